package plan

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/nvcomm/nvcomm/internal/diag"
	"github.com/nvcomm/nvcomm/internal/shard"
)

// Validate checks p against the plan contract (docs/plan.md) from the plan
// alone: the schema of every field, the schedules replayed on the shapes,
// and the meaning that ties steps, buffers, tensors and ops together —
// who holds what, counts, and bytes recomputed from the steps. What needs
// nvcomm's analyses and lowering (the certificate) is lower.Certify's. It
// returns the problems found, errors at no position (a step's named by
// their Subject, StepSubject), in the order the checks run (plan header,
// meshes by name, tensors, ops, steps in order, coverage, summary), at
// most MaxProblems of them and then one that counts the rest, or nil when
// p is valid. It never panics, whatever p holds.
func Validate(p *Plan) []diag.Diagnostic { return validate(p, true) }

// validate is Validate; alike lets it check each set of tensors alike
// once (validate_alike.go), which tests turn off to show that it changes
// nothing found.
func validate(p *Plan, alike bool) []diag.Diagnostic {
	if p == nil {
		return []diag.Diagnostic{{Message: "no plan"}}
	}
	v := &validator{
		p: p, names: make(map[string]*nameInfo, len(p.Tensors)+len(p.Steps)), meshSets: map[string]*deviceSet{},
		alike: alike, probs: NewProblems(),
	}
	v.checkHeader()
	v.checkMeshes()
	v.received = newDeviceBook(&v.devIndex)
	v.checkTensors()
	v.checkOps()
	v.checkPartials()
	v.checkSteps()
	v.checkWholes()
	v.checkCoverage()
	v.checkOutputsHeld()
	v.checkRaces()
	v.checkSummary()
	return v.probs.All()
}

// validator accumulates problems and the facts later checks rely on.
type validator struct {
	p     *Plan
	probs *diag.List
	// teamScratch lists a step's readers or writers (membersIn).
	teamScratch []int
	// alike lets checkTensorOnce skip tensors alike ones checked before.
	alike bool
	// devices holds every non-negative device id of every mesh.
	devices map[int]bool
	// names holds what is known of each tensor and buffer (nameInfo),
	// from a slab; recent holds the last names lookup found.
	names      map[string]*nameInfo
	nameSlab   []nameInfo
	recent     [recentNames]recentName
	nextRecent int
	// tensorEntries are the records of the tensors' names, by position
	// (nil until checked, and for a tensor with no name); cursors are the
	// positions of the tensors lookup found last, one a run of tensors
	// read in order (nextTensor), and nextCursor the one a jump moves.
	tensorEntries []*nameInfo
	cursors       [tensorCursors]int
	nextCursor    int
	// opOutputs and stepOutputs are the records of each op's and step's
	// output, found once: a later pass over the ops or steps would look
	// each up again, in a map too large for the processor's caches.
	opOutputs, stepOutputs []*nameInfo
	// opOK says, per op, whether it has no problem of its own.
	opOK []bool
	// received is what each device receives in the steps checked so far;
	// trafficUnknown is set once a collective's traffic is not certain.
	received       *deviceBook
	trafficUnknown bool
	// sent and recv are checkTraffic's books, emptied for every step.
	sent, recv *deviceBook
	// devIndex numbers the devices of the sets of the devices that hold
	// each buffer (nameInfo.held), from slabs of sets and of their words.
	devIndex deviceIndex
	setSlab  []deviceSet
	wordSlab []uint64
	// ofRecords holds, per composite (or gradient) record's output, the
	// first op that records it: every op of one expansion records it
	// alike.
	ofRecords map[ofKey]int
	// computesWithin marks the ops that other ops are computed within
	// (Op.Within): their steps may read their composite's operands. Nil
	// when no op is.
	computesWithin map[int]bool
	// meshSets maps each mesh, by name, to the set of its devices.
	meshSets map[string]*deviceSet
	// firstSharded maps each tensor name to the axis of the first
	// sharding entry of the first tensor of that name that has one
	// (firstShardedAxis); built on first use.
	firstSharded map[string]*int
	// exprs holds each op's Expr once a step has needed it ("" until then).
	exprs []string
	// cleanTensors holds, by appendTensorKey, what the step checks need to
	// know of each tensor checked without a problem (validate_alike.go);
	// tensorKey is the key being looked up, infoSlab the slab of
	// tensorInfos of the tensors alike them.
	cleanTensors map[string]*tensorInfo
	tensorKey    []byte
	infoSlab     []tensorInfo
	// teamOf and inTeam are checkTeams' and checkDevices' marks of the
	// devices of a step (validate_devices.go).
	teamOf, inTeam deviceMarks
}

// tensorInfo is what the step checks need to know about a tensor.
type tensorInfo struct {
	t    *Tensor
	mesh *Mesh // nil when the tensor names no existing mesh
	rank int   // number of non-reduction axes, -1 when unknown
	// values are the positions in Shape of the non-reduction axes.
	values []int
	local  int // elements per device, -1 when unknown
}

// buffer is what a step wrote ([validator.producer]).
type buffer struct {
	step  int // the producing step
	count int // its count.output
}

// The accepted values of enumerated fields.
var (
	deviceTypes = shard.DeviceTypeNames() // DIDx is the last mesh axis
	shardKinds  = []string{"block", "strided", "nested", "merged"}
)

// maxMeshRank is the most axes a mesh has: one per device type.
const maxMeshRank = 3

func (v *validator) planf(format string, args ...any) {
	v.probs.AddAbout("", format, args...)
}

func (v *validator) stepf(i int, format string, args ...any) {
	AddStep(v.probs, i, v.p.Steps[i].Type, format, args...)
}

// checkHeader checks rule 1's scalar fields.
func (v *validator) checkHeader() {
	if !KnownFormat(v.p.Format) {
		v.planf("format is %d, want %d (steps one after another) or %d (a step graph)", v.p.Format, Format, FormatGraph)
	}
	if v.p.Fusion == "" {
		v.planf("fusion name is empty")
	}
	// The policy and the objective name how nvcomm lowered the plan; which
	// names it knows is lower.Certify's to check, which lowers it again.
	if v.p.Policy == "" {
		v.planf("policy is empty; it names the policy that lowered the plan")
	}
	v.checkPipeline()
}

// pipelineSchedules are the schedules a plan's pipeline may name.
var pipelineSchedules = []string{"1f1b", "gpipe", "interleaved"}

// checkPipeline checks a pipeline's fields: stages that are distinct
// meshes of the plan, at least one micro-batch, a known schedule, and a
// step graph, without which the stages would run one after another.
// (Certify proves the ops; the pipeline's names only label them.)
func (v *validator) checkPipeline() {
	pl := v.p.Pipeline
	if pl == nil {
		return
	}
	if len(pl.Stages) == 0 {
		v.planf("pipeline has no stages")
	}
	for i, name := range pl.Stages {
		if _, ok := v.p.Meshes[name]; !ok {
			v.planf("pipeline stage %d: mesh %q does not exist", i, name)
		}
		if slices.Index(pl.Stages, name) < i {
			v.planf("pipeline stage %d: mesh %q is listed twice", i, name)
		}
	}
	if pl.Microbatches < 1 {
		v.planf("pipeline has %d micro-batches, want at least 1", pl.Microbatches)
	}
	if !slices.Contains(pipelineSchedules, pl.Schedule) {
		v.planf("pipeline schedule %q is not one of %s", pl.Schedule, strings.Join(pipelineSchedules, ", "))
	}
	if !v.p.Graph() {
		v.planf("a pipeline's plan has format %d (a step graph), this one %d: its stages would run one after another", FormatGraph, v.p.Format)
	}
}

// checkMeshes checks every mesh, by name, and collects the plan's devices.
func (v *validator) checkMeshes() {
	v.devices = map[int]bool{}
	for _, name := range slices.Sorted(maps.Keys(v.p.Meshes)) {
		m := v.p.Meshes[name]
		v.checkMesh(name, m)
		for _, d := range m.Devices {
			if d >= 0 {
				v.devices[d] = true
			}
		}
	}
	v.devIndex = newDeviceIndex(v.devices)
}

func (v *validator) checkMesh(name string, m Mesh) {
	if len(m.Shape) == 0 || len(m.Shape) > maxMeshRank {
		v.planf("mesh %q has %d axes, want 1 to %d", name, len(m.Shape), maxMeshRank)
	}
	positive := true
	for k, e := range m.Shape {
		if e < 1 {
			v.planf("mesh %q: shape[%d] is %d, want >= 1", name, k, e)
			positive = false
		}
	}
	if n, ok := product(m.Shape); positive && (!ok || n != len(m.Devices)) {
		v.planf("mesh %q: shape %v does not hold its %d devices", name, m.Shape, len(m.Devices))
	}
	seen := map[int]int{}
	for _, d := range m.Devices {
		seen[d]++
		switch {
		case d < 0:
			v.planf("mesh %q: device %d is negative", name, d)
		case seen[d] == 2:
			v.planf("mesh %q: device %d is listed more than once", name, d)
		}
	}
}

// checkTensors checks every tensor and indexes them by name.
func (v *validator) checkTensors() {
	v.tensorEntries = make([]*nameInfo, len(v.p.Tensors))
	for i := range v.p.Tensors {
		t := &v.p.Tensors[i]
		what := tensorRef{name: t.Name, index: i, sharding: -1}
		var e *nameInfo // the name's record, found once
		if t.Name != "" {
			e = v.entry(t.Name)
			if e.at == 0 {
				e.at = int32(i + 1)
			}
			v.tensorEntries[i] = e
		}
		dup := e != nil && e.tensor != nil
		switch {
		case t.Name == "":
			v.planf("%s has no name", what)
		case dup:
			v.planf("%s is declared more than once", what)
		}
		info := v.checkTensorOnce(what, t)
		if !dup && e != nil {
			e.tensor = info
		}
	}
}

// tensorRef names a tensor, or one of its sharding entries, in problems:
// `tensor "t1"`, `tensor 3` for one with no name (its position),
// `tensor "t1": sharding[0]`. It is formatted only when a problem is
// reported: formatting the name of every tensor of a plan, and of every
// sharding entry, made strings that only errors read.
type tensorRef struct {
	name     string
	index    int
	sharding int // the sharding entry, -1 for the tensor itself
}

func (r tensorRef) String() string {
	s := fmt.Sprintf("tensor %q", r.name)
	if r.name == "" {
		s = fmt.Sprintf("tensor %d", r.index)
	}
	if r.sharding >= 0 {
		s = fmt.Sprintf("%s: sharding[%d]", s, r.sharding)
	}
	return s
}

// checkTensor checks one tensor's fields (rule 2) and returns what the step
// checks need to know about it.
func (v *validator) checkTensor(what tensorRef, t *Tensor) *tensorInfo {
	info := &tensorInfo{t: t, rank: -1, local: -1}
	if m, ok := v.p.Meshes[t.Mesh]; ok {
		info.mesh = &m
	} else {
		v.planf("%s: mesh %q does not exist", what, t.Mesh)
	}
	if shard.DTypeSize(t.DType) == 0 {
		v.planf("%s: dtype %q is not one of %s", what, t.DType, strings.Join(shard.DTypeNames(), ", "))
	}
	shapeOK := true
	for k, e := range t.Shape {
		if e < 1 {
			v.planf("%s: shape[%d] is %d, want >= 1", what, k, e)
			shapeOK = false
		}
	}
	values := v.valueAxes(what, t)
	if values != nil {
		info.rank, info.values = len(values), values
		if shapeOK {
			v.checkSchedule(what, t, info.mesh)
		}
	}
	divisors := v.checkShardings(what, t, info)
	if info.rank < 0 {
		return info
	}
	v.checkLayout(what, t, info.rank)
	if !v.checkLocalShape(what, t, info.rank) {
		return info
	}
	if shapeOK && divisors != nil {
		v.checkLocalExtents(what, t, values, divisors)
	}
	if n, ok := product(t.LocalShape); ok {
		info.local = n
	}
	return info
}

// valueAxes checks the reduction axes and returns the positions in Shape of
// the non-reduction axes, or nil when the reduction axes are invalid.
func (v *validator) valueAxes(what tensorRef, t *Tensor) []int {
	reduction := make([]bool, len(t.Shape))
	ok := true
	for k, a := range t.ReductionAxes {
		switch {
		case a < 0 || a >= len(t.Shape):
			v.planf("%s: reduction_axes[%d] is %d, not a position in a shape of %d axes", what, k, a, len(t.Shape))
			ok = false
		case reduction[a]:
			v.planf("%s: reduction axis %d is listed more than once", what, a)
			ok = false
		default:
			reduction[a] = true
		}
	}
	if !ok {
		return nil
	}
	values := []int{}
	for a, r := range reduction {
		if !r {
			values = append(values, a)
		}
	}
	return values
}

// checkLocalShape checks that LocalShape has one non-negative entry per
// non-reduction axis, and reports whether it does.
func (v *validator) checkLocalShape(what tensorRef, t *Tensor, rank int) bool {
	if len(t.LocalShape) != rank {
		v.planf("%s: local_shape has %d entries, want %d (one per non-reduction axis)", what, len(t.LocalShape), rank)
		return false
	}
	for k, e := range t.LocalShape {
		if e < 0 {
			v.planf("%s: local_shape[%d] is %d, want >= 0", what, k, e)
			return false
		}
	}
	return true
}

// checkLocalExtents checks that each local extent is the global extent
// divided by the devices that shard the axis.
func (v *validator) checkLocalExtents(what tensorRef, t *Tensor, values, divisors []int) {
	if t.PaddedShape != nil && len(t.PaddedShape) != len(values) {
		v.planf("%s: padded_shape has %d entries, want %d (one per non-reduction axis)", what, len(t.PaddedShape), len(values))
		return
	}
	for k, a := range values {
		n, d := t.Shape[a], divisors[k]
		if t.PaddedShape != nil {
			if t.PaddedShape[k] < n {
				v.planf("%s: padded_shape[%d] is %d, less than the extent %d", what, k, t.PaddedShape[k], n)
				continue
			}
			n = t.PaddedShape[k] // the shards tile the padded extent
		}
		switch {
		case d < 1:
			// an invalid mesh, reported there
		case t.PaddedShape != nil && n%d == 0 && (t.LocalShape[k] < 0 || t.LocalShape[k] > n/d):
			v.planf("%s: local_shape[%d] is %d, more than %d (padded extent %d over %d devices)", what, k, t.LocalShape[k], n/d, n, d)
		case t.PaddedShape != nil && n%d == 0:
			// uneven: the largest shard may be shorter than its slot
		case n%d != 0:
			v.planf("%s: extent %d of axis %d does not divide among %d devices", what, n, k, d)
		case t.LocalShape[k] != n/d:
			v.planf("%s: local_shape[%d] is %d, want %d (extent %d over %d devices)", what, k, t.LocalShape[k], n/d, n, d)
		}
	}
}

// checkLayout checks that Layout is a permutation of the non-reduction axes.
func (v *validator) checkLayout(what tensorRef, t *Tensor, rank int) {
	if !isPermutation(t.Layout, rank) {
		v.planf("%s: layout %v is not a permutation of the %d non-reduction axes", what, t.Layout, rank)
	}
}

// isFusionInput reports whether name is a tensor that no op writes.
func (v *validator) isFusionInput(name string) bool {
	e := v.lookup(name)
	return e != nil && e.tensor != nil && !e.written
}

// checkCoverage checks that every op's output tensor is written by a step
// of that op (rule 7).
func (v *validator) checkCoverage() {
	// Per op: a step of it, and one that writes its output (a step of no
	// op is reported with the step).
	hasStep, writes := make([]bool, len(v.p.Ops)), make([]bool, len(v.p.Ops))
	for i := range v.p.Steps {
		s := &v.p.Steps[i]
		if s.Op < 0 || s.Op >= len(v.p.Ops) {
			continue
		}
		hasStep[s.Op] = true
		if s.Output == v.p.Ops[s.Op].Output {
			writes[s.Op] = true
		}
	}
	for i, op := range v.p.Ops {
		switch {
		case op.Within != nil && hasStep[i]:
			v.planf("op %d: is computed within op %d, but a step implements it", i, *op.Within)
		case op.Within != nil:
		case !hasStep[i]:
			v.planf("op %d: no step implements it", i)
		case !writes[i]:
			v.planf("op %d: no step of the op writes its output %q", i, op.Output)
		}
	}
}

// checkSummary checks the summary against the steps (rule 8).
func (v *validator) checkSummary() {
	collectives, locals := 0, 0
	byType := map[string]int{}
	for i := range v.p.Steps {
		s := &v.p.Steps[i] // not copied: a step is a few hundred bytes
		switch s.Kind {
		case KindCollective:
			collectives++
			byType[s.Type]++
		case KindLocal:
			locals++
		}
	}
	sum := v.p.Summary
	if sum.Collectives != collectives {
		v.planf("summary: collectives is %d, but the plan has %d collective steps", sum.Collectives, collectives)
	}
	if sum.LocalSteps != locals {
		v.planf("summary: local_steps is %d, but the plan has %d local steps", sum.LocalSteps, locals)
	}
	v.checkByType(byType)
	v.checkBytesReceivedMax()
	v.checkBytesRatio()
}

func (v *validator) checkByType(want map[string]int) {
	got := v.p.Summary.ByType
	keys := slices.Sorted(maps.Keys(want))
	for k := range got {
		if _, ok := want[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		n, ok := got[k]
		_, wanted := want[k]
		switch {
		case !ok:
			v.planf("summary: by_type lacks %q (%d steps)", k, want[k])
		case !wanted:
			v.planf("summary: by_type has %q, but no collective step has that type", k)
		case n != want[k]:
			v.planf("summary: by_type[%q] is %d, but the plan has %d such collective steps", k, n, want[k])
		}
	}
}

// mul returns a*b for non-negative a and b, and false when either is
// negative or the product overflows.
func mul(a, b int) (int, bool) {
	switch {
	case a < 0 || b < 0:
		return 0, false
	case a == 0 || b == 0:
		return 0, true
	case a > math.MaxInt/b:
		return 0, false
	}
	return a * b, true
}

// product multiplies xs, with mul's conditions.
func product(xs []int) (int, bool) {
	n := 1
	for _, x := range xs {
		var ok bool
		if n, ok = mul(n, x); !ok {
			return 0, false
		}
	}
	return n, true
}

// isPermutation reports whether xs holds each of 0..n-1 exactly once.
func isPermutation(xs []int, n int) bool {
	return len(xs) == n && distinctPositions(xs, n)
}
