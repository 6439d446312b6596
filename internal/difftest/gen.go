// Package difftest generates random valid fusions for differential testing:
// every generated fusion must either be rejected by the compiler with a clear
// error or lower to a plan that validates and simulates PASS.
package difftest

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
)

// genMesh is a mesh being generated.
type genMesh struct {
	name    string
	shape   []int
	devices []int
}

func (m genMesh) size(t string) int {
	a := len(m.shape) - 1 - map[string]int{"DIDx": 0, "DIDy": 1, "DIDz": 2}[t]
	if a < 0 {
		return 1
	}
	return m.shape[a]
}

func (m genMesh) types() []string {
	return []string{"DIDx", "DIDy", "DIDz"}[:len(m.shape)]
}

func (m genMesh) yaml() string {
	var nest func(devs []int, shape []int) string
	nest = func(devs []int, shape []int) string {
		if len(shape) == 1 {
			parts := make([]string, len(devs))
			for i, d := range devs {
				parts[i] = fmt.Sprint(d)
			}
			return "[" + strings.Join(parts, ", ") + "]"
		}
		step := len(devs) / shape[0]
		parts := make([]string, shape[0])
		for i := range parts {
			parts[i] = nest(devs[i*step:(i+1)*step], shape[1:])
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	return nest(m.devices, m.shape)
}

// Generator draws random fusions from a seeded source.
type Generator struct {
	r *rand.Rand
	// ShapeOps lets layer chains draw permute, reshape, cast, slice and cat
	// too. Off, the generator draws what it drew before those ops existed,
	// seed for seed.
	ShapeOps bool
}

// NewGenerator returns a generator seeded with seed.
func NewGenerator(seed uint64) *Generator {
	return &Generator{r: rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))}
}

var niceExtents = []int{1, 2, 3, 4, 6, 8, 12, 16, 24}

func (g *Generator) extent() int {
	if g.r.IntN(4) == 0 {
		return 1 + g.r.IntN(24)
	}
	return niceExtents[g.r.IntN(len(niceExtents))]
}

func (g *Generator) mesh(name string, maxRank int) genMesh {
	rank := 1 + g.r.IntN(maxRank)
	m := genMesh{name: name}
	n := 1
	for range rank {
		s := 1 + g.r.IntN(4)
		if n*s > 16 {
			s = 1
		}
		m.shape = append(m.shape, s)
		n *= s
	}
	pool := g.r.Perm(16)[:n]
	if g.r.IntN(2) == 0 {
		slices.Sort(pool)
	}
	m.devices = pool
	return m
}

// tensorState tracks a tensor's loop domain while its schedule is drawn.
type tensorState struct {
	loop   []int  // extents
	red    []bool // reduction axes
	par    []string
	steps  []string
	usedTy map[string]bool
}

// schedule draws a schedule for a tensor of the given logical extents
// (reduction axes marked) on mesh m.
func (g *Generator) schedule(ext []int, red []bool, m genMesh) *tensorState {
	s := &tensorState{loop: slices.Clone(ext), red: slices.Clone(red), par: make([]string, len(ext)), usedTy: map[string]bool{}}
	for range g.r.IntN(5) {
		switch k := g.r.IntN(10); {
		case k < 5:
			g.shard(s, m)
		case k < 7:
			g.split(s)
		case k < 8:
			g.merge(s)
		default:
			g.reorder(s)
		}
	}
	return s
}

// shard splits an axis by a mesh size and parallelizes one output.
func (g *Generator) shard(s *tensorState, m genMesh) {
	types := m.types()
	t := types[g.r.IntN(len(types))]
	if s.usedTy[t] && g.r.IntN(8) != 0 {
		return
	}
	d := m.size(t)
	a := g.pick(s, func(a int) bool { return s.par[a] == "" && s.loop[a]%d == 0 })
	if s.loop[a] == d && g.r.IntN(2) == 0 {
		g.parallelize(s, a, t)
		return
	}
	outer := g.r.IntN(3) != 0
	if outer {
		s.apply(fmt.Sprintf("outer_split: {axis: %d, factor: %d}", a, d), a, d, ceilDiv(s.loop[a], d))
		g.parallelize(s, a, t)
	} else {
		s.apply(fmt.Sprintf("split: {axis: %d, factor: %d}", a, d), a, ceilDiv(s.loop[a], d), d)
		g.parallelize(s, a+1, t)
	}
}

func (g *Generator) parallelize(s *tensorState, a int, t string) {
	s.steps = append(s.steps, fmt.Sprintf("parallelize: {axis: %d, type: %s}", g.signed(a, len(s.loop)), t))
	s.par[a] = t
	s.usedTy[t] = true
}

// signed sometimes writes a position counted from the end.
func (g *Generator) signed(a, rank int) int {
	if g.r.IntN(4) == 0 {
		return a - rank
	}
	return a
}

// pick chooses a loop axis, one satisfying good nine times in ten when
// there is one: invalid schedules are tested too, but rarely.
func (g *Generator) pick(s *tensorState, good func(int) bool) int {
	var ok []int
	for a := range s.loop {
		if good(a) {
			ok = append(ok, a)
		}
	}
	if len(ok) == 0 || g.r.IntN(10) == 0 {
		return g.r.IntN(len(s.loop))
	}
	return ok[g.r.IntN(len(ok))]
}

func (s *tensorState) apply(step string, a, outer, inner int) {
	s.steps = append(s.steps, step)
	s.loop = slices.Replace(s.loop, a, a+1, outer, inner)
	s.red = slices.Replace(s.red, a, a+1, s.red[a], s.red[a])
	s.par = slices.Replace(s.par, a, a+1, "", "")
}

func (g *Generator) split(s *tensorState) {
	a := g.pick(s, func(a int) bool { return s.par[a] == "" })
	f := 1 + g.r.IntN(4)
	if g.r.IntN(2) == 0 {
		s.apply(fmt.Sprintf("split: {axis: %d, factor: %d}", a, f), a, ceilDiv(s.loop[a], f), f)
	} else {
		s.apply(fmt.Sprintf("outer_split: {axis: %d, factor: %d}", a, f), a, f, ceilDiv(s.loop[a], f))
	}
}

func (g *Generator) merge(s *tensorState) {
	if len(s.loop) < 2 {
		return
	}
	a := g.r.IntN(len(s.loop) - 1)
	if (s.par[a] != "" || s.par[a+1] != "" || s.red[a] != s.red[a+1]) && g.r.IntN(10) != 0 {
		return
	}
	s.steps = append(s.steps, fmt.Sprintf("merge: {axis: %d}", g.signed(a, len(s.loop))))
	s.loop = slices.Replace(s.loop, a, a+2, s.loop[a]*s.loop[a+1])
	s.red = slices.Replace(s.red, a, a+2, s.red[a])
	s.par = slices.Replace(s.par, a, a+2, "")
}

func (g *Generator) reorder(s *tensorState) {
	perm := g.r.Perm(len(s.loop))
	parts := make([]string, len(perm))
	loop, red, par := slices.Clone(s.loop), slices.Clone(s.red), slices.Clone(s.par)
	for i, p := range perm {
		parts[i] = fmt.Sprint(p)
		s.loop[i], s.red[i], s.par[i] = loop[p], red[p], par[p]
	}
	s.steps = append(s.steps, "reorder: ["+strings.Join(parts, ", ")+"]")
}

// allocation sometimes draws a memory order over the stored loop axes.
func (g *Generator) allocation(s *tensorState) string {
	if g.r.IntN(3) != 0 {
		return ""
	}
	var stored []int
	for a := range s.loop {
		if !s.red[a] && s.par[a] == "" {
			stored = append(stored, a)
		}
	}
	if g.r.IntN(2) == 0 {
		g.r.Shuffle(len(stored), func(i, j int) { stored[i], stored[j] = stored[j], stored[i] })
	}
	parts := make([]string, len(stored))
	for i, a := range stored {
		parts[i] = fmt.Sprint(a)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// Case is one generated fusion and what the generator meant by it.
type Case struct {
	// Src is the fusion as YAML.
	Src string
	// Deliberate lists the errors the generator put in on purpose where it
	// knows it did: a layer op's output sharded otherwise than in even
	// blocks, operands whose shapes do not fit, a Partial tensor read by an
	// op other than set. A case with none that nvcomm rejects must have been
	// rejected for one of the random schedules, which the generator does
	// not track (see Sure).
	Deliberate []string
	// Sure holds the subjects the generator built valid by construction,
	// as nvcomm's messages name them (`tensor "t3"`, `ops[2]`): a parse
	// error about these alone, in a case with nothing deliberate, is a bug
	// of the generator or of nvcomm.
	Sure map[string]bool
}

// Case draws one random fusion: two in five are chains of sets and
// reductions (the generator's first kind, which moves data only), the rest
// chains and small DAGs of layer ops mixed with sets and reductions.
func (g *Generator) Case() Case {
	if g.r.IntN(5) < 2 {
		return Case{Src: g.setChain()}
	}
	return g.layerChain()
}

// Fusion draws one random fusion and returns it as YAML.
func (g *Generator) Fusion() string { return g.Case().Src }

// setChain draws a chain of one to three sets and reductions of one input,
// every tensor with a random schedule or placements.
func (g *Generator) setChain() string {
	var b strings.Builder
	main := g.mesh("m", 3)
	other := g.mesh("n", 1)
	if g.r.IntN(3) == 0 {
		// A mesh of the same shape on other devices: n-D moves between meshes.
		other = genMesh{name: "n", shape: main.shape, devices: g.r.Perm(16)[:len(main.devices)]}
	}
	meshes := []genMesh{main, other}
	b.WriteString("meshes:\n")
	for _, m := range meshes {
		fmt.Fprintf(&b, "  %s: %s\n", m.name, m.yaml())
	}
	rank := 1 + g.r.IntN(4)
	ext := make([]int, rank)
	for i := range ext {
		ext[i] = g.extent()
	}
	b.WriteString("tensors:\n")
	terms := g.writeTensor(&b, "t0", main, ext, make([]bool, rank), dtypes[g.r.IntN(len(dtypes))], true, true, true)
	var ops []string
	cur, curMesh := "t0", main
	for i := 1; i <= 1+g.r.IntN(3); i++ {
		name := fmt.Sprintf("t%d", i)
		mesh := curMesh
		if g.r.IntN(5) == 0 {
			mesh = meshes[g.r.IntN(2)]
		}
		kind := []string{"set", "set", "sum", "prod", "max", "min"}[g.r.IntN(6)]
		outExt, red := ext, make([]bool, len(ext))
		if kind != "set" && len(ext) > 0 {
			ax := g.r.IntN(len(ext))
			red[ax] = true
			ops = append(ops, fmt.Sprintf("  - {op: %s, in: %s, out: %s, axis: %d}", kind, cur, name, g.signed(ax, len(ext))))
			outExt = ext
			g.writeTensor(&b, name, mesh, outExt, red, "", mesh.name != curMesh.name, false, false)
			ext = slices.Delete(slices.Clone(ext), ax, ax+1)
		} else {
			ops = append(ops, fmt.Sprintf("  - {op: set, in: %s, out: %s}", cur, name))
			if cur == "t0" && terms > 0 {
				// A set from a Partial input reduces its terms, a leading
				// logical axis that its output keeps as a reduction axis
				// (docs/fusion.md, placements), so schedule positions
				// count it.
				outExt, red = append([]int{terms}, ext...), append([]bool{true}, red...)
			}
			g.writeTensor(&b, name, mesh, outExt, red, "", mesh.name != curMesh.name, false, false)
		}
		cur, curMesh = name, mesh
		if len(ext) == 0 {
			break
		}
	}
	b.WriteString("ops:\n")
	b.WriteString(strings.Join(ops, "\n"))
	b.WriteString("\n")
	return b.String()
}

// writeTensor writes a tensor declaration with a random schedule, or
// random placements, sometimes Partial where partialOK (on an input). An
// input (a tensor no op produces) is written with its mesh
// and shape. It reports whether the tensor is Partial.
func (g *Generator) writeTensor(b *strings.Builder, name string, m genMesh, ext []int, red []bool, dtype string, withMesh, input, partialOK bool) int {
	if g.r.IntN(5) == 0 {
		return g.writePlacements(b, name, m, ext, red, dtype, withMesh, input, partialOK)
	}
	s := g.schedule(ext, red, m)
	writeHeader(b, name, m, ext, dtype, withMesh, input)
	if len(s.steps) > 0 {
		b.WriteString("    schedule:\n")
		for _, st := range s.steps {
			fmt.Fprintf(b, "      - %s\n", st)
		}
	}
	if alloc := g.allocation(s); alloc != "" {
		fmt.Fprintf(b, "    allocation: %s\n", alloc)
	}
	if len(s.steps) == 0 && !withMesh && !input && dtype == "" {
		fmt.Fprintf(b, "    mesh: %s\n", m.name)
	}
	return 0
}

// writeHeader writes a tensor's name, and its mesh, dtype and (for an
// input) shape when given.
func writeHeader(b *strings.Builder, name string, m genMesh, ext []int, dtype string, withMesh, input bool) {
	fmt.Fprintf(b, "  %s:\n", name)
	if withMesh || input {
		fmt.Fprintf(b, "    mesh: %s\n", m.name)
	}
	if dtype != "" {
		fmt.Fprintf(b, "    dtype: %s\n", dtype)
	}
	if input {
		parts := make([]string, len(ext))
		for i, e := range ext {
			parts[i] = fmt.Sprint(e)
		}
		fmt.Fprintf(b, "    shape: [%s]\n", strings.Join(parts, ", "))
	}
}

// writePlacements writes a tensor declared with DTensor placements instead
// of a schedule: Shard over random dims (nesting when two mesh axes pick one
// dim), Replicate, and, where partialOK, sometimes Partial. It returns
// the number of partial terms (the size of the Partial placement's mesh
// axis), or 0 without one.
func (g *Generator) writePlacements(b *strings.Builder, name string, m genMesh, ext []int, red []bool, dtype string, withMesh, input, partialOK bool) int {
	var dims []int
	for k := range ext {
		if !red[k] {
			dims = append(dims, k)
		}
	}
	pls := make([]string, len(m.shape))
	terms := 0
	for i := range pls {
		switch k := g.r.IntN(5); {
		case k < 2 && len(dims) > 0:
			pls[i] = fmt.Sprintf("Shard(%d)", g.r.IntN(len(dims)))
		case k == 2 && partialOK && terms == 0:
			pls[i] = "Partial(" + []string{"sum", "prod", "max", "min"}[g.r.IntN(4)] + ")"
			terms = m.shape[i]
		default:
			pls[i] = "Replicate()"
		}
	}
	writeHeader(b, name, m, ext, dtype, withMesh, input)
	fmt.Fprintf(b, "    placements: [%s]\n", strings.Join(pls, ", "))
	return terms
}
