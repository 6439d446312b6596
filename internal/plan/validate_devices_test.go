package plan

import "testing"

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
