package ir

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestPropagatedSharedAsBuilt parses a format-2 fusion whose propagated
// tensors x and y are alike once the forward sweep builds them (both
// replicated), so that build shares their domain, and whose backward
// sweep shards x alone (its reader's output is declared sharded): x must
// get a domain of its own, and y keep the replicated one.
func TestPropagatedSharedAsBuilt(t *testing.T) {
	src := "format: 2\nmeshes:\n  m: [0, 1]\ntensors:\n  a: {mesh: m, shape: [4, 4]}\n  b: {mesh: m, shape: [4, 4]}\n" +
		"  z: {mesh: m, placements: [Shard(0)]}\n" +
		"ops:\n- {op: relu, in: a, out: x}\n- {op: relu, in: b, out: y}\n- {op: relu, in: x, out: z}\n"
	f, err := Parse("f.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*Tensor{}
	for _, tn := range f.Tensors {
		byName[tn.Name] = tn
	}
	x, y := byName["x"], byName["y"]
	if x == nil || y == nil {
		t.Fatalf("tensors x, y: %v, %v", x, y)
	}
	placements := func(tn *Tensor) string {
		pls, ok := valuePlacements(tn)
		if !ok {
			return "not placements"
		}
		return fmt.Sprint(pls)
	}
	got := map[string]string{"x": placements(x), "y": placements(y)}
	want := map[string]string{"x": "[Shard(0)]", "y": "[Replicate()]"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("placements (-want +got):\n%s", d)
	}
	if x.TensorDomain == y.TensorDomain {
		t.Errorf("x and y share a domain after the backward sweep sharded x alone")
	}
}
