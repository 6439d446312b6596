package export

import (
	"fmt"
	"math"
	"slices"

	"github.com/nvcomm/nvcomm/internal/ops"
	"github.com/nvcomm/nvcomm/internal/plan"
)

// Pad and Unpad steps, alone or fused with a Permute: each device's real
// box copied into or out of the padded buffer with one copy_ a piece, the
// holes filled with fill_ (strided.go has the geometry).

// pad writes a Pad (and, fused, the Permute after it): out is fresh memory
// that, viewed as dx and permuted by px, is the padded buffer; each
// device's box is copied into it and the holes filled, one pass.
func (g *gen) pad(b planned, s *plan.Step, out string, dx, px []int) {
	geo, ok := newGeometry(dx, px, s.Dims)
	if !ok { // a plain Pad: dx is s.Dims itself, which always refines
		geo, _ = newGeometry(s.Dims, iota(len(s.Dims)), s.Dims)
	}
	x, y := g.names[out], g.names[s.Input]
	what := "the real box copied in, the holes filled: one pass"
	if len(b.steps) > 1 {
		what = "the real box copied into the permuted layout, the holes filled: one pass"
	}
	// Alone, a device whose box fills dims has nothing to pad: its input
	// is its padded buffer, a view (DTensor's pad_tensor of pad size 0).
	plain := len(b.steps) == 1
	if plain && slices.ContainsFunc(s.Valid, func(box []int) bool { return slices.Equal(box, s.Dims) }) {
		what += " (a box that fills the buffer: the input itself)"
	}
	g.comment(b, what)
	done := g.guard(s.Devices)
	fill := g.fillValue(s.Output, s.Fill)
	kernels, viewed := 0, false
	g.byBox(s, func(box []int) {
		if plain && slices.Equal(box, s.Dims) {
			g.w.line("%s = %s", x, y)
			viewed = true
			return
		}
		g.w.line("%s = %s", x, g.empty(out, ops.Product(s.Dims)))
		lines := geo.padLines(x, y, box, fill)
		for _, l := range lines {
			g.w.line("%s", l)
		}
		kernels = max(kernels, len(lines))
	})
	done()
	g.recordPad(b, s, out, px, viewed, kernels)
}

// recordPad books a Pad's output and its block: priced by its busiest
// device with holes to fill (plan.Step.PadInput), a view when none has.
// Where some device's output is its input, the output is an alias of it
// (never written in place while the input is read), else fresh memory.
func (g *gen) recordPad(b planned, s *plan.Step, out string, px []int, viewed bool, kernels int) {
	if viewed {
		g.alias(out, s.Input, s.Devices)
	} else {
		g.alloc(out, s.Devices)
	}
	in, ok := s.PadInput()
	if viewed && !ok {
		g.record(b, "view", 0, 0)
		return
	}
	if !viewed {
		in = maxBox(s) // a fused Pad copies every box
	}
	g.record(b, boxPass(s, px), int64(ops.Product(s.Dims))+int64(in), kernels)
}

// boxPass is how a Pad or an Unpad moves memory: a contiguous copy where
// every device's box is the head of the padded buffer and nothing is
// permuted, else a strided one.
func boxPass(s *plan.Step, px []int) string {
	if isIdentity(px) && s.HeadBoxes() {
		return "copy"
	}
	return "strided"
}

// unpad writes an Unpad (and, fused, the Permute before it): x viewed as
// dx and permuted by px is the padded buffer, each device's box of which
// is copied out; a box that is a prefix of the buffer is a view.
func (g *gen) unpad(b planned, in string, s *plan.Step, dx, px []int) {
	x, y := g.names[in], g.names[s.Output]
	if len(b.steps) == 1 && s.HeadBoxes() {
		g.comment(b, "the box is the buffer's head: a view, no copy")
		done := g.guard(s.Devices)
		g.w.line("%s = %s[:%s]", y, x, perRank(s.Devices, func(d int) string { return fmt.Sprint(ops.Product(boxOf(s, d))) }))
		done()
		g.alias(s.Output, in, s.Devices)
		g.record(b, "view", 0, 0)
		return
	}
	geo, _ := newGeometry(dx, px, s.Dims)
	what := "the real box copied out: one pass"
	if len(b.steps) > 1 {
		what = "the real box copied out of the permuted view: one pass"
	}
	g.comment(b, what)
	done := g.guard(s.Devices)
	g.w.line("%s = %s", y, g.emptyPerRank(s.Output, s.Devices, func(d int) int { return ops.Product(boxOf(s, d)) }))
	kernels := 0
	g.byBox(s, func(box []int) {
		lines := geo.unpadLines(x, y, box)
		for _, l := range lines {
			g.w.line("%s", l)
		}
		kernels = max(kernels, len(lines))
	})
	done()
	g.alloc(s.Output, s.Devices)
	g.record(b, boxPass(s, px), 2*int64(maxBox(s)), kernels)
}

// byBox writes fn for each distinct box of a Pad or Unpad, under a test of
// the rank where devices differ.
func (g *gen) byBox(s *plan.Step, fn func(box []int)) {
	var boxes [][]int
	var who [][]int
	for i, d := range s.Devices {
		k := slices.IndexFunc(boxes, func(b []int) bool { return slices.Equal(b, s.Valid[i]) })
		if k < 0 {
			boxes, who = append(boxes, s.Valid[i]), append(who, nil)
			k = len(boxes) - 1
		}
		who[k] = append(who[k], d)
	}
	if len(boxes) == 1 {
		fn(boxes[0])
		return
	}
	for k, box := range boxes {
		switch k {
		case 0:
			g.w.line("if %s:", rankIn(who[k]))
		case len(boxes) - 1:
			g.w.line("else:")
		default:
			g.w.line("elif %s:", rankIn(who[k]))
		}
		g.w.indent++
		n := len(g.w.lines)
		fn(box)
		if len(g.w.lines) == n {
			g.w.line("pass") // an empty box: nothing to copy
		}
		g.w.indent--
	}
}

func boxOf(s *plan.Step, d int) []int {
	if i := slices.Index(s.Devices, d); i >= 0 && i < len(s.Valid) {
		return s.Valid[i]
	}
	return nil
}

func maxBox(s *plan.Step) int {
	m := 0
	for _, b := range s.Valid {
		m = max(m, ops.Product(b))
	}
	return m
}

// emptyPerRank renders a fresh buffer whose size may differ per device.
func (g *gen) emptyPerRank(b string, devices []int, n func(d int) int) string {
	size := perRank(devices, func(d int) string { return fmt.Sprint(n(d)) })
	return fmt.Sprintf("torch.empty(%s, dtype=%s, device=device)", size, torchDTypes[g.dtype[b]])
}

// fillValue renders a Pad's fill in buffer b's dtype: an integer dtype has
// no infinities, so ±inf is its largest or smallest value.
func (g *gen) fillValue(b string, fill *string) string {
	f := "0"
	if fill != nil {
		f = *fill
	}
	switch f {
	case "inf", "-inf":
		if bits, ok := intBits[g.dtype[b]]; ok {
			if f == "inf" {
				return fmt.Sprint(int64(math.MaxInt64 >> (64 - bits)))
			}
			return fmt.Sprint(-int64(math.MaxInt64>>(64-bits)) - 1)
		}
		return fmt.Sprintf("float(%q)", f)
	}
	return f
}

// intBits are the widths of the integer dtypes.
var intBits = map[string]int{"int32": 32, "int64": 64}
