package plan

import (
	"math/rand/v2"
	"testing"
)

// TestDeviceSet checks that a set holds exactly the devices added, as
// bits (devices 0..n-1, or others numbered), in its map (devices in no
// mesh), and all in its map past maxSetBits devices.
func TestDeviceSet(t *testing.T) {
	dense, sparse, huge := map[int]bool{}, map[int]bool{}, map[int]bool{}
	for d := range 70 {
		dense[d], sparse[3*d+1000] = true, true
	}
	for d := range maxSetBits + 1 {
		huge[d] = true
	}
	for name, devices := range map[string]map[int]bool{"dense": dense, "sparse": sparse, "huge": huge} {
		v := &validator{devIndex: newDeviceIndex(devices)}
		s := v.newSet()
		added := []int{0, 1, 64, 69, 1003, 1207, -5, 1 << 40}
		for _, d := range added {
			s.add(&v.devIndex, d)
		}
		in := map[int]bool{}
		for _, d := range added {
			in[d] = true
		}
		for _, d := range []int{0, 1, 2, 63, 64, 65, 69, 70, 1000, 1003, 1207, 1209, -5, -1, 1 << 40, maxSetBits} {
			if got := s.has(&v.devIndex, d); got != in[d] {
				t.Errorf("%s: has(%d) = %v, want %v", name, d, got, in[d])
			}
		}
		if other := v.newSet(); other.has(&v.devIndex, 0) || other.has(&v.devIndex, 1003) {
			t.Errorf("%s: a new set shares the words of another", name)
		}
	}
}

// TestDeviceMarks compares deviceMarks with a map emptied at each reset,
// over random resets, marks and reads of devices in and out of the
// meshes, with devices numbered densely, sparsely or not at all (past
// maxSetBits), and across the wrap of its generation counter.
func TestDeviceMarks(t *testing.T) {
	dense, sparse, huge := map[int]bool{}, map[int]bool{}, map[int]bool{}
	for d := range 70 {
		dense[d], sparse[3*d+1000] = true, true
	}
	for d := range maxSetBits + 1 {
		huge[d] = true
	}
	devices := []int{0, 1, 2, 63, 64, 69, 70, 1000, 1003, 1207, 1209, -5, 1 << 40, maxSetBits}
	for name, in := range map[string]map[int]bool{"dense": dense, "sparse": sparse, "huge": huge} {
		x := newDeviceIndex(in)
		for _, start := range []uint32{0, ^uint32(0) - 3} {
			r := rand.New(rand.NewPCG(uint64(len(in)), uint64(start)))
			m := deviceMarks{cur: start}
			m.reset(x.n)
			model := map[int]int32{}
			for range 5000 {
				d := devices[r.IntN(len(devices))]
				switch r.IntN(8) {
				case 0:
					m.reset(x.n)
					clear(model)
				case 1, 2, 3:
					v := int32(r.IntN(5))
					m.set(&x, d, v)
					model[d] = v
				default:
					got, ok := m.get(&x, d)
					want, wantOK := model[d]
					if got != want || ok != wantOK {
						t.Fatalf("%s, from generation %d: get(%d) = %d, %v; want %d, %v", name, start, d, got, ok, want, wantOK)
					}
				}
			}
		}
	}
}
