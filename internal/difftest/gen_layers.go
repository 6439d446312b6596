package difftest

import (
	"fmt"
	"slices"
	"strings"
)

// This file draws the generator's second kind of case: a chain, or a small
// DAG, of the ops of layers (add, sub, mul, maximum, minimum, relu, neg,
// abs, broadcast, matmul, linear; docs/fusion.md "ops") mixed with sets
// and reductions, on 1-D to 3-D meshes. The layer lowering takes even
// block shardings on the tensors layer ops compute and any sharding on
// their operands (docs/layers.md), so the generator declares the outputs
// of layer ops with block shardings — placements or outer_split by the
// mesh size, the contracted axis k sometimes split too (Partial(sum), or
// the same device type as an output axis: a ReduceScatter) — and their
// operands with block shardings, with the sharding the output requires
// (no resharding), or with the random schedules of the first kind (a
// resharding set first). Reductions may split their reduced axis
// (Partial(op) placements), and one case in five is in format 2, where
// some outputs are left to propagation. Now and then the generator breaks
// a rule on purpose (an uneven, strided, nested or merged output, or an
// uneven split of k; operands whose shapes do not fit; a Partial input
// read by another op than set) and records it in Case.Deliberate, so that
// every other rejection of the lowering is a failure.

// lt is a tensor of a layer chain that later ops may read.
type lt struct {
	name  string
	shape []int // non-reduction extents
	mesh  genMesh
	// terms is, for a Partial input, the number of its partial terms (a
	// leading logical axis); only set may read it. 0 for other tensors.
	terms int
}

// layerGen accumulates one layer chain.
type layerGen struct {
	*Generator
	meshes []genMesh // the main mesh, and another
	dtype  string
	// format2 turns on propagation: the outputs of layer ops are then now
	// and then left undeclared, and nvcomm gives them shardings.
	format2    bool
	tensors    strings.Builder // the declarations under tensors:
	ops        []genOp
	pool       []lt // tensors that later ops may read
	sure       map[string]bool
	deliberate []string
	n          int // tensors named so far
}

// genOp is one line under ops:, and whether the generator built it valid.
type genOp struct {
	line string
	sure bool
}

// decl is what a tensor's declaration says below its header: placements,
// or a schedule and an allocation.
type decl struct {
	pls   []string // one per mesh axis; nil when steps are given instead
	steps []string
	alloc string
	// invalid names the rule of layer ops the declaration breaks on
	// purpose, or is "".
	invalid string
}

// empty reports whether d declares no sharding.
func (d decl) empty() bool { return d.pls == nil && len(d.steps) == 0 }

// write writes d's lines under a tensor.
func (d decl) write(b *strings.Builder) {
	if d.pls != nil {
		fmt.Fprintf(b, "    placements: [%s]\n", strings.Join(d.pls, ", "))
	}
	if len(d.steps) > 0 {
		b.WriteString("    schedule:\n")
		for _, st := range d.steps {
			fmt.Fprintf(b, "      - %s\n", st)
		}
	}
	if d.alloc != "" {
		fmt.Fprintf(b, "    allocation: %s\n", d.alloc)
	}
}

// dtypes are the element types drawn, float32 twice as often as another.
var dtypes = []string{"float32", "float32", "float16", "bfloat16", "float64", "int32", "int64"}

// layerChain draws a case of the second kind: an input t0 (a random
// schedule, as in the first kind, or a block sharding) and one to five
// ops, each reading the chain's last tensor and, for ops of several
// operands, new inputs or earlier tensors.
func (g *Generator) layerChain() Case {
	l := &layerGen{Generator: g, sure: map[string]bool{}}
	main := g.mesh("m", 3)
	other := g.mesh("n", 1)
	if g.r.IntN(3) == 0 {
		other = genMesh{name: "n", shape: main.shape, devices: g.r.Perm(16)[:len(main.devices)]}
	}
	l.meshes = []genMesh{main, other}
	l.dtype = dtypes[g.r.IntN(len(dtypes))]
	l.format2 = g.r.IntN(5) == 0
	shape := make([]int, 1+g.r.IntN(3))
	for i := range shape {
		shape[i] = l.extent(main)
	}
	cur := l.input(shape, main, nil, true)
	for range 1 + g.r.IntN(5) {
		cur = l.op(cur)
		if len(cur.shape) == 0 {
			break // a full reduction: nothing left to compute on
		}
		if g.r.IntN(6) == 0 {
			// Continue from an earlier tensor: the chain becomes a DAG
			// with several outputs.
			cur = l.pool[g.r.IntN(len(l.pool))]
		}
	}
	return l.finish()
}

// finish assembles the fusion, the ops sometimes listed out of dependency
// order (nvcomm sorts them).
func (l *layerGen) finish() Case {
	var b strings.Builder
	if l.format2 {
		b.WriteString("format: 2\n")
	}
	b.WriteString("meshes:\n")
	for _, m := range l.meshes {
		fmt.Fprintf(&b, "  %s: %s\n", m.name, m.yaml())
	}
	b.WriteString("tensors:\n")
	b.WriteString(l.tensors.String())
	if l.r.IntN(8) == 0 {
		l.r.Shuffle(len(l.ops), func(i, j int) { l.ops[i], l.ops[j] = l.ops[j], l.ops[i] })
	}
	b.WriteString("ops:\n")
	for i, op := range l.ops {
		b.WriteString(op.line + "\n")
		if op.sure {
			l.sure[fmt.Sprintf("ops[%d]", i)] = true
		}
	}
	return Case{Src: b.String(), Deliberate: l.deliberate, Sure: l.sure}
}

// extent draws an extent for a tensor on mesh m: mostly a multiple of one
// of m's axis sizes, so that even block shardings are common, else a
// small extent that may not divide. Extents stay small (at most 12) so
// that a rank-4 matmul still simulates in milliseconds.
func (l *layerGen) extent(m genMesh) int {
	switch r := l.r.IntN(10); {
	case r < 5:
		return m.shape[l.r.IntN(len(m.shape))] * (1 + l.r.IntN(3))
	case r < 9:
		return []int{1, 2, 4, 6, 8, 12}[l.r.IntN(6)]
	default:
		return 1 + l.r.IntN(12)
	}
}

// name names the next tensor.
func (l *layerGen) name() string {
	l.n++
	return fmt.Sprintf("t%d", l.n-1)
}

// input declares a new fusion input of the given shape on m: with aligned
// placements when given (the sharding an op's output requires of it), a
// block sharding, or a random schedule (Partial only when partialOK).
func (l *layerGen) input(shape []int, m genMesh, aligned []string, partialOK bool) lt {
	t := lt{name: l.name(), shape: shape, mesh: m}
	dtype := l.dtype
	if dtype == "float32" && l.r.IntN(2) == 0 {
		dtype = "" // the default
	}
	switch r := l.r.IntN(10); {
	case aligned != nil && r < 4:
		l.declare(t.name, m, true, dtype, shape, decl{pls: aligned})
		l.sure[fmt.Sprintf("tensor %q", t.name)] = true
	case r < 6:
		l.declare(t.name, m, true, dtype, shape, l.blockDecl(shape, 0, m))
		l.sure[fmt.Sprintf("tensor %q", t.name)] = true
	default:
		t.terms = l.writeTensor(&l.tensors, t.name, m, shape, make([]bool, len(shape)), dtype, true, true, partialOK)
	}
	l.pool = append(l.pool, t)
	return t
}

// declare writes a tensor's declaration: mesh when withMesh, dtype, shape
// when given, and d. A produced tensor with nothing to declare is left
// out: it is unsharded on its first operand's mesh.
func (l *layerGen) declare(name string, m genMesh, withMesh bool, dtype string, shape []int, d decl) {
	if !withMesh && dtype == "" && shape == nil && d.empty() {
		return
	}
	if l.format2 && d.empty() && d.alloc != "" {
		// An allocation needs a given sharding, and in format 2 a tensor
		// that gives none of mesh, schedule or placements is propagated.
		withMesh = true
	}
	b := &l.tensors
	fmt.Fprintf(b, "  %s:\n", name)
	if withMesh {
		fmt.Fprintf(b, "    mesh: %s\n", m.name)
	}
	if dtype != "" {
		fmt.Fprintf(b, "    dtype: %s\n", dtype)
	}
	if shape != nil {
		fmt.Fprintf(b, "    shape: %s\n", intList(shape))
	}
	d.write(b)
}

func intList(xs []int) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprint(x)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

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
	"matmul", "matmul", "matmul", "linear", "linear", "linear",
}

// op appends one op reading cur (and, for several operands, others) and
// returns its output.
func (l *layerGen) op(cur lt) lt {
	kind := opKinds[l.r.IntN(len(opKinds))]
	if cur.terms > 0 && kind != "set" && l.r.IntN(5) != 0 {
		kind = "set" // mostly read a Partial input as it must be read
	}
	if len(cur.shape) >= 4 && kind == "broadcast" || len(cur.shape) < 2 && kind == "matmul" {
		kind = "unary"
	}
	if cur.terms > 0 && kind != "set" {
		l.deliberate = append(l.deliberate, "a Partial input read by "+kind)
	}
	switch kind {
	case "set":
		return l.set(cur)
	case "reduce":
		return l.reduce(cur)
	case "binary":
		return l.binary(cur)
	case "unary":
		return l.unary(cur)
	case "broadcast":
		return l.broadcast(cur)
	case "matmul":
		return l.matmul(cur)
	}
	return l.linear(cur)
}

// outMesh draws the mesh of an op's output: mostly its first operand's,
// else either mesh (the op then reads its operands from another mesh).
func (l *layerGen) outMesh(first lt) (genMesh, bool) {
	if l.r.IntN(8) == 0 {
		m := l.meshes[l.r.IntN(2)]
		return m, m.name != first.mesh.name || l.r.IntN(2) == 0
	}
	return first.mesh, false
}

// set copies cur to a random schedule (as the first kind does) or a block
// sharding, on either mesh. A set from a Partial input reduces its terms,
// a leading logical axis that the output keeps as a reduction axis: the
// random schedule counts it; placements, drawn then, count only the
// other axes.
func (l *layerGen) set(cur lt) lt {
	m, withMesh := l.outMesh(cur)
	out := lt{name: l.name(), shape: cur.shape, mesh: m}
	l.ops = append(l.ops, genOp{fmt.Sprintf("  - {op: set, in: %s, out: %s}", cur.name, out.name), true})
	ext, red := cur.shape, make([]bool, len(cur.shape))
	if cur.terms > 0 {
		ext, red = append([]int{cur.terms}, ext...), append([]bool{true}, red...)
	}
	switch {
	case l.r.IntN(2) == 0:
		l.writeTensor(&l.tensors, out.name, m, ext, red, "", withMesh, false, false)
	case cur.terms > 0:
		l.declare(out.name, m, withMesh, "", nil, l.blockPlacements(cur.shape, 0, m))
		l.sure[fmt.Sprintf("tensor %q", out.name)] = true
	default:
		l.declare(out.name, m, withMesh, "", nil, l.blockDecl(cur.shape, 0, m))
		l.sure[fmt.Sprintf("tensor %q", out.name)] = true
	}
	l.pool = append(l.pool, out)
	return out
}

// reduce reduces one axis of cur into a tensor with a random schedule, or
// with block placements that may split the reduced axis (Partial of the
// reduction's op).
func (l *layerGen) reduce(cur lt) lt {
	m, withMesh := l.outMesh(cur)
	kind := []string{"sum", "prod", "max", "min"}[l.r.IntN(4)]
	ax := l.r.IntN(len(cur.shape))
	out := lt{name: l.name(), shape: slices.Delete(slices.Clone(cur.shape), ax, ax+1), mesh: m}
	l.ops = append(l.ops, genOp{fmt.Sprintf("  - {op: %s, in: %s, out: %s, axis: %d}", kind, cur.name, out.name, l.signed(ax, len(cur.shape))), true})
	if l.r.IntN(4) == 0 {
		// Placements with Partial(kind) split the reduced axis over a mesh
		// axis: each device reduces its slice, the op combines the slices.
		d := l.blockPlacements(out.shape, cur.shape[ax], m)
		for i, p := range d.pls {
			if p == "Partial(sum)" {
				d.pls[i] = "Partial(" + kind + ")"
			}
		}
		l.declare(out.name, m, withMesh, "", nil, d)
		l.sure[fmt.Sprintf("tensor %q", out.name)] = true
	} else {
		red := make([]bool, len(cur.shape))
		red[ax] = true
		l.writeTensor(&l.tensors, out.name, m, cur.shape, red, "", withMesh, false, false)
	}
	l.pool = append(l.pool, out)
	return out
}

// outDecl draws the sharding of a layer op's output of value shape shape
// (k > 0: a contraction over k) on m: mostly a block sharding, sometimes
// one the layer lowering rejects, recorded as deliberate.
func (l *layerGen) outDecl(name string, shape []int, k int, m genMesh) decl {
	if l.r.IntN(25) == 0 {
		if d, ok := l.invalidDecl(shape, k, m); ok {
			l.deliberate = append(l.deliberate, d.invalid)
			return d
		}
	}
	l.sure[fmt.Sprintf("tensor %q", name)] = true
	return l.blockDecl(shape, k, m)
}

// declareOut declares a layer op's output with sharding d. It gives the
// output's shape when full is set (broadcast needs it), and otherwise
// sometimes: for a contraction, with or without its reduction axis k.
func (l *layerGen) declareOut(name string, shape []int, k int, m genMesh, withMesh, full bool, d decl) {
	var given []int
	switch {
	case full:
		given = shape
	case l.r.IntN(6) == 0:
		given = shape
		if k > 0 && l.r.IntN(2) == 0 {
			given = append(slices.Clone(shape), k)
		}
	}
	dtype := ""
	if l.r.IntN(10) == 0 {
		dtype = l.dtype
	}
	l.declare(name, m, withMesh, dtype, given, d)
}

// splitK returns the output placements pls that new operands align with:
// now and then, for a contraction whose output does not split its
// contracted axis k, with k split along a mesh axis that pls replicates
// anyway, so that the operands hold slices of k. The optimal policy may
// then sum partial products instead of gathering the operands.
func (l *layerGen) splitK(pls []string, k int, m genMesh) []string {
	if k == 0 || pls == nil || slices.Contains(pls, "Partial(sum)") || l.r.IntN(3) != 0 {
		return pls
	}
	var axes []int
	for i, p := range pls {
		if p == "Replicate()" && m.shape[i] > 1 && k%m.shape[i] == 0 {
			axes = append(axes, i)
		}
	}
	if len(axes) == 0 {
		return pls
	}
	out := slices.Clone(pls)
	out[axes[l.r.IntN(len(axes))]] = "Partial(sum)"
	return out
}

// aligned returns the placements that give operand i of an op the
// sharding the op's output placements pls require of it (nil when the
// output has no placements): a dim the output shards is sharded where
// the operand has it (mapAxis), and the contracted axis (kAxis) where
// the output is Partial(sum).
func aligned(pls []string, rank int, mapAxis func(outAxis int) int, kAxis int) []string {
	if pls == nil {
		return nil
	}
	out := make([]string, len(pls))
	for i, p := range pls {
		out[i] = "Replicate()"
		var d int
		switch {
		case p == "Partial(sum)" && kAxis >= 0:
			out[i] = fmt.Sprintf("Shard(%d)", kAxis)
		case strings.HasPrefix(p, "Shard("):
			fmt.Sscanf(p, "Shard(%d)", &d)
			if d < 0 {
				d += rank
			}
			if a := mapAxis(d); a >= 0 {
				out[i] = fmt.Sprintf("Shard(%d)", a)
			}
		}
	}
	return out
}

// operand is one operand of a layer op being drawn: an existing tensor,
// or the shape of a new input and how the op maps the output's axes to
// its own.
type operand struct {
	t       *lt // nil: a new input of shape
	shape   []int
	mapAxis func(outAxis int) int
	kAxis   int
}

// emit declares the op's output and its new inputs, and appends the op.
// ops are the operands in order; the output has value shape shape and
// contracts k (k > 0). The output's mesh is drawn first, so that new
// inputs can be sharded as the output requires; it is written out when it
// is not the first operand's, where the output would otherwise lie.
func (l *layerGen) emit(kind string, ops []operand, shape []int, k int, extra string, full, sure bool) lt {
	m, withMesh := l.meshes[0], l.r.IntN(16) == 0
	if ops[0].t != nil {
		m = ops[0].t.mesh
	}
	if l.r.IntN(8) == 0 {
		m, withMesh = l.meshes[l.r.IntN(2)], true
	}
	out := lt{name: l.name(), shape: shape, mesh: m}
	// In format 2 the output is now and then left to propagation: it then
	// takes its operands' block splits, which layer ops take.
	propagate := l.format2 && !full && l.r.IntN(5) < 2
	d := decl{}
	if !propagate {
		d = l.outDecl(out.name, shape, k, m)
	}
	names, meshes := make([]string, len(ops)), make([]genMesh, len(ops))
	pls := l.splitK(d.pls, k, m)
	for i, o := range ops {
		if o.t != nil {
			names[i], meshes[i] = o.t.name, o.t.mesh
			continue
		}
		im, al := m, aligned(pls, len(shape), o.mapAxis, o.kAxis)
		if l.r.IntN(5) == 0 {
			im, al = l.meshes[l.r.IntN(2)], nil
		}
		names[i], meshes[i] = l.input(o.shape, im, al, false).name, im
	}
	for i, om := range meshes {
		// The output lies on its first operand's mesh unless it says
		// otherwise; propagation (format 2) takes the mesh of the op's
		// first reference, which is not always its first operand.
		if om.name != m.name && (i == 0 || l.format2) {
			withMesh = true
		}
	}
	switch {
	case propagate && withMesh:
		// Its mesh must be given: replicated there, on purpose.
		l.declare(out.name, m, true, "", nil, d)
		l.sure[fmt.Sprintf("tensor %q", out.name)] = true
	case !propagate:
		l.declareOut(out.name, shape, k, m, withMesh, full, d)
	}
	l.ops = append(l.ops, genOp{l.opLine(kind, names, out.name, extra), sure})
	l.pool = append(l.pool, out)
	return out
}

// opLine writes an op: in is a name, or a list for several operands (and
// now and then for one).
func (l *layerGen) opLine(kind string, names []string, out, extra string) string {
	in := names[0]
	if len(names) > 1 || l.r.IntN(4) == 0 {
		in = "[" + strings.Join(names, ", ") + "]"
	}
	return fmt.Sprintf("  - {op: %s, in: %s, out: %s%s}", kind, in, out, extra)
}

func identityMap(outAxis int) int { return outAxis }

// unary applies relu, neg or abs to cur.
func (l *layerGen) unary(cur lt) lt {
	kind := []string{"relu", "neg", "abs"}[l.r.IntN(3)]
	return l.emit(kind, []operand{{t: &cur, mapAxis: identityMap, kAxis: -1}}, cur.shape, 0, "", false, true)
}

// binary applies add, sub, mul, maximum or minimum to cur and a second
// operand of equal rank: cur itself, an earlier tensor whose extents
// broadcast with cur's, or a new input, with extent-1 axes on either side
// broadcast. Now and then the extents do not broadcast, on purpose.
func (l *layerGen) binary(cur lt) lt {
	kind := []string{"add", "sub", "mul", "maximum", "minimum"}[l.r.IntN(5)]
	rank := len(cur.shape)
	var other operand
	switch r := l.r.IntN(10); {
	case r == 0:
		other.t = &cur
	case r < 4:
		if t, ok := l.fromPool(func(s []int) bool { return broadcasts(s, cur.shape) }); ok {
			other.t = &t
		}
	}
	sure := true
	if other.t != nil {
		other.shape = other.t.shape
	} else {
		other.shape = make([]int, rank)
		for j, e := range cur.shape {
			switch {
			case e == 1 && l.r.IntN(3) == 0:
				other.shape[j] = l.extent(cur.mesh) // cur is broadcast along j
			case l.r.IntN(5) == 0:
				other.shape[j] = 1 // the new operand is
			default:
				other.shape[j] = e
			}
		}
		if l.r.IntN(50) == 0 {
			sure = false
			l.deliberate = append(l.deliberate, "operands that do not broadcast")
			if j := slices.IndexFunc(cur.shape, func(e int) bool { return e > 1 }); j >= 0 {
				other.shape[j] = cur.shape[j] + 1
			} else {
				other.shape = append(other.shape, 2)
			}
		}
	}
	shape := slices.Clone(cur.shape)
	for j := range shape {
		if j < len(other.shape) && other.shape[j] > shape[j] {
			shape[j] = other.shape[j]
		}
	}
	a := operand{t: &cur, shape: cur.shape}
	ops := []operand{a, other}
	if l.r.IntN(2) == 0 {
		ops[0], ops[1] = ops[1], ops[0]
	}
	for i := range ops {
		s := ops[i].shape
		ops[i].kAxis = -1
		ops[i].mapAxis = func(j int) int {
			if j < len(s) && (s[j] != 1 || shape[j] == 1) {
				return j
			}
			return -1 // broadcast along j: the operand is not split
		}
	}
	return l.emit(kind, ops, shape, 0, "", false, sure)
}

// broadcasts reports whether shapes a and b have equal ranks and, at each
// axis, equal extents or an extent of 1 in one of them.
func broadcasts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for j := range a {
		if a[j] != b[j] && a[j] != 1 && b[j] != 1 {
			return false
		}
	}
	return true
}

// fromPool picks an earlier tensor, not Partial, whose shape fits.
func (l *layerGen) fromPool(fits func([]int) bool) (lt, bool) {
	var ok []lt
	for _, t := range l.pool {
		if t.terms == 0 && fits(t.shape) {
			ok = append(ok, t)
		}
	}
	if len(ok) == 0 {
		return lt{}, false
	}
	return ok[l.r.IntN(len(ok))], true
}

// broadcast inserts one or two new axes into cur, at positions written
// from the start or the end; the output declares its full shape.
func (l *layerGen) broadcast(cur lt) lt {
	rank := len(cur.shape) + 1 + l.r.IntN(min(2, 4-len(cur.shape)))
	axes := l.r.Perm(rank)[:rank-len(cur.shape)]
	slices.Sort(axes)
	shape := make([]int, 0, rank)
	written := make([]string, len(axes))
	for i, a := range axes {
		written[i] = fmt.Sprint(a)
		if l.r.IntN(4) == 0 {
			written[i] = fmt.Sprint(a - rank)
		}
	}
	next := 0
	for j := range rank {
		if slices.Contains(axes, j) {
			shape = append(shape, l.extent(cur.mesh))
			continue
		}
		shape = append(shape, cur.shape[next])
		next++
	}
	mapAxis := func(j int) int {
		if slices.Contains(axes, j) {
			return -1
		}
		n, _ := slices.BinarySearch(axes, j)
		return j - n
	}
	extra := ", axes: [" + strings.Join(written, ", ") + "]"
	return l.emit("broadcast", []operand{{t: &cur, mapAxis: mapAxis, kAxis: -1}}, shape, 0, extra, true, true)
}

// matmul multiplies cur, as a [..., m, k] or as b [..., k, n], with a new
// operand (or an earlier tensor that fits): b 2-D and shared by every
// batch, or with a's batch axes. Now and then the contracted extents
// differ, on purpose.
func (l *layerGen) matmul(cur lt) lt {
	r := len(cur.shape)
	var a, b operand
	var shape []int
	var k int
	if l.r.IntN(3) != 0 {
		// cur is a: [...batch, m, k].
		k = cur.shape[r-1]
		n := l.extent(cur.mesh)
		bs := []int{k, n}
		if r > 2 && l.r.IntN(2) == 0 {
			bs = append(slices.Clone(cur.shape[:r-2]), k, n)
		}
		a = operand{t: &cur, shape: cur.shape}
		b = operand{shape: bs}
		if t, ok := l.fromPool(func(s []int) bool {
			return len(s) == 2 && s[0] == k || len(s) == r && r > 2 && s[r-2] == k && slices.Equal(s[:r-2], cur.shape[:r-2])
		}); ok && l.r.IntN(4) == 0 {
			b = operand{t: &t, shape: t.shape}
		}
		shape = append(slices.Clone(cur.shape[:r-1]), b.shape[len(b.shape)-1])
	} else {
		// cur is b: [k, n] or [...batch, k, n].
		k = cur.shape[r-2]
		m := l.extent(cur.mesh)
		as := append(slices.Clone(cur.shape[:r-2]), m, k)
		if r == 2 && l.r.IntN(3) == 0 {
			as = []int{l.extent(cur.mesh), m, k} // batches sharing b
		}
		a = operand{shape: as}
		b = operand{t: &cur, shape: cur.shape}
		shape = append(slices.Clone(as[:len(as)-1]), cur.shape[r-1])
	}
	sure := true
	if l.r.IntN(50) == 0 && (a.t == nil || b.t == nil) {
		sure = false
		l.deliberate = append(l.deliberate, "matmul extents k that differ")
		if a.t == nil {
			a.shape = slices.Clone(a.shape)
			a.shape[len(a.shape)-1]++
		} else {
			b.shape = slices.Clone(b.shape)
			b.shape[len(b.shape)-2]++
		}
	}
	R, ra, rb := len(shape), len(a.shape), len(b.shape)
	a.mapAxis = func(j int) int {
		if j < R-1 {
			return j // batch and m
		}
		return -1
	}
	a.kAxis = ra - 1
	b.mapAxis = func(j int) int {
		switch {
		case j == R-1:
			return rb - 1 // n
		case j < R-2 && rb == R:
			return j // batch, when b has its own
		}
		return -1
	}
	b.kAxis = rb - 2
	return l.emit("matmul", []operand{a, b}, shape, k, "", false, sure)
}

// linear computes x @ wᵀ (+ bias) with cur as x [..., k], as w [n, k]
// (rank 2) or as the bias [n] (rank 1), the other operands new or earlier
// tensors that fit. Now and then w's k or the bias's n is off, on purpose.
func (l *layerGen) linear(cur lt) lt {
	r := len(cur.shape)
	var x, w operand
	var bias *operand
	var k, n int
	role := l.r.IntN(10)
	switch {
	case role < 2 && r == 2:
		// cur is w.
		n, k = cur.shape[0], cur.shape[1]
		xs := make([]int, 1+l.r.IntN(3))
		for i := range xs {
			xs[i] = l.extent(cur.mesh)
		}
		xs[len(xs)-1] = k
		x, w = operand{shape: xs}, operand{t: &cur, shape: cur.shape}
	case role < 3 && r == 1:
		// cur is the bias.
		n, k = cur.shape[0], l.extent(cur.mesh)
		xs := []int{l.extent(cur.mesh), k}
		x, w = operand{shape: xs}, operand{shape: []int{n, k}}
		bias = &operand{t: &cur, shape: cur.shape}
	default:
		k, n = cur.shape[r-1], l.extent(cur.mesh)
		x, w = operand{t: &cur, shape: cur.shape}, operand{shape: []int{n, k}}
		if t, ok := l.fromPool(func(s []int) bool { return len(s) == 2 && s[1] == k }); ok && l.r.IntN(4) == 0 {
			w, n = operand{t: &t, shape: t.shape}, t.shape[0]
		}
	}
	if bias == nil && l.r.IntN(5) < 2 {
		bias = &operand{shape: []int{n}}
		if t, ok := l.fromPool(func(s []int) bool { return len(s) == 1 && s[0] == n }); ok && l.r.IntN(4) == 0 {
			bias = &operand{t: &t, shape: t.shape}
		}
	}
	sure := true
	if l.r.IntN(50) == 0 {
		switch {
		case w.t == nil:
			sure = false
			l.deliberate = append(l.deliberate, "linear extents k that differ")
			w.shape = []int{n, k + 1}
		case bias != nil && bias.t == nil:
			sure = false
			l.deliberate = append(l.deliberate, "a linear bias that is not [n]")
			bias.shape = []int{n + 1}
		}
	}
	shape := append(slices.Clone(x.shape[:len(x.shape)-1]), n)
	R := len(shape)
	x.mapAxis = func(j int) int {
		if j < R-1 {
			return j
		}
		return -1
	}
	x.kAxis = len(x.shape) - 1
	nAxis := func(j int) int {
		if j == R-1 {
			return 0
		}
		return -1
	}
	w.mapAxis, w.kAxis = nAxis, 1
	ops := []operand{x, w}
	if bias != nil {
		bias.mapAxis, bias.kAxis = nAxis, -1
		ops = append(ops, *bias)
	}
	return l.emit("linear", ops, shape, k, "", false, sure)
}
