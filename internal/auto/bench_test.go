package auto

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
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

// BenchmarkSolveBlocks times Solve on n identical MLP blocks with a
// residual add (scale.MLPBlocks), every mesh and count of the table of
// docs/auto.md.
func BenchmarkSolveBlocks(b *testing.B) {
	for _, mesh := range benchMeshes {
		for _, n := range benchBlocks {
			src := scale.MLPBlocks(n, mesh.shape)
			b.Run(fmt.Sprintf("mesh=%s/blocks=%d", mesh.name, n), func(b *testing.B) {
				for b.Loop() {
					if _, err := Solve("blocks.yaml", src, Options{}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// TestAutoScaleTable prints the table of solve times of docs/auto.md
// (make bench-auto; skipped unless NVCOMM_BENCH_AUTO is set): per mesh and
// block count, Solve's wall time, its ratio to decoding the same fusion's
// YAML (measured in the same run), the ops priced, and whether every
// block chose as the single block does; per mesh the slope of log time
// against log blocks from 2 blocks on (1: linear).
func TestAutoScaleTable(t *testing.T) {
	if os.Getenv("NVCOMM_BENCH_AUTO") == "" {
		t.Skip("set NVCOMM_BENCH_AUTO=1 (make bench-auto)")
	}
	var b strings.Builder
	b.WriteString("| mesh | blocks | solve | ÷ YAML decode | lowered | as 1 block |\n|---|---|---|---|---|---|\n")
	for _, mesh := range benchMeshes {
		var one []string
		var ns []int
		var times []time.Duration
		for _, n := range benchBlocks {
			src := scale.MLPBlocks(n, mesh.shape)
			decode, err := scale.YAMLDecode(src)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			res, err := Solve("blocks.yaml", src, Options{})
			took := time.Since(start)
			if err != nil {
				t.Fatal(err)
			}
			blocks := perBlock(res, n)
			if n == 1 {
				one = blocks[0]
			}
			same := "yes"
			for _, bl := range blocks {
				if !slices.Equal(bl, one) {
					same = "no"
				}
			}
			if n >= 2 {
				ns, times = append(ns, n), append(times, took)
			}
			row := fmt.Sprintf("| %s | %d | %.2f s | %.0f× | %d | %s |\n", mesh.name, n, took.Seconds(), float64(took)/float64(decode), res.Lowered, same)
			t.Log(row) // as it comes: the 3-D rows take minutes
			b.WriteString(row)
		}
		fmt.Fprintf(&b, "| %s | slope | %.2f | | | |\n", mesh.name, scale.Exponent(ns, times))
	}
	t.Log("\n" + b.String())
}

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
