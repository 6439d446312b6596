package lower_test

import (
	"bytes"
	"testing"

	"github.com/nvcomm/nvcomm/internal/lower"
	"github.com/nvcomm/nvcomm/internal/plan"
	"github.com/nvcomm/nvcomm/internal/scale"
	"github.com/nvcomm/nvcomm/internal/syntax"
)

// BenchmarkValidateChain is `nvcomm validate` of the plan of a generated
// chain of 100k set ops, once the file is read: plan.Decode, then
// lower.Check (plan.Validate beside Certify). The plan is made once,
// before the timer starts, as `nvcomm lower` writes it. For profiles and
// benchstat (-bench ValidateChain -count 6 -cpuprofile cpu.out).
func BenchmarkValidateChain(b *testing.B) {
	for _, fam := range scale.Families[:2] { // chain1d, chain2d
		b.Run(fam.Name, func(b *testing.B) {
			js := chainPlan(b, fam.Name, fam.Gen(100_000))
			b.ReportAllocs()
			b.SetBytes(int64(len(js)))
			for b.Loop() {
				p, err := plan.Decode("plan.json", js)
				if err != nil {
					b.Fatal(err)
				}
				if problems, unproven := lower.Check(p); problems != nil || unproven != nil {
					b.Fatal(problems, unproven)
				}
			}
		})
	}
}

// chainPlan is the plan `nvcomm lower` writes for src, as JSON.
func chainPlan(b *testing.B, name string, src []byte) []byte {
	b.Helper()
	f, err := syntax.Parse(name+".yaml", src)
	if err != nil {
		b.Fatal(err)
	}
	var buf bytes.Buffer
	if err := lower.Stream(f, lower.Options{}, plan.NewWriter(&buf)); err != nil {
		b.Fatal(err)
	}
	return buf.Bytes()
}
