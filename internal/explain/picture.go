package explain

import (
	"fmt"
	"io"
	"strings"
)

// A grid is drawn only when it stays readable: at most maxGridRuns blocks
// along each axis and maxGridWidth columns in all; otherwise the picture is
// a table of each device's index ranges.
const (
	maxGridRuns  = 16
	maxGridWidth = 120
)

// noPicture says why a tensor split through merged dims has no picture.
const noPicture = "no picture: a device type splits a merge of dims"

// picture writes which devices hold which block of the tensor: for 0-, 1-
// and 2-D tensors a grid of blocks labelled with the ids of the devices
// that hold them (as JAX's visualize_array_sharding draws), for higher
// ranks, or grids too large to read, a table of device -> index ranges.
func (s *sharding) picture(w io.Writer, st *styles, indent string) error {
	if len(s.Merged) > 0 {
		_, err := fmt.Fprintf(w, "%s(%s)\n", indent, noPicture)
		return err
	}
	if g, ok := s.grid(); ok {
		return g.write(w, st, indent)
	}
	return s.table(w, st, indent)
}

// grid is a tensor's blocks of at most two dims: rows along the first
// value axis (one row for a 1-D tensor), columns along the last.
type grid struct {
	rows, cols []string   // the index range of each row and column
	labels     [][]string // the devices of each block
	colour     [][]int    // the colour of each block: one per distinct device set
}

// grid lays out the tensor's blocks, or reports that it has too many dims
// or blocks to draw.
func (s *sharding) grid() (*grid, bool) {
	if len(s.Axes) > 2 {
		return nil, false
	}
	g := &grid{rows: []string{""}, cols: []string{""}}
	rowAxis, colAxis := -1, -1
	switch len(s.Axes) {
	case 1:
		colAxis = 0
	case 2:
		rowAxis, colAxis = 0, 1
	}
	nr, nc := 1, 1
	if rowAxis >= 0 {
		nr = s.Axes[rowAxis].runs()
	}
	if colAxis >= 0 {
		nc = s.Axes[colAxis].runs()
	}
	if nr > maxGridRuns || nc > maxGridRuns {
		return nil, false
	}
	g.rows, g.cols = s.runLabels(rowAxis, nr), s.runLabels(colAxis, nc)
	seen := map[string]int{}
	for r := range nr {
		var labels []string
		var colours []int
		for c := range nc {
			var rs []int
			if rowAxis >= 0 {
				rs = append(rs, r)
			}
			if colAxis >= 0 {
				rs = append(rs, c)
			}
			l := deviceList(s.owners(rs))
			if _, ok := seen[l]; !ok {
				seen[l] = len(seen)
			}
			labels, colours = append(labels, l), append(colours, seen[l])
		}
		g.labels, g.colour = append(g.labels, labels), append(g.colour, colours)
	}
	return g, g.width() <= maxGridWidth
}

// runLabels are the index ranges of the n runs of value axis a ("" for a
// missing axis).
func (s *sharding) runLabels(a, n int) []string {
	out := make([]string, n)
	for r := range n {
		if a >= 0 {
			sp := s.Axes[a].run(r)
			out[r] = fmt.Sprintf("%d:%d", sp.Lo, sp.Hi)
		}
	}
	return out
}

// cellWidth is the inner width of every block.
func (g *grid) cellWidth() int {
	w := 5
	for _, c := range g.cols {
		w = max(w, width(c)+2)
	}
	for _, r := range g.labels {
		for _, l := range r {
			w = max(w, width(l)+2)
		}
	}
	return w
}

// headWidth is the width of the row labels.
func (g *grid) headWidth() int {
	w := 0
	for _, r := range g.rows {
		w = max(w, width(r))
	}
	return w
}

// width is the number of columns the grid takes.
func (g *grid) width() int { return g.headWidth() + 2 + len(g.cols)*(g.cellWidth()+1) }

// write draws the grid with box-drawing characters.
func (g *grid) write(w io.Writer, st *styles, indent string) error {
	cw, hw := g.cellWidth(), g.headWidth()
	lead := indent + strings.Repeat(" ", hw+1)
	border := func(l, m, r string) string {
		parts := make([]string, len(g.cols))
		for i := range parts {
			parts[i] = strings.Repeat("─", cw)
		}
		return lead + l + strings.Join(parts, m) + r + "\n"
	}
	var b strings.Builder
	if g.cols[0] != "" {
		var h strings.Builder
		for _, c := range g.cols {
			h.WriteString(" " + center(c, cw))
		}
		b.WriteString(strings.TrimRight(lead+h.String(), " ") + "\n")
	}
	b.WriteString(border("┌", "┬", "┐"))
	for r, row := range g.labels {
		b.WriteString(indent + pad(g.rows[r], hw) + " │")
		for c, l := range row {
			b.WriteString(st.paint(st.device(g.colour[r][c]), center(l, cw)) + "│")
		}
		b.WriteString("\n")
		if r < len(g.labels)-1 {
			b.WriteString(border("├", "┼", "┤"))
		}
	}
	b.WriteString(border("└", "┴", "┘"))
	_, err := io.WriteString(w, b.String())
	return err
}

// table writes, for each device of the mesh, the index ranges it holds
// along every value axis.
func (s *sharding) table(w io.Writer, st *styles, indent string) error {
	return st.writeTable(w, indent, s.tableRows(st))
}

// tableRows are the rows of the device table, its header first.
func (s *sharding) tableRows(st *styles) [][]cell {
	head := []cell{{"device", st.name}}
	if len(s.Mesh.Shape) > 1 {
		head = append(head, cell{"mesh coords", st.name})
	}
	for a := range s.Axes {
		head = append(head, cell{fmt.Sprintf("dim %d", a), st.name})
	}
	rows := [][]cell{head}
	for k, id := range s.Mesh.Devices {
		c := coords(s.Mesh, k)
		row := []cell{{fmt.Sprint(id), nil}}
		if len(s.Mesh.Shape) > 1 {
			row = append(row, cell{"(" + joinInts(c, ", ") + ")", st.dim})
		}
		for a := range s.Axes {
			row = append(row, cell{s.indexSet(c, a), nil})
		}
		rows = append(rows, row)
	}
	return rows
}
