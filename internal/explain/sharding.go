package explain

import (
	"fmt"
	"slices"

	"github.com/nvcomm/nvcomm/internal/plan"
)

// deviceTypes are the device-parallel types, DIDx first: DIDx is a mesh's
// last axis, DIDy the one before, DIDz the one before that.
var deviceTypes = []string{"DIDx", "DIDy", "DIDz"}

// digit is one device type's part of a logical axis, as docs/lowering.md's
// digit model has it: the device at coordinate c along Type holds the
// indices i of the axis with (i / Stride) % Extent == c.
type digit struct {
	Type   string
	Stride int
	Extent int
}

// axisSharding is how the devices share one non-reduction logical axis.
type axisSharding struct {
	Extent int     // the logical extent
	Padded int     // the extent the axis's splits tile (Extent when even)
	Digits []digit // the device types that split it, by decreasing stride
}

// sharding is a tensor's placement on its mesh, from its schedule alone.
type sharding struct {
	Tensor plan.Tensor
	Mesh   plan.Mesh
	// Axes are the tensor's value axes: its non-reduction axes.
	Axes []axisSharding
	// ValueAxis maps each of Axes to its position in Tensor.Shape.
	ValueAxis []int
	// Reduced are the device types that split a reduction axis: the op
	// that produces the tensor combines their partial results.
	Reduced []digit
	// Partial is set for an input that holds partial terms along its
	// axis 0 (plan.PartialInputOf).
	Partial *plan.PartialInput
	// Merged lists, for a device type that parallelizes a merge of
	// logical axes, those axes; such a tensor has no per-axis picture.
	Merged map[string][]int
}

// analyze replays t's schedule on its shape (plan.Replay) to find which
// devices hold which indices. A schedule that does not replay (which a
// validated plan never has) is an error, never a panic.
func analyze(p *plan.Plan, t plan.Tensor) (*sharding, error) {
	mesh, ok := p.Meshes[t.Mesh]
	if !ok {
		return nil, fmt.Errorf("tensor %s: unknown mesh %q", t.Name, t.Mesh)
	}
	loop, bad, why := plan.Replay(&t, &mesh)
	if why != "" {
		return nil, fmt.Errorf("tensor %s: schedule step %d: %s", t.Name, bad, why)
	}
	s := &sharding{Tensor: t, Mesh: mesh}
	digits := make([][]digit, len(t.Shape))
	for _, l := range loop {
		switch {
		case !slices.Contains(deviceTypes, l.Parallel):
		case l.Logical < 0:
			if s.Merged == nil {
				s.Merged = map[string][]int{}
			}
			s.Merged[l.Parallel] = slices.Sorted(slices.Values(l.Merged))
		case l.Extent > 1:
			digits[l.Logical] = append(digits[l.Logical], digit{Type: l.Parallel, Stride: l.Stride, Extent: l.Extent})
		}
	}
	if pi, ok := plan.PartialInputOf(p, t.Name); ok {
		s.Partial = &pi
	}
	s.collect(digits)
	return s, nil
}

// collect sorts the digits found by the replay into value axes and
// reduced ones.
func (s *sharding) collect(digits [][]digit) {
	for i, ds := range digits {
		slices.SortStableFunc(ds, func(a, b digit) int { return b.Stride - a.Stride })
		switch {
		case slices.Contains(s.Tensor.ReductionAxes, i):
			s.Reduced = append(s.Reduced, ds...)
		default:
			ax := axisSharding{Extent: s.Tensor.Shape[i], Padded: s.Tensor.Shape[i], Digits: ds}
			for _, d := range ds {
				ax.Padded = max(ax.Padded, d.Stride*d.Extent)
			}
			s.Axes = append(s.Axes, ax)
			s.ValueAxis = append(s.ValueAxis, i)
		}
	}
}

// ceilDiv is ⌈a/b⌉, 0 for a <= 0.
func ceilDiv(a, b int) int {
	if a <= 0 {
		return 0
	}
	return (a-1)/b + 1
}

// meshDim is the mesh axis of a device type, -1 when the mesh has none.
func meshDim(m plan.Mesh, typ string) int {
	i := slices.Index(deviceTypes, typ)
	if i < 0 || i >= len(m.Shape) {
		return -1
	}
	return len(m.Shape) - 1 - i
}

// typeOfDim is the device type of mesh axis dim.
func typeOfDim(m plan.Mesh, dim int) string {
	if i := len(m.Shape) - 1 - dim; i >= 0 && i < len(deviceTypes) {
		return deviceTypes[i]
	}
	return fmt.Sprintf("mesh axis %d", dim) // no device type: not a valid plan
}

// coords are the mesh coordinates of the device at flat position k.
func coords(m plan.Mesh, k int) []int {
	c := make([]int, len(m.Shape))
	for d := len(m.Shape) - 1; d >= 0; d-- {
		if m.Shape[d] > 0 {
			c[d] = k % m.Shape[d]
			k /= m.Shape[d]
		}
	}
	return c
}

// holds reports whether the device with mesh coordinates c holds index i
// of axis ax.
func (s *sharding) holds(c []int, ax axisSharding, i int) bool {
	if i >= ax.Extent {
		return false
	}
	for _, d := range ax.Digits {
		if dim := meshDim(s.Mesh, d.Type); dim >= 0 && (i/d.Stride)%d.Extent != c[dim] {
			return false
		}
	}
	return true
}

// unit is the length of the runs of an axis along which ownership is
// constant: the smallest stride of its digits (the extent when whole).
func (ax axisSharding) unit() int {
	u := ax.Padded
	for _, d := range ax.Digits {
		u = min(u, d.Stride)
	}
	return max(u, 1)
}

// runs is the number of runs of ax: maximal intervals whose indices the
// same devices hold.
func (ax axisSharding) runs() int { return ceilDiv(ax.Extent, ax.unit()) }

// span is an interval [Lo, Hi) of indices.
type span struct{ Lo, Hi int }

// run is the interval of the r-th run of ax.
func (ax axisSharding) run(r int) span {
	u := ax.unit()
	return span{r * u, min((r+1)*u, ax.Extent)}
}

// owners lists the devices (ids, in mesh order) that hold the block whose
// runs along the value axes are rs.
func (s *sharding) owners(rs []int) []int {
	var out []int
	for k, id := range s.Mesh.Devices {
		c := coords(s.Mesh, k)
		ok := true
		for a, r := range rs {
			if !s.holds(c, s.Axes[a], s.Axes[a].run(r).Lo) {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, id)
		}
	}
	return out
}
