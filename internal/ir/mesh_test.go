package ir

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestMeshIndex checks Index and Contains against a linear search, for
// consecutive ids (which need no map), shuffled ids and ids that wrap.
func TestMeshIndex(t *testing.T) {
	tests := map[string]struct {
		devices []int
		probe   []int
	}{
		"consecutive from 0":  {devices: []int{0, 1, 2, 3}, probe: []int{-1, 0, 3, 4}},
		"consecutive from 8":  {devices: []int{8, 9, 10}, probe: []int{0, 7, 8, 10, 11}},
		"shuffled":            {devices: []int{4, 5, 6, 7, 0, 1, 2, 3}, probe: []int{0, 3, 4, 7, 8}},
		"gaps":                {devices: []int{0, 2, 4}, probe: []int{1, 2, 3, 4}},
		"one device":          {devices: []int{5}, probe: []int{4, 5, 6}},
		"empty":               {devices: nil, probe: []int{0}},
		"wraps past MaxInt":   {devices: []int{math.MaxInt, math.MinInt}, probe: []int{math.MaxInt, math.MinInt, 0}},
		"repeated id (first)": {devices: []int{3, 1, 3}, probe: []int{1, 3}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			m := &Mesh{Shape: []int{len(tt.devices)}, Devices: tt.devices}
			var want, got []int
			var wantIn, gotIn []bool
			for _, d := range tt.probe {
				want = append(want, linearIndex(tt.devices, d))
				got = append(got, m.Index(d))
				wantIn = append(wantIn, linearIndex(tt.devices, d) >= 0)
				gotIn = append(gotIn, m.Contains(d))
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("Index (-want +got):\n%s", d)
			}
			if d := cmp.Diff(wantIn, gotIn); d != "" {
				t.Errorf("Contains (-want +got):\n%s", d)
			}
		})
	}
}

// linearIndex is the definition Index must agree with.
func linearIndex(devices []int, d int) int {
	for i, x := range devices {
		if x == d {
			return i
		}
	}
	return -1
}

// TestMeshCoord checks Coord against Coords on a 3-D mesh.
func TestMeshCoord(t *testing.T) {
	m := &Mesh{Shape: []int{2, 3, 4}, Devices: make([]int, 24)}
	var want, got [][3]int
	for i := range m.Devices {
		c := m.Coords(i)
		want = append(want, [3]int{c[2], c[1], c[0]})
		got = append(got, [3]int{m.Coord(i, DIDx), m.Coord(i, DIDy), m.Coord(i, DIDz)})
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Coord (-want +got):\n%s", d)
	}
}
