package explain

import (
	"io"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/fatih/color"
	"github.com/mattn/go-isatty"
)

// ColorAuto decides whether w gets colour: a terminal, unless NO_COLOR is
// set (https://no-color.org) or TERM is dumb. Pipes, files and buffers
// never do.
func ColorAuto(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok || os.Getenv("NO_COLOR") != "" || os.Getenv("TERM") == "dumb" {
		return false
	}
	return isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd())
}

// styles paints text when colour is on and leaves it alone otherwise.
type styles struct {
	on                                     bool
	title, name, typ, dim, collective, bad *color.Color
	palette                                []*color.Color
}

// newStyles returns the styles of one output, coloured or not.
func newStyles(on bool) *styles {
	st := &styles{
		on:         on,
		title:      color.New(color.Bold, color.Underline),
		name:       color.New(color.Bold),
		typ:        color.New(color.FgCyan),
		dim:        color.New(color.Faint),
		collective: color.New(color.FgYellow, color.Bold),
		bad:        color.New(color.FgRed),
	}
	for _, a := range []color.Attribute{color.FgBlue, color.FgGreen, color.FgMagenta, color.FgCyan, color.FgYellow, color.FgRed,
		color.FgHiBlue, color.FgHiGreen, color.FgHiMagenta, color.FgHiCyan, color.FgHiYellow, color.FgHiRed} {
		st.palette = append(st.palette, color.New(a, color.Bold))
	}
	for _, c := range append([]*color.Color{st.title, st.name, st.typ, st.dim, st.collective, st.bad}, st.palette...) {
		if on {
			c.EnableColor()
		} else {
			c.DisableColor()
		}
	}
	return st
}

// paint renders s in style c, or plainly with colour off or no style.
func (st *styles) paint(c *color.Color, s string) string {
	if !st.on || c == nil || s == "" {
		return s
	}
	return c.Sprint(s)
}

// device is the style of a block held by the k-th set of devices.
func (st *styles) device(k int) *color.Color { return st.palette[k%len(st.palette)] }

// cell is one table cell: its text and style.
type cell struct {
	text  string
	style *color.Color
}

// width is the number of terminal columns of s (every rune nvcomm prints
// is one column wide).
func width(s string) int { return utf8.RuneCountInString(s) }

// pad right-pads s with spaces to n columns.
func pad(s string, n int) string {
	if w := width(s); w < n {
		return s + strings.Repeat(" ", n-w)
	}
	return s
}

// center centres s in n columns.
func center(s string, n int) string {
	w := width(s)
	if w >= n {
		return s
	}
	left := (n - w) / 2
	return strings.Repeat(" ", left) + s + strings.Repeat(" ", n-w-left)
}

// writeTable writes rows as aligned columns two spaces apart, each line
// after indent, padding before painting so that colour does not upset the
// alignment; the last column is not padded.
func (st *styles) writeTable(w io.Writer, indent string, rows [][]cell) error {
	var widths []int
	for _, r := range rows {
		for i, c := range r {
			if i >= len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], width(c.text))
		}
	}
	var b strings.Builder
	for _, r := range rows {
		var line strings.Builder
		line.WriteString(indent)
		for i, c := range r {
			text := c.text
			if i < len(r)-1 {
				text = pad(text, widths[i]+2)
			}
			trail := text[len(strings.TrimRight(text, " ")):]
			line.WriteString(st.paint(c.style, strings.TrimRight(text, " ")) + trail)
		}
		b.WriteString(strings.TrimRight(line.String(), " ") + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}
