package scale

import (
	"fmt"
	"strings"
)

// MLPBlocks writes a format-2 fusion of n identical MLP blocks with a
// residual add (linear → relu → linear → add), the input of lower --auto's
// scale benchmark: on a mesh of the given shape (1-D to 3-D), the input
// x [256, 1024] and the output given, split by rows along the first mesh
// axis and replicated along the others, every weight (1024 → 4096 → 1024)
// placements: auto and every intermediate left to the search.
func MLPBlocks(n int, meshShape []int) []byte { return MLPBlocksSplit(n, meshShape, 0) }

// MLPBlocksSplit is MLPBlocks with the input and the output split by rows
// along mesh axis rows instead of the first.
func MLPBlocksSplit(n int, meshShape []int, rows int) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "format: 2\nname: mlp_blocks_%d\nmeshes:\n  g: %s\n", n, nestedDevices(meshShape, 0))
	pls := boundary(meshShape, rows)
	fmt.Fprintf(&b, "tensors:\n  x0: {mesh: g, shape: [256, 1024], placements: %s}\n", pls)
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "  w%da: {mesh: g, shape: [4096, 1024], placements: auto}\n", i)
		fmt.Fprintf(&b, "  w%db: {mesh: g, shape: [1024, 4096], placements: auto}\n", i)
	}
	fmt.Fprintf(&b, "  x%d: {placements: %s}\nops:\n", n, pls)
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "  - {op: linear, in: [x%d, w%da], out: h%d}\n", i-1, i, i)
		fmt.Fprintf(&b, "  - {op: relu, in: h%d, out: a%d}\n", i, i)
		fmt.Fprintf(&b, "  - {op: linear, in: [a%d, w%db], out: z%d}\n", i, i, i)
		fmt.Fprintf(&b, "  - {op: add, in: [z%d, x%d], out: x%d}\n", i, i-1, i)
	}
	return []byte(b.String())
}

// TransformerBlocks is n identical transformer-like blocks: an rms_norm,
// a SwiGLU MLP (gate and up projections, silu(gate) · up, the down
// projection) and a residual add, the second input of lower --auto's
// scale benchmark, on the meshes and with the boundary of MLPBlocks: x
// [256, 1024] in and out split by rows along the first mesh axis, the
// three weights (1024 → 4096 → 1024) placements: auto, the norm's weight
// replicated, every intermediate left to the search. The silu and the
// product are consecutive ops, one run of elementwise steps.
func TransformerBlocks(n int, meshShape []int) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "format: 2\nname: transformer_blocks_%d\nmeshes:\n  g: %s\n", n, nestedDevices(meshShape, 0))
	pls := boundary(meshShape, 0)
	fmt.Fprintf(&b, "tensors:\n  x0: {mesh: g, shape: [256, 1024], placements: %s}\n", pls)
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "  g%d: {mesh: g, shape: [1024]}\n", i)
		fmt.Fprintf(&b, "  w%dg: {mesh: g, shape: [4096, 1024], placements: auto}\n", i)
		fmt.Fprintf(&b, "  w%du: {mesh: g, shape: [4096, 1024], placements: auto}\n", i)
		fmt.Fprintf(&b, "  w%dd: {mesh: g, shape: [1024, 4096], placements: auto}\n", i)
	}
	fmt.Fprintf(&b, "  x%d: {placements: %s}\nops:\n", n, pls)
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "  - {op: rms_norm, in: [x%d, g%d], out: n%d, axes: [-1], eps: 1.0e-6}\n", i-1, i, i)
		fmt.Fprintf(&b, "  - {op: linear, in: [n%d, w%dg], out: gate%d}\n", i, i, i)
		fmt.Fprintf(&b, "  - {op: linear, in: [n%d, w%du], out: up%d}\n", i, i, i)
		fmt.Fprintf(&b, "  - {op: silu, in: gate%d, out: act%d}\n", i, i)
		fmt.Fprintf(&b, "  - {op: mul, in: [act%d, up%d], out: h%d}\n", i, i, i)
		fmt.Fprintf(&b, "  - {op: linear, in: [h%d, w%dd], out: z%d}\n", i, i, i)
		fmt.Fprintf(&b, "  - {op: add, in: [z%d, x%d], out: x%d}\n", i, i-1, i)
	}
	return []byte(b.String())
}

// boundary is the placements of the blocks' input and output: split by
// rows along mesh axis rows, replicated along the others.
func boundary(meshShape []int, rows int) string {
	given := make([]string, len(meshShape))
	for i := range given {
		given[i] = "Replicate()"
	}
	given[rows] = "Shard(0)"
	return "[" + strings.Join(given, ", ") + "]"
}

// nestedDevices writes the devices of a mesh of the given shape, numbered
// in order, as nested lists from axis on: [[0, 1], [2, 3]].
func nestedDevices(shape []int, start int) string {
	if len(shape) == 0 {
		return fmt.Sprint(start)
	}
	size := 1
	for _, e := range shape[1:] {
		size *= e
	}
	parts := make([]string, shape[0])
	for i := range parts {
		parts[i] = nestedDevices(shape[1:], start+i*size)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}
