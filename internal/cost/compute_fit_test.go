package cost

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestFitCompute: matmul samples (link compute, the bytes column holding
// floating-point operations) fit their dtype's compute line, α and
// throughput; products below MinFitFlops are not fitted; a dtype measured
// at one size gets its fastest sample's throughput and no α; dtypes without
// samples keep the base topology's.
func TestFitCompute(t *testing.T) {
	// row is a sample of dtype: flops operations taking α + flops/tflops.
	row := func(dtype string, flops, alphaUS, tflops float64) string {
		return fmt.Sprintf("matmul_%s,1,%.0f,%.6e,compute\n", dtype, flops, alphaUS*1e-6+flops/(tflops*1e12))
	}
	base := Default().Compute
	tests := map[string]struct {
		rows        string
		wantTFLOPS  map[string]float64
		wantLatency map[string]float64
	}{
		"a line": {
			rows:        row("bfloat16", 2<<30, 5, 700) + row("bfloat16", 2<<36, 5, 700) + row("bfloat16", 2<<39, 5, 700),
			wantTFLOPS:  map[string]float64{"bfloat16": 700},
			wantLatency: map[string]float64{"bfloat16": 5},
		},
		"a small product off the line is not fitted": {
			rows:        row("float32", 1<<20, 40, 1) + row("float32", 2<<30, 12, 50) + row("float32", 2<<36, 12, 50),
			wantTFLOPS:  map[string]float64{"float32": 50},
			wantLatency: map[string]float64{"float32": 12},
		},
		"one size: the fastest sample, no α": {
			rows:        row("float16", 2<<33, 0, 600) + row("float16", 2<<33, 0, 500),
			wantTFLOPS:  map[string]float64{"float16": 600},
			wantLatency: map[string]float64{"float16": 0},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			csv := "collective,ranks,bytes,seconds,link\n" + tc.rows +
				"allgather,2,1073741824,3.0e-3,nvlink\n" + "allgather,2,2147483648,6.0e-3,nvlink\n"
			samples, err := ReadSamples(strings.NewReader(csv))
			if err != nil {
				t.Fatal(err)
			}
			topo, points, err := Fit(samples, FitOptions{})
			if err != nil {
				t.Fatal(err)
			}
			wantTFLOPS, wantLatency := map[string]float64{}, map[string]float64{}
			for dt, v := range base.TFLOPS {
				wantTFLOPS[dt], wantLatency[dt] = v, base.Latency[dt]
			}
			for dt, v := range tc.wantTFLOPS {
				wantTFLOPS[dt], wantLatency[dt] = v, tc.wantLatency[dt]
			}
			gotLatency := map[string]float64{}
			for dt := range topo.Compute.TFLOPS {
				gotLatency[dt] = topo.Compute.Latency[dt]
			}
			if d := cmp.Diff(wantTFLOPS, topo.Compute.TFLOPS); d != "" {
				t.Errorf("tflops (-want +got):\n%s", d)
			}
			if d := cmp.Diff(wantLatency, gotLatency); d != "" {
				t.Errorf("latency_us (-want +got):\n%s", d)
			}
			for _, p := range points {
				if p.Link == LinkCompute && p.Predicted != topo.Compute.Seconds(p.Collective, float64(p.Bytes)) {
					t.Errorf("%s of %d operations: predicted %g s, not the fitted line's", p.Collective, p.Bytes, p.Predicted)
				}
			}
		})
	}
	if _, err := ReadSamples(strings.NewReader("collective,ranks,bytes,seconds,link\nmatmul_float8,1,100,1e-3,compute\n")); err == nil || !strings.Contains(err.Error(), `unknown matmul "matmul_float8"`) {
		t.Errorf("an unknown dtype: %v", err)
	}
}
