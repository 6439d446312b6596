package export

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/nvcomm/nvcomm/internal/plan"
)

// reduceOps are torch.distributed's names of the plan's reduce ops.
var reduceOps = map[string]string{"sum": "SUM", "prod": "PRODUCT", "max": "MAX", "min": "MIN"}

// coll is what the writer of one collective step needs: its teams split
// into those with peers (a torch.distributed call) and those of one device
// (a copy), and the rendered expressions that depend on the rank.
type coll struct {
	s              *plan.Step
	i              int // the step's index
	teams, singles [][]int
	members        []int // of the teams with peers
	group          string
	x, y           string // the input (cast to the step's dtype) and the output
	n              int    // count.input
	// async: issued with async_op=True (a plan of format 2); settled: its
	// handle waited for already where it is issued (waitNow).
	async, settled bool
}

// collective writes a collective step: one torch.distributed call, with
// the buffers it needs. torch numbers a group's ranks in ascending global
// rank, the plan in team order: where a team is not ascending, chunks are
// reordered (docs/export.md).
func (g *gen) collective(b planned, s *plan.Step) error {
	if len(s.Teams) == 0 {
		return fmt.Errorf("step %d (%s): a collective needs at least one team", s.ID, s.Type)
	}
	c := &coll{s: s, i: b.steps[0], y: g.names[s.Output], n: s.Count.Input, async: g.async(s)}
	for _, t := range s.Teams {
		if len(slices.Compact(slices.Sorted(slices.Values(t)))) < 2 {
			c.singles = append(c.singles, t)
			continue
		}
		c.teams = append(c.teams, t)
		c.members = append(c.members, t...)
	}
	c.x = g.names[s.Input]
	if dt := g.dtype[s.Output]; g.dtype[s.Input] != dt && dt != "" {
		c.x += ".to(" + torchDTypes[dt] + ")"
	}
	switch {
	case len(c.teams) == 1:
		c.group = "groups[" + ints(slices.Sorted(slices.Values(c.teams[0]))) + "]"
	case len(c.teams) > 1:
		c.group = "groups[" + teamTable(c) + "]"
	}
	g.comment(b, g.describe(c))
	all := slices.Concat(s.Teams...)
	done := g.guard(all)
	if c.async {
		g.w.line("with on_stream(device, %s):", pyRepr(s.StreamName()))
		g.w.indent++
		if line := g.waitLine(b.steps); line != "" {
			g.w.line("%s", line)
		}
	}
	g.singleTeams(c)
	if len(c.teams) > 0 {
		if len(c.singles) > 0 {
			g.w.line("else:")
			g.w.indent++
		}
		if err := g.call(c); err != nil {
			return err
		}
		if c.settled {
			g.w.line("work[%d] = recorded(device)  # for the steps that wait for it", c.i)
		}
		if len(c.singles) > 0 {
			g.w.indent--
		}
	}
	if c.async {
		g.w.indent--
	}
	done()
	g.record(b, "", 0, 0)
	return nil
}

// teamTable renders the team of every member as a dict indexed by rank.
func teamTable(c *coll) string {
	var parts []string
	for _, d := range slices.Sorted(slices.Values(c.members)) {
		parts = append(parts, fmt.Sprintf("%d: %s", d, tuple(slices.Sorted(slices.Values(teamOf(c.teams, d))))))
	}
	return "{" + strings.Join(parts, ", ") + "}[rank]"
}

func teamOf(teams [][]int, d int) []int {
	for _, t := range teams {
		if slices.Contains(t, d) {
			return t
		}
	}
	return nil
}

// describe is a collective block's comment.
func (g *gen) describe(c *coll) string {
	var ts []string
	for _, t := range c.s.Teams {
		ts = append(ts, "["+ints(t)+"]")
	}
	what := "team " + strings.Join(ts, ", ")
	if len(ts) > 1 {
		what = "teams " + strings.Join(ts, ", ")
	}
	if c.s.Root != nil {
		what += fmt.Sprintf(", root %d", *c.s.Root)
	}
	if c.s.ReduceOp != nil {
		what += ", " + *c.s.ReduceOp
	}
	return what
}

// singleTeams writes the copy a team of one device makes (no peers); an
// AllToAllV's may instead write an empty output, or nothing.
func (g *gen) singleTeams(c *coll) {
	if len(c.singles) == 0 {
		return
	}
	var ds []int
	for _, t := range c.singles {
		ds = append(ds, t[0])
	}
	if c.s.Type == plan.AllToAllV {
		// Its one member keeps its whole input, or, with a row of zeros,
		// reads nothing and writes an empty output or none at all.
		switch sends, receives := exchange(c.s); {
		case !receives[0]:
			g.w.line("if %s:  # a team of one device that moves nothing", rankIn(ds))
			g.w.line("    pass")
			return
		case !sends[0]:
			g.w.line("if %s:  # a team of one device: an empty output", rankIn(ds))
			g.w.line("    %s = %s", c.y, g.empty(c.s.Output, 0))
			if c.async {
				g.w.line("    work[%d] = recorded(device)  # for the steps that wait for it", c.i)
			}
			g.alloc(c.s.Output, ds)
			return
		}
	}
	g.w.line("if %s:  # a team of one device: a copy", rankIn(ds))
	g.w.indent++
	g.w.line("%s = %s.clone()", c.y, c.x)
	if c.async {
		g.w.line("work[%d] = recorded(device)  # for the steps that wait for it", c.i)
	}
	g.w.indent--
	g.alloc(c.s.Output, ds)
}

// call writes the torch.distributed call of the teams with peers.
func (g *gen) call(c *coll) error {
	switch c.s.Type {
	case plan.Allgather:
		g.allgather(c)
	case plan.ReduceScatter:
		g.reduceScatter(c)
	case plan.Allreduce:
		g.allreduce(c)
	case plan.AllToAll:
		g.alltoall(c)
	case plan.AllToAllV:
		g.alltoallv(c)
	case plan.Broadcast:
		g.broadcast(c)
	case plan.Scatter:
		g.scatter(c)
	case plan.Gather:
		g.gather(c)
	case plan.Reduce:
		g.reduce(c)
	case plan.SendRecv:
		g.sendrecv(c)
	default:
		return fmt.Errorf("step %d: unknown collective %q", c.s.ID, c.s.Type)
	}
	return nil
}

// order maps each member's team rank to its group rank (ascending global
// rank): toGroup[r] is the group rank of team rank r; toTeam is the
// inverse.
func (c *coll) order(d int) (toGroup, toTeam []int) {
	team := teamOf(c.teams, d)
	sorted := slices.Sorted(slices.Values(team))
	toGroup, toTeam = make([]int, len(team)), make([]int, len(team))
	for r, m := range team {
		toGroup[r] = slices.Index(sorted, m)
		toTeam[toGroup[r]] = r
	}
	return toGroup, toTeam
}

// reorders reports whether some team is not ascending.
func (c *coll) reorders() bool {
	for _, t := range c.teams {
		if !slices.IsSorted(t) {
			return true
		}
	}
	return false
}

// rows renders the row order of a reordering, by rank where teams differ.
func (c *coll) rows(group bool) string {
	return perRank(slices.Sorted(slices.Values(c.members)), func(d int) string {
		toGroup, toTeam := c.order(d)
		if group {
			return "[" + ints(toGroup) + "]"
		}
		return "[" + ints(toTeam) + "]"
	})
}

func (c *coll) size() int { return len(c.teams[0]) }

func (g *gen) allgather(c *coll) {
	T := c.size()
	g.w.line("%s = %s", c.y, g.empty(c.s.Output, T*c.n))
	g.w.line("%s", c.issue(fmt.Sprintf("dist.all_gather_into_tensor(%s, %s, group=%s)", c.y, c.x, c.group)))
	if c.reorders() {
		g.waitNow(c)
		g.w.line("%s = %s.view(%d, %d)[%s].view(-1)  # chunks from group order to team order", c.y, c.y, T, c.n, c.rows(true))
	}
	g.alloc(c.s.Output, c.members)
}

func (g *gen) reduceScatter(c *coll) {
	T := c.size()
	m := c.n / T
	x := c.x
	if c.reorders() {
		x = fmt.Sprintf("%s.view(%d, %d)[%s].view(-1)", x, T, m, c.rows(false))
	}
	g.w.line("%s = %s", c.y, g.empty(c.s.Output, m))
	g.w.line("%s", c.issue(fmt.Sprintf("dist.reduce_scatter_tensor(%s, %s, op=dist.ReduceOp.%s, group=%s)", c.y, x, reduceOps[deref(c.s.ReduceOp)], c.group)))
	g.alloc(c.s.Output, c.members)
}

// inPlace writes the buffer an in-place collective works on: the input
// itself where nothing else reads it (or its memory) later, else a copy.
func (g *gen) inPlace(c *coll, devices []int) {
	if c.x == g.names[c.s.Input] && g.writable(c.i, c.s.Input) {
		g.w.line("%s = %s  # in place: no later step reads %s", c.y, c.x, c.x)
		g.alias(c.s.Output, c.s.Input, devices)
		return
	}
	g.w.line("%s = %s.clone()", c.y, c.x)
	g.alloc(c.s.Output, devices)
}

func (g *gen) allreduce(c *coll) {
	g.inPlace(c, c.members)
	g.w.line("%s", c.issue(fmt.Sprintf("dist.all_reduce(%s, op=dist.ReduceOp.%s, group=%s)", c.y, reduceOps[deref(c.s.ReduceOp)], c.group)))
}

func (g *gen) alltoall(c *coll) {
	T := c.size()
	x := c.x
	if c.reorders() {
		x = fmt.Sprintf("%s.view(%d, %d)[%s].view(-1)", x, T, c.n/T, c.rows(false))
	}
	g.w.line("%s = %s", c.y, g.empty(c.s.Output, c.n))
	g.w.line("%s", c.issue(fmt.Sprintf("dist.all_to_all_single(%s, %s, group=%s)", c.y, x, c.group)))
	if c.reorders() {
		g.waitNow(c)
		g.w.line("%s = %s.view(%d, %d)[%s].view(-1)  # chunks from group order to team order", c.y, c.y, T, c.n/T, c.rows(true))
	}
	g.alloc(c.s.Output, c.members)
}

// alltoallv writes an AllToAllV: all_to_all_single with each rank's split
// sizes. A member's row of send_counts cuts its input in team order, and
// torch sends input chunks and receives output chunks in group order:
// where a team is not ascending, the input's chunks are put in group order
// first and the output's back in team order after. A member that sends
// nothing (a row of zeros) passes an empty input, and need not hold one; a
// member that receives nothing (a column of zeros) an empty output, which
// is not bound to the step's output buffer.
func (g *gen) alltoallv(c *coll) {
	members := slices.Sorted(slices.Values(c.members))
	counts := c.s.SendCounts
	sends, receives := exchange(c.s)
	rank := func(d int) int { return slices.Index(teamOf(c.teams, d), d) }
	// split renders, by rank, the sizes of the chunks a member sends
	// (out false) or receives (out true), in group order or team order.
	split := func(out, group bool) string {
		return perRank(members, func(d int) string {
			k := rank(d)
			_, toTeam := c.order(d)
			sizes := make([]int, len(toTeam))
			for i := range sizes {
				r := i
				if group {
					r = toTeam[i]
				}
				sizes[i] = counts[k][r]
				if out {
					sizes[i] = counts[r][k]
				}
			}
			return "[" + ints(sizes) + "]"
		})
	}
	// which lists the members whose team rank has f true.
	which := func(f []bool) []int {
		var ds []int
		for _, d := range members {
			if f[rank(d)] {
				ds = append(ds, d)
			}
		}
		return ds
	}
	senders, receivers := which(sends), which(receives)
	x := c.x
	if len(senders) < len(members) {
		x = fmt.Sprintf("(%s if %s else %s)", x, rankIn(senders), g.empty(c.s.Output, 0))
	}
	if c.reorders() {
		g.w.line("parts = %s.split(%s)  # chunks in team order", x, split(false, false))
		x = fmt.Sprintf("torch.cat([parts[r] for r in %s])", c.rows(false))
	}
	y := c.y
	if len(receivers) < len(members) {
		y = "buf"
		g.w.line("%s = %s", y, g.emptyPerRank(c.s.Output, members, func(d int) int {
			if receives[rank(d)] {
				return c.s.Count.Output
			}
			return 0
		}))
	} else {
		g.w.line("%s = %s", y, g.empty(c.s.Output, c.s.Count.Output))
	}
	g.w.line("%s", c.issue(fmt.Sprintf("dist.all_to_all_single(%s, %s, output_split_sizes=%s, input_split_sizes=%s, group=%s)",
		y, x, split(true, true), split(false, true), c.group)))
	if c.reorders() {
		g.waitNow(c)
		g.w.line("parts = %s.split(%s)  # chunks in group order", y, split(true, true))
		g.w.line("%s = torch.cat([parts[r] for r in %s])  # chunks from group order to team order", y, c.rows(true))
	}
	if y != c.y {
		g.w.line("if %s:  # the members that receive", rankIn(receivers))
		g.w.line("    %s = %s", c.y, y)
	}
	g.alloc(c.s.Output, receivers)
}

// exchange tells, by team rank, which members of AllToAllV s send (read
// the input: a row of send_counts that is not all zeros) and which
// receive (write the output: such a column). With count.input 0 every
// member reads, with count.output 0 every member writes.
func exchange(s *plan.Step) (sends, receives []bool) {
	t := len(s.SendCounts)
	sends, receives = make([]bool, t), make([]bool, t)
	for k, row := range s.SendCounts {
		for r, n := range row {
			if n != 0 {
				sends[k], receives[r] = true, true
			}
		}
	}
	for k := range t {
		sends[k] = sends[k] || s.Count.Input == 0
		receives[k] = receives[k] || s.Count.Output == 0
	}
	return sends, receives
}

// root is a rooted collective's root.
func (c *coll) root() int {
	if c.s.Root == nil {
		return -1
	}
	return *c.s.Root
}

func (g *gen) broadcast(c *coll) {
	root := c.root()
	g.w.line("%s = %s if rank == %d else %s", c.y, c.x, root, g.empty(c.s.Output, c.n))
	g.w.line("%s", c.issue(fmt.Sprintf("dist.broadcast(%s, src=%d, group=%s)", c.y, root, c.group)))
	g.alias(c.s.Output, c.s.Input, c.members) // the root's is its input: never written in place
}

func (g *gen) scatter(c *coll) {
	T, root := c.size(), c.root()
	m := c.n / T
	g.w.line("%s = %s", c.y, g.empty(c.s.Output, m))
	chunks := fmt.Sprintf("list(%s.view(%d, %d).unbind(0))", c.x, T, m)
	if c.reorders() {
		_, toTeam := c.order(root)
		var parts []string
		for _, r := range toTeam {
			parts = append(parts, fmt.Sprintf("%s.view(%d, %d)[%d]", c.x, T, m, r))
		}
		chunks = "[" + strings.Join(parts, ", ") + "]"
	}
	g.w.line("%s", c.issue(fmt.Sprintf("dist.scatter(%s, %s if rank == %d else None, src=%d, group=%s)", c.y, chunks, root, root, c.group)))
	g.alloc(c.s.Output, c.members)
}

// holds reports, for each member of the rooted step's team, whether it
// holds the input.
func (g *gen) holds(c *coll) []bool {
	team := c.teams[0]
	has := make([]bool, len(team))
	for r, d := range team {
		has[r] = slices.Contains(g.holders[c.s.Input], d)
	}
	return has
}

// gather writes a Gather: the root receives every holder's input into
// its rows of the output, in team order; a member that does not hold the
// input (the root nvFuser appends) sends zeros into a slot that is dropped.
func (g *gen) gather(c *coll) {
	team, root := c.teams[0], c.root()
	has := g.holds(c)
	H := 0
	for _, h := range has {
		if h {
			H++
		}
	}
	_, toTeam := c.order(root)
	var parts []string
	plain := !c.reorders() && !slices.Contains(has, false)
	for _, r := range toTeam {
		if !has[r] {
			parts = append(parts, g.empty(c.s.Output, c.n))
			continue
		}
		row := 0
		for _, h := range has[:r] {
			if h {
				row++
			}
		}
		parts = append(parts, fmt.Sprintf("%s.view(%d, %d)[%d]", c.y, H, c.n, row))
	}
	list := "[" + strings.Join(parts, ", ") + "]"
	if plain {
		list = fmt.Sprintf("list(%s.view(%d, %d).unbind(0))", c.y, H, c.n)
	}
	src := c.x
	if slices.Contains(has, false) {
		var without []int
		for r, d := range team {
			if !has[r] {
				without = append(without, d)
			}
		}
		src = fmt.Sprintf("torch.zeros(%d, dtype=%s, device=device) if %s else %s", c.n, torchDTypes[g.dtype[c.s.Output]], rankIn(without), c.x)
		g.w.line("src = %s", src)
		src = "src"
	}
	g.w.line("%s = %s if rank == %d else None", c.y, g.empty(c.s.Output, H*c.n), root)
	g.w.line("%s", c.issue(fmt.Sprintf("dist.gather(%s, %s if rank == %d else None, dst=%d, group=%s)", src, list, root, root, c.group)))
	g.alloc(c.s.Output, []int{root})
}

// reduce writes a Reduce: a member that does not hold the input
// contributes the reduction's identity.
func (g *gen) reduce(c *coll) {
	team, root := c.teams[0], c.root()
	has := g.holds(c)
	op := deref(c.s.ReduceOp)
	var without []int
	for r, d := range team {
		if !has[r] {
			without = append(without, d)
		}
	}
	if len(without) > 0 {
		id := g.identity(c.s.Output, op)
		g.w.line("buf = torch.full((%d,), %s, dtype=%s, device=device) if %s else %s.clone()", c.n, id, torchDTypes[g.dtype[c.s.Output]], rankIn(without), c.x)
	} else {
		g.w.line("buf = %s.clone()", c.x)
	}
	g.w.line("%s", c.issue(fmt.Sprintf("dist.reduce(buf, dst=%d, op=dist.ReduceOp.%s, group=%s)", root, reduceOps[op], c.group)))
	g.w.line("%s = buf if rank == %d else None", c.y, root)
	g.alloc(c.s.Output, []int{root})
}

// identity renders the identity of a reduce op in buffer b's dtype.
func (g *gen) identity(b, op string) string {
	fill := map[string]string{"sum": "0", "prod": "1", "max": "-inf", "min": "inf"}[op]
	return g.fillValue(b, &fill)
}

// sendrecv writes a SendRecv: each team's first member sends to its
// second. Several pairs are one step (Megatron-LM's pipeline stages send
// to the next stage's ranks pairwise, in one batch), each pair on its own
// group; a rank may send in one pair and receive in another (a shift),
// and then sends without blocking, receives, and waits for its send, so
// that a ring of such ranks cannot wait on itself.
func (g *gen) sendrecv(c *coll) {
	if c.async {
		g.sendrecvAsync(c)
		return
	}
	if len(c.teams) == 1 {
		sender, receiver := c.teams[0][0], c.teams[0][1]
		g.w.line("if rank == %d:", sender)
		g.w.line("    dist.send(%s, dst=%d, group=%s)", c.x, receiver, c.group)
		g.w.line("else:")
		g.w.line("    %s = %s", c.y, g.empty(c.s.Output, c.n))
		g.w.line("    dist.recv(%s, src=%d, group=%s)", c.y, sender, c.group)
		g.alloc(c.s.Output, []int{receiver})
		return
	}
	var senders, receivers []int
	dst, src := map[int]int{}, map[int]int{}
	for _, t := range c.teams {
		senders, receivers = append(senders, t[0]), append(receivers, t[1])
		dst[t[0]], src[t[1]] = t[1], t[0]
	}
	slices.Sort(senders)
	slices.Sort(receivers)
	sendGroup, recvGroup := pairGroups(dst), pairGroups(src)
	if !slices.ContainsFunc(senders, func(d int) bool { return slices.Contains(receivers, d) }) {
		g.w.line("if %s:", rankIn(senders))
		g.w.line("    dist.send(%s, dst=%s, group=%s)", c.x, rankTable(dst), sendGroup)
		g.w.line("else:")
		g.w.line("    %s = %s", c.y, g.empty(c.s.Output, c.n))
		g.w.line("    dist.recv(%s, src=%s, group=%s)", c.y, rankTable(src), recvGroup)
		g.alloc(c.s.Output, receivers)
		return
	}
	g.w.line("if %s:", rankIn(senders))
	g.w.line("    sending = dist.isend(%s, dst=%s, group=%s)", c.x, rankTable(dst), sendGroup)
	g.w.line("if %s:", rankIn(receivers))
	g.w.line("    %s = %s", c.y, g.empty(c.s.Output, c.n))
	g.w.line("    dist.recv(%s, src=%s, group=%s)", c.y, rankTable(src), recvGroup)
	g.w.line("if %s:", rankIn(senders))
	g.w.line("    sending.wait()")
	g.alloc(c.s.Output, receivers)
}

// pairGroups renders, for the ranks of peer (each rank's peer in its pair),
// the group of each rank's pair: groups[(a, b)] with a < b.
func pairGroups(peer map[int]int) string {
	var parts []string
	for _, d := range slices.Sorted(maps.Keys(peer)) {
		parts = append(parts, fmt.Sprintf("%d: %s", d, tuple([]int{min(d, peer[d]), max(d, peer[d])})))
	}
	return "groups[{" + strings.Join(parts, ", ") + "}[rank]]"
}

// rankTable renders a value per rank as a dict indexed by rank.
func rankTable(m map[int]int) string {
	var parts []string
	for _, d := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%d: %d", d, m[d]))
	}
	return "{" + strings.Join(parts, ", ") + "}[rank]"
}

// sendrecvAsync writes a SendRecv of a plan of format 2: each sender's
// isend and each receiver's irecv, never waited for here; a rank that
// sends and receives keeps both handles.
func (g *gen) sendrecvAsync(c *coll) {
	dst, src := map[int]int{}, map[int]int{}
	var senders, receivers []int
	for _, t := range c.teams {
		senders, receivers = append(senders, t[0]), append(receivers, t[1])
		dst[t[0]], src[t[1]] = t[1], t[0]
	}
	slices.Sort(senders)
	slices.Sort(receivers)
	to, from := fmt.Sprint(receivers[0]), fmt.Sprint(senders[0])
	sendGroup, recvGroup := c.group, c.group
	if len(c.teams) > 1 {
		to, from = rankTable(dst), rankTable(src)
		sendGroup, recvGroup = pairGroups(dst), pairGroups(src)
	}
	send := fmt.Sprintf("dist.isend(%s, dst=%s, group=%s)", c.x, to, sendGroup)
	recv := fmt.Sprintf("dist.irecv(%s, src=%s, group=%s)", c.y, from, recvGroup)
	if !slices.ContainsFunc(senders, func(d int) bool { return slices.Contains(receivers, d) }) {
		g.w.line("if %s:", rankIn(senders))
		g.w.line("    work[%d] = %s", c.i, send)
		g.w.line("else:")
		g.w.line("    %s = %s", c.y, g.empty(c.s.Output, c.n))
		g.w.line("    work[%d] = %s", c.i, recv)
		g.alloc(c.s.Output, receivers)
		return
	}
	g.w.line("work[%d] = []  # this rank's send and receive", c.i)
	g.w.line("if %s:", rankIn(senders))
	g.w.line("    work[%d].append(%s)", c.i, send)
	g.w.line("if %s:", rankIn(receivers))
	g.w.line("    %s = %s", c.y, g.empty(c.s.Output, c.n))
	g.w.line("    work[%d].append(%s)", c.i, recv)
	g.alloc(c.s.Output, receivers)
}
