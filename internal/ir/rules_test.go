package ir

import "testing"

// TestRulesShared checks that ops alike (kind, shapes, axis) share their
// rule's lists, and that an op of other shapes gets a rule of its own.
func TestRulesShared(t *testing.T) {
	src := "meshes:\n  m: [0, 1]\ntensors:\n  a: {mesh: m, shape: [4, 4]}\n  b: {mesh: m, shape: [4, 4]}\n  c: {mesh: m, shape: [4, 8]}\n" +
		"ops:\n- {op: relu, in: a, out: x}\n- {op: relu, in: b, out: y}\n- {op: relu, in: c, out: z}\n"
	f, err := Parse("f.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Ops) != 3 {
		t.Fatalf("%d ops, want 3", len(f.Ops))
	}
	x, y, z := f.Ops[0].Rule(), f.Ops[1].Rule(), f.Ops[2].Rule()
	if len(x.Factors) == 0 || len(z.Factors) == 0 {
		t.Fatalf("rules without factors: %+v, %+v", x, z)
	}
	if &x.Factors[0] != &y.Factors[0] {
		t.Errorf("two relus of [4, 4] do not share their rule's factors")
	}
	if &x.Factors[0] == &z.Factors[0] || z.Factors[1].Size != 8 {
		t.Errorf("a relu of [4, 8] shares the rule of [4, 4], or has the wrong factors: %+v", z.Factors)
	}
}
