package auto

import (
	"fmt"
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nvcomm/nvcomm/internal/scale"
)

// benchMeshes are the meshes of the scale benchmark: 1-D, 2-D and 3-D.
var benchMeshes = []struct {
	name  string
	shape []int
}{{"8", []int{8}}, {"2x4", []int{2, 4}}, {"4x4", []int{4, 4}}, {"2x2x4", []int{2, 2, 4}}}

// benchBlocks are the block counts of the scale benchmark.
var benchBlocks = []int{1, 2, 4, 8, 32}

// benchFamilies are the block families of the scale benchmark: MLP
// blocks (scale.MLPBlocks) and transformer-like blocks
// (scale.TransformerBlocks).
var benchFamilies = []struct {
	name   string
	blocks func(n int, meshShape []int) []byte
}{{"mlp", scale.MLPBlocks}, {"transformer", scale.TransformerBlocks}}

// BenchmarkSolveBlocks times Solve on n identical blocks of each family,
// every mesh and count of the table of docs/auto.md, with the garbage
// collector's target lower --auto sets.
func BenchmarkSolveBlocks(b *testing.B) {
	defer debug.SetGCPercent(debug.SetGCPercent(GCPercent)) // as lower --auto runs
	for _, fam := range benchFamilies {
		for _, mesh := range benchMeshes {
			for _, n := range benchBlocks {
				src := fam.blocks(n, mesh.shape)
				b.Run(fmt.Sprintf("family=%s/mesh=%s/blocks=%d", fam.name, mesh.name, n), func(b *testing.B) {
					for b.Loop() {
						if _, err := Solve("blocks.yaml", src, Options{}); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		}
	}
}

// BenchmarkSolveTrainingStep times Solve on the tensor-parallel block's
// training step under the memory budget of docs/auto.md's training
// table, most of which is pricing the ops' gradients (vjp.go).
func BenchmarkSolveTrainingStep(b *testing.B) {
	defer debug.SetGCPercent(debug.SetGCPercent(GCPercent)) // as lower --auto runs
	src, err := os.ReadFile("../../testdata/examples/auto_tp_block_backward.yaml")
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := Solve("block.yaml", src, Options{MemoryBudget: 33 << 10}); err != nil {
			b.Fatal(err)
		}
	}
}

// benchLimit is the search's time limit in the scale table: past it the
// solve finishes greedily and reports its gap.
const benchLimit = 10 * time.Second

// TestAutoScaleTable prints the tables of solve times of docs/auto.md
// (make bench-auto; skipped unless NVCOMM_BENCH_AUTO is set, and
// NVCOMM_BENCH_AUTO=mlp or =transformer prints one family's): per family,
// mesh and block count, Solve's wall time (its search limited to
// benchLimit) and CPU time, the wall time's ratio to decoding the same fusion's YAML (measured in
// the same run), the fusions lowered, whether the search finished (else
// its gap), whether every block chose as every other and as the single
// block does; per mesh the slope of log time against log blocks from 2
// blocks on (1: linear).
func TestAutoScaleTable(t *testing.T) {
	only := os.Getenv("NVCOMM_BENCH_AUTO")
	if only == "" {
		t.Skip("set NVCOMM_BENCH_AUTO=1 (make bench-auto)")
	}
	defer debug.SetGCPercent(debug.SetGCPercent(GCPercent)) // as lower --auto runs
	for _, fam := range benchFamilies {
		if only == fam.name || only == "1" {
			t.Log("\n" + scaleTable(t, fam.name, fam.blocks))
		}
	}
}

// scaleTable is the table of one family of blocks.
func scaleTable(t *testing.T, family string, blocks func(n int, meshShape []int) []byte) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s blocks\n\n| mesh | blocks | solve | CPU | ÷ YAML decode | lowered | exact | blocks alike | as 1 block |\n|---|---|---|---|---|---|---|---|---|\n", family)
	for _, mesh := range benchMeshes {
		var one []string
		var ns []int
		var times []time.Duration
		for _, n := range benchBlocks {
			src := blocks(n, mesh.shape)
			decode, err := scale.YAMLDecode(src)
			if err != nil {
				t.Fatal(err)
			}
			start, cpu0 := time.Now(), cpuTime(t)
			res, err := Solve("blocks.yaml", src, Options{TimeLimit: benchLimit})
			took, cpu := time.Since(start), cpuTime(t)-cpu0
			if err != nil {
				t.Fatal(err)
			}
			per := perBlock(res, n)
			if n == 1 {
				one = per[0]
			}
			alike, same := "yes", "yes"
			for _, bl := range per {
				if !slices.Equal(bl, per[0]) {
					alike = "no"
				}
				if !slices.Equal(bl, one) {
					same = "no"
				}
			}
			exact := "yes"
			if !res.Exact {
				exact = fmt.Sprintf("no, gap %s", humanSeconds(res.Gap))
			}
			if n >= 2 {
				ns, times = append(ns, n), append(times, took)
			}
			row := fmt.Sprintf("| %s | %d | %.2f s | %.2f s | %.0f× | %d | %s | %s | %s |\n", mesh.name, n, took.Seconds(), cpu.Seconds(), float64(took)/float64(decode), res.Lowered, exact, alike, same)
			t.Log(family + " " + row) // as it comes: the 3-D rows take minutes
			b.WriteString(row)
		}
		fmt.Fprintf(&b, "| %s | slope | %.2f | | | | | | |\n", mesh.name, scale.Exponent(ns, times))
	}
	return b.String()
}

// cpuTime is the CPU time the process has used, user and system: unlike
// the wall time, it does not grow with other work on the machine.
func cpuTime(t *testing.T) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// humanSeconds writes a gap in µs.
func humanSeconds(s float64) string { return fmt.Sprintf("%.1f µs", s*1e6) }

// perBlock is each block's choices (weights, then intermediates but the
// block's output x<i>, given in the last) as "name placements" with the
// block's number dropped from the name.
func perBlock(res *Result, n int) [][]string {
	out := make([][]string, n)
	for _, d := range res.Decisions {
		i := strings.IndexFunc(d.Tensor, func(r rune) bool { return r >= '0' && r <= '9' })
		end := strings.LastIndexFunc(d.Tensor, func(r rune) bool { return r >= '0' && r <= '9' }) + 1
		block, err := strconv.Atoi(d.Tensor[i:end])
		if err != nil {
			continue
		}
		if d.Tensor[0] != 'x' && block >= 1 && block <= n { // x<i>, a boundary, differs when given
			out[block-1] = append(out[block-1], d.Tensor[:i]+d.Tensor[end:]+" "+d.Chosen)
		}
	}
	return out
}

// TestBlocksAsOne checks the per-block choices of N identical blocks
// against one block's with the same boundary. They agree but in one case,
// which is the optimum and not a tie: on 2×4 with the input and output
// split by rows along the first mesh axis (2 ways), one block keeps that
// split (91.1 µs), but each block is 12.7 µs faster with the rows split 4
// ways along the second (78.4 µs), and moving there and back at the ends
// costs some 91 µs (less since an op may be computed where its operands
// are and its result moved after): from 8 blocks on, N blocks split
// 4 ways (718.8 µs for 8, against 729.1 µs kept). With the boundary given
// split 4 ways, one block and 32 choose alike.
func TestBlocksAsOne(t *testing.T) {
	for _, tc := range []struct {
		mesh    []int
		rows, n int
		same    bool
	}{
		{[]int{8}, 0, 32, true},
		{[]int{2, 4}, 0, 7, true},
		{[]int{2, 4}, 0, 8, false},
		{[]int{2, 4}, 0, 32, false},
		{[]int{2, 4}, 1, 32, true},
	} {
		t.Run(fmt.Sprintf("%v rows along %d, %d blocks", tc.mesh, tc.rows, tc.n), func(t *testing.T) {
			one, err := Solve("blocks.yaml", scale.MLPBlocksSplit(1, tc.mesh, tc.rows), Options{})
			if err != nil {
				t.Fatal(err)
			}
			res, err := Solve("blocks.yaml", scale.MLPBlocksSplit(tc.n, tc.mesh, tc.rows), Options{})
			if err != nil {
				t.Fatal(err)
			}
			want := perBlock(one, 1)[0]
			same := true
			for _, bl := range perBlock(res, tc.n) {
				same = same && slices.Equal(bl, want)
			}
			if same != tc.same {
				t.Errorf("every block chose as one block: %v, want %v", same, tc.same)
			}
			if repeated := float64(tc.n) * one.Seconds; !same && res.Seconds >= repeated {
				t.Errorf("%d blocks chose otherwise than one block at %.4g s, not faster than one block's choice repeated (%.4g s)", tc.n, res.Seconds, repeated)
			}
		})
	}
}

// BenchmarkSolveWithinBudget times Solve under a budget that binds (60 %
// of the unbounded choice's peak) on n transformer-like blocks of the
// 2×4 mesh: the exact search, whose Pareto sets grow with the blocks,
// against the search that prices bytes first (NoRunnerUps, as model
// --auto runs it; budget.go).
func BenchmarkSolveWithinBudget(b *testing.B) {
	defer debug.SetGCPercent(debug.SetGCPercent(GCPercent)) // as lower --auto runs
	for _, n := range []int{1, 2, 4} {
		src := scale.TransformerBlocks(n, []int{2, 4})
		free, err := Solve("blocks.yaml", src, Options{NoRunnerUps: true})
		if err != nil {
			b.Fatal(err)
		}
		budget := free.PeakBytes * 6 / 10
		for _, search := range []struct {
			name string
			opts Options
		}{{"exact", Options{MemoryBudget: budget}}, {"priced", Options{MemoryBudget: budget, NoRunnerUps: true}}} {
			b.Run(fmt.Sprintf("blocks=%d/search=%s", n, search.name), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := Solve("blocks.yaml", src, search.opts); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
