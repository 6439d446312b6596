package explain

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/plan"
)

// update rewrites the goldens (make golden sets it); review their diff
// before committing.
var update = os.Getenv("NVCOMM_UPDATE") != ""

// TestExamplesGolden explains the optimal plan of every example of
// testdata/examples and compares with testdata/NAME.txt.
func TestExamplesGolden(t *testing.T) {
	plans, err := filepath.Glob("../../testdata/examples/*.optimal.json")
	if err != nil || len(plans) == 0 {
		t.Fatalf("no example plans: %v", err)
	}
	for _, path := range plans {
		name := strings.TrimSuffix(filepath.Base(path), ".optimal.json")
		t.Run(name, func(t *testing.T) {
			p := decode(t, path)
			var b bytes.Buffer
			if err := Write(&b, p, All()); err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", name+".txt")
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
				t.Errorf("explain %s (-want +got):\n%s", name, diff)
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

// TestDotGolden compares the Graphviz graph of two examples with
// testdata/NAME.dot, and checks every example's graph: braces balance and
// every edge joins declared nodes.
func TestDotGolden(t *testing.T) {
	plans, _ := filepath.Glob("../../testdata/examples/*.optimal.json")
	for _, path := range plans {
		name := strings.TrimSuffix(filepath.Base(path), ".optimal.json")
		var b bytes.Buffer
		if err := WriteDot(&b, decode(t, path)); err != nil {
			t.Fatal(err)
		}
		checkDot(t, name, b.String())
		if name != "megatron_mlp" && name != "sequence_parallel_mlp" {
			continue
		}
		golden := filepath.Join("testdata", name+".dot")
		if update {
			if err := os.WriteFile(golden, b.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatalf("%v (NVCOMM_UPDATE=1 writes it)", err)
		}
		if diff := cmp.Diff(string(want), b.String()); diff != "" {
			t.Errorf("dot %s (-want +got):\n%s", name, diff)
		}
	}
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
