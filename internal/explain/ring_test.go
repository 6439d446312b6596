package explain

import (
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/plan"
)

// TestRingForm explains the ring attention example's last op with and
// without the lowering's prices: the form, the ops within it, the blocks
// each device computes (the causal ring skips those above the diagonal),
// and why; an op within it says where it is computed.
func TestRingForm(t *testing.T) {
	const file = "../../testdata/examples/attention_context_parallel_ring.optimal.json"
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Decode(file, src)
	if err != nil {
		t.Fatal(err)
	}
	lines := func(o Options, want string) []string {
		var b strings.Builder
		if err := Write(&b, p, o); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, l := range strings.Split(b.String(), "\n") {
			if strings.Contains(l, want) {
				got = append(got, strings.TrimSpace(l))
			}
		}
		return got
	}
	o := All()
	o.Op = 17
	if d := cmp.Diff([]string{"why this form: the fusion's cp: ring"}, lines(o, "why this form")); d != "" {
		t.Errorf("without prices (-want +got):\n%s", d)
	}
	o.Forms = []Form{{Op: 17, Ring: 242e-6, Gather: 81.1e-6, Expansion: 188e-6, Chosen: "ring"}}
	want := "why this form: the fusion's cp: ring; ring 242 µs as a step graph, all-gather 81.1 µs as a step graph, expansion 188 µs as a step graph (the ring chosen over the all-gather form and the expansion planned op by op)"
	if d := cmp.Diff([]string{want}, lines(o, "why this form")); d != "" {
		t.Errorf("with prices (-want +got):\n%s", d)
	}
	if got := lines(o, "computes o = sdpa"); len(got) != 1 || !strings.Contains(got[0], "4 rounds") || !strings.Contains(got[0], "17 ops are computed within its steps") {
		t.Errorf("the form: %q", got)
	}
	skips := "skips the blocks the causal mask zeroes whole (their keys all after the device's queries), which still pass along the ring: devices 0, 1, 2, 3 compute 1, 2, 3, 4 of the 4 blocks"
	if d := cmp.Diff([]string{skips}, lines(o, "skips the blocks")); d != "" {
		t.Errorf("the blocks skipped (-want +got):\n%s", d)
	}
	o.Op = 0
	if d := cmp.Diff([]string{"no steps: computed within op 17's steps (ring attention); no device holds o/kt"}, lines(o, "no steps")); d != "" {
		t.Errorf("an op within (-want +got):\n%s", d)
	}
}
