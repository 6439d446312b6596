package difftest

import (
	"fmt"
	"strings"
)

// This file draws the generator's second kind of case: a chain, or a small
// DAG, of the ops of layers (add, sub, mul, maximum, minimum, gt, eq, relu, neg,
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
	// terms is, for a Partial input or an op's output left pending, the
	// number of its partial terms (a leading logical axis); a set from it
	// reduces them, any other op gets that reduction inserted before it. 0
	// for other tensors.
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
	// back is the backward section, "" for none (gen_layers_backward.go).
	back string
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
	t0 := cur
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
	l.back = l.backward(t0)
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
	b.WriteString(l.back)
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
	return l.inputOf(shape, m, aligned, partialOK, l.dtype)
}

// inputOf is input in dtype.
func (l *layerGen) inputOf(shape []int, m genMesh, aligned []string, partialOK bool, dtype string) lt {
	t := lt{name: l.name(), shape: shape, mesh: m}
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
	if dtype == l.dtype || dtype == "" {
		l.pool = append(l.pool, t) // not a lookup's indices, which no other op reads
	}
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
