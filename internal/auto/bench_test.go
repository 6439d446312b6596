package auto

import (
	"fmt"
	"testing"

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
