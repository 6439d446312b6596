package reshard

import "github.com/nvcomm/nvcomm/internal/plan"

// stepChunk is how many steps a stepList allocates at once beyond its
// head. A plan.Step is a few hundred bytes and a fusion of 100k ops has
// more steps than ops: appending to one slice copied every step several
// times over as it grew (a third of the planner's time), where chunks are
// written once, and copied once into the plan only when the head
// reserved for them was too short.
const stepChunk = 1024

// stepList is the ledger's steps in order: head, filled up to its
// capacity (grown by append while under stepChunk), then chunks of
// stepChunk (the last one partly filled). The
// first base steps were handed out by flush and are no longer held: step
// numbers, ids included, still count them.
type stepList struct {
	head []plan.Step
	tail [][]plan.Step
	base int
}

// reserve makes room for n steps in all in head, moving the steps added
// so far there.
func (l *stepList) reserve(n int) {
	n -= l.base
	if n <= l.held() || len(l.tail) == 0 && n <= cap(l.head) {
		return
	}
	head := append(make([]plan.Step, 0, n), l.head...)
	for _, c := range l.tail {
		head = append(head, c...)
	}
	l.head, l.tail = head, nil
}

// len is the number of steps, those flushed included.
func (l *stepList) len() int { return l.base + l.held() }

// held is the number of steps held: those not flushed.
func (l *stepList) held() int {
	n := len(l.head)
	if k := len(l.tail); k > 0 {
		n += (k-1)*stepChunk + len(l.tail[k-1])
	}
	return n
}

// at is step i (at least base), which the caller may change in place.
func (l *stepList) at(i int) *plan.Step {
	i -= l.base
	if i < len(l.head) {
		return &l.head[i]
	}
	i -= len(l.head)
	return &l.tail[i/stepChunk][i%stepChunk]
}

// add appends s. A head shorter than a chunk grows as a slice does: the
// plan of one small op (internal/auto prices thousands) has a handful of
// steps, and a first chunk would allocate and clear room for 1024.
func (l *stepList) add(s plan.Step) {
	if len(l.tail) == 0 && (len(l.head) < cap(l.head) || cap(l.head) < stepChunk) {
		l.head = append(l.head, s)
		return
	}
	if k := len(l.tail); k == 0 || len(l.tail[k-1]) == stepChunk {
		l.tail = append(l.tail, make([]plan.Step, 0, stepChunk))
	}
	k := len(l.tail) - 1
	l.tail[k] = append(l.tail[k], s)
}

// all returns every step in one slice: head, or when the steps overflowed
// it, a copy that becomes the head.
func (l *stepList) all() []plan.Step {
	if len(l.tail) > 0 {
		out := make([]plan.Step, 0, l.held()+stepChunk)
		out = append(out, l.head...)
		for _, c := range l.tail {
			out = append(out, c...)
		}
		l.head, l.tail = out, nil
	}
	n := len(l.head)
	return l.head[:n:n]
}

// truncate drops every step from n (at least base) on.
func (l *stepList) truncate(n int) {
	n -= l.base
	if n <= len(l.head) {
		l.head, l.tail = l.head[:n], nil
		return
	}
	n -= len(l.head)
	k, r := n/stepChunk, n%stepChunk
	if r == 0 {
		l.tail = l.tail[:k] // the chunks kept are full
		return
	}
	l.tail = l.tail[:k+1]
	l.tail[k] = l.tail[k][:r]
}

// flush hands each step held, in order, to each and forgets them: the
// head's room is kept for the next ones, so each must copy what it keeps.
func (l *stepList) flush(each func(*plan.Step)) {
	steps := l.all()
	for i := range steps {
		each(&steps[i])
	}
	l.base += len(steps)
	clear(l.head)
	l.head = l.head[:0]
}
