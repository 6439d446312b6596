package difftest

import (
	"fmt"
	"strings"
)

// sumsChain draws a fusion whose sums may be computed late (docs/fusion.md,
// "placements"): format 2, matmuls that split their summed axis over
// DIDx (so that propagation sums their partial products), perhaps a
// Partial(sum) input, and a chain of adds, subs and negs of them; its
// last tensor is read by relu or left a fusion output, and sometimes
// another op reads a tensor of the chain too, which then must not be left
// pending. Every tensor and op is valid by construction (Sure).
func (g *Generator) sumsChain() Case {
	m, rows := g.sumsMesh()
	k, n := m.shape[len(m.shape)-1], 1+g.r.IntN(6)
	M, K := rows*(1+g.r.IntN(3)), k*(1+g.r.IntN(3))
	dtype := []string{"float32", "float32", "float64", "int32"}[g.r.IntN(4)]
	pls := func(row, x string) string { // the rows' placement (2-D), then DIDx's
		if len(m.shape) == 1 {
			return "[" + x + "]"
		}
		return "[" + row + ", " + x + "]"
	}
	row := "Replicate()"
	if g.r.IntN(2) == 0 {
		row = "Shard(0)"
	}
	sure := map[string]bool{}
	var b strings.Builder
	fmt.Fprintf(&b, "format: 2\nmeshes:\n  m: %s\ntensors:\n", m.yaml())
	decl := func(name string, shape [2]int, pls string) {
		fmt.Fprintf(&b, "  %s: {mesh: m, dtype: %s, shape: [%d, %d], placements: %s}\n", name, dtype, shape[0], shape[1], pls)
		sure[fmt.Sprintf("tensor %q", name)] = true
	}
	decl("a", [2]int{M, K}, pls(row, "Shard(1)"))
	var ops, terms []string
	for i := range 2 + g.r.IntN(3) {
		w, t := fmt.Sprintf("w%d", i), fmt.Sprintf("t%d", i)
		kSplit := "Shard(0)"
		if g.r.IntN(6) == 0 {
			kSplit = "Replicate()" // a whole summed axis: nothing pending
		}
		decl(w, [2]int{K, n}, pls("Replicate()", kSplit))
		ops = append(ops, fmt.Sprintf("{op: matmul, in: [a, %s], out: %s}", w, t))
		terms = append(terms, t)
	}
	if g.r.IntN(2) == 0 {
		decl("p", [2]int{M, n}, pls(row, "Partial(sum)"))
		terms = append(terms, "p")
	}
	acc := terms[0]
	for i, t := range terms[1:] {
		s := fmt.Sprintf("s%d", i)
		op := []string{"add", "add", "sub"}[g.r.IntN(3)]
		ops = append(ops, fmt.Sprintf("{op: %s, in: [%s, %s], out: %s}", op, acc, t, s))
		acc = s
		if g.r.IntN(4) == 0 {
			ops = append(ops, fmt.Sprintf("{op: neg, in: [%s], out: %s_neg}", acc, acc))
			acc += "_neg"
		}
		if g.r.IntN(5) == 0 {
			// A second reader: acc must hold values for it.
			ops = append(ops, fmt.Sprintf("{op: relu, in: [%s], out: %s_relu}", acc, acc))
		}
	}
	if g.r.IntN(3) == 0 {
		// The chain's end split along DIDx, the terms' type: its products
		// are reduce-scattered (sequence parallelism's row-parallel
		// layers), or their terms are, once, after the chain.
		split := ""
		switch {
		case n%k == 0:
			split = "Shard(1)"
		case row == "Replicate()" && M%k == 0:
			split = "Shard(0)"
		}
		if split != "" {
			fmt.Fprintf(&b, "  %s: {mesh: m, placements: %s}\n", acc, pls(row, split))
			sure[fmt.Sprintf("tensor %q", acc)] = true
		}
	}
	if g.r.IntN(2) == 0 {
		ops = append(ops, fmt.Sprintf("{op: relu, in: [%s], out: y}", acc))
	}
	b.WriteString("ops:\n")
	for i, op := range ops {
		fmt.Fprintf(&b, "  - %s\n", op)
		sure[fmt.Sprintf("ops[%d]", i)] = true
	}
	return Case{Src: b.String(), Sure: sure}
}

// sumsMesh draws sumsChain's mesh, 1-D or 2-D, with 2 to 4 devices
// along DIDx (its last axis), and returns it with the size of its rows'
// axis (1 on a 1-D mesh).
func (g *Generator) sumsMesh() (genMesh, int) {
	k := 2 + g.r.IntN(3)
	m := genMesh{name: "m", shape: []int{k}}
	rows := 1
	if g.r.IntN(2) == 0 {
		rows = 1 + g.r.IntN(3)
		m.shape = []int{rows, k}
	}
	m.devices = g.r.Perm(16)[:rows*k]
	return m, rows
}
