package sim_test

import (
	"os"
	"regexp"
	"slices"
	"strconv"
	"testing"

	"github.com/nvcomm/nvcomm/internal/ir"
	"github.com/nvcomm/nvcomm/internal/lower"
	"github.com/nvcomm/nvcomm/internal/plan"
	"github.com/nvcomm/nvcomm/internal/sim"
)

// TestPipelineEqualsWholeBatch: a pipeline's micro-batches together
// compute the whole batch's program. The example is lowered twice, with
// its pipeline section and without; the whole program's reference runs
// on simulate's data, and the micro-batched program's on blocks of the
// same inputs (rows mb·n/m to (mb+1)·n/m of each input cut along dim 0),
// the weights as they are. Every tensor of the whole program whose batch
// is its dim 0 must be its micro-batches' copies concatenated, and every
// other tensor both programs have (the weights' accumulated gradients)
// equal: exactly, as the simulator computes.
func TestPipelineEqualsWholeBatch(t *testing.T) {
	for _, name := range []string{"pipeline_1f1b", "pipeline_gpipe"} {
		t.Run(name, func(t *testing.T) {
			src, err := os.ReadFile("../../testdata/examples/" + name + ".yaml")
			if err != nil {
				t.Fatal(err)
			}
			section := regexp.MustCompile(`(?m)^pipeline:.*\n`)
			whole := lowered(t, section.ReplaceAll(src, nil))
			micro := lowered(t, src)
			m := micro.Pipeline.Microbatches
			ref, err := sim.Reference(whole, 1, nil)
			if err != nil {
				t.Fatal(err)
			}
			inputs := map[string][]float64{}
			for _, tn := range micro.Tensors {
				base, mb := split(tn.Name)
				if v, ok := ref[base]; ok && mb >= 0 {
					n := len(v) / m
					inputs[tn.Name] = v[mb*n : (mb+1)*n]
				} else if ok {
					inputs[tn.Name] = v
				}
			}
			got, err := sim.Reference(micro, 1, inputs)
			if err != nil {
				t.Fatal(err)
			}
			compared := 0
			for _, tn := range whole.Tensors {
				want := ref[tn.Name]
				if v, ok := got[tn.Name]; ok {
					compared++
					if !slices.Equal(v, want) {
						t.Errorf("%s differs from the whole batch's", tn.Name)
					}
					continue
				}
				var cat []float64
				for mb := range m {
					cat = append(cat, got[tn.Name+ir.MicrobatchSep+strconv.Itoa(mb)]...)
				}
				if len(cat) == len(want) && rowsFirst(micro, tn) {
					compared++
					if !slices.Equal(cat, want) {
						t.Errorf("%s's micro-batches concatenated differ from the whole batch's", tn.Name)
					}
				}
			}
			if compared < len(whole.Tensors)/2 {
				t.Errorf("compared %d of %d tensors", compared, len(whole.Tensors))
			}
		})
	}
}

// lowered is the optimal plan of fusion src.
func lowered(t *testing.T, src []byte) *plan.Plan {
	t.Helper()
	f, err := ir.Parse("in.yaml", src)
	if err != nil {
		t.Fatal(err)
	}
	p, err := lower.Lower(f, lower.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// split is a name t@mbK's t and K, or the name and -1.
func split(name string) (string, int) {
	m := regexp.MustCompile(`^(.*)@mb(\d+)$`).FindStringSubmatch(name)
	if m == nil {
		return name, -1
	}
	k, _ := strconv.Atoi(m[2])
	return m[1], k
}

// rowsFirst reports whether t's micro-batch copies in p are blocks of its
// dim 0 (its other dims whole): the copies concatenated are then t.
func rowsFirst(p *plan.Plan, t plan.Tensor) bool {
	for _, c := range p.Tensors {
		if c.Name == t.Name+ir.MicrobatchSep+"0" {
			return len(c.Shape) == len(t.Shape) && slices.Equal(c.Shape[1:], t.Shape[1:])
		}
	}
	return false
}
