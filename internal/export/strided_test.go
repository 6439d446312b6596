package export

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/ops"
)

func TestRefine(t *testing.T) {
	tests := map[string]struct {
		a, b   []int
		want   refinement
		wantOK bool
	}{
		"gathered chunks and the unpadded view": {[]int{8, 2, 6}, []int{8, 12},
			refinement{f: []int{8, 2, 6}, ga: [][]int{{0}, {1}, {2}}, gb: [][]int{{0}, {1, 2}}}, true},
		"extents of one have no digits": {[]int{1, 4, 1}, []int{2, 2},
			refinement{f: []int{2, 2}, ga: [][]int{nil, {0, 1}, nil}, gb: [][]int{{0}, {1}}}, true},
		"a boundary inside a digit": {[]int{2, 3}, []int{3, 2}, refinement{}, false},
		"different sizes":           {[]int{2, 3}, []int{7}, refinement{}, false},
		"a zero extent":             {[]int{0, 3}, []int{3, 0}, refinement{}, false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, ok := refine(tc.a, tc.b)
			if ok != tc.wantOK {
				t.Fatalf("ok = %v, want %v", ok, tc.wantOK)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(refinement{})); ok && diff != "" {
				t.Errorf("refine(%v, %v) (-want +got):\n%s", tc.a, tc.b, diff)
			}
		})
	}
}

// TestSpans: the pieces of a range cover it exactly once, each a box
// (leading digits fixed, one a range, the rest whole).
func TestSpans(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 500 {
		radix := make([]int, 1+rng.IntN(4))
		n := 1
		for i := range radix {
			radix[i] = 1 + rng.IntN(4)
			n *= radix[i]
		}
		lo := rng.IntN(n + 1)
		hi := lo + rng.IntN(n-lo+1)
		seen := make([]int, n)
		for _, p := range spans(lo, hi, radix) {
			forEach(p, radix, func(flat int) { seen[flat]++ })
		}
		for i, c := range seen {
			if want := btoi(i >= lo && i < hi); c != want {
				t.Fatalf("spans(%d, %d, %v): element %d covered %d times, want %d", lo, hi, radix, i, c, want)
			}
		}
	}
}

// forEach calls fn with the flat index of every element of a piece.
func forEach(p []sel, radix []int, fn func(int)) {
	var rec func(k, flat int)
	rec = func(k, flat int) {
		if k == len(radix) {
			fn(flat)
			return
		}
		for v := p[k].lo; v < p[k].hi; v++ {
			rec(k+1, flat*radix[k]+v)
		}
	}
	rec(0, 0)
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// randomCase is a random X viewed as dx and permuted by px, and a w of the
// same elements with a common refinement: Q's extents regrouped.
func randomCase(rng *rand.Rand) (dx, px, w []int, geo geometry) {
	for {
		dx = make([]int, 1+rng.IntN(4))
		for i := range dx {
			dx[i] = 1 + rng.IntN(4)
		}
		px = rng.Perm(len(dx))
		w = regroup(rng, permuted(dx, px))
		if g, ok := newGeometry(dx, px, w); ok {
			return dx, px, w, g
		}
	}
}

// regroup merges neighbours and splits extents of a shape at random.
func regroup(rng *rand.Rand, q []int) []int {
	w := slices.Clone(q)
	for range 3 {
		i := rng.IntN(len(w))
		switch {
		case rng.IntN(2) == 0 && i+1 < len(w):
			w = slices.Concat(w[:i], []int{w[i] * w[i+1]}, w[i+2:])
		case w[i]%2 == 0:
			w = slices.Concat(w[:i], []int{2, w[i] / 2}, w[i+1:])
		}
	}
	return w
}

// permutedFlat is A: X's values (x[i] = i) seen through dx permuted by px,
// flattened.
func permutedFlat(dx, px []int) []float64 {
	n := ops.Product(dx)
	s, _ := strides(dx)
	q := permuted(dx, px)
	a := make([]float64, 0, n)
	idx := make([]int, len(q))
	for range n {
		off := 0
		for k, d := range px {
			off += idx[k] * s[d+1]
		}
		a = append(a, float64(off))
		for k := len(q) - 1; k >= 0; k-- {
			if idx[k]++; idx[k] < q[k] {
				break
			}
			idx[k] = 0
		}
	}
	return a
}

// boxFlat lists the flat offsets in w of the box [0, box), row-major.
func boxFlat(w, box []int) []int {
	var out []int
	var rec func(d, flat int)
	rec = func(d, flat int) {
		if d == len(w) {
			out = append(out, flat)
			return
		}
		for v := range box[d] {
			rec(d+1, flat*w[d]+v)
		}
	}
	rec(0, 0)
	return out
}

func randomBox(rng *rand.Rand, w []int) []int {
	box := make([]int, len(w))
	for d, e := range w {
		box[d] = e
		if rng.IntN(2) == 0 {
			box[d] = rng.IntN(e + 1)
		}
	}
	return box
}

// TestUnpadLines: the copies of a (Permute +) Unpad, run by the view
// evaluator, give the box of the permuted buffer.
func TestUnpadLines(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 400 {
		dx, px, w, geo := randomCase(rng)
		box := randomBox(rng, w)
		a := permutedFlat(dx, px)
		var want []float64
		for _, f := range boxFlat(w, box) {
			want = append(want, a[f])
		}
		bufs := map[string][]float64{"x": iotaFloats(ops.Product(dx)), "y": fill(ops.Product(box), -1)}
		lines := geo.unpadLines("x", "y", box)
		if err := run(lines, bufs, nil); err != nil {
			t.Fatalf("dx %v px %v w %v box %v: %v\n%s", dx, px, w, box, err, strings.Join(lines, "\n"))
		}
		if diff := cmp.Diff(want, bufs["y"], cmp.Comparer(nilEmpty)); diff != "" {
			t.Fatalf("dx %v px %v w %v box %v (-want +got):\n%s\n%s", dx, px, w, box, diff, strings.Join(lines, "\n"))
		}
	}
}

// TestPadLines: the copies and fills of a Pad (+ Permute), run by the view
// evaluator, give the padded buffer in X's order.
func TestPadLines(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for range 400 {
		dx, px, w, geo := randomCase(rng)
		box := randomBox(rng, w)
		n := ops.Product(dx)
		padded := fill(n, -7)
		for i, f := range boxFlat(w, box) {
			padded[f] = float64(1000 + i)
		}
		want := make([]float64, n)
		for i, off := range permutedFlat(dx, px) { // A[i] is X[off]
			want[int(off)] = padded[i]
		}
		y := make([]float64, ops.Product(box))
		for i := range y {
			y[i] = float64(1000 + i)
		}
		bufs := map[string][]float64{"x": fill(n, -1), "y": y}
		lines := geo.padLines("x", "y", box, "-7")
		if err := run(lines, bufs, nil); err != nil {
			t.Fatalf("dx %v px %v w %v box %v: %v\n%s", dx, px, w, box, err, strings.Join(lines, "\n"))
		}
		if diff := cmp.Diff(want, bufs["x"]); diff != "" {
			t.Fatalf("dx %v px %v w %v box %v (-want +got):\n%s\n%s", dx, px, w, box, diff, strings.Join(lines, "\n"))
		}
	}
}

// TestSliceLine: the copy of a Permute + Slice gives the rank's row of the
// permuted buffer viewed as [T, m].
func TestSliceLine(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	tested := 0
	for tested < 300 {
		dx := make([]int, 1+rng.IntN(4))
		for i := range dx {
			dx[i] = 1 + rng.IntN(4)
		}
		px := rng.Perm(len(dx))
		n := ops.Product(dx)
		T := 1 + rng.IntN(n)
		if n%T != 0 {
			continue
		}
		geo, ok := newGeometry(dx, px, []int{T, n / T})
		if !ok {
			continue
		}
		tested++
		r := rng.IntN(T)
		a := permutedFlat(dx, px)
		bufs := map[string][]float64{"x": iotaFloats(n), "y": fill(n/T, -1)}
		line := geo.sliceLine("x", "y", n/T)
		if err := run([]string{line}, bufs, map[string]int{"r": r}); err != nil {
			t.Fatalf("dx %v px %v T %d: %v\n%s", dx, px, T, err, line)
		}
		if diff := cmp.Diff(a[r*n/T:(r+1)*n/T], bufs["y"]); diff != "" {
			t.Fatalf("dx %v px %v T %d r %d (-want +got):\n%s\n%s", dx, px, T, r, diff, line)
		}
	}
}

// TestCanonPermute: dropping extents of 1 and merging neighbours keeps the
// permutation; where catDim takes it, torch.cat of the chunks is it too.
func TestCanonPermute(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	cats := 0
	for range 500 {
		dx := make([]int, 1+rng.IntN(5))
		for i := range dx {
			dx[i] = 1 + rng.IntN(3)
		}
		px := rng.Perm(len(dx))
		dims, perm := canonPermute(dx, px)
		want := permutedFlat(dx, px)
		if got := permutedFlat(dims, perm); !slices.Equal(got, want) {
			t.Fatalf("canonPermute(%v, %v) = %v, %v: a different permutation", dx, px, dims, perm)
		}
		a, q, ok := catDim(dims, perm)
		if !ok {
			continue
		}
		cats++
		out := catShape(dims, perm, q)
		if got := catFlat(dims, a, q, out); !slices.Equal(got, want) {
			t.Fatalf("cat of %v's chunks along %d, along %d of %v = %v, want %v", dims, a, q, out, got, want)
		}
	}
	if cats < 50 {
		t.Errorf("only %d permutations were torch.cat", cats)
	}
}

// catFlat is torch.cat(x.view(dims).unbind(a), dim=q, out=y.view(out))
// with x[i] = i: chunk c fills [c·len, (c+1)·len) of dim q.
func catFlat(dims []int, a, q int, out []int) []float64 {
	y := make([]float64, ops.Product(dims))
	sIn, _ := strides(dims)
	sOut, _ := strides(out)
	piece := slices.Delete(slices.Clone(dims), a, a+1)
	pieceIn := slices.Delete(slices.Clone(sIn[1:]), a, a+1) // x's strides of the chunk's dims
	idx := make([]int, len(piece))
	for c := range dims[a] {
		for i := range ops.Product(piece) {
			rem := i
			for k := len(piece) - 1; k >= 0; k-- {
				idx[k], rem = rem%piece[k], rem/piece[k]
			}
			from, to := c*sIn[a+1], 0
			for k, v := range idx {
				from += v * pieceIn[k]
				if k == q {
					v += c * piece[q]
				}
				to += v * sOut[k+1]
			}
			y[to] = float64(from)
		}
	}
	return y
}

func iotaFloats(n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = float64(i)
	}
	return out
}

func fill(n int, v float64) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = v
	}
	return out
}

func nilEmpty(a, b []float64) bool { return len(a) == 0 && len(b) == 0 || slices.Equal(a, b) }

// A view evaluator for the statements geometry writes: `V.copy_(V)` and
// `V.fill_(N)`, V a buffer name followed by .view(ints), [index],
// .permute(ints), with torch's semantics (a view that torch could not take
// is an error).

type tview struct {
	buf     string
	off     int
	shape   []int
	strides []int
}

func run(lines []string, bufs map[string][]float64, env map[string]int) error {
	for _, l := range lines {
		if dst, src, ok := strings.Cut(l, ".copy_("); ok {
			d, err1 := evalView(dst, bufs, env)
			s, err2 := evalView(strings.TrimSuffix(src, ")"), bufs, env)
			if err := firstErr(err1, err2); err != nil {
				return err
			}
			if !slices.Equal(d.shape, s.shape) && !(ops.Product(d.shape) == 1 && ops.Product(s.shape) == 1) { // copy_ broadcasts one element
				return fmt.Errorf("copy_ between shapes %v and %v: %s", d.shape, s.shape, l)
			}
			vals := d.offsets()
			for i, off := range s.offsets() {
				bufs[d.buf][vals[i]] = bufs[s.buf][off]
			}
			continue
		}
		dst, val, ok := strings.Cut(l, ".fill_(")
		if !ok {
			return fmt.Errorf("not a copy_ or fill_: %s", l)
		}
		d, err := evalView(dst, bufs, env)
		v, err2 := strconv.ParseFloat(strings.TrimSuffix(val, ")"), 64)
		if err := firstErr(err, err2); err != nil {
			return err
		}
		for _, off := range d.offsets() {
			bufs[d.buf][off] = v
		}
	}
	return nil
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

func (v tview) offsets() []int {
	var out []int
	var rec func(d, off int)
	rec = func(d, off int) {
		if d == len(v.shape) {
			out = append(out, off)
			return
		}
		for i := range v.shape[d] {
			rec(d+1, off+i*v.strides[d])
		}
	}
	rec(0, v.off)
	return out
}

func evalView(expr string, bufs map[string][]float64, env map[string]int) (tview, error) {
	name := expr
	if i := strings.IndexAny(expr, ".["); i >= 0 {
		name = expr[:i]
	}
	buf, ok := bufs[name]
	if !ok {
		return tview{}, fmt.Errorf("unknown buffer %q", name)
	}
	v := tview{buf: name, shape: []int{len(buf)}, strides: []int{1}}
	rest := expr[len(name):]
	for rest != "" {
		var arg string
		var err error
		switch {
		case strings.HasPrefix(rest, ".view("):
			arg, rest = cutParen(rest[len(".view("):])
			v, err = v.view(parseInts(arg))
		case strings.HasPrefix(rest, ".permute("):
			arg, rest = cutParen(rest[len(".permute("):])
			v = v.permute(parseInts(arg))
		case strings.HasPrefix(rest, "["):
			end := strings.Index(rest, "]")
			arg, rest = rest[1:end], rest[end+1:]
			v, err = v.index(strings.Split(arg, ", "), env)
		default:
			return tview{}, fmt.Errorf("cannot evaluate %q", rest)
		}
		if err != nil {
			return tview{}, fmt.Errorf("%s: %w", expr, err)
		}
	}
	return v, nil
}

func cutParen(s string) (arg, rest string) {
	i := strings.Index(s, ")")
	return s[:i], s[i+1:]
}

func parseInts(s string) []int {
	var out []int
	for _, f := range strings.Split(s, ", ") {
		n, _ := strconv.Atoi(f)
		out = append(out, n)
	}
	return out
}

// view is torch's view: the new shape's strides where the old dims can be
// split and merged into it (ATen's computeStride), else an error.
func (v tview) view(shape []int) (tview, error) {
	if ops.Product(shape) != ops.Product(v.shape) {
		return tview{}, fmt.Errorf("view %v of %v elements", shape, ops.Product(v.shape))
	}
	strides := make([]int, len(shape))
	vd := len(shape) - 1
	base := v.strides[len(v.strides)-1]
	tn, vn := 1, 1
	for td := len(v.shape) - 1; td >= 0; td-- {
		tn *= v.shape[td]
		if td == 0 || v.shape[td-1] != 1 && v.strides[td-1] != tn*base {
			for vd >= 0 && (vn < tn || shape[vd] == 1) {
				strides[vd] = vn * base
				vn *= shape[vd]
				vd--
			}
			if vn != tn {
				return tview{}, fmt.Errorf("view %v of a tensor of shape %v and strides %v", shape, v.shape, v.strides)
			}
			if td > 0 {
				base, tn, vn = v.strides[td-1], 1, 1
			}
		}
	}
	if vd != -1 {
		return tview{}, fmt.Errorf("view %v of shape %v", shape, v.shape)
	}
	return tview{buf: v.buf, off: v.off, shape: slices.Clone(shape), strides: strides}, nil
}

func (v tview) permute(perm []int) tview {
	out := tview{buf: v.buf, off: v.off}
	for _, d := range perm {
		out.shape, out.strides = append(out.shape, v.shape[d]), append(out.strides, v.strides[d])
	}
	return out
}

func (v tview) index(idx []string, env map[string]int) (tview, error) {
	out := tview{buf: v.buf, off: v.off}
	for d, s := range idx {
		if a, b, ok := strings.Cut(s, ":"); ok {
			lo, hi := 0, v.shape[d]
			if a != "" {
				lo, _ = strconv.Atoi(a)
			}
			if b != "" {
				hi, _ = strconv.Atoi(b)
			}
			out.off += lo * v.strides[d]
			out.shape, out.strides = append(out.shape, hi-lo), append(out.strides, v.strides[d])
			continue
		}
		i, err := evalInt(s, env)
		if err != nil {
			return tview{}, err
		}
		if i < 0 || i >= v.shape[d] {
			return tview{}, fmt.Errorf("index %d out of %d", i, v.shape[d])
		}
		out.off += i * v.strides[d]
	}
	out.shape, out.strides = append(out.shape, v.shape[len(idx):]...), append(out.strides, v.strides[len(idx):]...)
	return out, nil
}

// evalInt evaluates what digitOf writes: an integer, or r, r // k, r % k,
// r // k % m.
func evalInt(s string, env map[string]int) (int, error) {
	f := strings.Fields(s)
	val := func(t string) (int, error) {
		if n, ok := env[t]; ok {
			return n, nil
		}
		return strconv.Atoi(t)
	}
	x, err := val(f[0])
	for i := 1; err == nil && i+1 < len(f); i += 2 {
		var y int
		if y, err = val(f[i+1]); err != nil {
			break
		}
		switch f[i] {
		case "//":
			x /= y
		case "%":
			x %= y
		default:
			err = fmt.Errorf("operator %q", f[i])
		}
	}
	return x, err
}
