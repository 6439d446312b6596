package auto

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"

	"github.com/nvcomm/nvcomm/internal/cost"
	"github.com/nvcomm/nvcomm/internal/ir"
	"github.com/nvcomm/nvcomm/internal/lower"
	"github.com/nvcomm/nvcomm/internal/shard"
	"github.com/nvcomm/nvcomm/internal/syntax"
)

// priceFusions are layers with what the other tests' lack: a given input
// declared by a schedule and an allocation, a broadcast, an uneven
// shard, a linear with a bias, a 2-D mesh with a reduction's Partial
// output, and a Partial input (whose set nvcomm cannot price alone: its
// op fusion reads the terms with their reduction, which only a set may).
var priceFusions = map[string]string{
	"declared": `format: 2
meshes:
  m: [0, 1]
tensors:
  x:
    mesh: m
    shape: [8, 6]
    schedule:
      - outer_split: {axis: -1, factor: 2}
      - parallelize: {axis: 1, type: DIDx}
    allocation: [2, 0]
  w: {mesh: m, shape: [6, 6], placements: [Replicate()], allocation: [1, 0]}
  b: {mesh: m, shape: [6], placements: auto}
ops:
  - {op: linear, in: [x, w, b], out: h}
  - {op: neg, in: h, out: y}
`,
	"broadcast": `format: 2
meshes:
  m: [0, 1, 2]
tensors:
  x: {mesh: m, shape: [7, 5], placements: [Shard(0)]}
  b: {shape: [7, 3, 5], placements: auto}
ops:
  - {op: broadcast, in: x, out: b, axes: [1]}
  - {op: max, in: b, out: s, axis: -1}
  - {op: relu, in: s, out: y}
`,
	"2-D reduction": `format: 2
meshes:
  g: [[0, 1], [2, 3]]
tensors:
  x: {mesh: g, shape: [4, 8], placements: [Shard(0), Shard(1)]}
ops:
  - {op: sum, in: x, out: s, axis: 1}
  - {op: mul, in: [s, s], out: y}
`,
	"partial input": `format: 2
meshes:
  m: [0, 1]
tensors:
  p: {mesh: m, shape: [8, 4], placements: [Partial(sum)]}
  y: {placements: auto}
ops:
  - {op: set, in: p, out: y}
  - {op: relu, in: y, out: z}
`,
}

// TestPricesAsFiles prices every op of the layers under every
// combination of its tensors' options both by building its fusion and by
// writing it as a fusion file and parsing it, as auto did before the
// builder, and requires the same prices, the same plans, and the same
// cache keys: two combinations share a key exactly when their files are
// the same.
func TestPricesAsFiles(t *testing.T) {
	srcs := map[string]string{}
	for name, src := range layers {
		srcs[name] = src
	}
	for name, src := range priceFusions {
		srcs[name] = src
	}
	files, err := filepath.Glob("../../testdata/examples/auto_*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range files {
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		srcs[filepath.Base(path)] = string(src)
	}
	for name, src := range srcs {
		t.Run(name, func(t *testing.T) {
			m := unpricedModel(t, src)
			byKey, byFile := map[string]string{}, map[string]string{}
			outcomes := map[string]int{}
			defer func() {
				t.Logf("%d files: %d without a fusion, %d without a plan", len(byFile), outcomes["no fusion"], outcomes["no plan"])
			}()
			opts := lower.Options{Topology: cost.Default()}
			for _, fa := range m.factors {
				var combo []int
				for i := range fa.table {
					combo = m.combination(fa, i, combo)
					key, file := m.opKey(fa, combo), opFile(t, m, fa, combo)
					if k, ok := byFile[file]; ok || byKey[key] != "" {
						if k != key || byKey[key] != file {
							t.Fatalf("key %q and file\n%s\ndo not pair one to one", key, file)
						}
						continue // compared already
					}
					byKey[key], byFile[file] = file, key
					got, want := planText(t, opts, func() (*ir.Fusion, error) { return m.opFusion(fa, combo) }),
						planText(t, opts, func() (*ir.Fusion, error) { return syntax.Parse("auto.yaml", []byte(file)) })
					if d := cmp.Diff(want, got); d != "" {
						t.Fatalf("op %q, file\n%s\nplans differ (-file +built):\n%s", fa.op.Expr(), file, d)
					}
					outcomes[got]++
				}
			}
		})
	}
}

// planText is the plan of the fusion build makes, as JSON without the
// fusion's file, or why there is none ("no fusion", "no plan").
func planText(t *testing.T, opts lower.Options, build func() (*ir.Fusion, error)) string {
	f, err := build()
	if err != nil {
		return "no fusion"
	}
	f.File = ""
	p, err := lower.Lower(f, opts)
	if err != nil {
		return "no plan"
	}
	text, err := json.MarshalIndent(p, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return string(text)
}

// opFile writes the fusion of fa's op alone, its tensors sharded as combo
// chooses, as a fusion file: what auto parsed before the builder.
func opFile(t *testing.T, m *model, fa *factor, combo []int) string {
	var b strings.Builder
	b.WriteString("format: 2\nname: auto_op\nmeshes:\n")
	var meshes []*ir.Mesh
	for _, k := range fa.vars {
		if mesh := m.vars[k].t.Mesh; !slices.Contains(meshes, mesh) {
			meshes = append(meshes, mesh)
			fmt.Fprintf(&b, "  %s: %s\n", mesh.Name, meshYAML(mesh))
		}
	}
	b.WriteString("tensors:\n")
	for j, k := range fa.vars {
		v := m.vars[k]
		s := v.options[combo[j]]
		shape := v.t.Shape()
		if k != m.index[fa.op.Out] {
			s = s.held(v.produced)
		}
		if !v.produced && slices.ContainsFunc(s, func(p shard.Placement) bool { return p.Kind == shard.Partial }) {
			shape = shape[1:] // a Partial input's terms axis is not declared
		}
		keys := fmt.Sprintf("shape: %v, placements: %s", intList(shape), s)
		if steps, ok := combinedSchedule(v.t, s); ok && k == m.index[fa.op.Out] {
			// The op sums across the devices: placements would leave
			// pending terms.
			steps.Style = yaml.FlowStyle
			text, err := yaml.Marshal(steps)
			if err != nil {
				t.Fatal(err)
			}
			keys = fmt.Sprintf("shape: %v, schedule: %s", intList(shape), strings.TrimSpace(string(text)))
		}
		if v.decl != "" {
			keys = v.decl
		}
		fmt.Fprintf(&b, "  t%d: {mesh: %s, dtype: %s, %s}\n", j, v.t.Mesh.Name, v.t.DType, keys)
	}
	op := fa.op
	names := make([]string, len(op.Inputs))
	for i, in := range op.Inputs {
		names[i] = fmt.Sprintf("t%d", slices.Index(fa.vars, m.index[in]))
	}
	kind := op.Kind
	if len(op.Inputs) == 1 && op.In().Partial != "" {
		kind = ir.OpSet // the file's set of a Partial tensor, which the parser made its sum
	}
	names = op.Scalar.Args(names) // a number operand in its slot
	fmt.Fprintf(&b, "ops:\n  - {op: %s, in: [%s], out: t%d", kind, strings.Join(names, ", "), slices.Index(fa.vars, m.index[op.Out]))
	switch {
	case kind.TakesAxis():
		fmt.Fprintf(&b, ", axis: %d", op.Axis)
	case op.Kind == ir.OpBroadcast:
		b.WriteString(", axes: " + intList(op.Axes))
	}
	for _, v := range op.Attrs { // a YAML flow value as an expression writes it
		fmt.Fprintf(&b, ", %s: %s", v.Key, v.Text())
	}
	b.WriteString("}\n")
	return b.String()
}

func intList(xs []int) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprint(x)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// meshYAML writes a mesh's devices as nested lists: [[0, 1], [2, 3]].
func meshYAML(m *ir.Mesh) string {
	var b strings.Builder
	var walk func(axis, start int)
	walk = func(axis, start int) {
		b.WriteByte('[')
		stride := 1
		for _, e := range m.Shape[axis+1:] {
			stride *= e
		}
		for i := range m.Shape[axis] {
			if i > 0 {
				b.WriteString(", ")
			}
			if axis == len(m.Shape)-1 {
				fmt.Fprint(&b, m.Devices[start+i])
			} else {
				walk(axis+1, start+i*stride)
			}
		}
		b.WriteByte(']')
	}
	walk(0, 0)
	return b.String()
}
