package sim

import (
	"fmt"
	"slices"

	"github.com/nvcomm/nvcomm/internal/plan"
)

// iterDomain is one axis of a tensor's domain graph.
type iterDomain struct {
	extent    int
	reduction bool
	// parallel is "DIDx", "DIDy", "DIDz", or "" for a serial axis.
	parallel string
}

// exprKind names the expressions that derive IterDomains from others.
type exprKind int

const (
	innerSplit exprKind = iota // [N] -> [ceil(N/f), f]
	outerSplit                 // [N] -> [f, ceil(N/f)]
	merge                      // [A, B] -> [A*B]
)

// expr is one edge of the domain graph. A split has one input and two
// outputs (outer, inner); a merge has two inputs (outer, inner) and one
// output. IterDomains are referred to by their index in domain.ids.
type expr struct {
	kind exprKind
	in   []int
	out  []int
}

// domain is the IterDomain graph of one tensor: its logical axes, the
// expressions replayed from its schedule, and the resulting loop domain.
type domain struct {
	ids     []iterDomain
	logical []int
	loop    []int
	exprs   []expr // in the order the schedule created them
}

// newDomain builds the logical domain of t and replays its schedule.
func newDomain(t plan.Tensor) (*domain, error) {
	d := &domain{}
	for i, n := range t.Shape {
		if n < 1 || n > maxExtent {
			return nil, fmt.Errorf("tensor %q: logical extent %d of axis %d must be between 1 and %d", t.Name, n, i, maxExtent)
		}
		d.logical = append(d.logical, d.add(iterDomain{extent: n}))
	}
	for _, a := range t.ReductionAxes {
		if a < 0 || a >= len(t.Shape) {
			return nil, fmt.Errorf("tensor %q: reduction axis %d out of range for shape %v", t.Name, a, t.Shape)
		}
		d.ids[d.logical[a]].reduction = true
	}
	d.loop = slices.Clone(d.logical)
	for i, s := range t.Schedule {
		if err := d.apply(s); err != nil {
			return nil, fmt.Errorf("tensor %q: schedule step %d: %w", t.Name, i, err)
		}
	}
	return d, nil
}

func (d *domain) add(id iterDomain) int {
	d.ids = append(d.ids, id)
	return len(d.ids) - 1
}

// apply replays one schedule step on the loop domain.
func (d *domain) apply(s plan.ScheduleStep) error {
	set := 0
	for _, b := range []bool{s.Split != nil, s.OuterSplit != nil, s.Merge != nil, s.Reorder != nil, s.Parallelize != nil} {
		if b {
			set++
		}
	}
	if set != 1 {
		return fmt.Errorf("expected exactly one transform, got %d", set)
	}
	switch {
	case s.Split != nil:
		return d.split(*s.Split, innerSplit)
	case s.OuterSplit != nil:
		return d.split(*s.OuterSplit, outerSplit)
	case s.Merge != nil:
		return d.merge(s.Merge.Axis)
	case s.Reorder != nil:
		return d.reorder(s.Reorder)
	default:
		return d.parallelize(*s.Parallelize)
	}
}

// loopAxis returns the IterDomain at loop position pos.
func (d *domain) loopAxis(pos int) (int, error) {
	if pos < 0 || pos >= len(d.loop) {
		return 0, fmt.Errorf("loop position %d out of range (loop domain has %d axes)", pos, len(d.loop))
	}
	return d.loop[pos], nil
}

func (d *domain) split(a plan.SplitArgs, kind exprKind) error {
	id, err := d.loopAxis(a.Axis)
	if err != nil {
		return err
	}
	if a.Factor < 1 || a.Factor > maxExtent {
		return fmt.Errorf("split factor %d must be between 1 and %d", a.Factor, maxExtent)
	}
	in := d.ids[id]
	if in.parallel != "" {
		return fmt.Errorf("cannot split loop axis %d: it is parallelized on %s (parallelize after splitting)", a.Axis, in.parallel)
	}
	rest := ceilDiv(in.extent, a.Factor)
	outerExt, innerExt := rest, a.Factor
	if kind == outerSplit {
		outerExt, innerExt = a.Factor, rest
	}
	o := d.add(iterDomain{extent: outerExt, reduction: in.reduction})
	i := d.add(iterDomain{extent: innerExt, reduction: in.reduction})
	d.exprs = append(d.exprs, expr{kind: kind, in: []int{id}, out: []int{o, i}})
	d.loop = slices.Concat(d.loop[:a.Axis], []int{o, i}, d.loop[a.Axis+1:])
	return nil
}

func (d *domain) merge(pos int) error {
	if pos < 0 || pos+1 >= len(d.loop) {
		return fmt.Errorf("merge position %d needs a partner (loop domain has %d axes)", pos, len(d.loop))
	}
	o, i := d.ids[d.loop[pos]], d.ids[d.loop[pos+1]]
	if o.parallel != "" || i.parallel != "" {
		return fmt.Errorf("cannot merge loop axes %d and %d: a device-parallel axis cannot be merged (parallelize after merging)", pos, pos+1)
	}
	if o.reduction != i.reduction {
		return fmt.Errorf("cannot merge loop axes %d and %d: one is a reduction axis and the other is not", pos, pos+1)
	}
	if o.extent > maxExtent/i.extent {
		return fmt.Errorf("merging loop axes %d and %d gives an extent above %d", pos, pos+1, maxExtent)
	}
	m := d.add(iterDomain{extent: o.extent * i.extent, reduction: o.reduction})
	d.exprs = append(d.exprs, expr{kind: merge, in: []int{d.loop[pos], d.loop[pos+1]}, out: []int{m}})
	d.loop = slices.Concat(d.loop[:pos], []int{m}, d.loop[pos+2:])
	return nil
}

func (d *domain) reorder(order []int) error {
	if !isPermutation(order, len(d.loop)) {
		return fmt.Errorf("reorder %v is not a permutation of the %d loop positions", order, len(d.loop))
	}
	loop := make([]int, len(order))
	for k, old := range order {
		loop[k] = d.loop[old]
	}
	d.loop = loop
	return nil
}

func (d *domain) parallelize(a plan.ParallelizeArgs) error {
	id, err := d.loopAxis(a.Axis)
	if err != nil {
		return err
	}
	switch a.Type {
	case "Serial":
		d.ids[id].parallel = ""
	case "DIDx", "DIDy", "DIDz":
		d.ids[id].parallel = a.Type
	default:
		return fmt.Errorf("unknown parallel type %q (expected DIDx, DIDy, DIDz or Serial)", a.Type)
	}
	return nil
}

// replay walks the graph backwards from loop values to logical values. vals
// holds a value for every loop IterDomain on entry (indexed by IterDomain)
// and for every IterDomain on return. It reports false when some split's
// input index falls outside its extent: the loop point is a hole.
func (d *domain) replay(vals []int) bool {
	for k := len(d.exprs) - 1; k >= 0; k-- {
		e := d.exprs[k]
		switch e.kind {
		case innerSplit, outerSplit:
			// Both read the input index as outer*innerExtent + inner.
			v := vals[e.out[0]]*d.ids[e.out[1]].extent + vals[e.out[1]]
			if v >= d.ids[e.in[0]].extent {
				return false
			}
			vals[e.in[0]] = v
		case merge:
			inner := d.ids[e.in[1]].extent
			vals[e.in[0]] = vals[e.out[0]] / inner
			vals[e.in[1]] = vals[e.out[0]] % inner
		}
	}
	return true
}

// maxExtent bounds every extent so that products of two stay in an int.
const maxExtent = 1 << 31

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// isPermutation reports whether p lists 0..n-1 each once.
func isPermutation(p []int, n int) bool {
	if len(p) != n {
		return false
	}
	seen := make([]bool, n)
	for _, v := range p {
		if v < 0 || v >= n || seen[v] {
			return false
		}
		seen[v] = true
	}
	return true
}
