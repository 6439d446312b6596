package sim

import (
	"fmt"
	"slices"
	"strings"

	"github.com/nvcomm/nvcomm/internal/ops"
	"github.com/nvcomm/nvcomm/internal/plan"
)

// call is one team's part of a collective step: the members' input
// buffers, and what the collective writes and moves.
type call struct {
	s    *plan.Step
	team []int
	size int64 // bytes per element
	slab *slab // the machine's, for small outputs
	// rope says whether an output that puts chunks together lists them
	// (a rope) rather than copying them (listsChunks).
	rope bool
	// reduced are the reference's reductions by the values they read
	// (combinationKey): a reduction that reads the same shares them.
	reduced map[string]vec
	in      []vec
	held    []bool // whether each member holds the input buffer
	out     []vec  // a zero vec: the member gets no output
	// sent and recv are bytes per member.
	sent, recv []int64
	spans      []span // the chunks of one output, reused
}

// chunks returns the call's scratch for n chunks.
func (c *call) chunks(n int) []span {
	c.spans = resize(c.spans, n)
	return c.spans
}

// collectives maps each collective type to its semantics (docs/plan.md).
var collectives = map[string]func(*call) error{
	plan.Allgather:     allgather,
	plan.ReduceScatter: reduceScatter,
	plan.Allreduce:     allreduce,
	plan.AllToAll:      allToAll,
	plan.AllToAllV:     allToAllV,
	plan.Broadcast:     broadcast,
	plan.Scatter:       scatter,
	plan.Gather:        gather,
	plan.Reduce:        reduce,
	plan.SendRecv:      sendRecv,
}

func allgather(c *call) error {
	n := c.s.Count.Input
	if err := c.allHold(n); err != nil {
		return err
	}
	if err := c.wantOutput(len(c.team) * n); err != nil {
		return err
	}
	// Every member's output is the same values, which never change: the
	// members share one.
	parts := c.chunks(len(c.team))
	for r, in := range c.in {
		parts[r] = span{in, 0, n}
	}
	out := join(parts, c.rope, c.slab)
	for r := range c.team {
		c.out[r] = out
		c.move(r, int64(len(c.team)-1)*int64(n), int64(len(c.team)-1)*int64(n))
	}
	return nil
}

func reduceScatter(c *call) error {
	m, err := c.chunk()
	if err != nil {
		return err
	}
	op, err := reduceOp(c.s)
	if err != nil {
		return err
	}
	if err := c.allHold(c.s.Count.Input); err != nil {
		return err
	}
	if err := c.wantOutput(m); err != nil {
		return err
	}
	for r := range c.team {
		parts := c.chunks(len(c.team))
		for i, in := range c.in {
			parts[i] = span{in, r * m, (r + 1) * m}
		}
		c.out[r] = c.combine(op, parts)
		c.move(r, int64(len(c.team)-1)*int64(m), int64(len(c.team)-1)*int64(m))
	}
	return nil
}

func allreduce(c *call) error {
	n := c.s.Count.Input
	op, err := reduceOp(c.s)
	if err != nil {
		return err
	}
	if err := c.allHold(n); err != nil {
		return err
	}
	if err := c.wantOutput(n); err != nil {
		return err
	}
	t := int64(len(c.team))
	parts := c.chunks(len(c.team))
	for r, in := range c.in {
		parts[r] = span{in, 0, n}
	}
	out := c.combine(op, parts) // shared by the members, as in allgather
	for r := range c.team {
		c.out[r] = out
		// Reduce-scatter then all-gather: 2(T-1)·n/T elements each way,
		// rounded down after converting to bytes.
		b := 2 * (t - 1) * int64(n) * c.size / t
		c.sent[r], c.recv[r] = b, b
	}
	return nil
}

func allToAll(c *call) error {
	m, err := c.chunk()
	if err != nil {
		return err
	}
	if err := c.allHold(c.s.Count.Input); err != nil {
		return err
	}
	if err := c.wantOutput(c.s.Count.Input); err != nil {
		return err
	}
	for j := range c.team {
		parts := c.chunks(len(c.team))
		for i, in := range c.in {
			parts[i] = span{in, j * m, (j + 1) * m}
		}
		c.out[j] = join(parts, c.rope, c.slab)
		c.move(j, int64(len(c.team)-1)*int64(m), int64(len(c.team)-1)*int64(m))
	}
	return nil
}

// allToAllV is an all-to-all with split sizes: member k cuts its input, in
// order, into chunks of send_counts[k][0], send_counts[k][1], ...
// elements, chunk r going to member r; member r's output is the chunks it
// receives, in member order. A member's chunk for itself stays: it is
// neither sent nor received. A member whose row is all zeros sends nothing
// and does not read the input (it need not hold it); one whose column is
// all zeros receives nothing and gets no output buffer. When count.input
// (count.output) is 0, every member reads (writes) as before.
func allToAllV(c *call) error {
	if err := c.checkSendCounts(); err != nil {
		return err
	}
	for k := range c.team {
		if !c.sends(k) {
			continue
		}
		if err := c.require(k); err != nil {
			return err
		}
	}
	for k := range c.team {
		if !c.sends(k) {
			continue
		}
		if err := c.checkSize(k, c.s.Count.Input); err != nil {
			return err
		}
	}
	// lo[k] is where sender k's chunk for the receiver at hand starts.
	lo := make([]int, len(c.team))
	for r := range c.team {
		if !c.receives(r) {
			continue
		}
		// The chunks from the senders in member order.
		parts := c.chunks(0)
		for k, row := range c.s.SendCounts {
			if n := row[r]; n != 0 {
				parts = append(parts, span{c.in[k], lo[k], lo[k] + n})
				lo[k] += n
				if r != k {
					c.move(k, int64(n), 0)
					c.move(r, 0, int64(n))
				}
			}
		}
		c.spans = parts
		c.out[r] = join(parts, c.rope, c.slab)
	}
	return nil
}

// sends reports whether AllToAllV member k reads its input: its row of
// send_counts has a chunk, or count.input is 0 (every member reads an
// empty input).
func (c *call) sends(k int) bool {
	return c.s.Count.Input == 0 || slices.ContainsFunc(c.s.SendCounts[k], func(n int) bool { return n != 0 })
}

// receives reports whether AllToAllV member r writes the output: its
// column of send_counts has a chunk, or count.output is 0.
func (c *call) receives(r int) bool {
	if c.s.Count.Output == 0 {
		return true
	}
	for _, row := range c.s.SendCounts {
		if row[r] != 0 {
			return true
		}
	}
	return false
}

// checkSendCounts checks an AllToAllV's send_counts against the team and
// the step's counts: a row and a column per member, no negative count,
// rows that sum to count.input (a member sends its whole input) or to 0
// (a member that sends nothing), and columns that sum to count.output
// (what a member receives is its output) or to 0 (a member that receives
// nothing).
func (c *call) checkSendCounts() error {
	t, counts := len(c.team), c.s.SendCounts
	in, out := c.s.Count.Input, c.s.Count.Output
	if len(counts) != t {
		return c.errorf("send_counts has %d rows, but team %v has %d members", len(counts), c.team, t)
	}
	// A sum is checked against the count it must reach before it grows:
	// counts of at least 0 that pass never sum past an int.
	cols := make([]int, t)
	for k, row := range counts {
		if len(row) != t {
			return c.errorf("send_counts[%d] has %d counts, but team %v has %d members", k, len(row), c.team, t)
		}
		sum := 0
		for r, n := range row {
			switch {
			case n < 0:
				return c.errorf("send_counts[%d][%d] is %d, a count is at least 0", k, r, n)
			case n > in-sum:
				return c.errorf("send_counts[%d] sums to more than count.input %d: member %d cuts its whole input into these chunks", k, in, k)
			case n > out-cols[r]:
				return c.errorf("column %d of send_counts sums to more than count.output %d: member %d of team %v receives these chunks", r, out, r, c.team)
			}
			sum += n
			cols[r] += n
		}
		if sum != in && sum != 0 {
			return c.errorf("send_counts[%d] sums to %d, but count.input is %d: member %d cuts its whole input into these chunks (or sends nothing)", k, sum, in, k)
		}
	}
	for r, sum := range cols {
		if sum != out && sum != 0 {
			return c.errorf("column %d of send_counts sums to %d, but count.output is %d: member %d of team %v receives these chunks (or nothing)", r, sum, out, r, c.team)
		}
	}
	return nil
}

func broadcast(c *call) error {
	n := c.s.Count.Input
	root, err := c.rootHolds(n)
	if err != nil {
		return err
	}
	if err := c.wantOutput(n); err != nil {
		return err
	}
	for r := range c.team {
		c.out[r] = c.in[root] // the values never change: shared, not copied
		if r != root {
			c.move(r, 0, int64(n))
		}
	}
	c.move(root, int64(len(c.team)-1)*int64(n), 0)
	return nil
}

func scatter(c *call) error {
	m, err := c.chunk()
	if err != nil {
		return err
	}
	root, err := c.rootHolds(c.s.Count.Input)
	if err != nil {
		return err
	}
	if err := c.wantOutput(m); err != nil {
		return err
	}
	for r := range c.team {
		c.out[r] = c.in[root].slice(r*m, (r+1)*m)
		if r != root {
			c.move(r, 0, int64(m))
		}
	}
	c.move(root, int64(len(c.team)-1)*int64(m), 0)
	return nil
}

func gather(c *call) error {
	parts, root, err := c.fromHolders(true)
	if err != nil {
		return err
	}
	if err := c.wantOutput(len(parts) * c.s.Count.Input); err != nil {
		return err
	}
	c.out[root] = join(parts, c.rope, c.slab)
	return nil
}

func reduce(c *call) error {
	op, err := reduceOp(c.s)
	if err != nil {
		return err
	}
	parts, root, err := c.fromHolders(false)
	if err != nil {
		return err
	}
	if err := c.wantOutput(c.s.Count.Input); err != nil {
		return err
	}
	c.out[root] = c.combine(op, parts)
	c.chain(root)
	return nil
}

// chain books a Reduce's traffic as NCCL's chain runs it (plan.Traffic):
// every member but the root passes one buffer to the next in team order,
// the first after the last, whether it holds the input or passes the
// identity on.
func (c *call) chain(root int) {
	n := int64(c.s.Count.Input)
	for r := range c.team {
		next := (r + 1) % len(c.team)
		if r != root && c.team[next] != c.team[r] {
			c.move(r, n, 0)
			c.move(next, 0, n)
		}
	}
}

func sendRecv(c *call) error {
	n := c.s.Count.Input
	if err := c.require(0); err != nil { // the team's sender, whether or not the step names it root
		return err
	}
	if err := c.checkSize(0, n); err != nil {
		return err
	}
	if err := c.wantOutput(n); err != nil {
		return err
	}
	c.out[1] = c.in[0] // shared, as in broadcast
	if c.team[0] != c.team[1] {
		c.move(0, int64(n), 0)
		c.move(1, 0, int64(n))
	}
	return nil
}

// fromHolders collects, in team order, the inputs of the members that hold
// one (Gather, Reduce); direct books each one's traffic to the root (a
// Gather's, where a Reduce's runs as a chain).
func (c *call) fromHolders(direct bool) ([]span, int, error) {
	root := slices.Index(c.team, *c.s.Root)
	parts := c.chunks(0)
	for r, ok := range c.held {
		if !ok {
			continue
		}
		if err := c.checkSize(r, c.s.Count.Input); err != nil {
			return nil, 0, err
		}
		parts = append(parts, span{c.in[r], 0, c.in[r].len()})
		if direct && r != root {
			c.move(r, int64(c.s.Count.Input), 0)
			c.move(root, 0, int64(c.s.Count.Input))
		}
	}
	c.spans = parts
	if len(parts) == 0 {
		return nil, 0, c.errorf("no member of team %v holds buffer %q", c.team, c.s.Input)
	}
	return parts, root, nil
}

// chunk returns the per-member chunk m of an input of T·m elements.
func (c *call) chunk() (int, error) {
	n, t := c.s.Count.Input, len(c.team)
	if n < 0 || n%t != 0 {
		return 0, c.errorf("count.input %d is not a multiple of the team size %d", n, t)
	}
	return n / t, nil
}

// rootHolds checks that the root holds an input of n elements and returns
// its rank.
func (c *call) rootHolds(n int) (int, error) {
	root := slices.Index(c.team, *c.s.Root)
	if err := c.require(root); err != nil {
		return 0, err
	}
	return root, c.checkSize(root, n)
}

// allHold checks that every member holds an input of n elements.
func (c *call) allHold(n int) error {
	for r := range c.team {
		if err := c.require(r); err != nil {
			return err
		}
	}
	for r := range c.team {
		if err := c.checkSize(r, n); err != nil {
			return err
		}
	}
	return nil
}

func (c *call) require(r int) error {
	if !c.held[r] {
		return c.errorf("device %d has no buffer %q", c.team[r], c.s.Input)
	}
	return nil
}

// checkSize is nvFuser's assertBuffersHaveSameSize: member r's input must
// have n elements.
func (c *call) checkSize(r, n int) error {
	if c.in[r].len() == n {
		return nil
	}
	var sizes []string
	for i, d := range c.team {
		if c.held[i] {
			sizes = append(sizes, fmt.Sprintf("%d:%d", d, c.in[i].len()))
		}
	}
	return c.errorf("buffer %q on device %d has %d elements, count.input is %d (team sizes %s)",
		c.s.Input, c.team[r], c.in[r].len(), n, strings.Join(sizes, " "))
}

// wantOutput checks the plan's count.output against the semantics.
func (c *call) wantOutput(n int) error {
	if c.s.Count.Output != n {
		return c.errorf("count.output is %d, but on team %v the step produces %d elements", c.s.Count.Output, c.team, n)
	}
	return nil
}

// move books elements sent and received by member r, in bytes.
func (c *call) move(r int, sent, recv int64) {
	c.sent[r] += sent * c.size
	c.recv[r] += recv * c.size
}

func (c *call) errorf(format string, args ...any) error {
	return stepError(c.s, format, args...)
}

// combine combines equally long spans with op, in order: the values of
// the reference's reduction that reads the very same values, when there is
// one (the same op on the same pieces of the same streams, in the same
// order, computes the same values; they are computed only if something
// reads them), else combineSpans's.
func (c *call) combine(op string, parts []span) vec {
	if len(c.reduced) > 0 && parts[0].hi-parts[0].lo >= ropeMin {
		if key, ok := combinationKey(op, parts); ok {
			if v, hit := c.reduced[key]; hit {
				return v
			}
		}
	}
	return stored(combineSpans(op, parts))
}

// elementwise combines equally long buffers with op, in order.
func elementwise(op string, parts [][]float64) []float64 {
	spans := make([]span, len(parts))
	for k, p := range parts {
		spans[k] = span{stored(p), 0, len(p)}
	}
	return combineSpans(op, spans)
}

// combineSpans combines equally long spans with op, in order, into a new
// buffer: a block of the output at a time, on every CPU, so that each
// span is read once and the output written once. A span in pieces is
// read a block at a time into scratch; stored ones are read in place.
func combineSpans(op string, parts []span) []float64 {
	out := make([]float64, parts[0].hi-parts[0].lo)
	combineSpansInto(op, out, parts)
	return out
}

// combineSpansInto is combineSpans into out, as long as every span.
func combineSpansInto(op string, out []float64, parts []span) {
	if len(out) < 2*minPiece {
		// One piece: no goroutine, nor the closure they take (most
		// reductions of a long plan are of a few hundred values).
		combineRange(op, out, parts, 0, len(out))
		return
	}
	inParallel(len(out), func(from, to int) { combineRange(op, out, parts, from, to) })
}

// combineRange is combineSpansInto on out's positions [from, to), a block
// at a time.
func combineRange(op string, out []float64, parts []span, from, to int) {
	var scratch []float64 // made once, only for a span in pieces
	for lo := from; lo < to; lo += combineBlock {
		hi := min(lo+combineBlock, to)
		dst := out[lo:hi]
		first := parts[0]
		first.v.readOne(first.lo+lo, dst)
		for _, p := range parts[1:] {
			if p.v.rope == nil {
				combineInto(op, dst, p.v.vals[p.lo+lo:p.lo+hi])
				continue
			}
			if scratch == nil {
				scratch = make([]float64, min(combineBlock, to-from))
			}
			src := scratch[:hi-lo]
			p.v.readOne(p.lo+lo, src)
			combineInto(op, dst, src)
		}
	}
}

// reduceOp returns the step's reduce op.
func reduceOp(s *plan.Step) (string, error) {
	if s.ReduceOp == nil || !ops.Is(*s.ReduceOp, ops.Reduction) {
		return "", stepError(s, "reduce_op must be one of %s", strings.Join(plan.ReduceOps(), ", "))
	}
	return *s.ReduceOp, nil
}

// stepError prefixes an error with the step's id and type.
func stepError(s *plan.Step, format string, args ...any) error {
	return fmt.Errorf("step %d (%s): %s", s.ID, s.Type, fmt.Sprintf(format, args...))
}
