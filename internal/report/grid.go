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

// palette colours the blocks of a grid by their set of devices, and the
// steps of the timeline by their type: ColorBrewer's Set3, pale enough
// for dark labels.
var palette = []string{"#8dd3c7", "#ffffb3", "#bebada", "#fb8072", "#80b1d3", "#fdb462",
	"#b3de69", "#fccde5", "#d9d9d9", "#bc80bd", "#ccebc5", "#ffed6f"}

// colour is the k-th colour of the palette, cycling.
func colour(k int) string { return palette[k%len(palette)] }

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
// above, every cell as wide as the widest label. Nil for no grid.
func layoutGrid(g *explain.Grid) *gridView {
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
			v.Blocks = append(v.Blocks, blockView{X: x, Y: y, W: cw, H: cellHeight, CX: x + cw/2, CY: y + cellHeight/2, Fill: colour(b.Set), Devices: b.Devices})
		}
	}
	return v
}

// textWidth estimates the width of s in the grid's monospace font.
func textWidth(s string) float64 { return float64(utf8.RuneCountInString(s)) * charWidth }
