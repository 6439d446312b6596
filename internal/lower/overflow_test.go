package lower_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/lower"
	"github.com/nvcomm/nvcomm/internal/syntax"
)

// Fusions at int64's edge (issue 10: counts and bytes wrapped silently).
// Every tensor fits in int64 bytes, as syntax.Parse requires; what a plan sums
// or multiplies by a team size may not.
const (
	// Each set gathers 2^62 − 2^31 bytes to each device: two sum to
	// 2^63 − 2^32, three overflow.
	gatherTwice = `meshes: {m: [0, 1]}
tensors:
  x: {mesh: m, shape: [1073741824, 2147483647], placements: [Shard(0)]}
ops:
  - {op: set, in: x, out: y1}
  - {op: set, in: x, out: y2}
`
	gatherThrice = gatherTwice + `  - {op: set, in: x, out: y3}
`
	// A Broadcast of 2^62 bytes to 3 devices sends 3·2^62 from its root.
	broadcast = `meshes: {a: [0], b: [1, 2, 3]}
tensors:
  x: {mesh: a, shape: [1073741824, 1073741824]}
  y: {mesh: b}
ops:
  - {op: set, in: x, out: y}
`
	// Each tensor pads one axis to 2^31 (2^62 bytes), the op both: 2^63.
	bothPadded = `meshes: {m: [0, 1]}
tensors:
  x:
    mesh: m
    dtype: float16
    shape: [1073741825, 1073741825]
    schedule: [{split: {axis: 0, factor: 1073741824}}, {parallelize: {axis: 0, type: DIDx}}]
  y:
    mesh: m
    schedule: [{split: {axis: 1, factor: 1073741824}}, {parallelize: {axis: 1, type: DIDx}}]
ops:
  - {op: set, in: x, out: y}
`
	// An Allreduce over 3 devices of 2^61 bytes each sends and receives
	// 2·2/3 of them: 2^63/3, though 4·2^61 overflows.
	allreduce = `meshes: {m: [0, 1, 2]}
tensors:
  x: {mesh: m, shape: [3, 1073741824, 536870912], placements: [Shard(0)]}
ops:
  - {op: sum, in: x, out: y, axis: 0}
`
)

func TestLowerOverflow(t *testing.T) {
	const max = "9223372036854775807, the most nvcomm counts (int64); nvcomm counts bytes in int64; use smaller tensors or fewer devices"
	tests := []struct {
		name, src string
		policy    lower.Policy
		want      string
	}{
		{"gather thrice", gatherThrice, lower.PolicyOptimal,
			`in.yaml:7:5: error: op "y3 = set(x)" cannot be lowered (policy optimal): the bytes device 0 receives over the plan exceed ` + max},
		{"gather thrice nvfuser", gatherThrice, lower.PolicyNvFuser,
			`in.yaml:7:5: error: op "y3 = set(x)" cannot be lowered (policy nvfuser): the bytes device 0 receives over the plan exceed ` + max},
		{"both padded", bothPadded, lower.PolicyOptimal,
			`in.yaml:12:5: error: op "y = set(x)" cannot be lowered (policy optimal): the bytes of the padded extents [2147483648, 2147483648] of float16 that both tensors' shards tile (an op may hold them all on a device) exceed ` + max},
		{"broadcast", broadcast, lower.PolicyOptimal,
			`in.yaml:6:5: error: op "y = set(x)" cannot be lowered (policy optimal): the bytes of every sequence of collectives from the producer's sharding to the consumer's exceed ` + max},
		{"broadcast nvfuser", broadcast, lower.PolicyNvFuser,
			`in.yaml:6:5: error: op "y = set(x)" cannot be lowered (policy nvfuser): the bytes its Broadcast of 1152921504606846976 elements per device sends or receives exceed ` + max},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := syntax.Parse("in.yaml", []byte(tt.src))
			if err != nil {
				t.Fatal(err)
			}
			p, err := lower.Lower(f, lower.Options{Policy: tt.policy})
			if err == nil {
				t.Fatalf("Lower succeeded with summary %+v, want an error", p.Summary)
			}
			if diff := cmp.Diff(tt.want, err.Error()); diff != "" {
				t.Errorf("Lower error mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestLowerNearOverflow lowers plans whose counts come close to int64's
// limit: every count and byte is exact.
func TestLowerNearOverflow(t *testing.T) {
	type result struct {
		Counts           [][2]int
		Bytes            [][3]int64 // sent, received, lower bound per step
		BytesReceivedMax int64
		BytesLowerBound  int64
	}
	const half = 1<<60 - 1<<29 // elements of x per device in gatherTwice
	tests := []struct {
		name, src string
		want      result
	}{
		{"gather twice", gatherTwice, result{
			Counts:           [][2]int{{half, 2 * half}, {half, 2 * half}},
			Bytes:            [][3]int64{{4 * half, 4 * half, 4 * half}, {4 * half, 4 * half, 4 * half}},
			BytesReceivedMax: 8 * half, BytesLowerBound: 8 * half,
		}},
		{"allreduce", allreduce, result{
			Counts:           [][2]int{{1 << 59, 1 << 59}},
			Bytes:            [][3]int64{{1 << 63 / 3, 1 << 63 / 3, 1 << 63 / 3}},
			BytesReceivedMax: 1 << 63 / 3, BytesLowerBound: 1 << 63 / 3,
		}},
	}
	for _, tt := range tests {
		for _, policy := range []lower.Policy{lower.PolicyOptimal, lower.PolicyNvFuser} {
			t.Run(tt.name+"/"+string(policy), func(t *testing.T) {
				f, err := syntax.Parse("in.yaml", []byte(tt.src))
				if err != nil {
					t.Fatal(err)
				}
				p, err := lower.Lower(f, lower.Options{Policy: policy})
				if err != nil {
					t.Fatal(err)
				}
				got := result{BytesReceivedMax: p.Summary.BytesReceivedMax, BytesLowerBound: p.Summary.BytesLowerBound}
				for _, s := range p.Steps {
					got.Counts = append(got.Counts, [2]int{s.Count.Input, s.Count.Output})
					if s.Bytes != nil {
						got.Bytes = append(got.Bytes, [3]int64{s.Bytes.SentPerDevice, s.Bytes.ReceivedPerDevice, s.Bytes.LowerBound})
					}
				}
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("plan mismatch (-want +got):\n%s", diff)
				}
			})
		}
	}
}
