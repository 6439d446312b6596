package plan_test

import (
	"runtime"
	"testing"
	"time"

	"github.com/nvcomm/nvcomm/internal/lower"
	"github.com/nvcomm/nvcomm/internal/plan"
	"github.com/nvcomm/nvcomm/internal/scale"
	"github.com/nvcomm/nvcomm/internal/syntax"
)

// BenchmarkDecode decodes the plans of generated fusions (the 100k-op ones
// are 105 and 200 MB) with fastDecode and with decodeLibrary (the JSON
// library, go-json-experiment/json), in the same run, one after the
// other: x-faster is how many times faster fastDecode is in wall time,
// x-faster-cpu in CPU time (which varies less on a busy machine); allocs
// and MB-alloc are per decode; x-lower is a decode's wall time over that
// of making the plan as `nvcomm lower` does (parse, lower, encode; timed
// once, before the decodes).
func BenchmarkDecode(b *testing.B) {
	for _, in := range []struct {
		name string
		gen  func() []byte
	}{
		{"chain1d_10k", func() []byte { return scale.Chain(10_000, scale.Mesh1D) }},
		{"chain1d_100k", func() []byte { return scale.Chain(100_000, scale.Mesh1D) }},
		{"mixed1_10k", func() []byte { return scale.Mixed(10_000, 1) }},
		{"mixed1_100k", func() []byte { return scale.Mixed(100_000, 1) }},
	} {
		b.Run(in.name, func(b *testing.B) {
			src, lowering := lowered(b, in.name, in.gen())
			var fast, lib cost
			for b.Loop() {
				fast.add(func() {
					if _, ok := plan.FastDecode(src); !ok {
						b.Fatal("fastDecode declined the plan")
					}
				})
				lib.add(func() {
					if _, err := plan.LibraryDecode(in.name, src); err != nil {
						b.Fatal(err)
					}
				})
			}
			n := float64(b.N)
			b.ReportMetric(float64(len(src))/1e6, "MB-plan")
			b.ReportMetric(fast.wall.Seconds()*1e3/n, "ms-fast")
			b.ReportMetric(lib.wall.Seconds()*1e3/n, "ms-lib")
			b.ReportMetric(float64(lib.wall)/float64(fast.wall), "x-faster")
			if fast.cpu > 0 {
				b.ReportMetric(float64(lib.cpu)/float64(fast.cpu), "x-faster-cpu")
			}
			b.ReportMetric(fast.wall.Seconds()/n/lowering.Seconds(), "x-lower-fast")
			b.ReportMetric(lib.wall.Seconds()/n/lowering.Seconds(), "x-lower-lib")
			b.ReportMetric(float64(fast.allocs)/n, "allocs-fast")
			b.ReportMetric(float64(lib.allocs)/n, "allocs-lib")
			b.ReportMetric(float64(fast.bytes)/1e6/n, "MB-alloc-fast")
			b.ReportMetric(float64(lib.bytes)/1e6/n, "MB-alloc-lib")
		})
	}
}

// lowered is the plan of a fusion, encoded, and the wall time it took to
// parse, lower and encode.
func lowered(b *testing.B, name string, src []byte) ([]byte, time.Duration) {
	runtime.GC()
	start := time.Now()
	f, err := syntax.Parse(name+".yaml", src)
	if err != nil {
		b.Fatal(err)
	}
	p, err := lower.Lower(f, lower.Options{})
	if err != nil {
		b.Fatal(err)
	}
	js, err := plan.Marshal(p)
	if err != nil {
		b.Fatal(err)
	}
	return js, time.Since(start)
}

// cost sums the time and allocations of runs of a function.
type cost struct {
	wall, cpu     time.Duration
	allocs, bytes uint64
}

// add runs f once and adds what it took.
func (c *cost) add(f func()) {
	var before, after runtime.MemStats
	runtime.GC() // each decode starts from the same heap
	runtime.ReadMemStats(&before)
	cpu, start := scale.CPUTime(), time.Now()
	f()
	c.wall += time.Since(start)
	c.cpu += scale.CPUTime() - cpu
	runtime.ReadMemStats(&after)
	c.allocs += after.Mallocs - before.Mallocs
	c.bytes += after.TotalAlloc - before.TotalAlloc
}
