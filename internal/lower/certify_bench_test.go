package lower_test

import (
	"io"
	"runtime"
	"testing"
	"time"

	"github.com/nvcomm/nvcomm/internal/lower"
	"github.com/nvcomm/nvcomm/internal/plan"
	"github.com/nvcomm/nvcomm/internal/scale"
	"github.com/nvcomm/nvcomm/internal/syntax"
)

// BenchmarkCertifyScale lowers every generated family of 100k ops (parse,
// lower, encode, as `nvcomm lower` does) and validates the plan as `nvcomm
// validate` does once it has read the file (decode, plan.Validate,
// lower.Certify), the two in turn in every iteration so that a busy
// machine slows both: x-lower is validating's wall time over lowering's
// (goal ≤ 0.5), and decode-, validate- and certify-x-lower its parts'.
// Unlike internal/scale's BenchmarkScaleValidate it lowers only the
// family run (-bench CertifyScale/chain1d), for profiling.
func BenchmarkCertifyScale(b *testing.B) {
	for _, fam := range scale.Families {
		b.Run(fam.Name, func(b *testing.B) {
			src := fam.Gen(100_000)
			var low, decode, validate, certify, lowCPU, valCPU time.Duration
			for b.Loop() {
				cpu := scale.CPUTime()
				js, took := lowerTimed(b, fam.Name, src)
				low, lowCPU = low+took, lowCPU+scale.CPUTime()-cpu
				cpu = scale.CPUTime()
				d, v, c := validateTimed(b, js)
				decode, validate, certify, valCPU = decode+d, validate+v, certify+c, valCPU+scale.CPUTime()-cpu
			}
			perLower := func(d time.Duration) float64 { return float64(d) / float64(low) }
			b.ReportMetric(perLower(decode+validate+certify), "x-lower")
			b.ReportMetric(perLower(decode), "decode-x-lower")
			b.ReportMetric(perLower(validate), "validate-x-lower")
			b.ReportMetric(perLower(certify), "certify-x-lower")
			if lowCPU > 0 {
				b.ReportMetric(float64(valCPU)/float64(lowCPU), "x-lower-cpu")
			}
			b.ReportMetric((decode+validate+certify).Seconds()/float64(b.N), "s-validate")
		})
	}
}

// lowerTimed parses, lowers and encodes src, returning the plan's JSON and
// the wall time of the three, the plan encoded as `nvcomm lower` writes
// it, in pieces, to a writer that keeps none (as internal/scale's report
// does): growing a buffer of 100 MB would be timed as lowering.
func lowerTimed(b *testing.B, name string, src []byte) ([]byte, time.Duration) {
	runtime.GC()
	start := time.Now()
	f, err := syntax.Parse(name+".yaml", src)
	if err != nil {
		b.Fatal(err)
	}
	p, err := lower.Lower(f, lower.Options{})
	if err != nil {
		b.Fatal(err)
	}
	if err := plan.Encode(io.Discard, p); err != nil {
		b.Fatal(err)
	}
	took := time.Since(start)
	js, err := plan.Marshal(p)
	if err != nil {
		b.Fatal(err)
	}
	return js, took
}

// validateTimed decodes, validates and certifies js, returning each
// part's wall time.
func validateTimed(b *testing.B, js []byte) (decode, validate, certify time.Duration) {
	runtime.GC()
	start := time.Now()
	p, err := plan.Decode("plan.json", js)
	if err != nil {
		b.Fatal(err)
	}
	decoded := time.Now()
	if got := plan.Validate(p); got != nil {
		b.Fatal(got)
	}
	validated := time.Now()
	if got, unproven := lower.Certify(p); got != nil || unproven != nil {
		b.Fatal(got, unproven)
	}
	return decoded.Sub(start), validated.Sub(decoded), time.Since(validated)
}
