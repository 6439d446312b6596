package ops_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/diag"
	"github.com/nvcomm/nvcomm/internal/lower"
	"github.com/nvcomm/nvcomm/internal/ops"
	"github.com/nvcomm/nvcomm/internal/plan"
	"github.com/nvcomm/nvcomm/internal/sim"
	"github.com/nvcomm/nvcomm/internal/syntax"
)

// registerLeaky adds two attributes of kinds no built-in op takes yet, a
// number and a flag, and an elementwise op that takes them: the registry
// alone must carry them through every phase.
func registerLeaky() {
	for _, s := range []ops.AttrSpec{
		{Key: "alpha", Kind: ops.FloatAttr, Doc: "the slope below 0"},
		{Key: "flag", Kind: ops.BoolAttr, Doc: "a flag"},
	} {
		if err := ops.RegisterAttr(s); err != nil {
			panic(err)
		}
	}
	ops.Default.MustRegister(ops.Op{
		Name: "leaky", Family: ops.Unary, Operands: []string{"x"}, Attrs: []ops.Attr{"alpha", "flag"},
		Rule:   ops.Lookup("relu").Rule,
		Kernel: &ops.Kernel{Value: func(a, _ float64) float64 { return max(a, 0) }},
		Torch:  &ops.Torch{Func: "torch.relu", Magnitude: "_same", Rounding: ops.Exact},
		Doc:    "relu, with attributes",
	})
}

// leakyFusion applies leaky, written with its attributes in the other
// order than its entry's, to a sharded tensor and gathers the result.
const leakyFusion = `format: 2
meshes:
  m: [0, 1, 2, 3]
tensors:
  x: {mesh: m, shape: [8, 12], placements: [Shard(0)]}
  z: {mesh: m, placements: [Replicate()]}
ops:
  - {op: leaky, in: x, out: y, flag: true, alpha: 0.5}
  - {op: set, in: y, out: z}
`

// TestRegisteredAttrsEndToEnd parses, lowers, encodes, decodes, validates,
// certifies and simulates a fusion whose op takes registered attributes:
// the plan writes them in the entry's order after the op's axis.
func TestRegisteredAttrsEndToEnd(t *testing.T) {
	for _, policy := range lower.Policies {
		t.Run(policy, func(t *testing.T) {
			f, err := syntax.Parse("leaky.yaml", []byte(leakyFusion))
			if err != nil {
				t.Fatal(err)
			}
			if got, want := f.Ops[0].Expr(), "y = leaky(x, alpha=0.5, flag=true)"; got != want {
				t.Errorf("Expr() = %q, want %q", got, want)
			}
			p, err := lower.Lower(f, lower.Options{Policy: lower.Policy(policy)})
			if err != nil {
				t.Fatal(err)
			}
			src, err := plan.Marshal(p)
			if err != nil {
				t.Fatal(err)
			}
			if want := "\"axis\": null,\n      \"alpha\": 0.5,\n      \"flag\": true\n"; !bytes.Contains(src, []byte(want)) {
				t.Errorf("the plan has no %q:\n%s", want, src)
			}
			q, err := plan.Decode("leaky.json", src)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(p.Ops, q.Ops); d != "" {
				t.Errorf("decoded ops (-lowered +decoded):\n%s", d)
			}
			if problems := plan.Validate(q); len(problems) > 0 {
				t.Fatalf("Validate: %v", problems)
			}
			if problems, unproven := lower.Certify(q); len(problems) > 0 || len(unproven) > 0 {
				t.Fatalf("Certify: %v, unproven ops %v", problems, unproven)
			}
			if res, err := sim.Run(q, sim.Options{Seed: 3}); err != nil || !res.Pass {
				t.Fatalf("simulate: %v, %+v", err, res)
			}
		})
	}
}

// TestRegisteredAttrsErrors checks the parser's and the validator's
// messages of attributes, from the registry's specs.
func TestRegisteredAttrsErrors(t *testing.T) {
	for _, tc := range []struct{ name, op, want string }{
		{"missing", "{op: leaky, in: x, out: y, alpha: 0.5}",
			`a.yaml:6:5: error: ops[0]: leaky needs "flag"; flag: a flag`},
		{"not taken", "{op: relu, in: x, out: y, alpha: 0.5}",
			`a.yaml:6:38: error: ops[0]: relu takes no "alpha"; "alpha" is an attribute of leaky`},
		{"wrong kind", "{op: leaky, in: x, out: y, alpha: yes, flag: 1}",
			"a.yaml:6:39: error: ops[0] alpha: expected a number, got \"yes\"\n" +
				"a.yaml:6:50: error: ops[0] flag: expected true or false, got integer 1"},
		{"misspelled", "{op: leaky, in: x, out: y, alpah: 0.5, flag: false}",
			`a.yaml:6:32: error: ops[0]: unknown key "alpah" (expected one of op, in, out, grad_of, axis, axes, dims, shape, dtype, eps, start, end, reduction, causal, cp, enable_gqa, diagonal, rows, overlap, chunks, top_k, capacity, alpha, flag); did you mean "alpha"?`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := "meshes:\n  m: [0, 1]\ntensors:\n  x: {mesh: m, shape: [4]}\nops:\n  - " + tc.op + "\n"
			_, err := syntax.Parse("a.yaml", []byte(src))
			var got string
			if list := (*diag.List)(nil); errors.As(err, &list) {
				got = strings.TrimSpace(err.Error())
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("errors (-want +got):\n%s", d)
			}
		})
	}
	p := &plan.Plan{Ops: []plan.Op{{Op: "leaky", Input: "x", Output: "y", Attrs: ops.Values{{Key: "alpha", Float: 1}, {Key: "dims", Ints: []int{0}}}}}}
	var got []string
	for _, pr := range plan.Validate(p) {
		if strings.Contains(pr.Error(), "flag") || strings.Contains(pr.Error(), "dims") {
			got = append(got, pr.Error())
		}
	}
	want := []string{"error: op 0: leaky takes no dims", "error: op 0: leaky needs flag"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Validate (-want +got):\n%s", d)
	}
}
