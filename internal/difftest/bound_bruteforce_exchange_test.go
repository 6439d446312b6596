package difftest

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"slices"
	"testing"

	"github.com/nvcomm/nvcomm/internal/plan"
)

// This file is the AllToAllVs of the brute-force bound test: the send
// counts it tries, over which teams, what one writes and makes each device
// receive (docs/plan.md, "Step semantics" and "Bytes"), and the rules that
// leave out, before they are built, those that cannot matter.
//
// An AllToAllV's send counts are any matrix whose rows sum to its input
// and columns to its output, far too many to try them all. The search
// tries a family that covers what an all-to-all with split sizes adds to
// the other collectives, and that nvcomm's exchanges come from: block
// patterns (bfBlockPatterns). For a team of t and j that divides t, 1 ≤ j
// < t, the members are cut into groups of j as senders and again as
// receivers, each group of senders matched with one of receivers; every
// member cuts its buffer into j equal chunks, in order, one for each
// member of the matched group, in member order, so that each member
// receives j chunks and its output is as long as its input. j = 1 is a
// device permutation: each member sends its whole buffer to one. j = t
// would be the AllToAll, which the search tries already. Besides, nvcomm's
// own AllToAllVs of the case (bfTeams.addOwn), whose members that send
// nothing need not hold the buffer, and whose members that receive nothing
// write no output (an exchange between two meshes).
//
// Teams: a permutation is tried over the devices that hold the buffer, all
// of them, as one team in ascending order (a member that keeps its buffer
// stands for one outside the team: every permutation of fewer devices is
// one of these); the others over every set of equal teams that hold the
// buffer, each team in ascending order (a member's chunks go to the
// members of its group in ascending order). Two AllToAllVs that write the
// same chunks to the same places (route) are tried once. And a chunk sent
// to another device must carry a value that the device holds nowhere yet
// (exchangeFresh): one that sends a device only what it holds is not
// tried.

// bfExchange is an AllToAllV the search tries: its teams, and its send
// counts in chunks (units[k][r] chunks from member k to member r, one
// matrix for every team). On a buffer of n elements a chunk is n/row
// elements, where row is what every row sums to; col is what every column
// does (row, but in nvcomm's own).
type bfExchange struct {
	ts       *bfTeamSet
	units    [][]int
	row, col int
	// first[k][r] is the first chunk member k sends member r.
	first [][]int
	// recv is, by position, the chunks a device receives from the other
	// members of its team.
	recv []int
	// whole marks a permutation, tried over all the devices that hold
	// the buffer only.
	whole bool
	// senders and receivers are the positions whose row, and column, is
	// not all zeros: in nvcomm's exchange between two meshes the
	// producers only send, and need the buffer, and the consumers only
	// receive, and write the output.
	senders, receivers uint64
}

// newBfExchange is the AllToAllV over ts with send counts units.
func newBfExchange(ts *bfTeamSet, units [][]int, positions int) *bfExchange {
	ex := &bfExchange{ts: ts, units: units, first: make([][]int, len(units)), recv: make([]int, positions)}
	for k := range units {
		row, col := 0, 0
		for r := range units {
			row, col = row+units[k][r], col+units[r][k]
		}
		ex.row, ex.col = max(ex.row, row), max(ex.col, col) // a row or column is all or nothing
	}
	for k, row := range units {
		ex.first[k] = make([]int, len(row))
		for r := 1; r < len(row); r++ {
			ex.first[k][r] = ex.first[k][r-1] + row[r-1]
		}
	}
	for _, team := range ts.pos {
		for r, p := range team {
			for k := range team {
				if k != r {
					ex.recv[p] += units[k][r]
				}
				if units[r][k] > 0 {
					ex.senders |= 1 << p
				}
				if units[k][r] > 0 {
					ex.receivers |= 1 << p
				}
			}
		}
	}
	return ex
}

// counts is the send_counts of ex with chunks of c elements.
func (ex *bfExchange) counts(c int) [][]int {
	out := make([][]int, len(ex.units))
	for k, row := range ex.units {
		out[k] = make([]int, len(row))
		for r, u := range row {
			out[k][r] = u * c
		}
	}
	return out
}

// route is what ex writes, whatever it reads: for every position, the
// chunks it concatenates (sender, first chunk, chunks), in order. Two
// AllToAllVs with one route write the same buffer and make every device
// receive the same.
func (ex *bfExchange) route(positions int) string {
	parts := make([][]byte, positions)
	for _, team := range ex.ts.pos {
		for r, p := range team {
			for k, q := range team {
				if n := ex.units[k][r]; n > 0 {
					parts[p] = binary.AppendUvarint(parts[p], uint64(q))
					parts[p] = binary.AppendUvarint(parts[p], uint64(ex.first[k][r]))
					parts[p] = binary.AppendUvarint(parts[p], uint64(n))
				}
			}
		}
	}
	var key []byte
	for _, part := range parts {
		key = binary.AppendUvarint(key, uint64(len(part)))
		key = append(key, part...)
	}
	return string(key)
}

// exchanges lists the AllToAllVs of the family (see the top of this file)
// over each set of equal teams, by its index in equal.
func (t *bfTeams) exchanges(positions int) {
	t.exch, t.routes = make([][]*bfExchange, len(t.equal)), map[string]bool{}
	patterns := map[int][][][]int{}
	for i := range t.equal {
		ts := &t.equal[i]
		if slices.ContainsFunc(ts.teams, func(team []int) bool { return !slices.IsSorted(team) }) {
			continue
		}
		size := len(ts.teams[0])
		if patterns[size] == nil {
			patterns[size] = bfBlockPatterns(size)
		}
		for _, units := range patterns[size] {
			whole := bfRowSum(units) == 1
			if whole && len(ts.teams) > 1 {
				continue
			}
			ex := newBfExchange(ts, units, positions)
			ex.whole = whole
			t.addExchange(i, ex, positions)
		}
	}
}

// addOwn adds the AllToAllVs of nvcomm's plan p: its send counts over its
// teams, on any buffer whose count its rows divide (in chunks of the
// quotient).
func (t *bfTeams) addOwn(p *plan.Plan, positions int) {
	for _, s := range p.Steps {
		if s.Type != plan.AllToAllV {
			continue
		}
		for i := range t.equal {
			if bfSameTeams(t.equal[i].teams, s.Teams) {
				t.addExchange(i, newBfExchange(&t.equal[i], s.SendCounts, positions), positions)
			}
		}
	}
}

// addExchange adds ex over the set of teams equal[i], unless an AllToAllV
// with its route is there already.
func (t *bfTeams) addExchange(i int, ex *bfExchange, positions int) {
	if key := ex.route(positions); !t.routes[key] {
		t.routes[key] = true
		t.exch[i] = append(t.exch[i], ex)
	}
}

// bfSameTeams reports whether a and b are the same ordered teams, in any
// order of teams.
func bfSameTeams(a, b [][]int) bool {
	return len(a) == len(b) && !slices.ContainsFunc(b, func(team []int) bool {
		return !slices.ContainsFunc(a, func(o []int) bool { return slices.Equal(o, team) })
	})
}

// bfRowSum is what the first row of units sums to.
func bfRowSum(units [][]int) int {
	n := 0
	for _, u := range units[0] {
		n += u
	}
	return n
}

// bfBlockPatterns lists the t×t matrices of 0s and 1s made of blocks of
// ones: for every j that divides t, 1 ≤ j < t, the rows cut into groups of
// j, the columns too, each group of rows matched with one of columns; but
// the identity.
func bfBlockPatterns(t int) [][][]int {
	var out [][][]int
	for j := 1; j < t; j++ {
		if t%j != 0 {
			continue
		}
		groups := bfGroupings(bfIdentity(t), j)
		matches := append(bfPermutations(t/j), bfIdentity(t/j))
		for _, rows := range groups {
			for _, cols := range groups {
				for _, match := range matches {
					m := make([][]int, t)
					for k := range m {
						m[k] = make([]int, t)
					}
					for g, senders := range rows {
						for _, k := range senders {
							for _, r := range cols[match[g]] {
								m[k][r] = 1
							}
						}
					}
					if !slices.EqualFunc(m, bfUnitRows(t), slices.Equal) {
						out = append(out, m)
					}
				}
			}
		}
	}
	return out
}

// bfGroupings lists the ways to cut xs into groups of j, each group
// ascending, the groups by their first member.
func bfGroupings(xs []int, j int) [][][]int {
	if len(xs) == 0 {
		return [][][]int{nil}
	}
	var out [][][]int
	for _, rest := range bfSubsets(xs[1:]) {
		if len(rest) != j-1 {
			continue
		}
		g := append([]int{xs[0]}, rest...)
		left := slices.DeleteFunc(slices.Clone(xs[1:]), func(x int) bool { return slices.Contains(rest, x) })
		for _, more := range bfGroupings(left, j) {
			out = append(out, append([][]int{g}, more...))
		}
	}
	return out
}

// bfUnitRows is the t×t identity matrix.
func bfUnitRows(t int) [][]int {
	out := make([][]int, t)
	for k := range out {
		out[k] = make([]int, t)
		out[k][k] = 1
	}
	return out
}

// exchanges visits the AllToAllVs of the family that read b within lim,
// after state s: over every set of teams whose members all hold b, those
// whose rows divide b's count, in chunks of the quotient. Emit would leave
// out most of the others after building them; these rules leave them out
// before, and leave out no AllToAllV emit would keep.
func (w *bfWorld) exchanges(s *bfState, b *bfBuf, out string, lim bfLimit, try func(bfMove)) {
	// Emit leaves out a step after which more buffers wait for a reader
	// than steps are left (waiting): reading b may take one off, and the
	// output adds one unless a device of the output's mesh could make its
	// output from it.
	waiting, spare := w.waiting(s), w.maxColls-s.colls-1+w.maxLocals-s.locals
	if i := slices.Index(s.bufs, b); i > 0 && s.read&(1<<i) == 0 && w.ownMask(b) == 0 {
		waiting--
	}
	if waiting > spare {
		return
	}
	for i := range w.teams.equal {
		ts := &w.teams.equal[i]
		if lim.need&^ts.mask != 0 {
			continue
		}
		for _, ex := range w.teams.exch[i] {
			if ex.senders&^b.held != 0 || b.count%ex.row != 0 || ex.whole && ts.mask != b.held {
				continue
			}
			c := b.count / ex.row
			if !w.exchangeFits(ex, int64(c)*w.elem, lim) || !w.exchangeFresh(s, ex, b, c) {
				continue
			}
			if lim.need != 0 && w.exchangeServed(ex, b, c, lim.need) != lim.need {
				continue // the last collective must serve every device that lacks its output
			}
			if waiting == spare && w.exchangeServed(ex, b, c, w.consumers&ts.mask) == 0 {
				continue // its output would wait for a reader too
			}
			try(bfMove{typ: plan.AllToAllV, in: b, out: out, countOut: ex.col * c, ts: ts, ex: ex, chunk: c})
		}
	}
}

// exchangeFits reports whether every device has room for what ex makes it
// receive in chunks of c bytes.
func (w *bfWorld) exchangeFits(ex *bfExchange, c int64, lim bfLimit) bool {
	for m := ex.ts.mask; m != 0; m &= m - 1 {
		p := bits.TrailingZeros64(m)
		if int64(ex.recv[p])*c > lim.rem[p] {
			return false
		}
	}
	return true
}

// exchangeFresh reports whether every chunk that ex, in chunks of c
// elements of b, sends to another device carries a value that the device
// holds nowhere in s.
func (w *bfWorld) exchangeFresh(s *bfState, ex *bfExchange, b *bfBuf, c int) bool {
	for _, team := range ex.ts.pos {
		for r, p := range team {
			held := w.heldAt(s, p)
			for k, q := range team {
				if k == r || ex.units[k][r] == 0 {
					continue
				}
				first := ex.first[k][r]
				chunk := b.data[q][first*c : (first+ex.units[k][r])*c]
				if !slices.ContainsFunc(chunk, func(v bfVal) bool { return !slices.Contains(held, v) }) {
					return false
				}
			}
		}
	}
	return true
}

// exchangeServed returns the devices of mask that could make their output
// from what ex, in chunks of c elements of b, writes there, without
// building it.
func (w *bfWorld) exchangeServed(ex *bfExchange, b *bfBuf, c int, mask uint64) uint64 {
	var served uint64
	for _, team := range ex.ts.pos {
		for r, p := range team {
			if mask&(1<<p) == 0 {
				continue
			}
			w.scratch = w.scratch[:0]
			for k, q := range team {
				first := ex.first[k][r]
				w.scratch = append(w.scratch, b.data[q][first*c:(first+ex.units[k][r])*c]...)
			}
			if w.derivable(p, w.scratch) {
				served |= 1 << p
			}
		}
	}
	return served
}

// bfExchangeOutput is what each member of one team of an AllToAllV gets,
// from its members' inputs in rank order: member r the chunks the members
// send it, in member order.
func bfExchangeOutput(ex *bfExchange, c int, in [][]bfVal) [][]bfVal {
	out := make([][]bfVal, len(in))
	for r := range out {
		out[r] = make([]bfVal, 0, ex.col*c)
		for k, v := range in {
			first := ex.first[k][r]
			out[r] = append(out[r], v[first*c:(first+ex.units[k][r])*c]...)
		}
	}
	return out
}

// bfExchangeTraffic books what an AllToAllV makes each device receive, by
// position, into recv, and returns the most a device sends and receives:
// each chunk to another device, booked to its sender and its receiver, as
// plan.Traffic books it.
func bfExchangeTraffic(mv *bfMove, elem int64, recv *[64]int64) (sent, most int64) {
	c := int64(mv.chunk) * elem
	for _, team := range mv.ts.pos {
		for k := range team {
			out := int64(0)
			for r, p := range team {
				if r != k {
					b := int64(mv.ex.units[k][r]) * c
					recv[p] += b
					out += b
				}
			}
			sent = max(sent, out)
		}
		for _, p := range team {
			most = max(most, recv[p])
		}
	}
	return sent, most
}

// TestBoundBruteForcePatterns checks the send counts the brute-force bound test
// tries: how many, each a matrix of 0s and 1s whose rows and columns have
// j ones, none the identity, none twice, nvcomm's strided exchange among
// them.
func TestBoundBruteForcePatterns(t *testing.T) {
	want := map[int]int{2: 1, 3: 5, 4: 23 + 18, 5: 119}
	for size, n := range want {
		seen := map[string]bool{}
		for _, m := range bfBlockPatterns(size) {
			j := bfRowSum(m)
			for k := range m {
				row, col := 0, 0
				for r := range m {
					row, col = row+m[k][r], col+m[r][k]
				}
				if row != j || col != j {
					t.Errorf("%v: row or column %d has %d and %d ones, want %d", m, k, row, col, j)
				}
			}
			if key := fmt.Sprint(m); seen[key] || j == 1 && slices.EqualFunc(m, bfUnitRows(size), slices.Equal) {
				t.Errorf("%v twice, or the identity", m)
			} else {
				seen[key] = true
			}
		}
		if len(seen) != n {
			t.Errorf("teams of %d: %d patterns, want %d", size, len(seen), n)
		}
		if strided := fmt.Sprint([][]int{{1, 0, 1, 0}, {1, 0, 1, 0}, {0, 1, 0, 1}, {0, 1, 0, 1}}); size == 4 && !seen[strided] {
			t.Errorf("no %s among the patterns of 4", strided)
		}
	}
}
