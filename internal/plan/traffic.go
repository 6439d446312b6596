package plan

import (
	"github.com/nvcomm/nvcomm/internal/checked"
	"github.com/nvcomm/nvcomm/internal/shard"
)

// DTypeSize is the size in bytes of an element of type dtype, 0 for a type
// plans do not have.
func DTypeSize(dtype string) int { return shard.DTypeSize(dtype) }

// Traffic counts, per device, the bytes a collective step sends and
// receives under the model of docs/plan.md ("Bytes"), for elements of elem
// bytes: direct transfers, but a Reduce runs as the chain NCCL pipelines it
// through. holds reports whether a device holds the step's input (the
// senders of a Gather). A rooted step's root is read
// only when set. ok is false when a count overflows 64 bits; the maps are
// then incomplete. lower accounts the steps it emits, and validate checks a
// plan's bytes, with this one function.
func Traffic(s *Step, elem int64, holds func(int) bool) (sent, recv map[int]int64, ok bool) {
	sent, recv = map[int]int64{}, map[int]int64{}
	return sent, recv, trafficInto(s, elem, holds, mapBook(sent), mapBook(recv))
}

// trafficInto is [Traffic] booked into empty books the caller owns, so
// that validating a plan of many collectives reuses two books rather than
// make two maps a step.
func trafficInto(s *Step, elem int64, holds func(int) bool, sent, recv book) bool {
	in, okIn := checked.Mul(s.Count.Input, int(elem))
	out, okOut := checked.Mul(s.Count.Output, int(elem))
	if !okIn || !okOut {
		return false
	}
	t := &tally{sent: sent, recv: recv, elem: elem, ok: true}
	for _, team := range s.Teams {
		t.team(s, team, in, out, holds)
	}
	return t.ok
}

// book holds bytes per device: a map (mapBook), or the validator's
// deviceBook.
type book interface {
	get(d int) int64
	set(d int, n int64)
}

// mapBook is a map as a book.
type mapBook map[int]int64

func (m mapBook) get(d int) int64    { return m[d] }
func (m mapBook) set(d int, n int64) { m[d] = n }

// tally accumulates one step's traffic, noting an overflow.
type tally struct {
	sent, recv book
	elem       int64 // bytes of an element
	ok         bool
}

// times returns k*n, noting an overflow.
func (t *tally) times(k, n int) int64 {
	p, ok := checked.Mul(k, n)
	t.ok = t.ok && ok
	return int64(p)
}

// share returns k*n/q rounded down, exact where k*n alone overflows (an
// Allreduce's 2(n-1)/n of a buffer fits whenever the buffer does), noting
// an overflow of the quotient.
func (t *tally) share(k, n, q int) int64 {
	p, ok := checked.MulDiv(k, n, q)
	t.ok = t.ok && ok
	return int64(p)
}

// exchange books what member k (device d) of an AllToAllV's team sends by
// its row of counts: each chunk to another device, the receiver's too; the
// chunk for itself stays. A device listed twice books each of its rows
// once.
func (t *tally) exchange(counts [][]int, team []int, k int) {
	if k >= len(counts) {
		return // malformed, and reported as such
	}
	d := team[k]
	for r, n := range counts[k] {
		if r < len(team) && team[r] != d && n > 0 {
			b := t.times(n, int(t.elem))
			t.add(t.sent, d, b)
			t.add(t.recv, team[r], b)
		}
	}
}

// chain books what member k of a Reduce's team sends along the chain NCCL
// runs (a ring cut at the root): every member but the root passes the
// partial result, one buffer of in bytes, to the next member in team order
// (the first after the last), so the root and every other member but the
// one after the root receive one buffer. A member that does not hold the
// input passes the identity on, as the exporter's does.
func (t *tally) chain(s *Step, team []int, k, in int) {
	if s.Root == nil || team[k] == *s.Root {
		return
	}
	next := team[(k+1)%len(team)]
	if next == team[k] {
		return // a team of one device, listed twice
	}
	t.add(t.sent, team[k], int64(in))
	t.add(t.recv, next, int64(in))
}

// add adds n to d's bytes in m, noting an overflow.
func (t *tally) add(m book, d int, n int64) {
	s, ok := checked.Add(m.get(d), n)
	t.ok = t.ok && ok
	m.set(d, s)
}

// team books what the members of one team send and receive; in and out are
// a member's input and output buffer in bytes.
func (t *tally) team(s *Step, team []int, in, out int, holds func(int) bool) {
	n := len(team)
	for k, d := range team {
		switch s.Type {
		case Allgather:
			t.sent.set(d, t.times(n-1, in))
			t.recv.set(d, t.times(n-1, in))
		case ReduceScatter, AllToAll:
			t.sent.set(d, t.share(n-1, in, n))
			t.recv.set(d, t.share(n-1, in, n))
		case Allreduce:
			t.sent.set(d, t.share(2*(n-1), in, n))
			t.recv.set(d, t.share(2*(n-1), in, n))
		case Broadcast, Scatter:
			if s.Root == nil {
				continue
			}
			if d == *s.Root {
				t.add(t.sent, d, t.times(n-1, out))
			} else {
				t.add(t.recv, d, int64(out))
			}
		case Reduce:
			t.chain(s, team, k, in)
		case Gather:
			if s.Root != nil && d != *s.Root && holds(d) {
				t.add(t.sent, d, int64(in))
				t.add(t.recv, *s.Root, int64(in))
			}
		case AllToAllV:
			t.exchange(s.SendCounts, team, k)
		case SendRecv:
			if n == 2 && team[0] != team[1] && d == team[1] {
				t.add(t.sent, team[0], int64(in))
				t.add(t.recv, d, int64(in))
			}
		}
	}
}
