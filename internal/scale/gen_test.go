package scale_test

import (
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"

	"github.com/nvcomm/nvcomm/internal/scale"
	"github.com/nvcomm/nvcomm/internal/syntax"
)

// TestInputsParse parses every generated input: a generator that wrote a
// fusion the parser rejects would make every benchmark fail late.
func TestInputsParse(t *testing.T) {
	inputs := map[string][]byte{
		"chain1d": scale.Chain(10, scale.Mesh1D),
		"chain2d": scale.Chain(10, scale.Mesh2x4),
		"mesh":    scale.BigMesh(16),
		"nested":  scale.MeshChange(2, 2, 4, scale.MeshChanges[1]),
	}
	for _, big := range scale.BigTensors() {
		inputs[big.Name] = big.Src
	}
	for _, f := range scale.Families {
		inputs[f.Name] = f.Gen(24)
	}
	for name, src := range inputs {
		f, err := syntax.Parse(name+".yaml", src)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if len(f.Ops) == 0 {
			t.Errorf("%s: no ops", name)
		}
	}
}

// TestChainOps checks that a chain of n ops has n ops and n+1 tensors.
func TestChainOps(t *testing.T) {
	for _, mesh := range []scale.Mesh{scale.Mesh1D, scale.Mesh2x4} {
		f, err := syntax.Parse("chain.yaml", scale.Chain(7, mesh))
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff([2]int{7, 8}, [2]int{len(f.Ops), len(f.Tensors)}); d != "" {
			t.Errorf("%s: ops, tensors (-want +got):\n%s", mesh, d)
		}
	}
}

// TestMixedOps checks that the mixed family's fusions have the ops asked
// for, that most are reductions or sets from Partial inputs, and that
// format 2 leaves the layer chain's adds to propagation.
func TestMixedOps(t *testing.T) {
	for _, format := range []int{1, 2} {
		f, err := syntax.Parse("mixed.yaml", scale.Mixed(80, format))
		if err != nil {
			t.Fatal(err)
		}
		kinds := map[string]int{}
		for _, op := range f.Ops {
			kinds[string(op.Kind)]++
			if op.Out.Propagated {
				kinds["propagated "+string(op.Kind)]++
			}
		}
		// A set from a Partial input is the reduction it resolves.
		want := map[string]int{"sum": 20, "max": 20, "prod": 10, "set": 10, "relu": 10, "add": 10}
		if format == 2 {
			want["propagated add"] = 10
		}
		if d := cmp.Diff(want, kinds); d != "" {
			t.Errorf("format %d: ops by kind (-want +got):\n%s", format, d)
		}
	}
}

// TestShapes3D lists the 3-D shapes of 16 devices, and counts those of
// 4,096 (2¹²: the ways to write 12 as a sum of three parts of at least 1).
func TestShapes3D(t *testing.T) {
	want := [][3]int{{2, 2, 4}, {2, 4, 2}, {4, 2, 2}}
	if d := cmp.Diff(want, scale.Shapes3D(16)); d != "" {
		t.Errorf("Shapes3D(16) (-want +got):\n%s", d)
	}
	if got := len(scale.Shapes3D(4096)); got != 55 {
		t.Errorf("Shapes3D(4096) has %d shapes, want 55", got)
	}
	for _, s := range scale.Shapes3D(4096) {
		if s[0]*s[1]*s[2] != 4096 {
			t.Errorf("shape %v has %d devices", s, s[0]*s[1]*s[2])
		}
	}
}

// TestMeshChangeDevices checks that a mesh change lists every device once,
// in row-major order.
func TestMeshChangeDevices(t *testing.T) {
	var doc struct {
		Meshes map[string][][][]int `yaml:"meshes"`
	}
	if err := yaml.Unmarshal(scale.MeshChange(2, 3, 4, scale.MeshChanges[0]), &doc); err != nil {
		t.Fatal(err)
	}
	var got []int
	for _, plane := range doc.Meshes["m"] {
		for _, row := range plane {
			got = append(got, row...)
		}
	}
	want := make([]int, 24)
	for i := range want {
		want[i] = i
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("devices (-want +got):\n%s", d)
	}
}

// TestExponent fits power laws (rounded to whole nanoseconds), and refuses
// a fit of one size.
func TestExponent(t *testing.T) {
	n := []int{1_000, 10_000, 100_000}
	for _, k := range []float64{1, 1.5, 2} {
		ts := make([]time.Duration, len(n))
		for i, x := range n {
			ts[i] = time.Duration(math.Pow(float64(x), k))
		}
		if got := scale.Exponent(n, ts); math.Abs(got-k) > 1e-4 {
			t.Errorf("exponent of n^%g: got %g", k, got)
		}
	}
	if got := scale.Exponent(n[:1], []time.Duration{time.Second}); !math.IsNaN(got) {
		t.Errorf("exponent of one size: got %g, want NaN", got)
	}
}
