package sim

import (
	"math"
	"runtime"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/plan"
)

// TestFootprint counts what the memory model prices on small plans: the
// members of an Allgather or an Allreduce share one output, only the root
// of a Gather and the receiver of a SendRecv get one (a SendRecv's and a
// Copy's are their inputs), and a small fusion input's reference is
// stored (a set's shares it), its shards slices of it when each is one
// run.
func TestFootprint(t *testing.T) {
	tests := map[string]struct {
		plan      *plan.Plan
		want      footprint
		wantBytes int64
	}{
		"allgather between permutes": {
			plan: seedPlan(),
			want: footprint{
				reference: 24, // tv1, a set, shares tv0's; shards are runs: no offsets held
				// tv0 and tv1/in: 6 elements on 4 devices; tv1/gathered: 24,
				// once for the team; tv1: 24 on each device.
				buffers: 4*48 + 4*48 + 192 + 4*192,
				entries: 16, names: 4, devices: 4, members: 4, listed: 4 + 3*4, steps: 3,
			},
			wantBytes: 24*8 + 1344 + 16*entryBytes + 4*nameBytes + 4*deviceBytes + 4*memberBytes + 16*listedBytes + 3*stepBytes,
		},
		"gather to one root": {
			plan: gatherPlan(),
			want: footprint{
				reference: 6,
				buffers:   48, // tv0: 3 elements on 0 and 1, slices of its reference; tv1: 6 on the root 2
				entries:   3, names: 2, devices: 3, members: 3, listed: 2 + 1 + 3, steps: 1,
			},
			wantBytes: 6*8 + 48 + 3*entryBytes + 2*nameBytes + 3*deviceBytes + 3*memberBytes + 6*listedBytes + stepBytes,
		},
		"sendrecv to the receivers": {
			plan: sendRecvPlan(),
			want: footprint{
				reference: 4,
				buffers:   0, // tv0 on 0 and 1 is slices of its reference; tv1 on 2 and 3 is tv0's
				entries:   4, names: 2, devices: 4, members: 2, listed: 2 + 2 + 2 + 2, steps: 2,
			},
			wantBytes: 4*8 + 4*entryBytes + 2*nameBytes + 4*deviceBytes + 2*memberBytes + 8*listedBytes + 2*stepBytes,
		},
		"row-parallel linear with bias": {
			plan: rowParallelLinearBias(),
			want: footprint{
				reference: 8 + 12 + 3 + 6, // x, w and bias, which the linear reads, and y
				// On both devices: x 4 elements, w 6 (bias, replicated, is its
				// reference); y/w, the Matmul's y/product and the Pointwise's y
				// 6 each; the Allreduce's y/sum 6 once.
				buffers: 2*(32+48+3*48) + 48,
				entries: 14, names: 7, devices: 2, members: 2, listed: 2 + 4*2, steps: 4,
			},
			wantBytes: 29*8 + 496 + 14*entryBytes + 7*nameBytes + 2*deviceBytes + 2*memberBytes + 10*listedBytes + 4*stepBytes,
		},
		"merged shard sorted through offsets": {
			plan: mergedSetPlan(),
			want: footprint{
				// tv0 [4, 3] merged to 12 and split 3 ways; tv1 is tv0's
				// copy, its buffers tv0's: tv0 is sorted through 4 offsets on
				// each device, 4 consecutive ones, its buffers slices of its
				// reference.
				reference: 12, transient: 4,
				buffers: 0,
				entries: 6, names: 2, devices: 3, members: 3, listed: 3 + 3, steps: 1,
			},
			wantBytes: 16*8 + 6*entryBytes + 2*nameBytes + 3*deviceBytes + 3*memberBytes + 6*listedBytes + stepBytes,
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			w, err := newWorld(tt.plan)
			if err != nil {
				t.Fatal(err)
			}
			got := w.footprint()
			if d := cmp.Diff(tt.want, got, cmp.AllowUnexported(footprint{})); d != "" {
				t.Errorf("footprint (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tt.wantBytes, got.bytes()); d != "" {
				t.Errorf("bytes (-want +got):\n%s", d)
			}
		})
	}
}

// mergedSetPlan copies tv0 [4, 3], its axes merged and block-split over
// three devices (four elements each, crossing rows), to tv1 sharded the
// same way: a Copy on every device.
func mergedSetPlan() *plan.Plan {
	sched := []plan.ScheduleStep{mergeAt(0), osplit(0, 3), par(0, "DIDx")}
	return &plan.Plan{
		Format: 1, Meshes: map[string]plan.Mesh{"m": mesh1(0, 1, 2)},
		Tensors: []plan.Tensor{
			{Name: "tv0", DType: "float32", Mesh: "m", Shape: []int{4, 3}, Schedule: sched},
			{Name: "tv1", DType: "float32", Mesh: "m", Shape: []int{4, 3}, Schedule: sched},
		},
		Ops: []plan.Op{{Index: 0, Op: "set", Input: "tv0", Output: "tv1"}},
		Steps: []plan.Step{{ID: 0, Kind: plan.KindLocal, Type: plan.Copy, Devices: []int{0, 1, 2},
			Input: "tv0", Output: "tv1", Count: plan.Count{Input: 4, Output: 4}}},
	}
}

// sendRecvPlan moves a [2, 2] tensor, one row a device, from devices 0
// and 1 to devices 2 and 3, one SendRecv a row.
func sendRecvPlan() *plan.Plan {
	sr := func(id, from, to int) plan.Step {
		return plan.Step{ID: id, Kind: plan.KindCollective, Type: plan.SendRecv, Teams: [][]int{{from, to}},
			Root: ip(from), Input: "tv0", Output: "tv1", Count: plan.Count{Input: 2, Output: 2}}
	}
	return &plan.Plan{
		Format: 1, Fusion: "sendrecv", Policy: "optimal",
		Meshes: map[string]plan.Mesh{"a": mesh1(0, 1), "b": mesh1(2, 3)},
		Tensors: []plan.Tensor{
			{Name: "tv0", DType: "float32", Mesh: "a", Shape: []int{2, 2}, Schedule: []plan.ScheduleStep{par(0, "DIDx")}},
			{Name: "tv1", DType: "float32", Mesh: "b", Shape: []int{2, 2}, Schedule: []plan.ScheduleStep{par(0, "DIDx")}},
		},
		Ops:   []plan.Op{{Index: 0, Op: "set", Input: "tv0", Output: "tv1"}},
		Steps: []plan.Step{sr(0, 0, 2), sr(1, 1, 3)},
	}
}

// TestAllocBytes checks the allocator's rounding the model assumes.
func TestAllocBytes(t *testing.T) {
	tests := map[int64]int64{
		0: 16, 1: 16, 2: 16, 6: 48, 1000: 8192, 4096: 32 << 10, 4097: 40 << 10,
		1 << 20: 8 << 20, math.MaxInt64 / 4: math.MaxInt64 &^ (8<<10 - 1),
	}
	got := map[int64]int64{}
	for n := range tests {
		got[n] = allocBytes(n)
	}
	if d := cmp.Diff(tests, got); d != "" {
		t.Errorf("allocBytes (-want +got):\n%s", d)
	}
}

// TestEstimateRefusesWhatRunRefuses checks that Estimate is the number the
// guard of Run compares with MaxBytes.
func TestEstimateRefusesWhatRunRefuses(t *testing.T) {
	need, err := Estimate(seedPlan())
	if err != nil {
		t.Fatal(err)
	}
	var got []bool
	for _, limit := range []int64{need - 1, need} {
		_, err := Run(seedPlan(), Options{MaxBytes: limit})
		got = append(got, err != nil)
	}
	if d := cmp.Diff([]bool{true, false}, got); d != "" {
		t.Errorf("refused at need-1, need (-want +got):\n%s", d)
	}
}

// TestLayerOpsAllocateTheirOutput checks the memory model's assumption
// about the layer ops: their reference and their steps allocate their
// output and nothing that grows with the data, so the estimate, which
// prices every tensor's reference and every step's output, holds.
func TestLayerOpsAllocateTheirOutput(t *testing.T) {
	ramp := func(n int) []float64 {
		v := make([]float64, n)
		for i := range v {
			v[i] = float64(i%1025 - 512)
		}
		return v
	}
	x, w, bias := in("x", []int{96, 256}, ramp(96*256)...), in("w", []int{128, 256}, ramp(128*256)...), in("bias", []int{128}, ramp(128)...)
	a, b := in("a", []int{4, 96, 256}, ramp(4*96*256)...), in("b", []int{256, 128}, ramp(256*128)...)
	row := in("row", []int{1, 128}, ramp(128)...)
	y := in("y", []int{96, 128}, ramp(96*128)...)
	tests := map[string]func() []float64{
		"linear reference": func() []float64 {
			return evalOp(layerOp("linear", "x", "w", "bias"), []operand{x, w, bias}, []int{96, 128})
		},
		"matmul reference": func() []float64 { return evalOp(layerOp("matmul", "a", "b"), []operand{a, b}, []int{4, 96, 128}) },
		"add reference":    func() []float64 { return evalOp(layerOp("add", "y", "row"), []operand{y, row}, []int{96, 128}) },
		"broadcast reference": func() []float64 {
			return evalOp(broadcastOp(0), []operand{in("v", []int{96, 128}, y.vals...)}, []int{4, 96, 128})
		},
		"Matmul step": func() []float64 {
			c, _ := matmulStep(ptr(sharedB(mm([2]int{4 * 96 * 256, 4 * 96 * 128}, []int{4, 96, 256, 128}, 0))))
			return c.f(0, [][]float64{a.vals, b.vals})
		},
		"Matmul step, transpose_b": func() []float64 {
			s := sharedB(mm([2]int{4 * 96 * 256, 4 * 96 * 128}, []int{4, 96, 256, 128}, 0))
			s.TransposeB = true
			c, _ := matmulStep(&s)
			return c.f(0, [][]float64{a.vals, b.vals}) // b's values read as [128, 256]
		},
		"Pointwise step": func() []float64 {
			c, _ := pointwiseStep(ptr(pw("add", [2]int{96 * 128, 96 * 128}, []int{96, 128}, [][]int{{96, 128}, {1, 128}}, "y", "row")))
			return c.f(0, [][]float64{y.vals, row.vals})
		},
	}
	for name, f := range tests {
		t.Run(name, func(t *testing.T) {
			// The least of three runs: TotalAlloc counts the whole
			// process, and the runtime now and then allocates a few KiB
			// on another goroutine (cleanups after a GC).
			extra, n := int64(math.MaxInt64), 0
			for range 3 {
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				out := f()
				runtime.ReadMemStats(&after)
				n = len(out)
				extra = min(extra, int64(after.TotalAlloc-before.TotalAlloc)-allocBytes(int64(n)))
			}
			if extra > 1024 {
				t.Errorf("allocated %d bytes beyond its output of %d elements", extra, n)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }
