package ir

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/nvcomm/nvcomm/internal/diag"
	"github.com/nvcomm/nvcomm/internal/shard"
)

// Digit is one factor of a logical axis in mixed radix (shard.Digit).
type Digit = shard.Digit

// ShardKind says how a device dimension cuts its logical axis.
type ShardKind string

// The shard kinds: a contiguous block per device, every D-th element per
// device, a block inside another device dimension's block, or several
// digits (a device axis made by a merge).
const (
	Block   ShardKind = "block"
	Strided ShardKind = "strided"
	Nested  ShardKind = "nested"
	Merged  ShardKind = "merged"
)

// Sharding says which logical axes one device type shards, and how: the
// device with coordinate c along Type holds the elements whose Digits,
// read as a mixed-radix number (most significant first), equal c.
type Sharding struct {
	Type   ParallelType
	Digits []Digit
	Kind   ShardKind
}

// Axis is the (first) sharded value axis.
func (s Sharding) Axis() int { return s.Digits[0].Axis }

// Axes lists the sharded value axes, in digit order, each once.
func (s Sharding) Axes() []int {
	var axes []int
	for _, d := range s.Digits {
		if !slices.Contains(axes, d.Axis) {
			axes = append(axes, d.Axis)
		}
	}
	return axes
}

// analysisError is a problem found by the analyses, positioned at the
// schedule step or allocation that causes it.
type analysisError struct {
	Pos  diag.Pos
	Msg  string
	Hint string
}

// analyze resolves t's shardings and layout (docs/lowering.md, "The digit
// model").
func (t *Tensor) analyze() *analysisError {
	t.an = &tensorAnalysis{}
	// By logical position: a list, where a map per tensor cost more. A
	// reduction axis maps to 0, as a map's missing key did.
	valueIndex := make([]int, len(t.Logical))
	for k, a := range t.ValueAxes() {
		valueIndex[a] = k
	}
	for _, pt := range DeviceTypes {
		id := t.deviceAxis(pt)
		if id == nil || id.Extent == 1 {
			continue
		}
		digits, err := t.digits(id, valueIndex)
		if err != nil {
			return &analysisError{Pos: err.Pos, Msg: fmt.Sprintf("%s axis: %s", pt, err.Msg), Hint: err.Hint}
		}
		t.an.shardings = append(t.an.shardings, Sharding{Type: pt, Digits: digits, Kind: t.kindOf(digits)})
	}
	return t.resolveLayout(valueIndex)
}

// kindOf classifies the digits a device axis selects.
func (t *Tensor) kindOf(digits []Digit) ShardKind {
	if len(digits) > 1 {
		return Merged
	}
	d := digits[0]
	switch {
	case d.Span() >= t.valueExtent(d.Axis):
		return Block
	case d.Stride == 1:
		return Strided
	}
	return Nested
}

// deviceAxis returns the non-reduction loop axis parallelized on pt, or nil.
func (t *Tensor) deviceAxis(pt ParallelType) *IterDomain {
	for _, id := range t.Loop {
		if id.Parallel == pt && !id.Reduction {
			return id
		}
	}
	return nil
}

// digits factors a loop axis into digits of logical axes, most significant
// first, by replaying the splits and merges that produced it. Digits of
// extent 1 are dropped. Splits must divide evenly.
func (t *Tensor) digits(id *IterDomain, valueIndex []int) ([]Digit, *analysisError) {
	return t.digitsMemo(id, valueIndex, map[*IterDomain]digitsResult{})
}

// digitsResult is a memoized result of digits. Without the memo, a schedule
// that splits an axis and merges the halves back, again and again, would
// take time exponential in its length.
type digitsResult struct {
	ds  []Digit
	err *analysisError
}

func (t *Tensor) digitsMemo(id *IterDomain, valueIndex []int, memo map[*IterDomain]digitsResult) ([]Digit, *analysisError) {
	if r, ok := memo[id]; ok {
		return r.ds, r.err
	}
	ds, err := t.digitsOf(id, valueIndex, memo)
	memo[id] = digitsResult{ds, err}
	return ds, err
}

func (t *Tensor) digitsOf(id *IterDomain, valueIndex []int, memo map[*IterDomain]digitsResult) ([]Digit, *analysisError) {
	if id.Def == nil {
		if id.Extent == 1 {
			return nil, nil
		}
		axis := 0 // for a position valueIndex lacks, as a map's missing key gave
		if l := id.Logical; l >= 0 && l < len(valueIndex) {
			axis = valueIndex[l]
		}
		return []Digit{{Axis: axis, Stride: 1, Extent: id.Extent}}, nil
	}
	tr := id.Def
	if tr.Kind == Merge {
		outer, err := t.digitsMemo(tr.In[0], valueIndex, memo)
		if err != nil {
			return nil, err
		}
		inner, err := t.digitsMemo(tr.In[1], valueIndex, memo)
		if err != nil {
			return nil, err
		}
		return slices.Concat(outer, inner), nil // memoized slices are shared
	}
	in, err := t.digitsMemo(tr.In[0], valueIndex, memo)
	if err != nil {
		return nil, err
	}
	outerExt, innerExt := tr.Out[0].Extent, tr.Out[1].Extent
	if outerExt*innerExt != tr.In[0].Extent {
		if tr.In[0].Def != nil || len(in) != 1 {
			return nil, &analysisError{Pos: tr.Pos,
				Msg:  fmt.Sprintf("uneven split: extent %d is not divisible into %d x %d, and only the first split of a logical axis may be uneven", tr.In[0].Extent, outerExt, innerExt),
				Hint: "split the logical axis unevenly first, then split its pieces evenly"}
		}
		// The first split of a logical axis pads it to outer*inner: the
		// indices past its extent are holes that no device stores.
		in = []Digit{{Axis: in[0].Axis, Stride: 1, Extent: outerExt * innerExt}}
		if t.an.rootPad == nil {
			t.an.rootPad = map[int]int{}
		}
		t.an.rootPad[in[0].Axis] = outerExt * innerExt
	}
	outer, inner, ok := splitDigits(in, innerExt)
	if !ok {
		return nil, misalignedSplit(tr, in)
	}
	if tr.Out[0] == id {
		return outer, nil
	}
	return inner, nil
}

// splitDigits splits a digit list (most significant first) into an outer and
// an inner part whose extents multiply to c for the inner part. A digit may
// be cut in two when c falls inside it and divides evenly.
func splitDigits(ds []Digit, c int) (outer, inner []Digit, ok bool) {
	p := 1
	for k := len(ds) - 1; k >= 0; k-- {
		d := ds[k]
		if p*d.Extent <= c {
			p *= d.Extent
			continue
		}
		if c%p != 0 || d.Extent%(c/p) != 0 {
			return nil, nil, false
		}
		r := c / p
		outer = append(slices.Clone(ds[:k]), Digit{Axis: d.Axis, Stride: d.Stride * r, Extent: d.Extent / r})
		inner = slices.Clone(ds[k+1:])
		if r > 1 {
			inner = append([]Digit{{Axis: d.Axis, Stride: d.Stride, Extent: r}}, inner...)
		}
		return outer, inner, true
	}
	if p != c {
		return nil, nil, false
	}
	return nil, slices.Clone(ds), true
}

// resolveLayout derives the order of value axes in memory from the
// allocation. The allocation must store each axis's local elements in
// increasing index order, one axis after another (a permutation of the
// logical axes, as nvFuser's canonical layouts are).
func (t *Tensor) resolveLayout(valueIndex []int) *analysisError {
	rank := t.NumValueAxes()
	if t.Allocation == nil {
		t.an.layout = make([]int, rank)
		for i := range t.an.layout {
			t.an.layout[i] = i
		}
		return nil
	}
	var order []int
	last := map[int]Digit{}
	for _, a := range t.Allocation {
		ds, err := t.digits(t.Loop[a], valueIndex)
		if err != nil {
			return &analysisError{Pos: t.AllocPos, Msg: "allocation: " + err.Msg, Hint: err.Hint}
		}
		for _, d := range ds {
			prev, seen := last[d.Axis]
			switch {
			case !seen:
				order = append(order, d.Axis)
			case order[len(order)-1] != d.Axis:
				return &analysisError{Pos: t.AllocPos, Msg: fmt.Sprintf("allocation interleaves the pieces of logical axis %d with other axes", d.Axis),
					Hint: "store each logical axis's pieces next to each other"}
			case prev.Stride < d.Span():
				return &analysisError{Pos: t.AllocPos, Msg: fmt.Sprintf("allocation stores the pieces of logical axis %d out of order (inner before outer)", d.Axis),
					Hint: "list the outer piece of a split before the inner one"}
			}
			last[d.Axis] = d
		}
	}
	// Axes with no stored digit (local extent 1) may sit anywhere; put each
	// before the first stored axis with a larger index.
	for a := range rank {
		if !slices.Contains(order, a) {
			i := slices.IndexFunc(order, func(b int) bool { return b > a })
			if i < 0 {
				i = len(order)
			}
			order = slices.Insert(order, i, a)
		}
	}
	t.an.layout = order
	return nil
}

// Shardings returns the device types that shard t (extent > 1 on the mesh),
// in the order DIDx, DIDy, DIDz.
func (t *Tensor) Shardings() []Sharding { return t.analyzed().shardings }

// ShardingOf returns how pt shards t, and false when it does not.
func (t *Tensor) ShardingOf(pt ParallelType) (Sharding, bool) {
	for _, s := range t.analyzed().shardings {
		if s.Type == pt {
			return s, true
		}
	}
	return Sharding{}, false
}

// Layout returns the value axes in memory order, outermost first.
func (t *Tensor) Layout() []int { return t.analyzed().layout }

// PaddedShape returns the extent of every value axis, padded where an
// uneven split of a sharded axis leaves holes: the space the shards tile.
func (t *Tensor) PaddedShape() []int {
	shape := t.Shape()
	for _, s := range t.analyzed().shardings {
		for _, d := range s.Digits {
			shape[d.Axis] = max(shape[d.Axis], d.Span(), t.analyzed().rootPad[d.Axis])
		}
	}
	return shape
}

// unevenLocalShape counts, per value axis, the elements the device at
// coordinate 0 of every device axis stores: the most any device stores,
// since a device's indices along an axis grow with its coordinates.
func (t *Tensor) unevenLocalShape() []int {
	shape, padded := t.Shape(), t.PaddedShape()
	local := make([]int, len(shape))
	for a := range shape {
		bounds := []int{1, padded[a]}
		var dev []Digit
		for _, s := range t.analyzed().shardings {
			for _, d := range s.Digits {
				if d.Axis == a {
					bounds = append(bounds, d.Stride, d.Span())
					dev = append(dev, d)
				}
			}
		}
		slices.Sort(bounds)
		bounds = slices.Compact(bounds)
		var stored []Digit
		for i := len(bounds) - 1; i > 0; i-- {
			d := Digit{Axis: a, Stride: bounds[i-1], Extent: bounds[i] / bounds[i-1]}
			if !slices.ContainsFunc(dev, func(x Digit) bool { return x.Stride <= d.Stride && d.Span() <= x.Span() }) {
				stored = append(stored, d)
			}
		}
		local[a] = ValidPrefix(stored, 0, shape[a])
	}
	return local
}

// ValidPrefix counts the local indices along one axis whose logical index is
// below n: the local index j, written in mixed radix over the stored digits
// (most significant first), contributes Σ digit·stride on top of base (the
// device digits' contribution). The count is a prefix, since the logical
// index grows with j.
func ValidPrefix(stored []Digit, base, n int) int {
	total := 1
	for _, d := range stored {
		total *= d.Extent
	}
	return sort.Search(total, func(j int) bool {
		v := base
		for k := len(stored) - 1; k >= 0; k-- {
			v += (j % stored[k].Extent) * stored[k].Stride
			j /= stored[k].Extent
		}
		return v >= n
	})
}

// IsUneven reports whether some device holds fewer elements than others.
func (t *Tensor) IsUneven() bool {
	// PaddedShape without its slice: the lowering asks of every tensor of
	// every op.
	for _, s := range t.analyzed().shardings {
		for _, d := range s.Digits {
			if max(d.Span(), t.analyzed().rootPad[d.Axis]) > t.valueExtent(d.Axis) {
				return true
			}
		}
	}
	return false
}

// valueExtent is the extent of value axis a: Shape()[a].
func (t *Tensor) valueExtent(a int) int {
	for _, id := range t.Logical {
		if !id.Reduction {
			if a == 0 {
				return id.Extent
			}
			a--
		}
	}
	panic("ir: value axis out of range")
}

// LocalShape returns the per-device extent of every value axis: the largest
// over devices when the tensor is uneven.
func (t *Tensor) LocalShape() []int {
	if t.IsUneven() {
		return t.unevenLocalShape()
	}
	shape := t.PaddedShape()
	for _, s := range t.analyzed().shardings {
		for _, d := range s.Digits {
			shape[d.Axis] /= d.Extent
		}
	}
	return shape
}

// LocalSize returns the number of elements each device stores.
func (t *Tensor) LocalSize() int {
	n := 1
	for _, e := range t.LocalShape() {
		n *= e
	}
	return n
}

// misalignedSplit explains a split of a merged axis whose cut falls inside
// a logical axis at a point that is not a divisor of it: the device axis
// would then hold pieces of two logical axes that no digit list describes.
// It names the user's step and factor and lists the factors that align.
func misalignedSplit(tr *Transform, merged []Digit) *analysisError {
	parts := make([]string, len(merged))
	for k, d := range merged {
		parts[k] = fmt.Sprintf("%d (axis %d)", d.Extent, d.Axis)
	}
	var good []string
	ext := tr.In[0].Extent
	for f := 2; f < ext; f++ {
		if ext%f != 0 {
			continue
		}
		inner := f // split: the factor is the inner extent
		if tr.Step == StepOuterSplit {
			inner = ext / f
		}
		if _, _, ok := splitDigits(merged, inner); ok {
			good = append(good, strconv.Itoa(f))
		}
	}
	hint := fmt.Sprintf("a factor must cut the merged axis between its logical axes or at a divisor inside one; %s factors that align here: %s", tr.Step, strings.Join(good, ", "))
	if len(good) == 0 {
		hint = "no factor of this merged axis aligns; split the logical axes before merging them"
	}
	return &analysisError{Pos: tr.Pos,
		Msg: fmt.Sprintf("%s by %d cuts the merged axis %s inside a logical axis, not at a divisor of it",
			tr.Step, tr.Factor, strings.Join(parts, " x ")),
		Hint: hint}
}

// MergedDeviceAxis returns a device type whose loop axis derives, through
// any chain of splits, from a merge of logical axes — even when the cut
// lands on whole logical axes, so that the device axis shards a single one.
// nvFuser rejects all of these ("Expected exactly one logical ID producing
// the device dimension", csrc/host_ir/lower_to_communication.cpp): it looks
// for one logical ancestor, not at extents.
func (t *Tensor) MergedDeviceAxis() (ParallelType, bool) {
	for _, pt := range DeviceTypes {
		if id := t.deviceAxis(pt); id != nil && throughMerge(id) {
			return pt, true
		}
	}
	return 0, false
}

// throughMerge reports whether a merge is among id's ancestors.
func throughMerge(id *IterDomain) bool {
	for tr := id.Def; tr != nil; tr = tr.In[0].Def {
		if tr.Kind == Merge {
			return true
		}
	}
	return false
}
