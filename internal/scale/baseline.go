package scale

import (
	"math"
	"time"

	"go.yaml.in/yaml/v3"
)

// YAMLDecode is how long decoding src into yaml.Nodes takes: the part of
// reading a fusion that no algorithm of nvcomm can avoid, and the baseline
// of every ratio of lowering.
func YAMLDecode(src []byte) (time.Duration, error) {
	start := time.Now()
	var n yaml.Node
	err := yaml.Unmarshal(src, &n)
	return time.Since(start), err
}

// copyPiece is the largest copy CopyTime makes at once: larger than any
// cache, so that the copy runs at memory speed.
const copyPiece = 256 << 20

// CopyTime is how long Go's copy() takes to copy n bytes, in pieces of at
// most 256 MiB between two buffers whose pages are touched first: the
// bandwidth a simulation that moves bytes is compared with.
func CopyTime(n int64) time.Duration {
	src, dst := make([]byte, min(n, copyPiece)), make([]byte, min(n, copyPiece))
	for i := range src {
		src[i] = byte(i)
	}
	copy(dst, src)
	start := time.Now()
	for left := n; left > 0; left -= copyPiece {
		copy(dst[:min(left, copyPiece)], src)
	}
	return time.Since(start)
}

// Exponent is the slope of log t against log n fitted by least squares:
// how the time t[i] at size n[i] grows, 1 for linear, 2 for quadratic.
// It is NaN for fewer than two sizes or one size repeated.
func Exponent(n []int, t []time.Duration) float64 {
	var sx, sy, sxx, sxy float64
	for i := range n {
		x, y := math.Log(float64(n[i])), math.Log(t[i].Seconds())
		sx, sy, sxx, sxy = sx+x, sy+y, sxx+x*x, sxy+x*y
	}
	k := float64(len(n))
	den := k*sxx - sx*sx
	if len(n) < 2 || den == 0 {
		return math.NaN()
	}
	return (k*sxy - sx*sy) / den
}
