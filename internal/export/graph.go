package export

import (
	_ "embed"
	"fmt"
	"slices"
	"strings"

	"github.com/nvcomm/nvcomm/internal/plan"
)

// A plan of format 2 (a step graph, docs/overlap.md) is exported so that
// its overlap happens: every collective is issued with async_op=True on the
// CUDA stream its step names (a stream of its own per name, so that it
// waits only for what it needs, not for every kernel queued before it),
// its work handle kept in `work` by step id, and a step calls wait_for on
// the steps it must follow before it runs: the steps its After lists and
// the previous step of its stream on each of its devices. A local step
// waits only for collectives (local steps run in the list's order on the
// current stream, one of the orders the graph allows); a collective also
// for local steps, through an event recorded after them (on a CPU the host
// has run them already). The function ends with settle: every step still in
// flight is waited for. A plan of format 1 is written as before, byte for
// byte.

//go:embed overlap.py
var overlapSrc string

// graphReserved are the names a graph plan's function uses besides its
// buffers; reserved only there, so that a format-1 plan's names stay.
var graphReserved = []string{"work", "start", "wait_for", "on_stream", "recorded", "settle", "contextlib"}

// graphHelpers are the functions a graph plan's function calls, written
// beside it.
const graphHelpers = `_STREAMS = {}


def start(device, *names):
    """The function's start: on a GPU the streams named (created once) wait for the current
    one, where the caller made the inputs. Returns the dict of the steps' work handles."""
    if device.type == "cuda":
        for name in names:
            key = (device.index, name)
            if key not in _STREAMS:
                _STREAMS[key] = torch.cuda.Stream(device)
            _STREAMS[key].wait_stream(torch.cuda.current_stream(device))
    return {}


def on_stream(device, name):
    """Runs what follows on stream ` + "`name`" + ` of device: on a GPU a CUDA stream of its own,
    so that a collective waits only for the steps it waits for, not for every kernel
    queued before it; on a CPU nothing (gloo runs collectives on its own threads)."""
    if device.type != "cuda":
        return contextlib.nullcontext()
    return torch.cuda.stream(_STREAMS[(device.index, name)])


def recorded(device):
    """An event at this point of the current stream, for a collective that waits for the
    local step before it (None on a CPU: a local step is done when it returns)."""
    if device.type != "cuda":
        return None
    event = torch.cuda.Event()
    event.record()
    return event


def wait_for(work, *steps):
    """Makes what follows wait for steps: each one's work handles (a collective's) or
    event (a local step's). On a GPU the current stream waits, the host does not; with
    gloo the host waits. A step this rank takes no part in has none."""
    for s in steps:
        w = work.get(s)
        for h in w if isinstance(w, list) else [w]:
            if h is not None:
                h.wait()


def settle(work, device):
    """Waits for every step still in flight; on a GPU every stream of on_stream then
    also waits for the current one, so that the function's buffers may be freed and
    reused once it returns."""
    wait_for(work, *list(work))
    if device.type == "cuda":
        for (d, _), s in _STREAMS.items():
            if d == device.index:
                s.wait_stream(torch.cuda.current_stream(device))
`

// graphDeps computes, for a plan of format 2, what each step waits for in
// the exported function (g.deps) and which local steps record an event
// for a collective that waits for them (g.events).
func (g *gen) graphDeps() {
	type onStream struct {
		device int
		name   string
	}
	last := map[onStream]int{}
	g.deps = make([][]int, len(g.p.Steps))
	g.events = map[int]bool{}
	for i := range g.p.Steps {
		s := &g.p.Steps[i]
		deps := slices.Clone(s.After)
		for _, d := range s.Members() {
			key := onStream{d, s.StreamName()}
			if j, ok := last[key]; ok && j != i { // a device named twice (a SendRecv [d, d])
				deps = append(deps, j)
			}
			last[key] = i
		}
		slices.Sort(deps)
		deps = slices.Compact(deps)
		async := g.async(s)
		var keep []int
		for _, j := range deps {
			switch {
			case g.async(&g.p.Steps[j]):
				keep = append(keep, j)
			case async:
				keep = append(keep, j)
				g.events[j] = true
			}
		}
		g.deps[i] = keep
	}
}

// async reports whether the exported function issues step s without
// waiting for it: every collective of a plan of format 2.
func (g *gen) async(s *plan.Step) bool {
	return g.graph && s.Kind == plan.KindCollective
}

// waitLine renders the call that waits for the steps a block's steps wait
// for, "" when none.
func (g *gen) waitLine(steps []int) string {
	var deps []int
	for _, i := range steps {
		for _, j := range g.deps[i] {
			if !slices.Contains(steps, j) {
				deps = append(deps, j)
			}
		}
	}
	if len(deps) == 0 {
		return ""
	}
	slices.Sort(deps)
	return fmt.Sprintf("wait_for(work, %s)", ints(slices.Compact(deps)))
}

// localWaits writes, at the head of a local block of a graph plan, its wait
// for the collectives it follows, on the ranks that run it.
func (g *gen) localWaits(b planned) {
	line := g.waitLine(b.steps)
	if line == "" {
		return
	}
	if ds := g.blockDevices(b); !slices.Equal(ds, g.devices) {
		line = "if " + rankIn(ds) + ": " + line
	}
	g.w.line("%s", line)
}

// localEvent writes, after a local block a collective waits for, the event
// the collective's stream waits on.
func (g *gen) localEvent(b planned) {
	var keys []string
	for _, i := range b.steps {
		if g.events[i] {
			keys = append(keys, fmt.Sprintf("work[%d]", i))
		}
	}
	if len(keys) == 0 {
		return
	}
	line := strings.Join(keys, " = ") + " = recorded(device)"
	if ds := g.blockDevices(b); !slices.Equal(ds, g.devices) {
		line = "if " + rankIn(ds) + ": " + line
	}
	g.w.line("%s", line)
}

// blockDevices are the devices a block's steps run on, sorted.
func (g *gen) blockDevices(b planned) []int {
	var ds []int
	for _, i := range b.steps {
		ds = append(ds, g.p.Steps[i].Members()...)
	}
	return slices.Compact(slices.Sorted(slices.Values(ds)))
}

// issue renders a collective's torch.distributed call: as it is in a plan
// of format 1; in one of format 2 with async_op=True, its handle kept in
// work.
func (c *coll) issue(call string) string {
	if !c.async {
		return call
	}
	return fmt.Sprintf("work[%d] = %s, async_op=True)", c.i, strings.TrimSuffix(call, ")"))
}

// waitNow writes, in a plan of format 2, the wait for a collective whose
// output the lines after its call rewrite (chunks put back in team
// order): it waits at once, and its later waiters wait for the event after
// those lines (c.settled).
func (g *gen) waitNow(c *coll) {
	if !c.async || c.settled {
		return
	}
	g.w.line("wait_for(work, %d)  # the lines below read what it received: waited for here", c.i)
	c.settled = true
}

// hoist moves each collective's block up, so that the host issues it
// before local steps that need not precede it: on a GPU the streams
// overlap whatever the host's order, but gloo runs a collective only once
// it is issued, beside the local steps the host runs meanwhile. A
// collective goes just after the last local step it waits for, and no
// higher than the first block that waits for each collective it waits
// for (with gloo the host blocks there anyway: waiting any earlier would
// stop the local steps in between from running beside that collective),
// nor above its place in the list where no block waits for one yet. So
// Allgather k + 1 of a decomposed Allgather + matmul is issued just
// before Matmul k, which waits for Allgather k, and runs beside it. The
// order stays one the graph allows, the same on every rank, and every
// wait is on a block before it.
func (g *gen) hoist(blocks []planned) []planned {
	var out []planned
	at := map[int]int{}     // step -> its block's position in out
	waiter := map[int]int{} // collective -> the step of the first block placed that waits for it
	for _, b := range blocks {
		pos := len(out)
		if s := &g.p.Steps[b.steps[0]]; g.async(s) {
			pos = 0
			for _, j := range g.deps[b.steps[0]] {
				switch w, ok := waiter[j]; {
				case !g.async(&g.p.Steps[j]):
					pos = max(pos, at[j]+1)
				case ok:
					pos = max(pos, at[w])
				default:
					pos = len(out)
				}
			}
		}
		out = slices.Insert(out, pos, b)
		for k := range out[pos:] {
			for _, i := range out[pos+k].steps {
				at[i] = pos + k
			}
		}
		for _, i := range b.steps {
			for _, j := range g.deps[i] {
				if w, ok := waiter[j]; !ok || at[w] > at[i] {
					waiter[j] = i
				}
			}
		}
	}
	return out
}
