// Package scale generates the inputs of nvcomm's scale benchmarks and
// measures the baselines they are compared with: fusions of many ops, of
// many devices and of big tensors, written on the fly so that no big file
// is committed, and the two speeds no algorithm of nvcomm can beat, decoding
// the fusion file's YAML and Go's copy(). Its tests (`make bench-scale`)
// measure every row of docs/performance.md; the packages' own benchmarks
// use its generators. It imports no nvcomm package, so any test may use it.
package scale

import (
	"fmt"
	"strconv"
	"strings"
)

// Mesh is the device mesh of a chain fusion.
type Mesh int

const (
	// Mesh1D is a 1-D mesh of 8 devices; the chain's tensors alternate
	// between dim 0 sharded, dim 1 sharded and replicated.
	Mesh1D Mesh = iota
	// Mesh2x4 is a 2×4 mesh; the chain's tensors take four placements
	// that shard one or both dims in turn.
	Mesh2x4
)

// String names the mesh as the benchmarks do: "1d" or "2d".
func (m Mesh) String() string {
	if m == Mesh2x4 {
		return "2d"
	}
	return "1d"
}

// Chain writes a fusion of n set ops, t0 → t1 → … → tn, each tensor
// [16, 16] float32 with the next of the mesh's placements in turn: many
// ops, each small, so that per-op costs dominate.
func Chain(n int, mesh Mesh) []byte {
	var b strings.Builder
	b.Grow(50 * n)
	b.WriteString("format: 1\nname: chain\nmeshes:\n")
	placements := []string{"[Shard(0)]", "[Shard(1)]", "[Replicate()]"}
	if mesh == Mesh2x4 {
		b.WriteString("  m: [[0, 1, 2, 3], [4, 5, 6, 7]]\n")
		placements = []string{"[Shard(0), Shard(1)]", "[Shard(1), Shard(0)]", "[Replicate(), Shard(0)]", "[Shard(0), Replicate()]"}
	} else {
		b.WriteString("  m: [0, 1, 2, 3, 4, 5, 6, 7]\n")
	}
	fmt.Fprintf(&b, "tensors:\n  t0: {mesh: m, shape: [16, 16], placements: %s}\n", placements[0])
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "  t%d: {mesh: m, placements: %s}\n", i, placements[i%len(placements)])
	}
	b.WriteString("ops:\n")
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "  - {op: set, in: t%d, out: t%d}\n", i-1, i)
	}
	return []byte(b.String())
}

// BigMesh writes a fusion whose 1-D mesh lists n devices: a [n] tensor
// sharded one element a device gathered onto every device, so that every
// per-device computation runs n times and the plan lists every device in
// the mesh and in the Allgather's team.
func BigMesh(n int) []byte {
	var b strings.Builder
	b.WriteString("format: 1\nname: big_mesh\nmeshes:\n  m: [")
	for d := range n {
		if d > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Itoa(d))
	}
	fmt.Fprintf(&b, "]\ntensors:\n  tv0:\n    mesh: m\n    shape: [%d]\n    schedule:\n"+
		"      - outer_split: {axis: 0, factor: %d}\n      - parallelize: {axis: 0, type: DIDx}\n"+
		"  tv1:\n    mesh: m\nops:\n  - {op: set, in: tv0, out: tv1}\n", n, n)
	return []byte(b.String())
}

// Change is a sharding change of one set op on a 3-D mesh: placements
// from Src to Dst.
type Change struct{ Name, Src, Dst string }

// MeshChanges change the sharding along all three device types at once:
// a rotation of the sharded axes, a nested shard moved to another axis,
// and a gather of all three. They are the resharding search at its
// largest.
var MeshChanges = []Change{
	{"rotate", "[Shard(0), Shard(1), Shard(2)]", "[Shard(1), Shard(2), Shard(0)]"},
	{"nested", "[Shard(0), Shard(0), Shard(0)]", "[Shard(1), Shard(1), Shard(1)]"},
	{"gather", "[Shard(0), Shard(1), Shard(2)]", "[Replicate(), Replicate(), Replicate()]"},
}

// MeshChange writes a fusion on a z×y×x mesh whose one set applies c to a
// [4096, 4096, 64] float32 tensor.
func MeshChange(z, y, x int, c Change) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "format: 1\nname: mesh_%dx%dx%d\nmeshes:\n  m: [", z, y, x)
	for i := range z {
		b.WriteString(sep(i) + "[")
		for j := range y {
			b.WriteString(sep(j) + "[")
			for k := range x {
				b.WriteString(sep(k) + strconv.Itoa((i*y+j)*x+k))
			}
			b.WriteString("]")
		}
		b.WriteString("]")
	}
	fmt.Fprintf(&b, "]\ntensors:\n  x:\n    mesh: m\n    shape: [4096, 4096, 64]\n    placements: %s\n"+
		"  y:\n    mesh: m\n    placements: %s\nops:\n  - {op: set, in: x, out: y}\n", c.Src, c.Dst)
	return []byte(b.String())
}

// sep is the separator before the i-th element of a flow list.
func sep(i int) string {
	if i == 0 {
		return ""
	}
	return ", "
}

// Shapes4096 are two 3-D meshes of 4,096 devices, the most uneven the
// benchmarks time and the most even.
var Shapes4096 = [][3]int{{8, 8, 64}, {16, 16, 16}}

// Shapes3D lists every 3-D mesh shape z×y×x of n devices whose three
// extents are at least 2, z first, then y.
func Shapes3D(n int) [][3]int {
	var out [][3]int
	for z := 2; z <= n; z++ {
		for y := 2; n%z == 0 && y <= n/z; y++ {
			if x := n / z / y; (n/z)%y == 0 && x >= 2 {
				out = append(out, [3]int{z, y, n / z / y})
			}
		}
	}
	return out
}

// Big is a fusion of one collective on a 64 MiB float32 tensor over 8
// devices.
type Big struct {
	Name string
	Src  []byte
}

// BigTensors are the big-tensor fusions: one Allgather, one AllToAll and
// one Allreduce, each of 64 MiB of float32 on a 1-D mesh of 8 devices.
func BigTensors() []Big {
	cases := []struct{ name, tensors, op string }{
		{"allgather", "x: {mesh: m, shape: [8, 2097152], placements: [Shard(0)]}\n  y: {mesh: m, placements: [Replicate()]}", "{op: set, in: x, out: y}"},
		{"alltoall", "x: {mesh: m, shape: [8, 8, 262144], placements: [Shard(0)]}\n  y: {mesh: m, placements: [Shard(1)]}", "{op: set, in: x, out: y}"},
		{"allreduce", "x: {mesh: m, shape: [8, 2097152], placements: [Shard(0)]}\n  y: {mesh: m, placements: [Replicate()]}", "{op: sum, in: x, out: y, axis: 0}"},
	}
	out := make([]Big, len(cases))
	for i, c := range cases {
		src := fmt.Sprintf("format: 1\nname: big_%s\nmeshes:\n  m: [0, 1, 2, 3, 4, 5, 6, 7]\ntensors:\n  %s\nops:\n  - %s\n", c.name, c.tensors, c.op)
		out[i] = Big{c.name, []byte(src)}
	}
	return out
}

// Family is a kind of generated fusion whose size is its number of ops:
// the scale report measures lower, validate and simulate on every family
// at 1k, 10k and 100k ops.
type Family struct {
	// Name names the family in benchmarks and the report.
	Name string
	// Gen writes a fusion of n ops.
	Gen func(n int) []byte
}

// Families are every generated fusion family: the chains of set ops on
// either mesh, and the mixed fusions in both formats, whose ops are
// mostly reductions, sets from Partial inputs and changes along both axes
// of a 2×4 mesh, alternating with a 1-D mesh of the same 8 devices.
var Families = []Family{
	{"chain1d", func(n int) []byte { return Chain(n, Mesh1D) }},
	{"chain2d", func(n int) []byte { return Chain(n, Mesh2x4) }},
	{"mixed1", func(n int) []byte { return Mixed(n, 1) }},
	{"mixed2", func(n int) []byte { return Mixed(n, 2) }},
}

// mixedCycle is the mixed family's cycle of ops on two meshes of the same
// 8 devices: a, 1-D, and b, 2×4. Five of its eight ops are reductions or
// sets from Partial inputs, each with a bound in all; one changes both of
// b's axes at once; two are layer ops of a chain c0 → c1 → … on a
// (chain), the add's output left undeclared in format 2 (propagated).
var mixedCycle = []struct {
	in, out, op       string
	chain, propagated bool
}{
	{"x%[1]d: {mesh: a, shape: [16, 16], placements: [Shard(0)]}", "y%[1]d: {mesh: a, placements: [Replicate()]}",
		"{op: sum, in: x%[1]d, out: y%[1]d, axis: 0}", false, false},
	{"x%[1]d: {mesh: b, shape: [16, 16], placements: [Shard(0), Shard(1)]}", "y%[1]d: {mesh: b, placements: [Replicate(), Shard(0)]}",
		"{op: max, in: x%[1]d, out: y%[1]d, axis: 0}", false, false},
	{"x%[1]d: {mesh: a, shape: [16, 16], placements: [Partial(sum)]}", "y%[1]d: {mesh: a, placements: [Shard(0)]}",
		"{op: set, in: x%[1]d, out: y%[1]d}", false, false},
	{"", "c%[2]d: {mesh: a, placements: [Shard(1)]}",
		"{op: relu, in: c%[3]d, out: c%[2]d}", true, false},
	{"x%[1]d: {mesh: b, shape: [16, 16], placements: [Partial(max), Shard(0)]}", "y%[1]d: {mesh: b, placements: [Shard(1), Replicate()]}",
		"{op: set, in: x%[1]d, out: y%[1]d}", false, false},
	{"x%[1]d: {mesh: b, shape: [16, 16], placements: [Shard(0), Shard(1)]}", "y%[1]d: {mesh: b, placements: [Shard(1), Shard(0)]}",
		"{op: set, in: x%[1]d, out: y%[1]d}", false, false},
	{"x%[1]d: {mesh: a, shape: [16, 16], placements: [Shard(1)]}", "y%[1]d: {mesh: a, placements: [Shard(0)]}",
		"{op: prod, in: x%[1]d, out: y%[1]d, axis: 1}", false, false},
	{"w%[1]d: {mesh: a, shape: [16, 16], placements: [Shard(0)]}", "c%[2]d: {mesh: a, placements: [Shard(0)]}",
		"{op: add, in: [c%[3]d, w%[1]d], out: c%[2]d}", true, true},
}

// Mixed writes a fusion of n ops in the given format (1 or 2) that cycle
// through mixedCycle. The chain's tensors c1, c2, … are declared where
// their op is; in format 2 the add's output is not declared and takes its
// mesh and sharding from the op.
func Mixed(n, format int) []byte {
	var tensors, ops strings.Builder
	tensors.Grow(90 * n)
	ops.Grow(45 * n)
	tensors.WriteString("  c0: {mesh: a, shape: [16, 16], placements: [Shard(0)]}\n")
	chain := 0
	for i := range n {
		c := mixedCycle[i%len(mixedCycle)]
		out := c.out
		if format == 2 && c.propagated {
			out = ""
		}
		next := chain
		if c.chain {
			next++
		}
		for _, decl := range []string{c.in, out} {
			if decl != "" {
				fmt.Fprintf(&tensors, "  "+decl+"\n", i, next, chain)
			}
		}
		fmt.Fprintf(&ops, "  - "+c.op+"\n", i, next, chain)
		chain = next
	}
	return fmt.Appendf(nil, "format: %d\nname: mixed%d\nmeshes:\n  a: [0, 1, 2, 3, 4, 5, 6, 7]\n"+
		"  b: [[0, 1, 2, 3], [4, 5, 6, 7]]\ntensors:\n%sops:\n%s", format, format, tensors.String(), ops.String())
}
