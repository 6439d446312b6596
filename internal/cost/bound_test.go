package cost

import (
	"math"
	"testing"
)

// TestLowerBound checks the time bound: the smallest latency and the
// largest bus bandwidth of any line, wherever each is (here the latency
// on NVLink's low-latency line, the bandwidth on a per-type line of the
// network), and no time for no bytes.
func TestLowerBound(t *testing.T) {
	topo := &Topology{
		NVLink: Link{Params: Params{Bandwidth: 100, Latency: 10, LowLatency: &Line{Bandwidth: 20, Latency: 2}}},
		Network: Link{Params: Params{Bandwidth: 50, Latency: 30},
			Collectives: map[string]Params{"SendRecv": {Bandwidth: 400, Latency: 40}}},
	}
	tests := map[int64]float64{
		0:      0,
		-5:     0,
		4e9:    2e-6 + 4e9/400e9,
		400000: 2e-6 + 400000/400e9,
	}
	for bytes, want := range tests {
		if got := topo.LowerBound(bytes); math.Abs(got-want) > 1e-15 {
			t.Errorf("LowerBound(%d) = %g, want %g", bytes, got, want)
		}
	}
	if got := (&Topology{}).LowerBound(100); got != 0 {
		t.Errorf("a topology without lines bounds 100 bytes by %g s, want 0", got)
	}
}
