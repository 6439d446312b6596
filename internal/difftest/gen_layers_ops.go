package difftest

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// The ops the layer generator draws: sets, reductions, the shared emission
// of an op and its output (gen_layers.go).

// op appends one op reading cur (and, for several operands, others) and
// returns its output.
func (l *layerGen) op(cur lt) lt {
	if l.ShapeOps && cur.terms == 0 && l.r.IntN(3) == 0 {
		return l.shapeOp(cur)
	}
	kind := opKinds[l.r.IntN(len(opKinds))]
	if cur.terms > 0 && kind != "set" && l.r.IntN(2) != 0 {
		// Mostly read a Partial tensor with a set, which reduces its
		// terms; any other op gets that reduction inserted before it.
		kind = "set"
	}
	if len(cur.shape) >= 4 && kind == "broadcast" || len(cur.shape) < 2 && kind == "matmul" || len(cur.shape) < 1 && kind == "composite" {
		kind = "unary"
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
	case "composite":
		return l.composite(cur)
	case "matmul":
		return l.matmul(cur)
	case "embedding":
		return l.embedding(cur)
	case "gather":
		return l.gather(cur)
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
		// Placements with Partial(kind) leave pending terms: each device
		// reduces its slice of the reduced axis. Half the time the
		// reduced axis is split by a schedule instead, and the op
		// combines the slices across the devices.
		d := l.blockPlacements(out.shape, cur.shape[ax], m)
		for i, p := range d.pls {
			if p == "Partial(sum)" {
				d.pls[i] = "Partial(" + kind + ")"
			}
		}
		if l.r.IntN(2) == 0 {
			d = combinedDecl(d.pls, len(out.shape), ax, m)
		}
		out.terms = termsOf(d.pls, m)
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
	t *lt // nil: a new input of shape, or the number lit
	// lit is a binary op's number operand as the file writes it ("0.5"),
	// "" for a tensor.
	lit   string
	shape []int
	// dtype is a new input's dtype when not the chain's: a lookup's
	// indices.
	dtype   string
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
	if i := slices.IndexFunc(ops, func(o operand) bool { return o.lit == "" }); ops[i].t != nil {
		m = ops[i].t.mesh // the first tensor's: a number has no mesh
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
	if k > 0 && slices.Contains(d.pls, "Partial(sum)") && (len(ops) == 3 || l.r.IntN(2) == 0) {
		// The summed axis split by a schedule: the op sums across the
		// devices (a Partial(sum) output would leave the terms pending,
		// and linear's bias cannot be added to them).
		d = combinedDecl(d.pls, len(shape), len(shape), m)
	}
	out.terms = termsOf(d.pls, m)
	for i, o := range ops {
		if o.lit != "" {
			names[i], meshes[i] = o.lit, m
			continue
		}
		if o.t != nil {
			names[i], meshes[i] = o.t.name, o.t.mesh
			continue
		}
		im, al := m, aligned(pls, len(shape), o.mapAxis, o.kAxis)
		if l.r.IntN(5) == 0 {
			im, al = l.meshes[l.r.IntN(2)], nil
		}
		names[i], meshes[i] = l.inputOf(o.shape, im, al, false, cmp.Or(o.dtype, l.dtype)).name, im
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

// combinedDecl is the schedule of a layer op's output of rank value dims
// that splits what placements pls say, their Partial the output's
// reduction axis, at position red among its logical axes: the op combines
// its terms across the devices (nvFuser's rDID), the output holds values.
func combinedDecl(pls []string, rank, red int, m genMesh) decl {
	pos := make([]int, len(pls)) // the logical position each mesh axis splits, -1 for none
	for i, p := range pls {
		var d int
		switch {
		case strings.HasPrefix(p, "Partial("):
			pos[i] = red
		case strings.HasPrefix(p, "Shard("):
			fmt.Sscanf(p, "Shard(%d)", &d)
			if d < 0 {
				d += rank
			}
			if d >= red {
				d++
			}
			pos[i] = d
		default:
			pos[i] = -1
		}
	}
	var steps []string
	for at := rank; at >= 0; at-- { // from the last, so positions do not move
		for i, p := range pos {
			if p == at {
				t := []string{"DIDx", "DIDy", "DIDz"}[len(m.shape)-1-i]
				steps = append(steps, fmt.Sprintf("outer_split: {axis: %d, factor: %d}", at, m.shape[i]),
					fmt.Sprintf("parallelize: {axis: %d, type: %s}", at, t))
			}
		}
	}
	return decl{steps: steps}
}

// termsOf is the number of pending terms of an op's output that placements
// pls declare: the size of the mesh axis of their Partial, 0 without one.
func termsOf(pls []string, m genMesh) int {
	for i, p := range pls {
		if strings.HasPrefix(p, "Partial(") {
			return m.shape[i]
		}
	}
	return 0
}
