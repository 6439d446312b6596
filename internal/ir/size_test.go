package ir

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestBytes(t *testing.T) {
	type result struct {
		Bytes int64
		OK    bool
	}
	tests := []struct {
		shape []int
		dtype DType
		want  result
	}{
		{nil, "float32", result{4, true}},
		{[]int{8, 1024}, "float16", result{16384, true}},
		{[]int{1 << 30, 1 << 30, 1}, "float32", result{1 << 62, true}},
		// The largest: (2^31-1)^2 elements of 2 bytes is 2^63 - 2^33 + 2.
		{[]int{math.MaxInt32, math.MaxInt32}, "bfloat16", result{math.MaxInt64 - 1<<33 + 3, true}},
		{[]int{math.MaxInt32, math.MaxInt32}, "float32", result{0, false}},
		// Issue 10: 2^64 bytes (Allgather bytes 0) and 2^65 (export panicked).
		{[]int{65536, 65536, 65536, 65536}, "float32", result{0, false}},
		{[]int{1 << 30, 1 << 30, 8}, "float32", result{0, false}},
		{[]int{1 << 30, 1 << 30, 2}, "float32", result{0, false}}, // exactly 2^63
		{[]int{1 << 30, 1 << 30, 1}, "float64", result{0, false}},
	}
	for _, tt := range tests {
		b, ok := Bytes(tt.shape, tt.dtype)
		if diff := cmp.Diff(tt.want, result{b, ok}); diff != "" {
			t.Errorf("Bytes(%v, %s) mismatch (-want +got):\n%s", tt.shape, tt.dtype, diff)
		}
	}
}

// TestParseLargeTensors parses tensors at the size limit: they are valid,
// and every size nvcomm derives from them is exact.
func TestParseLargeTensors(t *testing.T) {
	type sizes struct {
		Padded     []int
		Bytes      int64
		LocalSize  int
		LocalShape []int
	}
	tests := []struct {
		name, src string
		want      sizes
	}{{
		name: "largest",
		src: `meshes: {m: [0, 1]}
tensors:
  x:
    mesh: m
    dtype: float16
    shape: [2147483647, 2147483647]
    placements: [Shard(1)]
`,
		// Shard(1) pads the odd extent: (2^31-1)·2^31 elements of 2 bytes.
		want: sizes{[]int{2147483647, 1 << 31}, 1<<63 - 1<<32, 2147483647 << 30, []int{2147483647, 1 << 30}},
	}, {
		name: "padded_to_the_limit",
		src: `meshes: {m: [0, 1]}
tensors:
  x:
    mesh: m
    dtype: float16
    shape: [1073741825, 1073741824]
    schedule:
      - split: {axis: 0, factor: 1073741824}
      - parallelize: {axis: 0, type: DIDx}
`,
		want: sizes{[]int{1 << 31, 1 << 30}, 1 << 62, 1 << 60, []int{1 << 30, 1 << 30}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Parse("in.yaml", []byte(tt.src))
			if err != nil {
				t.Fatal(err)
			}
			x := f.Tensor("x")
			b, ok := Bytes(x.PaddedShape(), x.DType)
			if !ok {
				t.Fatalf("Bytes(%v, %s) overflows", x.PaddedShape(), x.DType)
			}
			got := sizes{x.PaddedShape(), b, x.LocalSize(), x.LocalShape()}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
