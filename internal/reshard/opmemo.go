package reshard

import (
	"strings"

	"github.com/nvcomm/nvcomm/internal/checked"
	"github.com/nvcomm/nvcomm/internal/plan"
)

// An OpMemo keeps whole lowerings of sets and reductions, for a caller
// that knows which ops are lowered alike: lower.Certify, which lowers a
// plan's fusion again and whose tensors alike are one built tensor
// renamed. What a job writes to the ledger — its steps, the bytes it books
// for each device, received and bound, and the bound it adds in all —
// depends on the op's kind and axes, on its producer and consumer (their
// meshes, shapes, schedules and analyses; not their names), on whether a
// later op reads its output, and on the planner; the ledger's state only
// decides whether a booking overflows. So the caller keys an op by the
// first (the op and its tensors' classes), LowerAlike adds the second,
// and an op whose key was seen gets the first such op's lowering with its
// own names: its producer's, its consumer's, and the consumer's buffers
// (consumer/what), which are all the names a job writes when the
// producer's name is not under the consumer's (distinctNames); names
// with a "/", such as the sets the resharding pass inserts
// (x → x/resharded, x/relu → y), are keyed apart from plain ones, which
// the search tells apart (TestLowerAlikeAsFresh holds replays to fresh
// lowerings). A lowering that failed, or one whose bookings would now
// overflow, is never replayed: the op is lowered afresh.
type OpMemo struct {
	ops map[string]*opRecord
	key []byte // scratch
	// replayed counts the ops replayed, for tests.
	replayed int
	// replays, when kept, are the ops replayed, whose steps the ledger
	// does not hold (NewOpMemo).
	replays []Replay
	keep    bool
}

// Replayed is the number of ops the memo replayed.
func (m *OpMemo) Replayed() int { return m.replayed }

// Replays are the ops replayed, in order, when the memo keeps them.
func (m *OpMemo) Replays() []Replay { return m.replays }

// Replay is an op that LowerAlike replayed and kept aside: its steps are
// those of the op it replays, whose names SameName maps to its own. The
// ledger holds neither them nor ids for them; it holds the bytes and
// bounds they book.
type Replay struct {
	Op   int    // the op's index, as its steps would give it
	Expr string // the op, as its steps would name it
	rec  *opRecord
	// producer and consumer are the op's names.
	producer, consumer string
}

// Steps are the replayed op's steps, as recorded for the op replayed:
// the caller must not change them.
func (r *Replay) Steps() []plan.Step { return r.rec.steps }

// SameName reports whether got is the name that a step of r's op has
// where the recorded step has recorded.
func (r *Replay) SameName(got, recorded string) bool {
	switch {
	case recorded == "": // no input
		return got == ""
	case recorded == r.rec.producer:
		return got == r.producer
	case recorded == r.rec.consumer:
		return got == r.consumer
	}
	what := recorded[len(r.rec.consumer):] // "/what": opRecord.names holds it to that
	return len(got) == len(r.consumer)+len(what) && got[:len(r.consumer)] == r.consumer && got[len(r.consumer):] == what
}

// opRecord is a job's lowering as LowerAlike replays it.
type opRecord struct {
	producer, consumer string
	steps              []plan.Step
	books              []booking
	aggregates         []aggregateAdd
}

// booking is bytes added to a device's count in a book.
type booking struct {
	book book
	dev  int
	n    int64
}

// aggregateAdd is bytes added to the aggregate over devices (bound.go).
type aggregateAdd struct {
	devices []int
	extra   int64
}

// NewOpMemo returns an empty memo, for the jobs of one ledger. keep
// keeps the ops replayed aside (Replays) rather than write their steps to
// the ledger: lower.Certify compares them with a plan's steps where they
// are, which spares copying and renaming most of the steps of a chain.
// ops, the number of ops the ledger will lower, sizes that list, which a
// chain's replays nearly fill (growing it to 100k replays copied them
// into fresh memory some twenty times).
func NewOpMemo(keep bool, ops int) *OpMemo {
	m := &OpMemo{ops: map[string]*opRecord{}, keep: keep}
	if keep {
		m.replays = make([]Replay, 0, ops)
	}
	return m
}

// LowerAlike is Lower, or the replay of the lowering of an earlier op of
// the ledger under the same key and with the same answer to whether a
// later op reads the output (see OpMemo). The caller vouches that ops of
// one key have the same kind, axis and axes, and producers and consumers
// alike but for their names.
func (j *Job) LowerAlike(m *OpMemo, key []byte) {
	producer, consumer := j.op.In(), j.op.Out
	if j.planner.debug.NoReplay || j.planner.debug.Searched != nil || !distinctNames(producer.Name, consumer.Name) {
		j.Lower()
		return
	}
	// Whether the producer is named as a buffer is, besides the key, what
	// the lowering reads of the names (a search's fromBuffer, a template).
	m.key = append(append(m.key[:0], key...), boolByte(j.ctx(j.op, nil).readLater()), boolByte(!plainName(producer.Name)))
	if r, ok := m.ops[string(m.key)]; ok {
		if !j.bookReplay(r) {
			j.Lower()
			return
		}
		m.replayed++
		if m.keep {
			m.replays = append(m.replays, Replay{Op: j.op.Index, Expr: j.expr(), rec: r, producer: producer.Name, consumer: consumer.Name})
			return
		}
		j.replaySteps(r)
		return
	}
	rec := &opRecord{producer: producer.Name, consumer: consumer.Name}
	first, errs := j.ledger.steps.len(), j.ledger.errs.Len()
	j.opRec = rec
	j.Lower()
	j.opRec = nil
	if j.ledger.errs.Len() != errs || j.overflowed {
		return
	}
	for i := first; i < j.ledger.steps.len(); i++ {
		rec.steps = append(rec.steps, *j.ledger.steps.at(i))
	}
	if rec.names() {
		m.ops[string(m.key)] = rec
	}
}

// plainName reports whether a tensor's name holds no "/", which only the
// names of intermediate buffers and the tensors the resharding pass
// inserts (x/resharded) do.
func plainName(name string) bool { return !strings.Contains(name, "/") }

// distinctNames reports whether a job's producer and consumer names tell
// every name its steps write apart: the two differ, and the producer is
// not a name under the consumer's (consumer/what, the job's buffers). The
// consumer may be under the producer's (x → x/resharded): the buffers,
// x/resharded/what, are still under the consumer's alone.
func distinctNames(producer, consumer string) bool {
	return producer != "" && consumer != "" && producer != consumer && !strings.HasPrefix(producer, consumer+"/")
}

func boolByte(v bool) byte {
	if v {
		return 1
	}
	return 0
}

// names reports whether every name r's steps write or read is its
// producer, its consumer or a buffer of the consumer's.
func (r *opRecord) names() bool {
	known := func(name string) bool {
		return name == r.producer || name == r.consumer || strings.HasPrefix(name, r.consumer+"/")
	}
	return namesOnly(r.steps, known)
}

// bookReplay books the bytes and bounds of r for the job's op, unless a
// booking would overflow (false: nothing is booked).
func (j *Job) bookReplay(r *opRecord) bool {
	if !j.booksFit(r.books) {
		return false
	}
	c := j.ctx(j.op, nil)
	for _, b := range r.books {
		c.addBytes(b.book, b.dev, b.n)
	}
	for _, a := range r.aggregates {
		c.bookAggregate(a.devices, a.extra)
	}
	return true
}

// replaySteps writes the steps of r to the ledger as the job's op's, with
// its names.
func (j *Job) replaySteps(r *opRecord) {
	producer, consumer := j.op.In().Name, j.op.Out.Name
	rename := func(name string) string {
		switch {
		case name == r.producer:
			return producer
		case name == r.consumer:
			return consumer
		}
		return consumer + name[len(r.consumer):] // consumer/what
	}
	for _, s := range r.steps {
		renameBuffers(&s, rename)
		s.ID, s.Op, s.Expr = j.ledger.steps.len(), j.op.Index, j.expr()
		j.ledger.steps.add(s)
	}
}

// booksFit reports whether adding books to the ledger's counts overflows
// none: whether each count they touch can take them all (a device booked
// twice takes both; what it cannot vouch for is lowered afresh, which
// reports the overflow).
func (j *Job) booksFit(books []booking) bool {
	total := int64(0)
	for _, b := range books {
		var ok bool
		if total, ok = checked.Add(total, max(b.n, 0)); !ok {
			return false
		}
	}
	for _, b := range books {
		if _, ok := checked.Add(j.ledger.book(b.book)[b.dev], total); !ok {
			return false
		}
	}
	return true
}

// bookAggregate adds extra to the aggregate over devices, recording it
// while an op memo records the job.
func (c lowering) bookAggregate(devices []int, extra int64) {
	if c.job.opRec != nil {
		c.job.opRec.aggregates = append(c.job.opRec.aggregates, aggregateAdd{devices, extra})
	}
	c.ledger.aggregates.add(devices, extra)
}
