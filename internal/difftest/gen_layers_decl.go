package difftest

import (
	"fmt"
	"slices"
)

// The declarations the layer generator draws for tensors: block splits as
// placements or schedules, and the deliberately invalid ones (gen_layers.go).

// blockDecl draws an even block sharding of a tensor of value shape shape
// on m, whose contracted axis k (k > 0: the output of a matmul or linear,
// k its trailing reduction axis) may be split too: DTensor placements
// (Shard(d), Replicate(), Partial(sum)), or a schedule that outer-splits
// axes by the mesh size and parallelizes the outer part, then sometimes
// reorders the loop, splits a stored axis or gives an allocation.
// Sometimes nothing: replicated.
func (l *layerGen) blockDecl(shape []int, k int, m genMesh) decl {
	switch r := l.r.IntN(20); {
	case r < 2:
		return decl{}
	case r < 11:
		return l.blockPlacements(shape, k, m)
	}
	return l.blockSchedule(shape, k, m)
}

// blockPlacements draws placements that split each dim at most once, by a
// mesh axis whose size divides it, and k (Partial(sum)) likewise.
func (l *layerGen) blockPlacements(shape []int, k int, m genMesh) decl {
	used := map[int]bool{}
	partial := false
	pls := make([]string, len(m.shape))
	for i, size := range m.shape {
		var dims []int
		for d, e := range shape {
			if !used[d] && e%size == 0 {
				dims = append(dims, d)
			}
		}
		switch r := l.r.IntN(10); {
		case r < 5 && len(dims) > 0:
			d := dims[l.r.IntN(len(dims))]
			used[d] = true
			pls[i] = fmt.Sprintf("Shard(%d)", l.signed(d, len(shape)))
		case r < 8 && k > 0 && !partial && k%size == 0:
			pls[i] = "Partial(sum)"
			partial = true
		default:
			pls[i] = "Replicate()"
		}
	}
	return decl{pls: pls}
}

// cut is a device split drawn for blockSchedule: logical axis axis, in
// blocks over mesh axis t of size size.
type cut struct {
	axis int
	t    string
	size int
}

// blockSchedule draws a schedule of block splits. The contracted axis (at
// position len(shape), after the value axes) may share its device type
// with a value axis: the partial products are then summed by a
// ReduceScatter.
func (l *layerGen) blockSchedule(shape []int, k int, m genMesh) decl {
	ext, red := slices.Clone(shape), make([]bool, len(shape))
	if k > 0 {
		ext, red = append(ext, k), append(red, true)
	}
	types := slices.Clone(m.types())
	l.r.Shuffle(len(types), func(i, j int) { types[i], types[j] = types[j], types[i] })
	var cuts []cut
	used := map[int]bool{}
	for _, t := range types {
		size := m.size(t)
		var axes []int
		for a, e := range ext {
			if !used[a] && e%size == 0 {
				axes = append(axes, a)
			}
		}
		if len(axes) == 0 || l.r.IntN(4) == 0 {
			continue
		}
		a := axes[l.r.IntN(len(axes))]
		used[a] = true
		cuts = append(cuts, cut{a, t, size})
	}
	if k > 0 && !used[len(shape)] && len(cuts) > 0 && l.r.IntN(3) == 0 {
		if c := cuts[l.r.IntN(len(cuts))]; k%c.size == 0 {
			cuts = append(cuts, cut{len(shape), c.t, c.size})
		}
	}
	// Split the last axes first, so that each cut's logical axis is still
	// at its logical position.
	slices.SortFunc(cuts, func(a, b cut) int { return b.axis - a.axis })
	s := &tensorState{loop: ext, red: red, par: make([]string, len(ext)), usedTy: map[string]bool{}}
	for _, c := range cuts {
		if ext[c.axis] == c.size && l.r.IntN(2) == 0 {
			l.parallelize(s, c.axis, c.t) // a logical device axis
			continue
		}
		s.apply(fmt.Sprintf("outer_split: {axis: %d, factor: %d}", l.signed(c.axis, len(s.loop)), c.size), c.axis, c.size, ext[c.axis]/c.size)
		l.parallelize(s, c.axis, c.t)
	}
	if l.r.IntN(4) == 0 {
		l.reorder(s)
	}
	d := decl{}
	if l.r.IntN(5) == 0 {
		l.serialSplit(s)
	} else {
		// Each logical axis has at most one stored piece, so any order
		// of them is a valid allocation.
		d.alloc = l.allocation(s)
	}
	d.steps = s.steps
	return d
}

// serialSplit splits a stored (not device-parallel, not reduction) loop
// axis by a factor that divides it: a change of the local loop only.
func (l *layerGen) serialSplit(s *tensorState) {
	var axes []int
	for a, e := range s.loop {
		if s.par[a] == "" && !s.red[a] && e > 1 {
			axes = append(axes, a)
		}
	}
	if len(axes) == 0 {
		return
	}
	a := axes[l.r.IntN(len(axes))]
	var fs []int
	for f := 1; f <= s.loop[a]; f++ {
		if s.loop[a]%f == 0 {
			fs = append(fs, f)
		}
	}
	f := fs[l.r.IntN(len(fs))]
	if l.r.IntN(2) == 0 {
		s.apply(fmt.Sprintf("split: {axis: %d, factor: %d}", a, f), a, s.loop[a]/f, f)
	} else {
		s.apply(fmt.Sprintf("outer_split: {axis: %d, factor: %d}", a, f), a, f, s.loop[a]/f)
	}
}

// invalidDecl draws a sharding that layer ops do not take on their
// outputs: an uneven block, a strided split, two mesh axes nested on one
// axis, a split of merged axes, or a contracted axis k split unevenly. It reports false when the shape and
// mesh allow none of those.
func (l *layerGen) invalidDecl(shape []int, k int, m genMesh) (decl, bool) {
	kinds := []func() (decl, bool){
		func() (decl, bool) { return l.unevenDecl(shape, m) },
		func() (decl, bool) { return l.stridedDecl(shape, m) },
		func() (decl, bool) { return l.nestedDecl(shape, m) },
		func() (decl, bool) { return l.mergedDecl(shape, m) },
		func() (decl, bool) { return l.unevenSumDecl(k, m) },
	}
	var tries []func() (decl, bool)
	for range 4 {
		tries = append(tries, kinds[l.r.IntN(len(kinds))])
	}
	for _, try := range tries {
		if d, ok := try(); ok {
			return d, true
		}
	}
	return decl{}, false
}

// typeAxis picks a mesh axis of size > 1 and a value axis for which good
// holds, or reports false.
func (l *layerGen) typeAxis(shape []int, m genMesh, good func(e, size int) bool) (string, int, bool) {
	type pair struct {
		t string
		a int
	}
	var ok []pair
	for _, t := range m.types() {
		for a, e := range shape {
			if size := m.size(t); size > 1 && good(e, size) {
				ok = append(ok, pair{t, a})
			}
		}
	}
	if len(ok) == 0 {
		return "", 0, false
	}
	p := ok[l.r.IntN(len(ok))]
	return p.t, p.a, true
}

func (l *layerGen) unevenDecl(shape []int, m genMesh) (decl, bool) {
	t, a, ok := l.typeAxis(shape, m, func(e, size int) bool { return e%size != 0 })
	if !ok {
		return decl{}, false
	}
	return decl{invalid: "uneven output", steps: []string{
		fmt.Sprintf("outer_split: {axis: %d, factor: %d}", a, m.size(t)),
		fmt.Sprintf("parallelize: {axis: %d, type: %s}", a, t)}}, true
}

func (l *layerGen) unevenSumDecl(k int, m genMesh) (decl, bool) {
	t, _, ok := l.typeAxis([]int{k}, m, func(e, size int) bool { return e > 0 && e%size != 0 })
	if !ok {
		return decl{}, false
	}
	pls := make([]string, len(m.shape))
	for i := range pls {
		pls[i] = "Replicate()"
	}
	pls[len(m.shape)-1-map[string]int{"DIDx": 0, "DIDy": 1, "DIDz": 2}[t]] = "Partial(sum)"
	return decl{invalid: "uneven contraction split", pls: pls}, true
}

func (l *layerGen) stridedDecl(shape []int, m genMesh) (decl, bool) {
	t, a, ok := l.typeAxis(shape, m, func(e, size int) bool { return e%size == 0 && e > size })
	if !ok {
		return decl{}, false
	}
	return decl{invalid: "strided output", steps: []string{
		fmt.Sprintf("split: {axis: %d, factor: %d}", a, m.size(t)),
		fmt.Sprintf("parallelize: {axis: %d, type: %s}", a+1, t)}}, true
}

func (l *layerGen) nestedDecl(shape []int, m genMesh) (decl, bool) {
	if len(m.shape) < 2 {
		return decl{}, false
	}
	i := l.r.IntN(len(m.shape) - 1)
	j := i + 1 + l.r.IntN(len(m.shape)-1-i)
	s := m.shape[i] * m.shape[j]
	var dims []int
	for d, e := range shape {
		if m.shape[i] > 1 && m.shape[j] > 1 && e%s == 0 {
			dims = append(dims, d)
		}
	}
	if len(dims) == 0 {
		return decl{}, false
	}
	d := dims[l.r.IntN(len(dims))]
	pls := make([]string, len(m.shape))
	for k := range pls {
		pls[k] = "Replicate()"
	}
	pls[i], pls[j] = fmt.Sprintf("Shard(%d)", d), fmt.Sprintf("Shard(%d)", d)
	return decl{invalid: "nested output", pls: pls}, true
}

func (l *layerGen) mergedDecl(shape []int, m genMesh) (decl, bool) {
	if len(shape) < 2 {
		return decl{}, false
	}
	a := l.r.IntN(len(shape) - 1)
	merged := slices.Replace(slices.Clone(shape), a, a+2, shape[a]*shape[a+1])
	t, b, ok := l.typeAxis(merged, m, func(e, size int) bool { return e%size == 0 })
	if !ok || b != a {
		return decl{}, false
	}
	return decl{invalid: "merged output", steps: []string{
		fmt.Sprintf("merge: {axis: %d}", a),
		fmt.Sprintf("outer_split: {axis: %d, factor: %d}", a, m.size(t)),
		fmt.Sprintf("parallelize: {axis: %d, type: %s}", a, t)}}, true
}

// opKinds are the ops a layer chain draws, weighted.
var opKinds = []string{
	"set", "set", "reduce", "reduce",
	"binary", "binary", "binary", "unary", "unary", "broadcast", "broadcast",
	"matmul", "matmul", "matmul", "linear", "linear", "linear", "composite", "composite",
	"embedding", "embedding", "gather", "gather",
}
