package explain

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/cost"
	"github.com/nvcomm/nvcomm/internal/lower"
	"github.com/nvcomm/nvcomm/internal/plan"
)

// update rewrites the goldens (make golden sets it); review their diff
// before committing.
var update = os.Getenv("NVCOMM_UPDATE") != ""

// TestExamplesGolden explains the optimal plan of every example of
// testdata/examples, with the prices of its sdpas' forms and of its
// decomposed collectives as nvcomm explain shows them (lower.Forms,
// lower.Overlaps), and compares with testdata/NAME.txt.
func TestExamplesGolden(t *testing.T) {
	forExamples(t, ".txt", func(p *plan.Plan, b *bytes.Buffer) error {
		o := All()
		forms, err := lower.Forms(p, o.Topology)
		if err != nil {
			return err
		}
		for _, f := range forms {
			o.Forms = append(o.Forms, Form{Op: f.Op, Ring: f.Ring, Gather: f.Gather, Expansion: f.Expansion, Bytes: f.Bytes, Chosen: f.Chosen})
		}
		overlaps, err := lower.Overlaps(p, o.Topology)
		if err != nil {
			return err
		}
		for _, c := range overlaps {
			x := Overlap{Op: c.Op, Kind: c.Kind, Bytes: c.Bytes, Chosen: OverlapPrice(c.Chosen)}
			for _, pr := range c.Prices {
				x.Prices = append(x.Prices, OverlapPrice(pr))
			}
			o.Overlaps = append(o.Overlaps, x)
		}
		return Write(b, p, o)
	})
}

// TestTraceGolden compares the trace of the optimal plan of every example
// on the default topology with testdata/NAME.trace (JSON: a .json
// there would be taken for a golden plan).
func TestTraceGolden(t *testing.T) {
	forExamples(t, ".trace", func(p *plan.Plan, b *bytes.Buffer) error {
		pr, err := cost.Predict(cost.Default(), p)
		if err != nil {
			return err
		}
		tr, err := NewTrace(p, pr, cost.Default(), nil)
		if err != nil {
			return err
		}
		return tr.Write(b)
	})
}

// forExamples renders the optimal plan of every example of
// testdata/examples with render and compares with testdata/NAME+ext,
// which NVCOMM_UPDATE=1 rewrites.
func forExamples(t *testing.T, ext string, render func(*plan.Plan, *bytes.Buffer) error) {
	t.Helper()
	plans, err := filepath.Glob("../../testdata/examples/*.optimal.json")
	if err != nil || len(plans) == 0 {
		t.Fatalf("no example plans: %v", err)
	}
	for _, path := range plans {
		name := strings.TrimSuffix(filepath.Base(path), ".optimal.json")
		t.Run(name, func(t *testing.T) {
			var b bytes.Buffer
			if err := render(decode(t, path), &b); err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", name+ext)
			if update {
				if err := os.WriteFile(golden, b.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (NVCOMM_UPDATE=1 writes it)", err)
			}
			if diff := cmp.Diff(string(want), b.String()); diff != "" {
				t.Errorf("%s%s (-want +got):\n%s", name, ext, diff)
			}
		})
	}
}

// decode reads a plan file.
func decode(t *testing.T, path string) *plan.Plan {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Decode(path, src)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestDotGolden compares the Graphviz graph of every example with
// testdata/NAME.dot, and checks its structure: braces balance and every
// edge joins declared nodes.
func TestDotGolden(t *testing.T) {
	forExamples(t, ".dot", func(p *plan.Plan, b *bytes.Buffer) error {
		if err := WriteDot(b, p); err != nil {
			return err
		}
		checkDot(t, p.Fusion, b.String())
		return nil
	})
}

// checkDot checks a graph's structure without Graphviz.
func checkDot(t *testing.T, name, dot string) {
	t.Helper()
	if strings.Count(dot, "{") != strings.Count(dot, "}") {
		t.Errorf("%s: unbalanced braces", name)
	}
	nodes := map[string]bool{}
	for line := range strings.Lines(dot) {
		line = strings.TrimSpace(line)
		if id, rest, ok := strings.Cut(line, " ["); ok && !strings.Contains(id, "->") && strings.HasPrefix(rest, "shape=") {
			nodes[id] = true
		}
	}
	for line := range strings.Lines(dot) {
		from, rest, ok := strings.Cut(strings.TrimSpace(line), " -> ")
		if !ok {
			continue
		}
		to, _, _ := strings.Cut(rest, " [")
		if !nodes[from] || !nodes[to] {
			t.Errorf("%s: edge %s -> %s joins an undeclared node", name, from, to)
		}
	}
}

// TestDotRenders runs Graphviz on every example's graph where it is
// installed (Debian's graphviz package).
func TestDotRenders(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Graphviz 27 times")
	}
	dot, err := exec.LookPath("dot")
	if err != nil {
		t.Skip("no Graphviz dot in PATH (apt-get install graphviz)")
	}
	plans, _ := filepath.Glob("../../testdata/examples/*.optimal.json")
	for _, path := range plans {
		var b bytes.Buffer
		if err := WriteDot(&b, decode(t, path)); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(dot, "-Tsvg")
		cmd.Stdin = &b
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s: dot: %v\n%.500s", path, err, out)
		}
	}
}

// TestDocsShowGoldens: every picture, op or summary table that the README
// and docs/explain.md show as explain's output is explain's output now:
// each paragraph of their code blocks that holds placements, a step table
// or a summary's table stands, to the byte, in an example's golden file.
func TestDocsShowGoldens(t *testing.T) {
	goldens, err := filepath.Glob("testdata/*.txt")
	summaries, _ := filepath.Glob("testdata/*.summary")
	goldens = append(goldens, summaries...)
	if err != nil || len(goldens) == 0 {
		t.Fatalf("no goldens: %v", err)
	}
	var all strings.Builder
	for _, g := range goldens {
		b, err := os.ReadFile(g)
		if err != nil {
			t.Fatal(err)
		}
		all.Write(b)
	}
	shown := 0
	for _, doc := range []string{"../../README.md", "../../docs/explain.md"} {
		src, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for i, block := range strings.Split(string(src), "```") {
			if i%2 == 0 {
				continue // prose between the fences
			}
			for _, para := range strings.Split(strings.TrimPrefix(block, "\n"), "\n\n") {
				if !strings.Contains(para, "placements [") && !strings.Contains(para, "  step  type") && !strings.Contains(para, "  steps  ") {
					continue
				}
				shown++
				if !strings.Contains(all.String(), strings.TrimSuffix(para, "\n")+"\n") {
					t.Errorf("%s shows explain output that no golden has (make golden, then copy):\n%s", doc, para)
				}
			}
		}
	}
	if shown < 6 {
		t.Errorf("found %d paragraphs of explain output in the docs, want the seed's and the 2-D example's", shown)
	}
}
