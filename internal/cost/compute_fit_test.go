package cost

import (
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestFitCompute: matmul samples (link compute, the bytes column holding
// floating-point operations) set the dtype's throughput to the fastest
// sample's; dtypes without samples keep the base topology's; the samples
// are predicted at the fitted throughput.
func TestFitCompute(t *testing.T) {
	csv := "collective,ranks,bytes,seconds,link\n" +
		"matmul_bfloat16,1,2147483648,4.0e-5,compute\n" + // 2·1024³: 53.7 TFLOPS
		"matmul_bfloat16,1,137438953472,2.0e-4,compute\n" + // 2·4096³: 687 TFLOPS
		"matmul_bfloat16,1,1099511627776,1.6e-3,compute\n" + // 2·8192³: 687 TFLOPS
		"allgather,2,1073741824,3.0e-3,nvlink\n" +
		"allgather,2,2147483648,6.0e-3,nvlink\n"
	samples, err := ReadSamples(strings.NewReader(csv))
	if err != nil {
		t.Fatal(err)
	}
	topo, points, err := Fit(samples, FitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{}
	for dt, v := range Default().Compute.TFLOPS {
		want[dt] = v
	}
	want["bfloat16"] = 137438953472 / 2.0e-4 / 1e12
	approx := cmp.Comparer(func(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(math.Abs(a), 1) })
	if d := cmp.Diff(want, topo.Compute.TFLOPS, approx); d != "" {
		t.Errorf("tflops (-want +got):\n%s", d)
	}
	for _, p := range points {
		if p.Link == LinkCompute && p.Predicted > p.Seconds*(1+1e-9) {
			t.Errorf("%s of %d operations: predicted %g s, slower than measured %g s (the peak is the fastest)", p.Collective, p.Bytes, p.Predicted, p.Seconds)
		}
	}
	if _, err := ReadSamples(strings.NewReader("collective,ranks,bytes,seconds,link\nmatmul_float8,1,100,1e-3,compute\n")); err == nil || !strings.Contains(err.Error(), `unknown matmul "matmul_float8"`) {
		t.Errorf("an unknown dtype: %v", err)
	}
}
