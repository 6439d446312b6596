package cli

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"strings"
	"sync"

	"github.com/spf13/cobra"

	"github.com/nvcomm/nvcomm/internal/diag"
	"github.com/nvcomm/nvcomm/internal/lower"
	"github.com/nvcomm/nvcomm/internal/plan"
	"github.com/nvcomm/nvcomm/internal/sim"
)

func newValidateCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "validate PLAN|-",
		Short: "Check a plan's schema and meaning",
		Long: `validate checks a plan against the contract of docs/plan.md: every field's schema,
the schedules and allocations replayed on the shapes, the steps' buffers, counts and
bytes, and the summary. It then certifies the plan: the analyses (sharding,
local_shape, padded_shape, layout) and lower bounds it states must be the ones
nvcomm computes for its fusion. At most 10 problems are printed, then how many more
there were.`,
		Example: `  nvcomm lower fusion.yaml -o plan.json && nvcomm validate plan.json
  nvcomm lower fusion.yaml | nvcomm validate -`,
		Args:              exactArgs(1),
		ValidArgsFunction: fileArg(planExts...),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, src, err := readPlanOrFusion(cmd, args[0])
			if err != nil {
				return err
			}
			if d, ok := notPlan(name, args[0], src); ok {
				return report(cmd, d)
			}
			p, err := readPlan(cmd, name, src)
			if err != nil {
				return err
			}
			noun := "steps"
			if len(p.Steps) == 1 {
				noun = "step"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: valid plan (%d %s)\n", name, len(p.Steps), noun)
			return nil
		},
	}
}

// readPlan decodes the plan src and checks it (checkPlan), the collector
// paused (pauseCollector) until the check is done: every command that
// reads a plan runs it. A decoding error is reported.
func readPlan(cmd *cobra.Command, name string, src []byte) (*plan.Plan, error) {
	resume := pauseCollector(len(src))
	defer resume() // on a panic too; a second resume counts for nothing
	p, err := plan.Decode(name, src)
	if err != nil {
		resume()
		return nil, report(cmd, err)
	}
	problems, unproven := lower.Check(p)
	resume() // a simulation, below, sets a memory limit of its own
	if err := checkPlan(cmd, name, p, problems, unproven); err != nil {
		return nil, err
	}
	return p, nil
}

// checkPlan takes the problems and unproven ops lower.Check found in a
// decoded plan and, when there are no problems, proves by simulation the
// ops it lowers otherwise than nvcomm would, printing the problems found:
// every command that reads a plan runs it, so none acts on a plan nvcomm
// cannot vouch for.
func checkPlan(cmd *cobra.Command, name string, p *plan.Plan, problems []diag.Diagnostic, unproven []int) error {
	if len(problems) == 0 && len(unproven) > 0 {
		problems = prove(p, unproven)
	}
	if len(problems) == 0 {
		return nil
	}
	for _, d := range problems {
		d.File = name
		fmt.Fprintln(cmd.ErrOrStderr(), d.Error())
	}
	return reportedError{}
}

// notPlan recognizes a fusion file given where a plan is expected (a plan
// is a JSON object; anything else that is not empty is taken for YAML) and
// returns the diagnostic that says what to run instead.
func notPlan(name, arg string, src []byte) (diag.Diagnostic, bool) {
	trimmed := bytes.TrimLeft(src, " \t\r\n")
	if len(trimmed) == 0 || trimmed[0] == '{' || trimmed[0] == '[' {
		return diag.Diagnostic{}, false // plan.Decode words these errors
	}
	before := src[:len(src)-len(trimmed)]
	pos := diag.At(1+bytes.Count(before, []byte("\n")), 1+len(before)-(bytes.LastIndexByte(before, '\n')+1))
	return diag.Diagnostic{
		File:    name,
		Pos:     pos,
		Message: "not a plan: a plan is JSON, an object starting with '{', and this looks like a fusion file (YAML)",
		Hint:    fmt.Sprintf("lower it first: nvcomm lower %s | nvcomm validate - (simulate and export torch take fusion files as they are)", arg),
	}, true
}

// prove simulates a plan whose ops are lowered otherwise than nvcomm would
// lower them: nothing else can vouch that their steps compute the ops.
// It returns why the plan is not proven, or nil.
func prove(p *plan.Plan, ops []int) []diag.Diagnostic {
	what := fmt.Sprintf("op %d is lowered otherwise than nvcomm lowers it", ops[0])
	if len(ops) > 1 {
		list := strings.ReplaceAll(strings.Trim(fmt.Sprint(ops), "[]"), " ", ", ")
		what = fmt.Sprintf("ops %s are lowered otherwise than nvcomm lowers them", list)
	}
	what += ", which only a simulation proves"
	res, err := sim.Run(p, sim.Options{})
	switch {
	case errors.Is(err, sim.ErrTooLarge):
		return []diag.Diagnostic{{Message: fmt.Sprintf("%s, and the plan is %v", what, err)}}
	case err != nil:
		return []diag.Diagnostic{{Message: fmt.Sprintf("%s, and simulating the plan fails: %v", what, err)}}
	case !res.Pass:
		return []diag.Diagnostic{{Message: fmt.Sprintf("%s, and the simulation finds wrong data: %v", what, res.Mismatch)}}
	}
	return nil
}

// The collector while a plan is read and checked. What plan.Decode
// allocates on its fast path is the plan itself, and what lower.Check
// allocates (its name records, the fusion it rebuilds) lives until the
// check ends: collections while they run mark the growing heap again and
// again to free next to nothing. For `nvcomm validate` of a chain of 100k
// ops (a 105 MB plan) the collector ran seven times, the last marking
// 282 MB, and took more than a quarter of the command's CPU time. So the commands pause it (GOGC off) with a memory limit as the
// bound instead: collecting starts only if the heap reaches it, as it may
// for a plan that leaves garbage (the library decoder's path). A GOGC or
// GOMEMLIMIT the user set rules.
var collector struct {
	sync.Mutex
	paused                 int   // pauses under way, each with its resume
	limit                  int64 // the largest of their limits
	prevPercent, prevLimit int64 // the settings before the first
}

// pauseFactor and pauseSlack make the memory limit of a pause for a plan
// of n bytes: pauseFactor·n + pauseSlack. Decoding and checking a plan
// that nvcomm lower wrote takes about three times its size (chain1d's
// 105 MB plan: 311 MB allocated in all).
const (
	pauseFactor = 4
	pauseSlack  = 256 << 20
)

// pauseCollector pauses the collector while a plan of size bytes is read
// and checked, unless the user set GOGC or GOMEMLIMIT, and returns the
// function that resumes it as it was. Pauses may nest or overlap (tests
// run commands in process): the last to resume restores the settings.
func pauseCollector(size int) (resume func()) {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return func() {}
	}
	limit := int64(size)*pauseFactor + pauseSlack
	collector.Lock()
	defer collector.Unlock()
	if collector.paused == 0 {
		collector.prevLimit = debug.SetMemoryLimit(-1)
		collector.prevPercent = int64(debug.SetGCPercent(-1))
		collector.limit = 0
	}
	collector.paused++
	collector.limit = max(collector.limit, limit)
	debug.SetMemoryLimit(min(collector.limit, collector.prevLimit))
	var once sync.Once
	return func() {
		once.Do(func() {
			collector.Lock()
			defer collector.Unlock()
			if collector.paused--; collector.paused == 0 {
				debug.SetGCPercent(int(collector.prevPercent))
				debug.SetMemoryLimit(collector.prevLimit)
			}
		})
	}
}
