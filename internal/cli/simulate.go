package cli

import (
	"errors"
	"fmt"
	"math"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"

	"github.com/nvcomm/nvcomm/internal/lower"
	"github.com/nvcomm/nvcomm/internal/plan"
	"github.com/nvcomm/nvcomm/internal/sim"
	"github.com/nvcomm/nvcomm/internal/syntax"
)

type simulateOptions struct {
	policy    *enumFlag
	objective *enumFlag
	format    *enumFlag
	seed      uint64
	maxBytes  sizeFlag
	topology  string
	trace     string
	orders    int
}

// DefaultSimulateBytes is simulate's --max-bytes unless given: enough for
// the plans of 100k ops that lower writes (the chain's and the mixed
// families' need about 2 GiB), and never more than the machine gives the
// process, which caps every value of the flag.
const DefaultSimulateBytes = 4 << 30

func newSimulateCmd() *cobra.Command {
	o := &simulateOptions{
		policy: newEnum(lower.Policies...).describe("the best plan under --objective: by default the fastest the cost model predicts",
			"nvFuser's lowering rules exactly"),
		format:    newEnum("text", "json").describe("a report for reading", "the report as JSON"),
		maxBytes:  sizeFlag{DefaultSimulateBytes},
		objective: newObjective(),
	}
	cmd := &cobra.Command{
		Use:   "simulate FUSION|PLAN|-",
		Short: "Run a plan on virtual devices and check it against the unsharded program",
		Long: `simulate executes a plan (or lowers a fusion file, then executes its plan) on
virtual devices with deterministic integer data, checks every op's output on every
device against the unsharded reference, and reports PASS or the first mismatch,
with the bytes each step moves. Input starting with '{' is a plan; anything else a
fusion file.`,
		Example: `  nvcomm simulate testdata/examples/megatron_mlp.yaml
  nvcomm simulate plan.json --seed 7
  nvcomm simulate fusion.yaml --policy nvfuser --format json
  nvcomm simulate fusion.yaml --topology default     # also predict each step's time on H200s
  nvcomm simulate fusion.yaml --topology topology.yaml --max-bytes 4GiB
  nvcomm simulate fusion.yaml --trace plan.trace.json  # also the predicted timeline, for ui.perfetto.dev`,
		Args:              exactArgs(1),
		ValidArgsFunction: fileArg(anyInputExts...),
		RunE:              func(cmd *cobra.Command, args []string) error { return o.run(cmd, args[0]) },
	}
	enumVar(cmd, o.policy, "policy", "lowering policy for a fusion file: optimal (the best plan under --objective) or nvfuser (nvFuser's rules)")
	objectiveVar(cmd, o.objective)
	enumVar(cmd, o.format, "format", "report format: text or json")
	cmd.Flags().Uint64Var(&o.seed, "seed", 0, "the seed `N` of the input data")
	cmd.Flags().Var(&o.maxBytes, "max-bytes", "refuse simulations that need more memory than `SIZE` (bytes, or with a unit: 512MiB, 4GB); never more than the machine has")
	choiceOrFileVar(cmd, &o.topology, "topology", "",
		"also predict every step's time on a topology: default (the built-in H200 one) or a FILE that calibrate --fit wrote",
		[]string{"default"}, topologyExts...)
	cmd.Flags().IntVar(&o.orders, "orders", 4, "for a plan whose steps form a graph (format 2): run the steps in `N` orders it allows, the list's and N-1 random ones, and pass only if every one does")
	cmd.Flags().StringVar(&o.trace, "trace", "", "also write the plan's predicted timeline to `FILE` as Chrome trace events (nvcomm trace's), priced on --topology (the built-in one by default)")
	fileFlag(cmd, "trace", "json")
	return cmd
}

func (o *simulateOptions) run(cmd *cobra.Command, arg string) error {
	if o.trace == "-" {
		return usageError{errors.New("--trace: needs a file name (the report goes to standard output)")}
	}
	lo, err := lowering(cmd, o.policy, o.objective, o.topology)
	if err != nil {
		return err
	}
	name, src, err := readPlanOrFusion(cmd, arg)
	if err != nil {
		return err
	}
	name, p, err := loadNamedSource(cmd, name, src, lo)
	if err != nil {
		return err
	}
	restore, err := guardMemory(p, o.maxBytes.bytes)
	if err != nil {
		return reportIn(cmd, name, simError(err))
	}
	if o.orders < 1 {
		restore()
		return usageError{errors.New("--orders: must be at least 1")}
	}
	res, failed, err := o.simulateOrders(p)
	restore()
	if err != nil {
		return reportIn(cmd, name, simError(err))
	}
	pred, err := o.predict(cmd, name, p)
	if err != nil {
		return err
	}
	if err := writeSimulation(cmd, o.format.value, res, pred); err != nil {
		return err
	}
	if p.Graph() && o.format.value == "text" {
		fmt.Fprintf(cmd.OutOrStdout(), "step graph: %s\n", ordersLine(o.orders, failed))
	}
	if err := o.writeTrace(cmd, p); err != nil {
		return err
	}
	if !res.Pass {
		return reportedError{}
	}
	if err := o.checkSumsLate(cmd, name, src, lo, p); err != nil {
		return err
	}
	return o.checkMicrobatches(cmd, name, src, lo, p)
}

// checkSumsLate compares, when p was lowered here from a fusion whose
// sums it computes late (docs/fusion.md, "placements"), p's program with
// the fusion's as written, every reduction where the file puts it
// (sim.CheckSameProgram): the simulation proves p's steps against p's
// program, and this proves that program the file's.
func (o *simulateOptions) checkSumsLate(cmd *cobra.Command, name string, src []byte, lo lower.Options, p *plan.Plan) error {
	if isPlan(src) || !p.SumsLate() {
		return nil
	}
	return o.compareWith(cmd, name, src, lo, otherProgram{
		opts:    syntax.Options{SumsAsWritten: true},
		check:   func(written *plan.Plan) (*sim.ProgramCheck, error) { return sim.CheckSameProgram(written, p, o.seed) },
		differs: "the program with its sums computed late differs from the fusion as written",
		same: func(c *sim.ProgramCheck) string {
			return fmt.Sprintf("sums computed late: the program computes the fusion's values as written (%d tensors compared)", c.Compared)
		},
	})
}

// checkMicrobatches compares a pipeline's micro-batches with the whole
// batch's program (sim.CheckMicrobatches), when p is a pipeline's plan
// lowered from a fusion here: a plan holds only the micro-batches'
// program.
func (o *simulateOptions) checkMicrobatches(cmd *cobra.Command, name string, src []byte, lo lower.Options, p *plan.Plan) error {
	if p.Pipeline == nil || isPlan(src) {
		return nil
	}
	return o.compareWith(cmd, name, src, lo, otherProgram{
		opts:    syntax.Options{Whole: true},
		check:   func(whole *plan.Plan) (*sim.ProgramCheck, error) { return sim.CheckMicrobatches(whole, p, o.seed) },
		differs: "the micro-batches differ from the whole batch's program",
		same: func(c *sim.ProgramCheck) string {
			return fmt.Sprintf("micro-batches: the %d micro-batches, concatenated along the batch, compute the whole batch's program (%d tensors compared)",
				p.Pipeline.Microbatches, c.Compared)
		},
	})
}

// otherProgram is a program simulate compares a plan's with: the fusion
// read with opts and lowered again, compared by check; differs says what
// a difference means, same what the text report says when there is none.
type otherProgram struct {
	opts    syntax.Options
	check   func(other *plan.Plan) (*sim.ProgramCheck, error)
	differs string
	same    func(*sim.ProgramCheck) string
}

// compareWith lowers the fusion src (name) as other reads it and compares
// the programs: a difference fails, naming the tensors that differ.
func (o *simulateOptions) compareWith(cmd *cobra.Command, name string, src []byte, lo lower.Options, other otherProgram) error {
	f, err := syntax.ParseWith(name, src, other.opts)
	if err != nil {
		return report(cmd, err)
	}
	q, err := lower.Lower(f, lo)
	if err != nil {
		return report(cmd, err)
	}
	c, err := other.check(q)
	if err != nil {
		return reportIn(cmd, name, simError(err))
	}
	if len(c.Differ) > 0 {
		fmt.Fprintf(cmd.ErrOrStderr(), "%s: error: %s in %s\n", name, other.differs, strings.Join(c.Differ, ", "))
		return reportedError{}
	}
	if o.format.value == "text" {
		fmt.Fprintln(cmd.OutOrStdout(), other.same(c))
	}
	return nil
}

// simulateOrders runs p, a plan of format 2 in o.orders orders that its
// step graph allows (the list's, then random ones), and returns the first
// failing order's result and number, or order 0's and -1 when all pass.
func (o *simulateOptions) simulateOrders(p *plan.Plan) (*sim.Result, int, error) {
	n := 1
	if p.Graph() {
		n = o.orders
	}
	var first *sim.Result
	for k := range n {
		res, err := sim.Run(p, sim.Options{Seed: o.seed, MaxBytes: o.maxBytes.bytes, Order: orderSeed(o.seed, k)})
		if err != nil {
			if k > 0 {
				err = fmt.Errorf("in random order %d of the step graph (--orders): %w", k, err)
			}
			return nil, k, err
		}
		if !res.Pass {
			return res, k, nil
		}
		if first == nil {
			first = res
		}
	}
	return first, -1, nil
}

// orderSeed is the seed of order k of a step graph under --seed seed: 0,
// the list's order, for k = 0; k + seed·2³² otherwise, so that --seed 0
// draws the orders it always drew and another seed other orders, as it
// draws other data.
func orderSeed(seed uint64, k int) uint64 {
	if k == 0 {
		return 0
	}
	return uint64(k) + seed<<32
}

// ordersLine says in which orders of a step graph the steps ran.
func ordersLine(n, failed int) string {
	switch {
	case failed == 0:
		return "the steps in the list's order fail (above); no other order was tried"
	case failed > 0:
		return fmt.Sprintf("random order %d of the %d tried (--orders) FAILS: the plan's result depends on the order its steps run in, a race that validate should report", failed, n)
	case n == 1:
		return "the steps ran in the list's order only (--orders 1)"
	}
	return fmt.Sprintf("the steps ran in %d orders the graph allows, the list's and %d random ones (--orders): the same result in each", n, n-1)
}

// writeTrace writes the plan's timeline to the --trace file, if any, as
// the trace command does, priced on --topology or the built-in topology.
func (o *simulateOptions) writeTrace(cmd *cobra.Command, p *plan.Plan) error {
	if o.trace == "" {
		return nil
	}
	topology := o.topology
	if topology == "" {
		topology = "default"
	}
	t, err := loadTopology(cmd, topology)
	if err != nil {
		return err
	}
	data, err := predictedTrace(cmd, p, t, nil)
	if err != nil {
		return err
	}
	return writeOutput(cmd, o.trace, data)
}

// simError words an error of the simulator: "too large to simulate: …"
// says it already.
func simError(err error) error {
	if errors.Is(err, sim.ErrTooLarge) {
		return err
	}
	return fmt.Errorf("cannot simulate: %w", err)
}

// guardMemory refuses a simulation that this machine cannot hold, whatever
// --max-bytes says (Go exits with 2 when an allocation fails), or that
// needs more than maxBytes, before sim.Run builds anything. Otherwise it
// asks the garbage collector to keep the process within the estimate until
// restore is called: left alone, Go lets the heap grow to twice what is
// live, and the peak would be twice the estimate.
func guardMemory(p *plan.Plan, maxBytes int64) (restore func(), err error) {
	need, err := sim.Estimate(p)
	if err != nil {
		return nil, err
	}
	total := satAdd(need, sim.RuntimeBytes)
	if limit := memoryLimit(); limit > 0 && total > limit {
		return nil, fmt.Errorf("%w: it needs %s, more than the %s of memory this machine gives the process (whatever --max-bytes says); use smaller extents",
			sim.ErrTooLarge, aboutSize(total), plan.Size(limit))
	}
	if need > maxBytes {
		return nil, fmt.Errorf("%w: it needs %s, more than the limit of %s; raise --max-bytes or use smaller extents",
			sim.ErrTooLarge, aboutSize(need), plan.Size(maxBytes))
	}
	prev := debug.SetMemoryLimit(-1)
	if total >= prev {
		return func() {}, nil
	}
	debug.SetMemoryLimit(total)
	return func() { debug.SetMemoryLimit(prev) }, nil
}

// aboutSize words an estimate of memory for readers: "about 24 GiB", or
// "more than 8.0 EiB" when it saturated at the largest int64.
func aboutSize(n int64) string {
	if n == math.MaxInt64 {
		return "more than " + plan.Size(n)
	}
	return "about " + plan.Size(n)
}

// satAdd adds non-negative numbers, saturating instead of overflowing.
func satAdd(a, b int64) int64 {
	if s := a + b; s >= a {
		return s
	}
	return math.MaxInt64
}
