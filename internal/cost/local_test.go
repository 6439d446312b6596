package cost

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/plan"
)

func TestReadLocalSamples(t *testing.T) {
	tests := map[string]struct {
		csv     string
		want    []Sample
		wantErr string
	}{
		"copy and permute": {
			csv: "collective,ranks,bytes,seconds,link\ncopy,1,2097152,1.5e-05,memory\npermute,1,2097152,2e-05,memory\n",
			want: []Sample{{Collective: PassCopy, Ranks: 1, Bytes: 2097152, Seconds: 1.5e-05, Link: LinkMemory},
				{Collective: PassStrided, Ranks: 1, Bytes: 2097152, Seconds: 2e-05, Link: LinkMemory}},
		},
		"a local copy on a link": {csv: "collective,ranks,bytes,seconds,link\ncopy,2,1024,1e-05,nvlink\n",
			wantErr: `unknown collective "copy"`},
		"a collective in memory": {csv: "collective,ranks,bytes,seconds,link\nallgather,2,1024,1e-05,memory\n",
			wantErr: `unknown local copy "allgather"`},
		"a collective of one rank": {csv: "collective,ranks,bytes,seconds\nallgather,1,1024,1e-05\n",
			wantErr: "ranks must be at least 2"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ReadSamples(strings.NewReader(tc.csv))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("samples (-want +got):\n%s", diff)
			}
		})
	}
}

// TestFitMemory: samples of a contiguous and a strided copy drawn from
// known lines are fitted back to them; the collectives keep the base's.
func TestFitMemory(t *testing.T) {
	copyLine := Params{Bandwidth: 4000, Latency: 3}
	strided := Params{Bandwidth: 2800, Latency: 5}
	var samples []Sample
	for s := int64(1 << 20); s <= 1<<31; s *= 2 {
		samples = append(samples,
			Sample{Collective: PassCopy, Ranks: 1, Bytes: s, Seconds: copyLine.Seconds(float64(s)), Link: LinkMemory},
			Sample{Collective: PassStrided, Ranks: 1, Bytes: s, Seconds: strided.Seconds(float64(s)), Link: LinkMemory})
	}
	topo, points, err := Fit(samples, FitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := []Params{topo.Memory.Params, topo.Memory.StridedParams()}
	approx := cmp.Comparer(func(a, b float64) bool { return math.Abs(a-b) <= 0.01*math.Max(math.Abs(a), 1) })
	if diff := cmp.Diff([]Params{copyLine, strided}, got, approx); diff != "" {
		t.Errorf("memory (-want +got):\n%s", diff)
	}
	for _, p := range points {
		if e := math.Abs(p.RelErr()); e > 0.01 {
			t.Errorf("%s of %d bytes: predicted %.1f us, measured %.1f us", p.Collective, p.Bytes, p.Predicted*1e6, p.Seconds*1e6)
		}
	}
	if diff := cmp.Diff(Default().NVLink, topo.NVLink); diff != "" {
		t.Errorf("nvlink changed without collective samples (-want +got):\n%s", diff)
	}
}

// TestLocalStepPricing: Permute, Pad, Unpad and Concat are strided
// copies, priced at memory.strided where the topology has it and at
// memory's rate where it does not (topology files before the field); a
// view is free. A Concat reads only its windows: whatever its first
// input's count, it moves twice its output.
func TestLocalStepPricing(t *testing.T) {
	withStrided := testTopology()
	withStrided.Memory.Strided = &Params{Bandwidth: 500, Latency: 2}
	const bytes = 1e6
	tests := []struct {
		topo      *Topology
		typ, pass string
		want      float64
	}{
		{testTopology(), plan.Permute, PassStrided, 1e-6 + bytes/1000e9},
		{withStrided, plan.Permute, PassStrided, 2e-6 + bytes/500e9},
		{withStrided, plan.Pad, PassStrided, 2e-6 + bytes/500e9},
		{withStrided, plan.Unpad, PassStrided, 2e-6 + bytes/500e9},
		{withStrided, plan.Concat, PassStrided, 2e-6 + bytes/500e9},
		{withStrided, plan.Copy, PassCopy, 1e-6 + bytes/1000e9},
		{withStrided, plan.Slice, PassView, 0},
	}
	for _, tc := range tests {
		name := fmt.Sprintf("%s strided=%v", tc.typ, tc.topo.Memory.Strided != nil)
		if got := tc.topo.Pass(tc.pass, bytes, 1); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("%s: Pass(%s) = %g, want %g", name, tc.pass, got, tc.want)
		}
		if tc.pass == PassView {
			continue
		}
		// A second kernel (a Pad's fill of its holes) adds its latency.
		if got, want := tc.topo.Pass(tc.pass, bytes, 2), tc.want+1e-6*tc.topo.Memory.StridedParams().Latency; tc.pass == PassStrided && math.Abs(got-want) > 1e-12 {
			t.Errorf("%s: Pass of two kernels = %g, want %g", name, got, want)
		}
		in := int(bytes / 8)
		if tc.typ == plan.Concat {
			in *= 3 // a slice of a third of its input
		}
		got, ok := tc.topo.LocalSeconds(tc.typ, plan.Count{Input: in, Output: bytes / 8}, 4)
		if !ok || math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("%s: LocalSeconds = %g, want %g", name, got, tc.want)
		}
	}
}

// TestStridedRoundTrip: memory.strided is optional in topology files, and
// written back as read.
func TestStridedRoundTrip(t *testing.T) {
	src := "format: 1\nname: t\ndevices_per_node: 2\nnvlink: {bandwidth_gbps: 10, latency_us: 10}\n" +
		"network: {bandwidth_gbps: 1, latency_us: 100}\nmemory: {bandwidth_gbps: 4000, latency_us: 3, strided: {bandwidth_gbps: 2800, latency_us: 5}}\n"
	topo, err := ParseTopology("t.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&Params{Bandwidth: 2800, Latency: 5}, topo.Memory.Strided); diff != "" {
		t.Errorf("strided (-want +got):\n%s", diff)
	}
	out, err := topo.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	again, err := ParseTopology("again.yaml", out)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(topo, again); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	bad := strings.Replace(src, "bandwidth_gbps: 2800", "bandwidth_gbps: 0", 1)
	if _, err := ParseTopology("bad.yaml", []byte(bad)); err == nil || !strings.Contains(err.Error(), "memory.strided: bandwidth_gbps must be positive") {
		t.Errorf("a strided bandwidth of 0: error %v", err)
	}
}

// TestLookupBytes: a Lookup reads its indices and the rows it copies (as
// many as it writes) and writes its output, at a contiguous copy's rate.
func TestLookupBytes(t *testing.T) {
	topo := testTopology()
	for _, tc := range []struct {
		name  string
		count plan.Count
		elem  int64
		bytes float64 // read plus written
	}{
		{"embedding rows", plan.Count{Input: 32, Output: 32 * 64}, 4, (32 + 2*32*64) * 4},
		{"gather's one element a row", plan.Count{Input: 8, Output: 8}, 2, (8 + 2*8) * 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := topo.LocalSeconds(plan.Lookup, tc.count, tc.elem)
			if want := topo.Local(int64(tc.bytes)); !ok || math.Abs(got-want) > 1e-15 {
				t.Errorf("LocalSeconds = %g, want %g (%g bytes)", got, want, tc.bytes)
			}
		})
	}
}
