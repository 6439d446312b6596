package report

import (
	"unicode/utf8"

	"github.com/nvcomm/nvcomm/internal/explain"
)

// The grid's geometry, in CSS pixels. Labels are set in a 12px monospace
// font, about charWidth wide a character, so cells are sized from their
// labels' lengths without measuring text.
const (
	charWidth  = 7.5
	cellHeight = 30.0
	minCell    = 56.0
	headHeight = 20.0
)

// palette colours the blocks of the pictures by their set of devices, and
// the steps of the timeline by their type: ColorBrewer's Set3, then the
// colours of Pastel2 and Pastel1 that Set3 lacks (28 in all), pale enough
// for dark labels. A page of 8 devices often shows more than Set3's 12
// sets: the 8 devices alone, the rows and columns of its mesh, all of them.
var palette = []string{
	"#8dd3c7", "#ffffb3", "#bebada", "#fb8072", "#80b1d3", "#fdb462",
	"#b3de69", "#fccde5", "#d9d9d9", "#bc80bd", "#ccebc5", "#ffed6f",
	"#b3e2cd", "#fdcdac", "#cbd5e8", "#f4cae4", "#e6f5c9", "#fff2ae", "#f1e2cc", "#cccccc",
	"#fbb4ae", "#b3cde3", "#decbe4", "#fed9a6", "#ffffcc", "#e5d8bd", "#fddaec", "#f2f2f2",
}

// colour is the k-th colour of the palette, cycling.
func colour(k int) string { return palette[k%len(palette)] }

// deviceColours gives every set of devices one colour on the whole page,
// in the order the sets first appear (tensors in plan order, each
// picture's blocks row by row), so that blocks held by the same devices
// match across pictures, as they do within one. A set is named by its
// label ("0-3", "0,4"), which lists its devices in one way only.
type deviceColours map[string]string

// of returns the colour of the set of devices labelled devices.
func (dc deviceColours) of(devices string) string {
	c, ok := dc[devices]
	if !ok {
		c = colour(len(dc))
		dc[devices] = c
	}
	return c
}

// gridView is a grid laid out: the SVG's size, the column and row labels
// and the blocks, each at its place.
type gridView struct {
	Width, Height float64
	Cols, Rows    []label
	Blocks        []blockView
}

// label is a text at (X, Y), X its centre or its end.
type label struct {
	X, Y float64
	Text string
}

// blockView is one block: its rectangle, its centre (CX, CY) where its
// label goes, its colour and its devices.
type blockView struct {
	X, Y, W, H, CX, CY float64
	Fill               string
	Devices            string
}

// layoutGrid places g's blocks: row labels on the left, column labels
// above, every cell as wide as the widest label, each block filled with
// its set of devices' colour in dc. Nil for no grid.
func layoutGrid(g *explain.Grid, dc deviceColours) *gridView {
	if g == nil {
		return nil
	}
	cw, hw, hh := minCell, 0.0, 0.0
	for _, c := range g.Cols {
		cw = max(cw, textWidth(c)+16)
		if c != "" {
			hh = headHeight
		}
	}
	for _, row := range g.Blocks {
		for _, b := range row {
			cw = max(cw, textWidth(b.Devices)+16)
		}
	}
	for _, r := range g.Rows {
		if r != "" {
			hw = max(hw, textWidth(r)+12)
		}
	}
	v := &gridView{Width: hw + float64(len(g.Cols))*cw + 2, Height: hh + float64(len(g.Rows))*cellHeight + 2}
	for c, text := range g.Cols {
		v.Cols = append(v.Cols, label{X: hw + 1 + (float64(c)+0.5)*cw, Y: hh - 6, Text: text})
	}
	for r, row := range g.Blocks {
		y := hh + 1 + float64(r)*cellHeight
		if g.Rows[r] != "" {
			v.Rows = append(v.Rows, label{X: hw - 6, Y: y + cellHeight/2, Text: g.Rows[r]})
		}
		for c, b := range row {
			x := hw + 1 + float64(c)*cw
			v.Blocks = append(v.Blocks, blockView{X: x, Y: y, W: cw, H: cellHeight, CX: x + cw/2, CY: y + cellHeight/2, Fill: dc.of(b.Devices), Devices: b.Devices})
		}
	}
	return v
}

// textWidth estimates the width of s in the grid's monospace font.
func textWidth(s string) float64 { return float64(utf8.RuneCountInString(s)) * charWidth }
