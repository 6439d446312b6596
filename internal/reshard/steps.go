package reshard

import "github.com/nvcomm/nvcomm/internal/plan"

// stepChunk is how many steps a stepList allocates at once. A plan.Step is
// a few hundred bytes and a fusion of 100k ops has more steps than ops:
// appending to one slice copied every step several times over as it grew
// (a third of the planner's time), where chunks are written once and
// copied once, into the plan.
const stepChunk = 1024

// stepList is the ledger's steps in order, in chunks: every chunk of full
// holds stepChunk steps, and last the rest.
type stepList struct {
	full [][]plan.Step
	last []plan.Step
	// flat is every step in one slice, once all made it and until add.
	flat []plan.Step
}

// len is the number of steps.
func (l *stepList) len() int { return len(l.full)*stepChunk + len(l.last) }

// at is step i, which the caller may change in place.
func (l *stepList) at(i int) *plan.Step {
	if k := i / stepChunk; k < len(l.full) {
		return &l.full[k][i%stepChunk]
	}
	return &l.last[i-len(l.full)*stepChunk]
}

// add appends s.
func (l *stepList) add(s plan.Step) {
	if len(l.last) == stepChunk {
		l.full, l.last = append(l.full, l.last), nil
	}
	if l.last == nil {
		l.last = make([]plan.Step, 0, stepChunk)
	}
	l.last = append(l.last, s)
	l.flat = nil
}

// all returns every step in one slice. It copies the chunks once, into a
// slice that the list then holds its chunks in.
func (l *stepList) all() []plan.Step {
	n := l.len()
	switch {
	case l.flat != nil:
		return l.flat
	case len(l.full) == 0:
		return l.last[:n:n]
	}
	out := make([]plan.Step, n, (n/stepChunk+1)*stepChunk)
	k := 0
	for _, c := range l.full {
		k += copy(out[k:], c)
	}
	copy(out[k:], l.last)
	for i := range l.full {
		l.full[i] = out[i*stepChunk : (i+1)*stepChunk : (i+1)*stepChunk]
	}
	l.last = out[k:n:min(k+stepChunk, cap(out))]
	l.flat = out[:n:n]
	return l.flat
}
