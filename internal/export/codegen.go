package export

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/nvcomm/nvcomm/internal/plan"
)

// gen writes the plan's Python function: one block of statements per step,
// or per run of local steps fused into one pass (fuse.go), in step order.
type gen struct {
	p       *plan.Plan
	devices []int // every device the plan names: the ranks that call the function
	names   map[string]string
	dtype   map[string]string // buffer -> dtype name
	// holders: which devices hold each buffer, as the steps are emitted.
	holders map[string][]int
	// storage ids: buffers that are views of one another share one; fresh
	// marks those the function allocated (not a view of an input).
	storage map[string]int
	fresh   map[int]bool
	nextID  int
	// lastRead is the index of the last step that reads each buffer.
	lastRead map[string]int
	outputs  map[string]bool // op outputs: returned, so never written in place
	blocks   []Block
	helpers  map[string]bool // helper functions the body calls
	w        *pyWriter
	// graph: a plan of format 2, whose collectives are issued
	// asynchronously (graph.go); deps are what each step waits for in the
	// function, events the local steps a collective waits for.
	graph  bool
	deps   [][]int
	events map[int]bool
}

// pyWriter accumulates indented Python lines.
type pyWriter struct {
	lines  []string
	indent int
}

func (w *pyWriter) line(format string, args ...any) {
	text := fmt.Sprintf(format, args...)
	if text == "" {
		w.lines = append(w.lines, "")
		return
	}
	w.lines = append(w.lines, strings.Repeat("    ", w.indent)+text)
}

func newGen(p *plan.Plan) *gen {
	g := &gen{p: p, names: map[string]string{}, dtype: map[string]string{}, holders: map[string][]int{},
		storage: map[string]int{}, fresh: map[int]bool{}, lastRead: map[string]int{}, outputs: map[string]bool{},
		helpers: map[string]bool{}, w: &pyWriter{indent: 1}}
	g.devices = planDevices(p)
	taken := map[string]bool{}
	for _, r := range reserved {
		taken[r] = true
	}
	if p.Graph() {
		g.graph = true
		for _, r := range graphReserved {
			taken[r] = true
		}
	}
	name := func(buf string) {
		if _, ok := g.names[buf]; !ok {
			g.names[buf] = identifier(buf, taken)
		}
	}
	for _, t := range p.Tensors {
		name(t.Name)
		g.dtype[t.Name] = t.DType
	}
	for _, op := range p.Ops {
		g.outputs[op.Output] = true
	}
	for i, s := range p.Steps {
		for _, b := range s.Operands() {
			g.lastRead[b] = i
		}
		name(s.Output)
		if dt := opDType(p, s.Op); dt != "" {
			g.dtype[s.Output] = dt
		}
	}
	for _, in := range inputs(p) {
		g.nextID++
		g.storage[in.Name] = g.nextID
		g.holders[in.Name] = meshDevices(p, in.Mesh)
	}
	if g.graph {
		g.graphDeps()
	}
	return g
}

// reserved are the names the function uses besides its buffers.
var reserved = []string{"rank", "device", "groups", "torch", "dist", "r", "parts", "buf", "exact",
	"and", "as", "assert", "async", "await", "break", "class", "continue", "def", "del", "elif", "else",
	"except", "finally", "for", "from", "global", "if", "import", "in", "is", "lambda", "nonlocal", "not",
	"or", "pass", "raise", "return", "try", "while", "with", "yield", "None", "True", "False"}

var nonIdent = regexp.MustCompile(`[^A-Za-z0-9_]+`)

// identifier turns a buffer name into a Python identifier not yet taken:
// "tv1/padded" is tv1_padded.
func identifier(name string, taken map[string]bool) string {
	id := strings.Trim(nonIdent.ReplaceAllString(name, "_"), "_")
	if id == "" || id[0] >= '0' && id[0] <= '9' {
		id = "t_" + id
	}
	base := id
	for k := 2; taken[id]; k++ {
		id = fmt.Sprintf("%s_%d", base, k)
	}
	taken[id] = true
	return id
}

// planDevices lists every device a mesh or a step names, sorted.
func planDevices(p *plan.Plan) []int {
	var ds []int
	for _, m := range p.Meshes {
		ds = append(ds, m.Devices...)
	}
	for _, s := range p.Steps {
		ds = append(ds, slices.Concat(slices.Concat(s.Teams...), s.Devices)...)
	}
	return slices.Compact(slices.Sorted(slices.Values(ds)))
}

func meshDevices(p *plan.Plan, mesh string) []int {
	if m, ok := p.Meshes[mesh]; ok {
		return slices.Sorted(slices.Values(m.Devices))
	}
	return nil
}

// inputs are the fusion inputs: tensors no op produces, in plan order.
func inputs(p *plan.Plan) []plan.Tensor {
	produced := map[string]bool{}
	for _, op := range p.Ops {
		produced[op.Output] = true
	}
	var out []plan.Tensor
	for _, t := range p.Tensors {
		if !produced[t.Name] {
			out = append(out, t)
		}
	}
	return out
}

// opDType is the dtype of op k's output, "" when it has none.
func opDType(p *plan.Plan, k int) string {
	if k < 0 || k >= len(p.Ops) {
		return ""
	}
	for _, t := range p.Tensors {
		if t.Name == p.Ops[k].Output {
			return t.DType
		}
	}
	return ""
}

// torchDTypes are the torch names of the plan's dtypes.
var torchDTypes = map[string]string{
	"float32": "torch.float32", "float16": "torch.float16", "bfloat16": "torch.bfloat16",
	"float64": "torch.float64", "int32": "torch.int32", "int64": "torch.int64",
}

// funcName is the Python name of the plan's function.
func funcName(p *plan.Plan) string {
	return identifier(p.Fusion, map[string]bool{"main": true, "run": true})
}

// function returns the plan's function, its lines unindented at def. It
// writes only valid plans: the code relies on what validate checks (a
// device holds every buffer a step reads, a box per device, teams of
// matching sizes).
func (g *gen) function() ([]string, error) {
	if probs := plan.Validate(g.p); len(probs) > 0 {
		return nil, fmt.Errorf("export: invalid plan: %s", probs[0].Text())
	}
	blocks := fuse(g.p)
	if g.graph {
		blocks = g.hoist(blocks)
	}
	for _, b := range blocks {
		if err := g.block(b); err != nil {
			return nil, err
		}
	}
	body := g.w.lines
	g.w = &pyWriter{}
	g.header()
	g.w.indent = 1
	g.preamble()
	g.w.lines = append(g.w.lines, body...)
	g.returns()
	return g.w.lines, nil
}

// header writes the def line and the docstring.
func (g *gen) header() {
	var params []string
	for _, t := range inputs(g.p) {
		params = append(params, g.names[t.Name])
	}
	g.w.line("def %s(%s):", funcName(g.p), strings.Join(append([]string{"rank", "device", "groups"}, params...), ", "))
	g.w.indent = 1
	g.w.line(`"""Runs plan %q on one rank: device %s is global rank %s.`, g.p.Fusion, "`rank`", "`rank`")
	g.w.line("")
	for _, t := range inputs(g.p) {
		g.w.line("%s: this rank's shard of %s (%s), flat; None on a rank outside mesh %s.", g.names[t.Name], t.Name, t.DType, t.Mesh)
	}
	g.w.line("groups: the process group of each team, by its devices in ascending order.")
	g.w.line(`Returns this rank's buffer of every op's output, flat (None where it holds none)."""`)
}

// preamble sets to None the op outputs some rank running the function
// does not write, so that the return statement names them on every rank.
func (g *gen) preamble() {
	if g.graph {
		var names []string
		for i := range g.p.Steps {
			if s := &g.p.Steps[i]; g.async(s) {
				names = append(names, pyRepr(s.StreamName()))
			}
		}
		slices.Sort(names)
		args := strings.Join(append([]string{"device"}, slices.Compact(names)...), ", ")
		g.w.line("work = start(%s)  # by step id: collectives' work handles, events after local steps", args)
	}
	for _, op := range g.p.Ops {
		if !slices.Equal(g.holders[op.Output], g.devices) && g.written(op.Output) {
			g.w.line("%s = None", g.names[op.Output])
		}
	}
}

// written reports whether a step writes buffer b.
func (g *gen) written(b string) bool {
	return slices.ContainsFunc(g.p.Steps, func(s plan.Step) bool { return s.Output == b })
}

func (g *gen) returns() {
	var parts []string
	for _, op := range g.p.Ops {
		if g.written(op.Output) {
			parts = append(parts, fmt.Sprintf("%s: %s", pyRepr(op.Output), g.names[op.Output]))
		}
	}
	if g.graph {
		g.w.line("settle(work, device)")
	}
	g.w.line("return {%s}", strings.Join(slices.Compact(parts), ", "))
}

// guard opens `if rank in (...)` when the devices are not every device of
// the plan, and returns the function that closes it.
func (g *gen) guard(devices []int) func() {
	ds := slices.Compact(slices.Sorted(slices.Values(devices)))
	if slices.Equal(ds, g.devices) {
		return func() {}
	}
	g.w.line("if %s:", rankIn(ds))
	g.w.indent++
	return func() { g.w.indent-- }
}

// rankIn renders the test that rank is one of ds.
func rankIn(ds []int) string {
	if len(ds) == 1 {
		return fmt.Sprintf("rank == %d", ds[0])
	}
	return "rank in " + tuple(ds)
}

// tuple renders a Python tuple of ints.
func tuple(xs []int) string {
	if len(xs) == 1 {
		return fmt.Sprintf("(%d,)", xs[0])
	}
	return "(" + ints(xs) + ")"
}

// perRank renders a value that depends on the rank: the value itself when
// every rank of devices has the same, else a dict indexed by rank.
func perRank(devices []int, value func(d int) string) string {
	first := value(devices[0])
	same := true
	parts := make([]string, len(devices))
	for i, d := range devices {
		v := value(d)
		same = same && v == first
		parts[i] = fmt.Sprintf("%d: %s", d, v)
	}
	if same {
		return first
	}
	return "{" + strings.Join(parts, ", ") + "}[rank]"
}

// empty renders a fresh buffer of n elements of buffer b's dtype.
func (g *gen) empty(b string, n int) string {
	return fmt.Sprintf("torch.empty(%d, dtype=%s, device=device)", n, torchDTypes[g.dtype[b]])
}

// alloc records that buffer b is fresh memory of the function, held by devices.
func (g *gen) alloc(b string, devices []int) {
	g.nextID++
	g.storage[b] = g.nextID
	g.fresh[g.nextID] = true
	g.hold(b, devices)
}

// alias records that buffer b is a view of buffer of (same memory).
func (g *gen) alias(b, of string, devices []int) {
	g.storage[b] = g.storage[of]
	g.hold(b, devices)
}

func (g *gen) hold(b string, devices []int) {
	g.holders[b] = slices.Compact(slices.Sorted(slices.Values(append(g.holders[b], devices...))))
}

// writable reports whether step i may write its input in place: the input
// is memory the function allocated, and no other buffer on it, nor the
// input itself, is read after step i or returned.
func (g *gen) writable(i int, in string) bool {
	id, ok := g.storage[in]
	if !ok || !g.fresh[id] || g.graph {
		// In a step graph an earlier step may still read it: a collective
		// in flight, or a kernel the collective's stream does not wait for.
		return false
	}
	for b, sid := range g.storage {
		if sid != id {
			continue
		}
		if g.outputs[b] || g.lastRead[b] > i {
			return false
		}
	}
	return true
}

// comment writes a block's comment line: the runtime finds blocks by it.
func (g *gen) comment(b planned, what string) {
	ids := fmt.Sprint(b.steps[0])
	word := "step"
	if len(b.steps) > 1 {
		word, ids = "steps", fmt.Sprintf("%d-%d", b.steps[0], b.steps[len(b.steps)-1])
	}
	var types []string
	for _, id := range b.steps {
		types = append(types, g.p.Steps[id].Type)
	}
	g.w.line("# %s %s (%s): %s", word, ids, strings.Join(types, " + "), what)
	if g.graph && !g.async(&g.p.Steps[b.steps[0]]) {
		g.localWaits(b)
	}
}
