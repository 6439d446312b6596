package explain

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/nvcomm/nvcomm/internal/plan"
)

// placement is the placement of the tensor along mesh axis dim, in
// DTensor's words where it has them: Shard(d) for a block split of value
// dim d, Replicate() otherwise. A tensor's values are what it holds: an
// op that combined its partial results across the devices (a device type
// on its reduction axis, nvFuser's rDID) left complete values, which the
// notes say in words; only pending terms are Partial (notes).
// A split DTensor cannot write gets nvcomm's kind, Shard(d, strided).
func (s *sharding) placement(dim int, reduceOp string) string {
	if s.Partial != nil {
		// Pending terms on dim 0: DTensor's Partial, the other dims
		// numbered without it.
		return s.placementAfter(dim, reduceOp, &reduction{Dim: 0, Op: s.Partial.Op})
	}
	return s.placementAfter(dim, reduceOp, nil)
}

// reduction is an op that reduces value dim Dim of its input with Op.
type reduction struct {
	Dim int
	Op  string
}

// placementAfter is placement with the dims renumbered as the output of
// reduction r sees them (r nil: unchanged): a split of the reduced dim
// becomes partial results, Partial(op), and the dims after it move down.
func (s *sharding) placementAfter(dim int, reduceOp string, r *reduction) string {
	typ := typeOfDim(s.Mesh, dim)
	var parts []string
	for a, ax := range s.Axes {
		for _, d := range ax.Digits {
			if d.Type != typ {
				continue
			}
			name := a
			switch {
			case r != nil && a == r.Dim:
				parts = append(parts, "Partial("+r.Op+")")
				continue
			case r != nil && a > r.Dim:
				name = a - 1
			}
			if k := ax.kind(d); k != "block" && !ax.dtensorNest(s.Mesh) {
				parts = append(parts, fmt.Sprintf("Shard(%d, %s)", name, k))
			} else {
				parts = append(parts, fmt.Sprintf("Shard(%d)", name))
			}
		}
	}
	if axes, ok := s.Merged[typ]; ok {
		parts = append(parts, "Shard("+joinInts(s.valueDims(axes), "·")+", merged)")
	}
	if len(parts) == 0 {
		return "Replicate()"
	}
	return strings.Join(parts, "+")
}

// placements renders the tensor's placements, one per mesh axis, outermost
// first: "[Shard(0), Replicate()]".
func (s *sharding) placements(reduceOp string) string {
	pls := make([]string, len(s.Mesh.Shape))
	for dim := range pls {
		pls[dim] = s.placement(dim, reduceOp)
	}
	return "[" + strings.Join(pls, ", ") + "]"
}

// isDTensor reports whether DTensor's placements say exactly how the
// tensor is split: every split a block, or blocks of blocks nested in
// mesh-axis order, no merge, and no type that both splits and sums.
func (s *sharding) isDTensor(reduceOp string) bool {
	if len(s.Merged) > 0 {
		return false
	}
	for _, ax := range s.Axes {
		if !ax.dtensorNest(s.Mesh) {
			return false
		}
	}
	for dim := range s.Mesh.Shape {
		if strings.Contains(s.placement(dim, reduceOp), "+") {
			return false
		}
	}
	return true
}

// kind is nvcomm's name for how digit d splits the axis: block (whole
// contiguous blocks), strided (every Extent-th index) or nested.
func (ax axisSharding) kind(d digit) string {
	switch {
	case d.Stride*d.Extent >= ax.Padded:
		return "block"
	case d.Stride == 1:
		return "strided"
	}
	return "nested"
}

// dtensorNest reports whether the axis's digits are DTensor's nesting of
// Shard placements: the outermost a block split, each next one splitting
// the blocks of the one before, their mesh axes in increasing order.
func (ax axisSharding) dtensorNest(m plan.Mesh) bool {
	outer, dim := ax.Padded, -1
	for _, d := range ax.Digits {
		if d.Stride*d.Extent != outer || meshDim(m, d.Type) <= dim {
			return false
		}
		outer, dim = d.Stride, meshDim(m, d.Type)
	}
	return true
}

// notes say, in nvcomm's words, what the placements leave out: uneven
// blocks, strided or nested splits, merged axes, partial results and
// terms.
func (s *sharding) notes(reduceOp string) []string {
	var out []string
	for a, ax := range s.Axes {
		if ax.Extent != ax.Padded && len(ax.Digits) > 0 {
			u := ax.unit()
			out = append(out, fmt.Sprintf("uneven: dim %d of %d in blocks of %d, the last %d", a, ax.Extent, u, ax.Extent-(ax.runs()-1)*u))
		}
		if ax.dtensorNest(s.Mesh) {
			continue
		}
		for _, d := range ax.Digits {
			out = append(out, fmt.Sprintf("dim %d: %s split over %s (%d devices): device c holds %s",
				a, ax.kind(d), d.Type, d.Extent, digitSet(d)))
		}
	}
	for _, typ := range deviceTypes {
		if axes, ok := s.Merged[typ]; ok {
			out = append(out, fmt.Sprintf("dims %s merged, then split over %s", joinInts(s.valueDims(axes), ", "), typ))
		}
	}
	if s.Partial != nil {
		out = append(out, fmt.Sprintf("Partial(%s): pending terms; in the plan its dim 0 holds one term per device along %s (the placements number the other dims without it), and a set reading it reduces them with %s",
			s.Partial.Op, s.Partial.Type, s.Partial.Op))
	}
	for _, d := range s.Reduced {
		out = append(out, fmt.Sprintf("reduced over %s: the op's %s runs over a dim split along %s and combines the partial results across those devices itself, so the values are complete",
			d.Type, reduceOp, d.Type))
	}
	return out
}

// valueDims maps logical positions to value-axis numbers where they are
// value axes.
func (s *sharding) valueDims(logical []int) []int {
	out := make([]int, len(logical))
	for i, l := range logical {
		out[i] = l
		if k := slices.Index(s.ValueAxis, l); k >= 0 {
			out[i] = k
		}
	}
	return out
}

// digitSet describes the indices a digit gives the device at coordinate
// c, for any c.
func digitSet(d digit) string {
	if d.Stride == 1 {
		return fmt.Sprintf("the indices i with i %% %d = c", d.Extent)
	}
	return fmt.Sprintf("the indices i with (i / %d) %% %d = c", d.Stride, d.Extent)
}

// reduceOpOf is the op that combines the partial results of the op that
// produces name: a reduction's own, else sum (a contraction's).
func reduceOpOf(p *plan.Plan, name string) string {
	for _, op := range p.Ops {
		if op.Output == name && slices.Contains([]string{"prod", "max", "min"}, op.Op) {
			return op.Op
		}
	}
	return "sum"
}

// joinInts joins xs with sep.
func joinInts(xs []int, sep string) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = strconv.Itoa(x)
	}
	return strings.Join(parts, sep)
}

// deviceList renders device ids compactly: runs of three or more
// consecutive ids as a range, "0-3", the rest separated by commas.
func deviceList(ids []int) string {
	if len(ids) == 0 {
		return "none"
	}
	var parts []string
	for i := 0; i < len(ids); {
		j := i
		for j+1 < len(ids) && ids[j+1] == ids[j]+1 {
			j++
		}
		switch {
		case j-i >= 2:
			parts = append(parts, fmt.Sprintf("%d-%d", ids[i], ids[j]))
		case j > i:
			parts = append(parts, strconv.Itoa(ids[i]), strconv.Itoa(ids[j]))
		default:
			parts = append(parts, strconv.Itoa(ids[i]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}
