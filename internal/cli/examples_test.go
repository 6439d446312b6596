package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// exampleCommand is a command that shows a plan, run on an example's
// fusion file, and the golden file its output must equal.
type exampleCommand struct {
	name string
	// args before the fusion file; FILE stands for a file the command
	// writes, whose bytes are compared instead of standard output.
	args   []string
	golden string // with NAME for the example's name
}

// exampleCommands are the commands of issue 15. Their goldens belong to
// the packages that render them (internal/explain, internal/report),
// which render the examples' golden optimal plans: the commands must
// print those bytes from the fusion files.
var exampleCommands = []exampleCommand{
	{"explain", []string{"explain"}, "../explain/testdata/NAME.txt"},
	{"trace", []string{"trace"}, "../explain/testdata/NAME.trace"},
	{"dot", []string{"lower", "--format", "dot"}, "../explain/testdata/NAME.dot"},
	{"report", []string{"report", "-o", "FILE"}, "../report/testdata/NAME.html"},
	{"simulate_trace", []string{"simulate", "--trace", "FILE"}, "../explain/testdata/NAME.trace"},
}

// TestExampleCommands runs explain, trace, lower --format dot, report and
// simulate --trace on every example of testdata/examples that has a
// golden optimal plan and compares their output with the goldens. The
// examples that lower only with --auto (placements: auto; their goldens are
// the errors of lowering without it) have none: docs/auto.md's commands
// run on them (TestDocsAutoCommands).
func TestExampleCommands(t *testing.T) {
	if os.Getenv("NVCOMM_UPDATE") != "" {
		t.Skip("the goldens are being rewritten by the tests of internal/explain and internal/report")
	}
	fusions, err := filepath.Glob("../../testdata/examples/*.yaml")
	if err != nil || len(fusions) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	for _, fusion := range fusions {
		name := strings.TrimSuffix(filepath.Base(fusion), ".yaml")
		if _, err := os.Stat(strings.TrimSuffix(fusion, ".yaml") + ".optimal.err"); err == nil {
			continue // the optimal policy rejects it: no plan to show
		}
		for _, c := range exampleCommands {
			if _, large := tooLargeToSimulate[name]; large && c.name == "simulate_trace" {
				continue // TestExamplesSimulate: refused, its twin simulated
			}
			t.Run(name+"/"+c.name, func(t *testing.T) {
				want, err := os.ReadFile(strings.ReplaceAll(c.golden, "NAME", name))
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(string(want), runExample(t, c, fusion)); diff != "" {
					t.Errorf("nvcomm %s %s (-want +got):\n%s", strings.Join(c.args, " "), fusion, diff)
				}
			})
		}
	}
}

// runExample runs c on fusion and returns what it wrote: standard output,
// or the file that FILE names.
func runExample(t *testing.T, c exampleCommand, fusion string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "out")
	args := make([]string, 0, len(c.args)+1)
	for _, a := range c.args {
		args = append(args, strings.ReplaceAll(a, "FILE", file))
	}
	code, stdout, stderr := run(t, "", append(args, fusion)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(strings.Join(c.args, " "), "FILE") {
		return stdout
	}
	out, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}
