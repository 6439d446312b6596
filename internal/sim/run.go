package sim

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/nvcomm/nvcomm/internal/plan"
)

// ErrTooLarge is the error Run wraps when a simulation would need more
// memory than Options.MaxBytes allows.
var ErrTooLarge = errors.New("too large to simulate")

// DefaultMaxBytes is the memory limit [Run] uses when [Options].MaxBytes is
// not positive: 1 GiB.
const DefaultMaxBytes = 1 << 30

// Options tune a simulation. No option changes what is checked.
type Options struct {
	// Seed selects the input data.
	Seed uint64
	// MaxBytes bounds the memory the simulation is estimated to need
	// ([Estimate]); a plan that needs more is refused. Zero or negative
	// means [DefaultMaxBytes].
	MaxBytes int64
	// Order selects the order the steps run in, for a plan of format 2:
	// 0 the list's, any other a random order that the step graph allows
	// (drawn from it). A plan of format 1 runs in its list's order.
	Order uint64
}

// Mismatch is where a device's buffer first differs from the reference:
// in the earliest op that fails, the first device of its output's mesh, the
// first element.
type Mismatch struct {
	// Op is the op whose output is wrong; Step the id of its last step
	// and Device the device checked, both -1 when the op has no steps.
	Op     int    `json:"op"`
	Step   int    `json:"step"`
	Tensor string `json:"tensor"`
	Device int    `json:"device"`
	// FlatIndex is the position in the device's buffer and LogicalIndex
	// the element of the global tensor it should hold; -1 and nil when
	// the mismatch is not about one element.
	FlatIndex    int   `json:"flat_index"`
	LogicalIndex []int `json:"logical_index"`
	// Expected and Actual are the values, or the element counts when the
	// buffer is missing (Actual 0) or has the wrong size.
	Expected Value `json:"expected"`
	Actual   Value `json:"actual"`
	// Reason says what differs, for readers.
	Reason string `json:"reason"`
}

// StepTraffic is what one step moves: the largest bytes sent and received
// by one device.
type StepTraffic struct {
	// Step is the step's id.
	Step     int    `json:"step"`
	Type     string `json:"type"`
	Sent     int64  `json:"sent"`
	Received int64  `json:"received"`
}

// Result is the outcome of [Run].
type Result struct {
	// Pass is true when every op's output matches the reference on every
	// device of its mesh.
	Pass     bool      `json:"pass"`
	Mismatch *Mismatch `json:"mismatch"`
	// Steps has one entry per plan step, in order.
	Steps []StepTraffic `json:"steps"`
	// DeviceReceived is the bytes each device receives in the whole plan,
	// for every device of a mesh or a step.
	DeviceReceived map[int]int64 `json:"device_received"`
	// MaxReceived is the largest DeviceReceived: the plan's
	// summary.bytes_received_max.
	MaxReceived int64 `json:"max_received"`
	// TotalSent is the bytes sent by all devices together.
	TotalSent int64 `json:"total_sent"`
}

// Run executes p on virtual devices and checks every op's output against
// the unsharded reference. The error says why p cannot be executed or
// checked (malformed tensors or steps, missing buffers, buffer sizes that
// disagree with a step's count, wrong byte accounting, too much memory); a
// plan that runs but computes wrong data gives a Result with a Mismatch.
func Run(p *plan.Plan, opts Options) (*Result, error) {
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = DefaultMaxBytes
	}
	w, err := newWorld(p)
	if err != nil {
		return nil, err
	}
	f := w.footprint()
	if err := CheckMemory(f.bytes(), opts.MaxBytes); err != nil {
		return nil, err
	}
	w.order = order(p, opts.Order)
	if len(w.order) != len(p.Steps) {
		// Never a plan that validates: its waits name earlier steps only.
		return nil, fmt.Errorf("the step graph orders %d of its %d steps: a cycle of waits", len(w.order), len(p.Steps))
	}
	_, _, res, err := w.simulate(f, opts.Seed)
	return res, err
}

// Reference computes the unsharded program of p's ops on the values of
// its fusion inputs given by name (row-major, each of its tensor's
// elements; the inputs not given take simulate's data of seed) and
// returns the values of every tensor, by name. It runs no step: it is
// what Run checks the devices' buffers against, for tests that compare
// two programs (a pipeline's micro-batches with the whole batch's).
func Reference(p *plan.Plan, seed uint64, inputs map[string][]float64) (map[string][]float64, error) {
	w, err := newWorld(p)
	if err != nil {
		return nil, err
	}
	w.given = inputs
	ref, err := w.reference(seed)
	if err != nil {
		return nil, err
	}
	out := make(map[string][]float64, len(ref))
	for name, v := range ref {
		out[name] = v.flat()
	}
	return out, nil
}

// simulate computes the reference, loads the inputs onto a machine with
// room for f's buffer names and runs the plan; it returns the machine and
// the reference too, for tests.
func (w *world) simulate(f footprint, seed uint64) (*machine, map[string]vec, *Result, error) {
	ref, err := w.reference(seed)
	if err != nil {
		return nil, nil, nil, err
	}
	m := newMachine(f.names)
	m.copied, m.reduced = w.copied, w.reduced
	w.load(m, ref)
	res, err := w.execute(m, ref)
	return m, ref, res, err
}

// CheckMemory is the guard of [Run]: the error, wrapping [ErrTooLarge],
// when a simulation estimated to need need bytes ([Estimate]) exceeds
// maxBytes, and nil otherwise.
func CheckMemory(need, maxBytes int64) error {
	if need <= maxBytes {
		return nil
	}
	about := "about"
	if need == math.MaxInt64 {
		about = "more than" // the estimate saturates instead of wrapping
	}
	return fmt.Errorf("%w: it needs %s %s, more than the limit of %s; raise --max-bytes or use smaller extents", ErrTooLarge, about, plan.Size(need), plan.Size(maxBytes))
}

// execute runs every step, checks each op after its last step, and
// accounts the traffic.
func (w *world) execute(m *machine, ref map[string]vec) (*Result, error) {
	res := &Result{DeviceReceived: w.devices(), Mismatch: w.opWithoutSteps()}
	if len(w.p.Steps) > 0 { // none stays nil, as the report writes it
		res.Steps = make([]StepTraffic, 0, len(w.p.Steps))
	}
	seq := w.order
	if seq == nil {
		seq = order(w.p, 0)
	}
	last := w.lastSteps(seq)
	for _, i := range seq {
		s := &w.p.Steps[i]
		if err := w.run(m, s, res); err != nil {
			return nil, err
		}
		if last[s.Op] == i && (res.Mismatch == nil || s.Op < res.Mismatch.Op) {
			res.Mismatch = earlier(res.Mismatch, w.check(m, ref, s.Op, s.ID))
		}
	}
	slices.SortStableFunc(res.Steps, func(a, b StepTraffic) int { return cmp.Compare(a.Step, b.Step) })
	if res.MaxReceived != w.p.Summary.BytesReceivedMax {
		return nil, fmt.Errorf("summary: bytes_received_max is %d, the simulation measured %d", w.p.Summary.BytesReceivedMax, res.MaxReceived)
	}
	res.Pass = res.Mismatch == nil
	return res, nil
}

// lastSteps returns, per op, the position of its last step in seq, the
// order the steps run in, or -1 when it has none. A step of an op that
// does not exist is left out: running it fails before any op is checked
// after it.
func (w *world) lastSteps(seq []int) []int {
	last := make([]int, len(w.p.Ops))
	for i := range last {
		last[i] = -1
	}
	for _, i := range seq {
		if op := w.p.Steps[i].Op; op >= 0 && op < len(last) {
			last[op] = i
		}
	}
	return last
}

// earlier returns the mismatch of the earlier op; nil means none.
func earlier(a, b *Mismatch) *Mismatch {
	if a == nil || (b != nil && b.Op < a.Op) {
		return b
	}
	return a
}

// run executes one step and books its traffic into res.
func (w *world) run(m *machine, s *plan.Step, res *Result) error {
	if s.Op < 0 || s.Op >= len(w.p.Ops) {
		return stepError(s, "op %d does not exist (the plan has %d ops)", s.Op, len(w.p.Ops))
	}
	flows, err := m.exec(s, w.opOutputs[s.Op].elemSize)
	if err != nil {
		return err
	}
	st := StepTraffic{Step: s.ID, Type: s.Type}
	for d, f := range flows {
		st.Sent, st.Received = max(st.Sent, f.sent), max(st.Received, f.recv)
		res.DeviceReceived[d] += f.recv
		res.MaxReceived = max(res.MaxReceived, res.DeviceReceived[d])
		res.TotalSent += f.sent
	}
	res.Steps = append(res.Steps, st)
	return checkBytes(s, st)
}

// checkBytes compares the plan's accounting of a step with the measured
// traffic.
func checkBytes(s *plan.Step, st StepTraffic) error {
	if s.Bytes == nil {
		if s.Kind == plan.KindCollective {
			return stepError(s, "the plan gives no bytes; the simulation measured sent %d, received %d", st.Sent, st.Received)
		}
		return nil
	}
	if s.Bytes.SentPerDevice != st.Sent || s.Bytes.ReceivedPerDevice != st.Received {
		return stepError(s, "the plan says %d bytes sent and %d received per device, the simulation measured %d and %d",
			s.Bytes.SentPerDevice, s.Bytes.ReceivedPerDevice, st.Sent, st.Received)
	}
	return nil
}

// devices returns every device of a mesh or a step, each with zero bytes.
// A list equal to the one before adds nothing: the steps of a long plan
// name the same few lists of devices over and over.
func (w *world) devices() map[int]int64 {
	all := map[int]int64{}
	var last []int
	add := func(list []int) {
		if last != nil && slices.Equal(list, last) {
			return
		}
		for _, d := range list {
			all[d] = 0
		}
		last = list
	}
	for _, t := range w.ordered {
		add(t.mesh.Devices)
	}
	for i := range w.p.Steps {
		s := &w.p.Steps[i]
		for _, team := range s.Teams {
			add(team)
		}
		add(s.Devices)
	}
	return all
}

// opWithoutSteps reports the first op that no step implements, but for
// an op computed within another's steps (plan.Op.Within), which has none:
// the op it is within is checked against the reference and against the
// composite's definition.
func (w *world) opWithoutSteps() *Mismatch {
	has := make([]bool, len(w.p.Ops))
	for i := range w.p.Steps {
		if op := w.p.Steps[i].Op; op >= 0 && op < len(has) {
			has[op] = true
		}
	}
	for i, op := range w.p.Ops {
		if !has[i] && op.Within == nil {
			return &Mismatch{Op: i, Step: -1, Tensor: op.Output, Device: -1, FlatIndex: -1,
				Reason: fmt.Sprintf("no step implements op %d (%s)", i, op.Op)}
		}
	}
	return nil
}

// check compares every device's buffer of op's output with its shard of
// the reference. A long buffer that a device shares with the last device
// checked, whose shard is the same elements, is not compared again.
func (w *world) check(m *machine, ref map[string]vec, op, step int) *Mismatch {
	name := w.p.Ops[op].Output
	if w.opOutputs[op].pending {
		return w.checkPending(m, ref, op, step)
	}
	t, held, want := w.opOutputs[op], m.named(name), ref[name]
	var passed checked
	for _, d := range t.mesh.Devices {
		buf, ok := held[d]
		if ok && passed.covers(w, t.shard, d, buf) {
			continue
		}
		n, diff, off := w.compareShard(t.shard, d, buf, want)
		switch {
		case !ok:
			mis := newMismatch(op, step, name, d, float64(n), 0)
			mis.Reason = fmt.Sprintf("device %d holds no buffer %q", d, name)
			return mis
		case buf.len() != n:
			mis := newMismatch(op, step, name, d, float64(n), float64(buf.len()))
			mis.Reason = fmt.Sprintf("size: the buffer has %d elements, the shard has %d", buf.len(), n)
			return mis
		case diff >= 0:
			mis := newMismatch(op, step, name, d, want.value(off), buf.value(diff))
			mis.FlatIndex, mis.LogicalIndex = diff, unflatten(off, t.shard.shape)
			mis.Reason = "value differs"
			return mis
		}
		passed.record(w, t.shard, d, buf)
	}
	return nil
}

// checked is the last device whose buffer of a long output passed, with
// the runs of its shard: a device that shares that buffer (an Allgather's
// or an Allreduce's members do) and whose shard is the same runs holds the
// same values where they must be, and passes without a comparison.
type checked struct {
	buf  vec
	runs []run // nil: nothing recorded
}

// maxRecordedRuns is the most runs of a shard checked keeps: a shard of
// more is compared again on every device that shares it.
const maxRecordedRuns = 64

// record keeps device's buffer buf, which passed, when it is long.
func (c *checked) record(w *world, s *sharder, device int, buf vec) {
	c.runs = c.runs[:0]
	if buf.len() < ropeMin {
		c.runs = nil
		return
	}
	c.buf = buf
	s.eachRun(device, &w.scratch, func(r run) bool {
		c.runs = append(c.runs, r)
		return len(c.runs) <= maxRecordedRuns
	})
	if len(c.runs) > maxRecordedRuns {
		c.runs = nil
	} else if c.runs == nil {
		c.runs = []run{} // an empty shard is recorded too
	}
}

// covers reports whether buf is the buffer recorded and device's shard
// the same runs.
func (c *checked) covers(w *world, s *sharder, device int, buf vec) bool {
	if c.runs == nil || !buf.same(c.buf) {
		return false
	}
	k := 0
	s.eachRun(device, &w.scratch, func(r run) bool {
		if k < len(c.runs) && c.runs[k] == r {
			k++
			return true
		}
		k = -1
		return false
	})
	return k == len(c.runs)
}

// newMismatch is a mismatch of op's output on device, not yet about one
// element.
func newMismatch(op, step int, tensor string, device int, expected, actual float64) *Mismatch {
	return &Mismatch{Op: op, Step: step, Tensor: tensor, Device: device, FlatIndex: -1, Expected: Value(expected), Actual: Value(actual)}
}

// Value is a mismatch's expected or actual value. JSON has no number for
// the infinities a Pad fills with, nor for the NaN an exact kernel makes
// of one (docs/simulate.md, "Exactness"): the JSON report writes those as
// the strings "+Inf", "-Inf" and "NaN", where encoding/json failed.
type Value float64

// String writes v as %v writes a float64, but a value of the second sort
// (sort.go) as its representative modulo q: "-12 (mod q)".
func (v Value) String() string {
	if f := float64(v); isQ(f) {
		return strconv.FormatInt(qRep(f), 10) + " (mod q)"
	}
	return strconv.FormatFloat(float64(v), 'g', -1, 64)
}

// MarshalJSON writes v as a JSON number, or a non-finite v as a string.
func (v Value) MarshalJSON() ([]byte, error) {
	f := float64(v)
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return json.Marshal(strconv.FormatFloat(f, 'g', -1, 64))
	}
	return json.Marshal(f)
}

// compareShard walks device's shard once, run by run: it returns the
// shard's size n and, comparing buf with want while buf is long enough,
// the buffer position diff of the first element that differs and its
// offset off in want (diff is -1 when none does).
func (w *world) compareShard(s *sharder, device int, buf, want vec) (n, diff, off int) {
	diff = -1
	s.eachRun(device, &w.scratch, func(r run) bool {
		if diff < 0 && n+r.n <= buf.len() {
			if i := firstUnequalVec(buf, n, want, r); i >= 0 {
				diff, off = n+i, r.at(i)
			}
		}
		n += r.n
		return true // the size is needed whatever differs
	})
	return n, diff, off
}

// firstUnequalVec returns the first position where buf's values from pos
// differ from the elements of want that r lists, or -1. A piece of buf
// that is those very elements of want's array (the run of the stream or
// of the values the reference is) is equal without reading it.
func firstUnequalVec(buf vec, pos int, want vec, r run) int {
	if buf.rope == nil && want.rope == nil {
		return firstUnequal(buf.vals[pos:pos+r.n], want.vals, r)
	}
	first := -1
	buf.each(pos, pos+r.n, func(p piece) bool {
		j := p.pos - pos // p holds r's elements from j
		seg := run{off: r.at(j), stride: r.stride, n: p.n}
		if i := firstUnequalPiece(p, want, seg); i >= 0 {
			first = j + i
			return false
		}
		return true
	})
	return first
}

// firstUnequalPiece returns the first position where p's values differ
// from the elements of want that seg lists, or -1.
func firstUnequalPiece(p piece, want vec, seg run) int {
	if listsSame(p, want, seg) {
		return -1
	}
	if p.vals != nil && p.stride == 1 && want.rope == nil && seg.stride == 1 {
		return firstDiffering(p.vals[p.off:p.off+p.n], want.vals[seg.off:seg.off+seg.n])
	}
	return firstMismatch(p.n, func(lo, hi int, got, exp []float64) {
		p.cut(p.pos+lo, p.pos+hi).fill(got)
		readRun(want, run{off: seg.at(lo), stride: seg.stride, n: hi - lo}, exp)
	})
}

// listsSame reports whether piece p lists the very elements seg lists of
// want: both within one piece q of want, the same array at the same
// positions. Values never change, so those are equal.
func listsSame(p piece, want vec, seg run) bool {
	if want.rope == nil || seg.n == 0 {
		return false
	}
	first, last := seg.off, seg.at(seg.n-1)
	var q piece
	found := false
	want.each(min(first, last), max(first, last)+1, func(x piece) bool {
		q, found = x, x.pos <= min(first, last) && max(first, last) < x.pos+x.n
		return false // the first piece must hold them all
	})
	if !found || !p.sameArray(q) {
		return false
	}
	off := q.off + (first-q.pos)*q.stride
	return p.off == off && (p.n == 1 || p.stride == seg.stride*q.stride)
}

// readRun sets dst to the elements of v that r lists.
func readRun(v vec, r run, dst []float64) {
	switch {
	case r.stride == 1:
		v.readOne(r.off, dst)
	case v.rope == nil:
		for i := range dst {
			dst[i] = v.vals[r.at(i)]
		}
	default:
		for i := range dst {
			dst[i] = v.value(r.at(i))
		}
	}
}

// firstUnequal returns the first position where got differs from the
// elements of want that r lists, or -1.
func firstUnequal(got, want []float64, r run) int {
	if r.stride == 1 && len(got) > 0 && &got[0] == &want[r.off] {
		return -1 // the very values: a buffer that shares the reference's
	}
	if r.stride == 1 {
		return firstDiffering(got, want[r.off:r.off+r.n])
	}
	for i, v := range got {
		if v != want[r.at(i)] {
			return i
		}
	}
	return -1
}
