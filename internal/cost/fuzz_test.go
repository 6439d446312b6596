package cost

import (
	"math"
	"os"
	"strings"
	"testing"
)

// FuzzParseTopology checks that any topology file either fails with an
// error or parses into a topology that marshals and parses back the same
// and prices every collective with a finite, non-negative time.
func FuzzParseTopology(f *testing.F) {
	f.Add(DefaultYAML())
	f.Add([]byte("format: 1\ndevices_per_node: 2\nnvlink: {bandwidth_gbps: 1, latency_us: 1, launch_us: 5, low_latency: {bandwidth_gbps: 0.5, latency_us: 0}}\nnetwork: {bandwidth_gbps: 1, latency_us: 1}\nmemory: {bandwidth_gbps: 1, latency_us: 1}\n"))
	f.Add([]byte("format: 1\ndevices_per_node: 1\nnvlink: {bandwidth_gbps: .inf, latency_us: 1}\n"))
	f.Fuzz(func(t *testing.T, src []byte) {
		topo, err := ParseTopology("f.yaml", src)
		if err != nil {
			return
		}
		out, err := topo.Marshal()
		if err != nil {
			t.Fatalf("Marshal: %v", err)
		}
		again, err := ParseTopology("again.yaml", out)
		if err != nil {
			t.Fatalf("a marshalled topology does not parse: %v\n%s", err, out)
		}
		for _, link := range []string{LinkNVLink, LinkNetwork} {
			for _, typ := range []string{"Allgather", "Allreduce", "SendRecv"} {
				a, b := topo.Collective(link, typ, 1<<20, 4), again.Collective(link, typ, 1<<20, 4)
				if a != b || !(a >= 0) || math.IsInf(a, 0) {
					t.Fatalf("%s %s: %v before marshalling, %v after", link, typ, a, b)
				}
			}
		}
	})
}

// FuzzFit checks that any calibration CSV either fails with an error or
// fits a topology that passes its own checks.
func FuzzFit(f *testing.F) {
	src, err := os.ReadFile(calibration)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(string(src))
	f.Add("collective,ranks,bytes,seconds\nallgather,2,1048576,1e-5\nallgather,2,4194304,2e-5\nallgather,2,16777216,1e-5\n")
	f.Add("collective,ranks,bytes,seconds,link\nsendrecv,2,1048576,Inf,network\n")
	f.Fuzz(func(t *testing.T, csv string) {
		samples, err := ReadSamples(strings.NewReader(csv))
		if err != nil || len(samples) > 64 {
			return
		}
		topo, points, err := Fit(samples, FitOptions{})
		if err != nil {
			return
		}
		if problems := topo.Check(); len(problems) > 0 {
			t.Fatalf("fitted topology fails its checks: %v", problems)
		}
		if len(points) != len(samples) {
			t.Fatalf("%d points for %d samples", len(points), len(samples))
		}
	})
}
