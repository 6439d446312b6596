package sim

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"
	"text/tabwriter"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/plan"
)

// TestWriteDevicesColumns checks that the device table, written line by
// line, has the columns text/tabwriter gave it before.
func TestWriteDevicesColumns(t *testing.T) {
	tests := map[string]map[int]int64{
		"none":            {},
		"narrow ids":      {0: 72, 1: 0, 3: 1 << 40},
		"ids wider":       {7: 1, 12345678: 2, 99: 3},
		"as wide as name": {123456: 5, 2: 6},
	}
	for name, recv := range tests {
		t.Run(name, func(t *testing.T) {
			var got strings.Builder
			if err := (&Result{DeviceReceived: recv}).writeDevices(&got); err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tabwriterDevices(recv), got.String()); d != "" {
				t.Errorf("device table (-tabwriter +got):\n%s", d)
			}
		})
	}
}

// tabwriterDevices is the device table as a tabwriter writes it.
func tabwriterDevices(recv map[int]int64) string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "device\treceived\n")
	for _, d := range sortedKeys(recv) {
		fmt.Fprintf(tw, "%d\t%s\n", d, plan.Size(recv[d]))
	}
	tw.Flush()
	return b.String()
}

func sortedKeys(m map[int]int64) []int {
	keys := slices.Collect(maps.Keys(m))
	slices.Sort(keys)
	return keys
}

// TestMismatchJSONNonFinite checks that a mismatch whose values are not
// finite (a Pad's infinity left where a value belongs, NaN from an exact
// kernel given one) encodes, as strings, and a finite one as a number.
func TestMismatchJSONNonFinite(t *testing.T) {
	for _, tc := range []struct {
		expected, actual float64
		want             string
	}{
		{3, math.NaN(), `"expected":3,"actual":"NaN"`},
		{-2.5, math.Inf(-1), `"expected":-2.5,"actual":"-Inf"`},
		{math.Inf(1), 7, `"expected":"+Inf","actual":7`},
	} {
		b, err := json.Marshal(newMismatch(0, 1, "t", 2, tc.expected, tc.actual))
		if err != nil || !strings.Contains(string(b), tc.want) {
			t.Errorf("json.Marshal = %s, %v; want it to contain %s", b, err, tc.want)
		}
	}
}
