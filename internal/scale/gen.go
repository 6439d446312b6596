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
