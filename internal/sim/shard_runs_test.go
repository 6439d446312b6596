package sim

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/nvcomm/nvcomm/internal/plan"
)

// referenceOffsets is the definition of a shard that eachRun computes run
// by run (and what the simulator computed before it had runs): every loop
// point in allocation order, device axes fixed, replayed one by one to its
// logical offset, holes skipped, and sorted when there is no allocation.
func referenceOffsets(s *sharder, device int) []int {
	c, ok := s.at.coords(device)
	if !ok {
		return nil
	}
	vals := make([]int, len(s.d.ids))
	ext := make([]int, len(s.order))
	for k, pos := range s.order {
		ext[k] = s.extentOf(pos)
	}
	for pos, id := range s.d.loop {
		if s.role[pos] == roleDevice {
			vals[id] = c[s.meshAxis[pos]]
			if vals[id] >= s.d.ids[id].extent {
				return nil
			}
		}
	}
	var offs []int
	for point := range odometer(ext) {
		for k, pos := range s.order {
			if s.role[pos] == roleIterate {
				vals[s.d.loop[pos]] = point[k]
			}
		}
		if off, ok := s.logicalOffset(vals); ok {
			offs = append(offs, off)
		}
	}
	if s.sorted {
		slices.Sort(offs)
	}
	return offs
}

// runOffsets expands eachRun's runs into offsets, checking that size
// agrees and that runs are joined (no run continues the previous one).
func runOffsets(t *testing.T, s *sharder, device int) []int {
	t.Helper()
	var offs, scratch []int
	var prev run
	s.eachRun(device, &scratch, func(r run) bool {
		if r.n < 1 {
			t.Fatalf("empty run %+v", r)
		}
		if prev.n > 1 && r.off == prev.at(prev.n) && r.stride == prev.stride {
			t.Errorf("run %+v continues %+v but was not joined", r, prev)
		}
		for i := range r.n {
			offs = append(offs, r.at(i))
		}
		prev = r
		return true
	})
	if n := s.size(device, &scratch); n != len(offs) {
		t.Errorf("size %d, runs hold %d elements", n, len(offs))
	}
	return offs
}

// checkRuns compares every device's runs with the reference, and one
// device outside the mesh.
func checkRuns(t *testing.T, tv plan.Tensor, m plan.Mesh) {
	t.Helper()
	s, err := newSharder(tv, m)
	if err != nil {
		return
	}
	for _, d := range append(slices.Clone(m.Devices), slices.Max(m.Devices)+1) {
		got, want := runOffsets(t, s, d), referenceOffsets(s, d)
		if !slices.Equal(got, want) {
			t.Fatalf("tensor %+v on mesh %v, device %d:\nruns      %v\nreference %v", tv, m, d, got, want)
		}
	}
}

// TestRunsMatchReferenceOnGoldens checks every tensor of every golden
// plan.
func TestRunsMatchReferenceOnGoldens(t *testing.T) {
	var files []string
	for _, dir := range []string{"conformance", "examples", "regress"} {
		fs, _ := filepath.Glob(filepath.Join("..", "..", "testdata", dir, "*.json"))
		files = append(files, fs...)
	}
	if len(files) < 100 {
		t.Fatalf("found only %d golden plans", len(files))
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		p, err := plan.Decode(f, src)
		if err != nil {
			t.Fatal(err)
		}
		for _, tv := range p.Tensors {
			if elements(tv.Shape) > maxCheckedElements {
				continue // the reference walks every element: see maxCheckedElements
			}
			checkRuns(t, tv, p.Meshes[tv.Mesh])
		}
	}
}

// maxCheckedElements bounds the tensors TestRunsMatchReferenceOnGoldens
// checks: its reference visits each element, and two examples hold
// tensors of 2^26 to 2^28 elements (tp_mlp_overlap_auto at a realistic
// size, vocab_parallel_embedding_sp_backward's products over its
// vocabulary), which took it from 16 s to 245 s; the next largest are
// 2^24.
const maxCheckedElements = 1 << 25

// elements is the product of shape's extents.
func elements(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// TestRunsMatchReference checks random tensors: shapes with reduction
// axes, schedules of splits, merges, reorders and parallelizations,
// allocations, on meshes of up to three dimensions.
func TestRunsMatchReference(t *testing.T) {
	for seed := range uint64(20000) {
		tv, m := randomTensor(rand.New(rand.NewPCG(seed, 13)))
		checkRuns(t, tv, m)
		if t.Failed() {
			t.Fatalf("seed %d", seed)
		}
	}
}

// FuzzRuns is TestRunsMatchReference for any seed.
func FuzzRuns(f *testing.F) {
	for seed := range uint64(8) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, seed uint64) {
		tv, m := randomTensor(rand.New(rand.NewPCG(seed, 13)))
		checkRuns(t, tv, m)
	})
}

// randomTensor returns a small random tensor and mesh; some are invalid
// (newSharder refuses them, and checkRuns skips them).
func randomTensor(r *rand.Rand) (plan.Tensor, plan.Mesh) {
	rank := 1 + r.IntN(3)
	tv := plan.Tensor{Name: "t", Shape: make([]int, rank)}
	for i := range tv.Shape {
		tv.Shape[i] = 1 + r.IntN(7)
		if r.IntN(5) == 0 {
			tv.ReductionAxes = append(tv.ReductionAxes, i)
		}
	}
	loop := rank
	types := []string{"DIDx", "DIDy", "DIDz", "Serial"}
	for range r.IntN(6) {
		switch r.IntN(5) {
		case 0:
			tv.Schedule = append(tv.Schedule, isplit(r.IntN(loop), 1+r.IntN(4)))
			loop++
		case 1:
			tv.Schedule = append(tv.Schedule, osplit(r.IntN(loop), 1+r.IntN(4)))
			loop++
		case 2:
			if loop > 1 {
				tv.Schedule = append(tv.Schedule, mergeAt(r.IntN(loop-1)))
				loop--
			}
		case 3:
			tv.Schedule = append(tv.Schedule, reorderTo(r.Perm(loop)...))
		default:
			tv.Schedule = append(tv.Schedule, par(r.IntN(loop), types[r.IntN(len(types))]))
		}
	}
	if r.IntN(3) == 0 {
		tv.Allocation = r.Perm(loop)
	}
	shape := make([]int, 1+r.IntN(3))
	n := 1
	for i := range shape {
		shape[i] = 1 + r.IntN(3)
		n *= shape[i]
	}
	devices := r.Perm(n + r.IntN(3))[:n]
	if r.IntN(2) == 0 {
		slices.Sort(devices)
	}
	return tv, plan.Mesh{Shape: shape, Devices: devices}
}
