package ir

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestScheduleCheckOrder: a file's schedule is decoded into values before
// the replay checks them, and still reports what the parser reported when
// it decoded and checked each part in turn. A part that cannot be decoded
// is reported only once the parts written before it pass their checks,
// and a step after a failing one is not looked at.
func TestScheduleCheckOrder(t *testing.T) {
	const head = "meshes:\n  m: [0, 1]\ntensors:\n  t:\n    mesh: m\n    shape: [4, 6]\n"
	for _, tc := range []struct {
		name, keys, want string
	}{
		{"axis before factor", "    schedule:\n      - split: {axis: 5, factor: x}\n",
			`in.yaml:8:23: error: tensor "t" split: axis 5 is out of range for a loop domain of 2 axes`},
		{"factor once the axis passes", "    schedule:\n      - split: {axis: 0, factor: x}\n",
			`in.yaml:8:34: error: tensor "t" split factor: expected an integer, got "x"`},
		{"factor not positive", "    schedule:\n      - split: {axis: 0, factor: 0}\n",
			`in.yaml:8:34: error: tensor "t" split factor: expected an integer >= 1, got 0`},
		{"axis before type", "    schedule:\n      - parallelize: {axis: 7, type: DIDw}\n",
			`in.yaml:8:29: error: tensor "t" parallelize: axis 7 is out of range for a loop domain of 2 axes`},
		{"type once the axis passes", "    schedule:\n      - parallelize: {axis: 0, type: DIDw}\n",
			`in.yaml:8:38: error: tensor "t" parallelize: unknown parallel type "DIDw" (expected DIDx, DIDy, DIDz or Serial); did you mean "DIDx"?`},
		{"reorder length before entries", "    schedule:\n      - reorder: [0, x, 1]\n",
			`in.yaml:8:18: error: tensor "t" reorder: expected a permutation of the 2 loop positions, got 3 entries`},
		{"reorder entry before a later one", "    schedule:\n      - reorder: [4, x]\n",
			`in.yaml:8:19: error: tensor "t" reorder: axis 4 is out of range for a loop domain of 2 axes`},
		{"reorder entry once those before pass", "    schedule:\n      - reorder: [1, x]\n",
			`in.yaml:8:22: error: tensor "t" reorder axis: expected an integer, got "x"`},
		{"a failing step hides the next", "    schedule:\n      - merge: {axis: 1}\n      - twist: {axis: 0}\n",
			`in.yaml:8:23: error: tensor "t" merge: axis 1 is the last loop axis and has no partner to merge with`},
		{"an unknown key is reported with the step's check", "    schedule:\n      - merge: {axis: 1, extra: 2}\n",
			"in.yaml:8:23: error: tensor \"t\" merge: axis 1 is the last loop axis and has no partner to merge with\n" +
				`in.yaml:8:26: error: tensor "t" merge: unknown key "extra" (expected one of axis)`},
		{"allocation entry before a later one", "    allocation: [3, x]\n",
			`in.yaml:7:18: error: tensor "t" allocation: axis 3 is out of range for a loop domain of 2 axes`},
		{"allocation entry once those before pass", "    allocation: [1, x]\n",
			`in.yaml:7:21: error: tensor "t" allocation axis: expected an integer, got "x"`},
		{"allocation after the schedule", "    schedule:\n      - split: {axis: 3, factor: 2}\n    allocation: x\n",
			`in.yaml:8:23: error: tensor "t" split: axis 3 is out of range for a loop domain of 2 axes`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("in.yaml", []byte(head+tc.keys))
			if err == nil {
				t.Fatal("Parse succeeded, want an error")
			}
			if diff := cmp.Diff(tc.want, err.Error()); diff != "" {
				t.Errorf("error mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
