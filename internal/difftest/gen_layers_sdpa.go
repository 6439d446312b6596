package difftest

import "slices"

// sdpa applies attention to cur as its queries q [..., s, d]: keys k
// [..., t, d] and values v [..., t, dv] are cur itself now and then
// (self-attention of one tensor), else new inputs, which are often
// sharded alike the output's batch and heads dims (or v's dv), so that
// heads-parallel attention is drawn as often as a resharded one. Now and
// then k's head dim differs from q's, or causal is true, on purpose. The
// output, the second matmul's, keeps the keys t as its trailing
// reduction axis, which its schedule counts and may split (the partial
// products then summed across devices, or left pending).
func (l *layerGen) sdpa(cur lt) lt {
	r := len(cur.shape)
	lead := func(j int) int {
		if j < r-2 {
			return j
		}
		return -1
	}
	q := operand{t: &cur, shape: cur.shape, mapAxis: identityMap, kAxis: -1}
	if l.r.IntN(6) == 0 {
		out := slices.Clone(cur.shape)
		return l.emit("sdpa", []operand{q, q, q}, out, cur.shape[r-2], ", causal: false", false, true)
	}
	t, dv := l.extent(cur.mesh), l.extent(cur.mesh)
	kShape := append(slices.Clone(cur.shape[:r-2]), t, cur.shape[r-1])
	vShape := append(slices.Clone(cur.shape[:r-2]), t, dv)
	sure, causal := true, "false"
	switch l.r.IntN(60) {
	case 0:
		sure = false
		l.deliberate = append(l.deliberate, "attention keys of another head dim than the queries'")
		kShape[r-1]++
	case 1:
		sure, causal = false, "true"
		l.deliberate = append(l.deliberate, "causal attention")
	}
	k := operand{shape: kShape, mapAxis: lead, kAxis: -1}
	v := operand{shape: vShape, kAxis: -1, mapAxis: func(j int) int {
		if j == r-1 {
			return r - 1
		}
		return lead(j)
	}}
	out := append(slices.Clone(cur.shape[:r-1]), dv)
	return l.emit("sdpa", []operand{q, k, v}, out, t, ", causal: "+causal, false, sure)
}
