package difftest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/nvcomm/nvcomm/internal/cost"
	"github.com/nvcomm/nvcomm/internal/ir"
	"github.com/nvcomm/nvcomm/internal/lower"
	"github.com/nvcomm/nvcomm/internal/plan"
	"github.com/nvcomm/nvcomm/internal/syntax"
)

// bfCase is one op of the brute-force bound test: a redistribution (the
// type of redistribute_test.go, whose fusionOf writes it) and how to
// search it.
type bfCase struct {
	r redistribution
	// long marks a case that make race's -short run leaves out.
	long bool
	// below searches only the plans that receive less than the bound
	// (none, when it is one), where the plans that meet it are too many to
	// search in the time the test has.
	below bool
	// locals is the most local steps a plan may take besides the one that
	// writes the output.
	locals int
}

// bf is the case of shape, from the producer's placements (or schedule,
// "|" between steps) src on mesh to the consumer's dst on the mesh to (""
// for the same).
func bf(mesh, to, shape, src, dst string) bfCase {
	name := bfShardName(src) + "->" + bfShardName(dst) + " " + shape + " on " + mesh
	if to != "" {
		name += "->" + to
	}
	r := redistribution{name: name, mesh: mesh, to: to, shape: shape, src: src, dst: dst}
	return bfCase{r: r, locals: bfMaxLocals}
}

// Shards that placements cannot write: strided (an inner split) on 2 and
// 4 devices, nested (the inner part of an outer split, split again) on 2.
const (
	bfStrided2 = "split: {axis: 0, factor: 2}|parallelize: {axis: 1, type: DIDx}"
	bfStrided4 = "split: {axis: 0, factor: 4}|parallelize: {axis: 1, type: DIDx}"
	bfNested2  = "outer_split: {axis: 0, factor: 2}|split: {axis: 1, factor: 2}|parallelize: {axis: 1, type: DIDx}"
)

// bfShardName is how a case's name writes a sharding.
func bfShardName(s string) string {
	switch s {
	case bfStrided2, bfStrided4:
		return "[strided]"
	case bfNested2:
		return "[nested]"
	}
	return s
}

// slow marks a case that -short leaves out.
func (c bfCase) slow() bfCase { c.long = true; return c }

// withLocals limits a case's plans to n local steps.
func (c bfCase) withLocals(n int) bfCase { c.locals = n; return c }

// strictly searches a case below its bound only.
func (c bfCase) strictly() bfCase { c.below = true; return c }

// bfCases are tiny meshes and tensors: placement changes of a few elements
// on 1-D meshes of 2, 3 and 4 devices and a 2×2 mesh, and moves between
// meshes (2 → 1, 1 → 2, 2 → 3), with even and uneven extents (torch.chunk:
// 3 on 2 devices is 2 + 1, 5 on 4 is 2 + 2 + 1 + 0, 2 on 4 is 1 + 1 + 0 +
// 0; where the last devices hold nothing, or both tensors are uneven, the
// bound of real elements is below the padded one), partial sums (a set
// from a Partial input is a sum) and strided and nested shards.
var bfCases = []bfCase{
	bf("[0, 1]", "", "[4]", "[Shard(0)]", "[Replicate()]"),
	bf("[0, 1]", "", "[4]", "[Replicate()]", "[Shard(0)]"),
	bf("[0, 1]", "", "[2, 2]", "[Shard(0)]", "[Shard(1)]"),
	bf("[0, 1]", "", "[2]", "[Partial(sum)]", "[Replicate()]"),
	bf("[0, 1]", "", "[4]", "[Partial(sum)]", "[Shard(0)]"),
	bf("[0, 1]", "", "[3]", "[Shard(0)]", "[Replicate()]"),
	bf("[0, 1]", "", "[3]", "[Replicate()]", "[Shard(0)]"),
	bf("[0, 1]", "", "[3]", "[Partial(sum)]", "[Shard(0)]"),
	bf("[0, 1]", "", "[3, 3]", "[Shard(0)]", "[Shard(1)]"),
	bf("[0, 1]", "", "[4]", bfStrided2, "[Shard(0)]"),
	bf("[0, 1]", "", "[8]", bfNested2, "[Replicate()]"),
	bf("[0, 1]", "", "[8]", bfNested2, "[Shard(0)]"),
	bf("[0, 1, 2]", "", "[3]", "[Shard(0)]", "[Replicate()]"),
	bf("[0, 1, 2]", "", "[4]", "[Shard(0)]", "[Replicate()]").slow(),
	bf("[0, 1, 2]", "", "[3, 3]", "[Shard(0)]", "[Shard(1)]"),
	bf("[0, 1, 2]", "", "[3]", "[Partial(sum)]", "[Replicate()]").slow(),
	bf("[0, 1, 2]", "", "[3]", "[Partial(sum)]", "[Shard(0)]").slow(),
	bf("[0, 1, 2, 3]", "", "[4]", "[Shard(0)]", "[Replicate()]").slow(),
	bf("[0, 1, 2, 3]", "", "[5]", "[Shard(0)]", "[Replicate()]").strictly().slow(),
	bf("[0, 1, 2, 3]", "", "[2]", "[Shard(0)]", "[Replicate()]").strictly(),
	bf("[0, 1, 2, 3]", "", "[4, 4]", "[Shard(0)]", "[Shard(1)]").slow(),
	bf("[0, 1, 2, 3]", "", "[1]", "[Partial(sum)]", "[Replicate()]"),
	bf("[0, 1, 2, 3]", "", "[4]", "[Partial(sum)]", "[Shard(0)]").withLocals(1).strictly().slow(),
	bf("[0, 1, 2, 3]", "", "[8]", bfStrided4, "[Shard(0)]").slow(),
	bf("[[0, 1], [2, 3]]", "", "[2, 2]", "[Shard(0), Shard(1)]", "[Replicate(), Replicate()]").slow(),
	bf("[[0, 1], [2, 3]]", "", "[2, 2]", "[Shard(0), Shard(1)]", "[Shard(1), Shard(0)]"),
	bf("[[0, 1], [2, 3]]", "", "[4, 4]", "[Shard(0), Shard(0)]", "[Shard(1), Shard(1)]").slow(),
	bf("[[0, 1], [2, 3]]", "", "[4]", "[Replicate(), Shard(0)]", "[Shard(0), Replicate()]").withLocals(1).slow(),
	bf("[[0, 1], [2, 3]]", "", "[2]", "[Partial(sum), Replicate()]", "[Replicate(), Replicate()]").slow(),
	bf("[0, 1]", "[2]", "[4]", "[Shard(0)]", "[Replicate()]"),
	bf("[0, 1]", "[2]", "[4]", "[Partial(sum)]", "[Replicate()]").slow(),
	bf("[0, 1]", "[1]", "[4]", "[Partial(sum)]", "[Replicate()]"),
	bf("[0]", "[1, 2]", "[4]", "[Replicate()]", "[Shard(0)]"),
	bf("[0]", "[0, 1]", "[2]", "[Replicate()]", "[Replicate()]"),
	bf("[0, 1]", "[2, 3, 4]", "[6]", "[Replicate()]", "[Shard(0)]").slow(),
	bf("[0, 1]", "[2, 3, 4]", "[6]", "[Shard(0)]", "[Shard(0)]"),
	bf("[0, 1]", "[1, 2, 3]", "[3]", "[Replicate()]", "[Replicate()]").slow(),
}

// TestBoundBruteForce checks nvcomm's lower bounds against every plan of
// at most bfMaxColls collectives (and bfMaxLocals local steps) that the
// step vocabulary of docs/plan.md can express on tiny meshes: every
// collective type but AllToAllV, over every set of teams, in every member
// order, from every root, on every buffer (the reductions only where the
// op reduces; a Reduce in one order for each root and chain head, which
// decide what it writes and books); AllToAllVs of a family of send counts
// (bound_bruteforce_exchange_test.go): every permutation of the devices
// that hold a buffer, and, over every set of equal teams (ascending) that
// hold it, every block pattern: the t members of a team cut into groups of
// j, 1 < j < t, as senders and again as receivers, each group of senders
// matched with one of receivers, each sender cutting its buffer into j
// equal chunks, one to each member of its matched group; each chunk sent
// to another device carrying a value that device lacks; and the send
// counts of nvcomm's own plans; Permute and LocalReduce over every view of
// a buffer in up to three dims, Slice of a contiguous or a strided chunk
// over every set of teams; nvcomm's Pad and Unpad where shards are uneven;
// then a Copy into the output. Matmul and Pointwise, the steps of layer
// ops, are left out. A symbolic model says what each buffer holds (sets
// of input elements), so that prefixes that reach the same state are
// searched once. Every plan the model says computes the output is
// validated (plan.Validate) and simulated (sim.Run) and must PASS; a
// sample of the others, finished from the buffers closest to the output,
// must not. Every plan that passes must receive at least the bound, and
// take at least the time bound on the built-in topology (cost.Predict, an
// AllToAllV priced at the bytes its busiest member receives); nvcomm's own
// plans too.
//
// The search keeps only plans in which no device receives more than the
// bound (less, for the cases searched strictly): any other plan receives
// more than the bound. Where nvcomm's bytes-objective plan meets the bound
// in steps the search covers, the search must find a plan that does.
func TestBoundBruteForce(t *testing.T) {
	for _, c := range bfCases {
		t.Run(c.r.name, func(t *testing.T) {
			if testing.Short() && c.long {
				t.Skip("left out by -short")
			}
			t.Parallel()
			bfSearchCase(t, c)
		})
	}
}

// bfSearchCase searches one case and checks its bounds.
func bfSearchCase(t *testing.T, c bfCase) {
	few, fast := bfPlans(t, c)
	w := bfCaseWorld(t, c, bfWorldPlan(few, fast))
	w.own = []*plan.Plan{few, fast}
	for _, p := range []*plan.Plan{few, fast} {
		w.checkOwn(t, p)
	}
	n := w.search(t)
	w.checkFound(t, n)
	if !c.below && n.fewest < 0 && w.coverable(few) {
		t.Errorf("no plan found that meets the bound, though nvcomm's does in steps the search covers:\n%s", bfDescribe(few.Steps))
	}
	if n.fewest >= 0 && n.fewest < few.Summary.BytesReceivedMax {
		t.Logf("a plan receives %d B, nvcomm's bytes-objective plan %d B:\n%s", n.fewest, few.Summary.BytesReceivedMax, bfDescribe(n.fewestSteps))
	}
	t.Logf("%s: %d states searched, %d plans within %d B compute the output (each valid, simulated PASS), %d others simulated FAIL; fewest bytes %s, least time %s; %d of the plans with an AllToAllV, fewest bytes %s, least time %s; bound %d B, %.2f µs; nvcomm's plan %d B (bytes objective), %d B (time)",
		c.r.name, n.states, n.plans, w.cap, n.wrong, bfFewest(n.fewest), bfMicros(n.fastest), n.exchanges, bfFewest(n.exchangeFewest), bfMicros(n.exchangeFastest),
		few.Summary.BytesLowerBound, w.seconds*1e6, few.Summary.BytesReceivedMax, fast.Summary.BytesReceivedMax)
}

// bfPlans lowers a case under the optimal policy, for bytes and for time.
func bfPlans(t *testing.T, c bfCase) (few, fast *plan.Plan) {
	f, err := syntax.Parse("case.yaml", []byte(c.r.fusionOf()))
	if err != nil {
		t.Fatal(err)
	}
	return bfLower(t, f, lower.Options{Objective: lower.ObjectiveBytes}), bfLower(t, f, lower.Options{})
}

// bfCaseWorld is the world of case c, whose bound p states.
func bfCaseWorld(t *testing.T, c bfCase, p *plan.Plan) *bfWorld {
	w, err := newBfWorld(p)
	if err != nil {
		t.Fatal(err)
	}
	w.maxColls, w.maxLocals, w.topo = bfMaxColls, c.locals, cost.Default()
	bound := p.Summary.BytesLowerBound
	w.cap, w.seconds = bound, w.topo.LowerBound(bound)
	if c.below && bound > 0 {
		w.cap = bound - 1
	}
	return w
}

// checkFound reports what the search found that contradicts the bounds:
// a plan that receives less than the bound, or is predicted faster than
// the time bound; and bytes the search booked otherwise than plan.Traffic.
func (w *bfWorld) checkFound(t *testing.T, n bfCount) {
	for _, e := range w.trafficErrs {
		t.Errorf("bytes booked by the search: %s", e)
	}
	if bound := w.p.Summary.BytesLowerBound; n.fewest >= 0 && n.fewest < bound {
		t.Errorf("the bound %d B is not a bound: this plan receives %d B:\n%s", bound, n.fewest, bfDescribe(n.fewestSteps))
	}
	if n.fastest >= 0 && n.fastest < w.seconds {
		t.Errorf("the time bound %g s is not a bound: this plan is predicted to take %g s:\n%s", w.seconds, n.fastest, bfDescribe(n.fastestSteps))
	}
}

// TestBoundBruteForceCanFail checks that the search finds a plan that
// beats a bound that is not one: with the bound of a case raised by one
// element, it must find the plans that receive the true bound.
func TestBoundBruteForceCanFail(t *testing.T) {
	c := bf("[0, 1]", "", "[4]", "[Shard(0)]", "[Replicate()]")
	few, _ := bfPlans(t, c)
	raised := *few
	raised.Summary.BytesLowerBound += int64(plan.DTypeSize(few.Tensors[0].DType))
	w := bfCaseWorld(t, c, &raised)
	n := w.search(t)
	if n.fewest != few.Summary.BytesLowerBound {
		t.Errorf("with the bound raised to %d B, the search found %s, want a plan of %d B", raised.Summary.BytesLowerBound, bfFewest(n.fewest), few.Summary.BytesLowerBound)
	}
}

// bfLower lowers f.
func bfLower(t *testing.T, f *ir.Fusion, opts lower.Options) *plan.Plan {
	t.Helper()
	p, err := lower.Lower(f, opts)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// checkOwn checks that one of nvcomm's plans for the case has the case's
// bound and meets it: at least the bound in bytes and in predicted time.
func (w *bfWorld) checkOwn(t *testing.T, p *plan.Plan) {
	bound := w.p.Summary.BytesLowerBound
	if p.Summary.BytesLowerBound != bound || p.Summary.BytesReceivedMax < bound {
		t.Errorf("objective %q: bound %d B, plan %d B; the bytes objective's bound is %d B", p.Objective, p.Summary.BytesLowerBound, p.Summary.BytesReceivedMax, bound)
	}
	if s := w.predict(t, p); s < w.seconds {
		t.Errorf("objective %q: the plan is predicted to take %g s, less than the time bound %g s", p.Objective, s, w.seconds)
	}
}

// coverable reports whether p meets its bound with steps the search
// covers: at most maxColls collectives and maxLocals local steps besides
// the one that writes the output.
func (w *bfWorld) coverable(p *plan.Plan) bool {
	s := p.Summary
	return s.BytesReceivedMax == s.BytesLowerBound && s.Collectives <= w.maxColls && s.LocalSteps <= w.maxLocals+1
}

// bfFewest writes the fewest bytes a plan found receives.
func bfFewest(b int64) string {
	if b < 0 {
		return "none found"
	}
	return fmt.Sprintf("%d B", b)
}

// bfMicros writes a time found in microseconds.
func bfMicros(s float64) string {
	if s < 0 {
		return "none found"
	}
	return fmt.Sprintf("%.2f µs", s*1e6)
}

// bfDescribe lists steps, one a line, for a message.
func bfDescribe(steps []plan.Step) string {
	var b strings.Builder
	for _, s := range steps {
		who := fmt.Sprint(s.Teams)
		if len(s.Devices) > 0 {
			who = fmt.Sprint(s.Devices)
		}
		if s.Root != nil {
			who += fmt.Sprintf(" root %d", *s.Root)
		}
		recv := ""
		if s.Bytes != nil {
			recv = fmt.Sprintf(", busiest device receives %d B", s.Bytes.ReceivedPerDevice)
		}
		if s.SendCounts != nil {
			who += fmt.Sprintf(" send_counts %v", s.SendCounts)
		}
		fmt.Fprintf(&b, "  %s %s: %s -> %s, count %d/%d%s\n", s.Type, who, s.Input, s.Output, s.Count.Input, s.Count.Output, recv)
	}
	return b.String()
}
