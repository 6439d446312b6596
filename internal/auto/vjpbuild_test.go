package auto

import (
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/nvcomm/nvcomm/internal/cost"
	"github.com/nvcomm/nvcomm/internal/lower"
	"github.com/nvcomm/nvcomm/internal/syntax"
)

// TestGradientFusionAsText checks that the gradients' fusions built with
// the Source's declarations (vjpFusion) price exactly as their text
// (vjpSource) parsed did, for every combination of every gradient of
// every example with a backward section and of the training layers of
// these tests, and that vjpKeyer's keys tell the fusions apart exactly
// as their texts did (the memo shares the same prices).
func TestGradientFusionAsText(t *testing.T) {
	files, err := filepath.Glob("../../testdata/examples/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	srcs := map[string][]byte{"mlp": []byte(trainingMLP("")),
		"mlp_grad": []byte(trainingMLP("  w1.grad: {mesh: tp, shape: [32, 16], placements: [Shard(0)]}\n"))}
	for _, file := range files {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(src), "\nbackward:") {
			srcs[filepath.Base(file)] = src
		}
	}
	opts := lower.Options{Topology: cost.Default(), SkipBounds: true, Searches: lower.NewSearches()}
	total, direct := 0, 0
	for name, src := range srcs {
		f, err := syntax.ParseAuto(name, src)
		if err != nil {
			continue // an example of an error
		}
		tree, err := readSource(src)
		if err != nil {
			t.Fatal(err)
		}
		m, err := newModel(f, tree)
		if err != nil {
			continue
		}
		m.addGradients(tree)
		meshes := "{}"
		if n := lookup(tree.root(), "meshes"); n != nil {
			meshes = flowYAML(n)
		}
		byKey, byText := map[string]string{}, map[string]string{}
		for _, fa := range m.factors {
			if fa.vjp == nil {
				continue
			}
			total++
			if !m.direct(fa) {
				continue
			}
			direct++
			key := m.vjpKeyer(fa)
			real := fa.vjp.seed >= 0 || fa.vjp.one
			var combos [][]int
			for i := range fa.table {
				combo := m.combination(fa, i, nil)
				k, text := key(combo), m.vjpSource(meshes, fa, combo)
				if w, ok := byKey[k]; ok && w != text {
					t.Errorf("%s %s: key %q names two texts:\n%s\n%s", name, fa.vjp.out, k, w, text)
				}
				if w, ok := byText[text]; ok && w != k {
					t.Errorf("%s %s: text has two keys:\n%s\n%q\n%q", name, fa.vjp.out, text, w, k)
				}
				if _, ok := byKey[k]; !ok {
					combos = append(combos, combo)
				}
				byKey[k], byText[text] = text, k
			}
			var bad atomic.Int64
			parallel(len(combos), func(n int) {
				combo := combos[n]
				want := gradientPrice(m.vjpSource(meshes, fa, combo), real, fa.vjp.again, opts)
				got := int64(maxCost)
				if g, err := m.vjpFusion(fa, combo); err == nil {
					got = fusionGradientPrice(g, real, fa.vjp.again, opts)
				}
				if got != want && bad.Add(1) <= 3 {
					t.Errorf("%s %s %v: built %d ps, text %d ps\n%s", name, fa.vjp.out, combo, got, want, m.vjpSource(meshes, fa, combo))
				}
			})
		}
	}
	t.Logf("%d gradients, %d built without text", total, direct)
	if direct == 0 {
		t.Error("no gradient built without text")
	}
}
