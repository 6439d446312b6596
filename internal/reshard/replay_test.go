package reshard_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/nvcomm/nvcomm/internal/ir"
	"github.com/nvcomm/nvcomm/internal/lower"
	"github.com/nvcomm/nvcomm/internal/plan"
	"github.com/nvcomm/nvcomm/internal/reshard"
	"github.com/nvcomm/nvcomm/internal/scale"
	"github.com/nvcomm/nvcomm/internal/syntax"
)

// TestReplayEmitsAsFresh lowers every example, conformance and regression
// fusion, and chains on both meshes, under both objectives, with the
// replay of recorded emissions and without: the plans (or errors) must
// be the same bytes.
func TestReplayEmitsAsFresh(t *testing.T) {
	fusions := corpus(t)
	for name, src := range map[string][]byte{
		"chain1d.yaml": scale.Chain(300, scale.Mesh1D),
		"chain2d.yaml": scale.Chain(300, scale.Mesh2x4),
	} {
		f, err := syntax.Parse(name, src)
		if err != nil {
			t.Fatal(err)
		}
		fusions[name] = f
	}
	for file, f := range fusions {
		for _, obj := range reshard.Objectives {
			var out [2]string
			for i, on := range []bool{false, true} {
				out[i] = lowered(f, lower.Options{Objective: reshard.Objective(obj), Debug: reshard.Debug{NoReplay: !on}})
			}
			if out[0] != out[1] {
				t.Errorf("%s (%s): the plan with replays differs from the plan without", file, obj)
			}
		}
	}
}

// lowered is f's plan under opts as JSON, or its error.
func lowered(f *ir.Fusion, opts lower.Options) string {
	p, err := lower.Lower(f, opts)
	if err != nil {
		return "error: " + err.Error()
	}
	var b bytes.Buffer
	if err := plan.Encode(&b, p); err != nil {
		return fmt.Sprint("encode: ", err)
	}
	return b.String()
}
