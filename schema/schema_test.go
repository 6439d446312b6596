package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"

	"github.com/nvcomm/nvcomm/internal/cost"
)

// root is the repository's root, from this package's directory.
const root = ".."

// compile compiles the schema file name, checking it against the draft
// 2020-12 meta-schema on the way.
func compile(t *testing.T, name string) *jsonschema.Schema {
	t.Helper()
	src, err := Files.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(src))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if id, _ := doc.(map[string]any)["$id"].(string); id != BaseURL+name {
		t.Errorf("%s: $id is %q, want %q", name, id, BaseURL+name)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(BaseURL+name, doc); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	sch, err := c.Compile(BaseURL + name)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return sch
}

// fromYAML converts a YAML document to the JSON value an editor's YAML
// language server checks against a schema: mappings become objects,
// sequences arrays, and scalars take the type their tag resolves to.
//
// It refuses what nvcomm refuses before any schema applies: text that is
// not UTF-8, anchors and aliases, and keys that are not scalars (JSON has
// only string keys).
func fromYAML(src []byte) (any, error) {
	if !utf8.Valid(src) {
		return nil, errors.New("not UTF-8")
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		return nil, err
	}
	if len(doc.Content) == 0 {
		return nil, nil // an empty document is null
	}
	v, err := yamlValue(doc.Content[0], 0)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return jsonschema.UnmarshalJSON(bytes.NewReader(b))
}

// yamlValue converts one node at the given depth.
func yamlValue(n *yaml.Node, depth int) (any, error) {
	if depth > 1000 {
		return nil, errors.New("nested deeper than 1000")
	}
	switch n.Kind {
	case yaml.AliasNode:
		return nil, errors.New("an alias: nvcomm reads no anchors and aliases")
	case yaml.SequenceNode:
		out := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			v, err := yamlValue(c, depth+1)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	case yaml.MappingNode:
		out := map[string]any{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			if k := n.Content[i]; k.Kind != yaml.ScalarNode {
				return nil, fmt.Errorf("line %d: a key that is not a string", k.Line)
			}
			v, err := yamlValue(n.Content[i+1], depth+1)
			if err != nil {
				return nil, err
			}
			out[n.Content[i].Value] = v
		}
		return out, nil
	}
	switch n.ShortTag() {
	case "!!null":
		return nil, nil
	case "!!bool":
		var b bool
		if n.Decode(&b) == nil {
			return b, nil
		}
	case "!!int":
		var i int64
		if n.Decode(&i) == nil {
			return json.Number(strconv.FormatInt(i, 10)), nil
		}
		var f float64
		if n.Decode(&f) == nil && !math.IsInf(f, 0) && !math.IsNaN(f) {
			return f, nil
		}
	case "!!float":
		var f float64
		if n.Decode(&f) == nil && !math.IsInf(f, 0) && !math.IsNaN(f) {
			return f, nil
		}
	}
	return n.Value, nil // a string, or a tagged scalar that is not what its tag says
}

// files lists the files matching each pattern, relative to the repository.
func files(t *testing.T, patterns ...string) []string {
	t.Helper()
	var out []string
	for _, p := range patterns {
		m, err := filepath.Glob(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m...)
	}
	slices.Sort(out)
	return out
}

// validate reads a YAML or JSON file and validates it against sch.
func validate(t *testing.T, sch *jsonschema.Schema, path string) error {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if strings.HasSuffix(path, ".json") {
		v, err = jsonschema.UnmarshalJSON(bytes.NewReader(src))
	} else {
		v, err = fromYAML(src)
	}
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return sch.Validate(v)
}

// TestFusionsValidate: every example, conformance, regression and export
// fusion of the repository is valid against fusion.schema.json, but the
// conformance cases whose expected result is a schema-level error.
func TestFusionsValidate(t *testing.T) {
	sch := compile(t, Fusion)
	paths := files(t, "testdata/examples/*.yaml", "testdata/conformance/*.yaml", "testdata/regress/*.yaml", "testdata/export/*.yaml")
	if len(paths) < 100 {
		t.Fatalf("found %d fusion files, expected the repository's examples and conformance corpus", len(paths))
	}
	for _, p := range paths {
		err := validate(t, sch, p)
		name := strings.TrimSuffix(filepath.Base(p), ".yaml")
		if why, rejected := conformanceRejects[name]; rejected {
			if err == nil {
				t.Errorf("%s: valid, want rejected: %s", p, why)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
}

// conformanceRejects are the conformance fusions whose expected result is
// an error that the schema states.
var conformanceRejects = map[string]string{
	"E-13_unsupported_reduction_op": "sub takes two operands and no axis",
}

// TestExamplesNameTheirSchema: every example starts with the comment that
// points the YAML language server at the fusion schema.
func TestExamplesNameTheirSchema(t *testing.T) {
	const want = "# yaml-language-server: $schema=../../schema/" + Fusion
	for _, p := range files(t, "testdata/examples/*.yaml") {
		src, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if first, _, _ := strings.Cut(string(src), "\n"); first != want {
			t.Errorf("%s: first line is %q, want %q", p, first, want)
		}
	}
}

// TestPlansValidate: every golden plan is valid against plan.schema.json.
func TestPlansValidate(t *testing.T) {
	sch := compile(t, Plan)
	paths := files(t, "testdata/*/*.json", "internal/export/testdata/*.json")
	if len(paths) < 100 {
		t.Fatalf("found %d plans, expected the repository's golden plans", len(paths))
	}
	for _, p := range paths {
		if err := validate(t, sch, p); err != nil {
			t.Errorf("%s: %v (if the plan format gained a field, add it to schema/%s)", p, err, Plan)
		}
	}
}

// TestTopologiesValidate: the built-in topology, a topology as calibrate
// --fit writes it, and the topologies under docs/ are valid against
// topology.schema.json.
func TestTopologiesValidate(t *testing.T) {
	sch := compile(t, Topology)
	check := func(name string, src []byte) {
		t.Helper()
		v, err := fromYAML(src)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := sch.Validate(v); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	check("built-in h200.yaml", cost.DefaultYAML())
	out, err := cost.Default().Marshal()
	if err != nil {
		t.Fatal(err)
	}
	check("built-in topology, marshaled", out)
	paths := files(t, "docs/*/*.yaml", "docs/*.yaml")
	if len(paths) == 0 {
		t.Fatal("no topology files under docs/")
	}
	for _, p := range paths {
		src, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		check(p, src)
	}
}

// TestInvalidFusionsSchemaLevel: of the invalid corpus (testdata/invalid),
// the schema rejects exactly the files of schemaRejects — errors of
// structure, keys, types, ranges, names and of which keys and how many
// operands each op takes, which an editor shows as the file is typed — and
// notYAML lists those that are no YAML nvcomm reads, so no schema applies.
// The others need nvcomm: what holds between values (extents that must
// divide, shapes that must agree, names that must be declared, a mesh's
// rows of equal length, cycles, duplicate keys the YAML parser merges).
func TestInvalidFusionsSchemaLevel(t *testing.T) {
	sch := compile(t, Fusion)
	var rejected, unread []string
	for _, p := range files(t, "testdata/invalid/*.yaml") {
		name := strings.TrimSuffix(filepath.Base(p), ".yaml")
		src, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		v, err := fromYAML(src)
		switch {
		case err != nil:
			unread = append(unread, name)
		case sch.Validate(v) != nil:
			rejected = append(rejected, name)
		}
	}
	var want []string
	for _, names := range schemaRejects {
		want = append(want, names...)
	}
	slices.Sort(want)
	if d := cmp.Diff(want, rejected); d != "" {
		t.Errorf("invalid fusions the schema rejects (-want +got):\n%s", d)
	}
	if d := cmp.Diff(notYAML, unread); d != "" {
		t.Errorf("invalid fusions that are no YAML nvcomm reads (-want +got):\n%s", d)
	}
}

// schemaRejects lists, by reason, the invalid fusions the schema rejects.
var schemaRejects = map[string][]string{
	"not a mapping, list or string where one is expected, or empty": {
		"comments_only", "empty_file", "top_level_scalar", "top_not_mapping", "ops_not_list",
		"schedule_not_list", "tensor_not_mapping", "op_not_mapping", "op_in_mapping", "mesh_ref_not_string",
	},
	"a required key is missing": {
		"missing_meshes", "op_missing_key", "step_missing_key", "reduction_without_axis", "broadcast_without_axes",
	},
	"an unknown key, or keys that exclude each other": {
		"unknown_top_key", "unknown_tensor_key", "unknown_key_no_hint", "unknown_schedule_step",
		"step_unknown_key", "two_keys_in_step", "placements_and_schedule",
	},
	"a value of the wrong type": {
		"float_for_int", "int_for_string", "int_tag_not_number", "string_for_int", "name_not_string",
	},
	"a number out of range": {
		"integer_out_of_range", "negative_device", "negative_factor", "zero_factor", "non_positive_extent", "unsupported_format",
	},
	"a word that is not one of the allowed ones": {
		"unknown_dtype", "unknown_op", "unknown_parallel_type", "placements_unknown", "placements_partial_op", "cast_unknown_dtype",
	},
	"a name that is not an identifier": {
		"invalid_mesh_name", "invalid_op_tensor_name", "invalid_tensor_name",
	},
	"a list that is empty, too deep or repeats itself": {
		"empty_mesh", "no_meshes", "mesh_rank4", "ragged_mesh_depth", "ragged_mesh_mixed",
		"op_in_empty_list", "broadcast_empty_axes", "outputs_listed_twice",
	},
	"a key or a number of operands that the op does not take": {
		"arity_linear", "arity_matmul", "arity_unary", "axes_on_add", "axes_on_sum", "axis_on_matmul", "set_with_axis",
		"attr_not_taken", "permute_needs_dims",
	},
	"several errors, one of them of the kinds above": {
		"layer_several_errors", "several_errors", "too_many_errors", "independent_errors",
	},
}

// notYAML lists the invalid fusions that are no YAML nvcomm reads: syntax
// errors, text that is not UTF-8, aliases, keys that are not strings.
var notYAML = []string{"alias_value", "non_string_key", "not_utf8", "yaml_bad_indent", "yaml_syntax", "yaml_tab_indent"}

// TestPlanSchemaRejects: edits of a golden plan that break its structure
// are rejected by the plan schema.
func TestPlanSchemaRejects(t *testing.T) {
	sch := compile(t, Plan)
	src, err := os.ReadFile(filepath.Join(root, "testdata/examples/megatron_mlp.optimal.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		edit  func(p map[string]any)
		valid bool
	}{
		{name: "unchanged", edit: func(map[string]any) {}, valid: true},
		{name: "unknown top-level field", edit: func(p map[string]any) { p["steps_count"] = json.Number("3") }},
		{name: "format 3", edit: func(p map[string]any) { p["format"] = json.Number("3") }},
		{name: "format 2, a step graph", edit: func(p map[string]any) {
			p["format"] = json.Number("2")
			step(p, 0)["stream"] = "comm2"
		}, valid: true},
		{name: "a stream not a name", edit: func(p map[string]any) { step(p, 0)["stream"] = "Comm" }},
		{name: "after twice", edit: func(p map[string]any) { step(p, 0)["after"] = []any{json.Number("0"), json.Number("0")} }},
		{name: "unknown policy", edit: func(p map[string]any) { p["policy"] = "gspmd" }},
		{name: "tensor without layout", edit: func(p map[string]any) { delete(tensor(p, 0), "layout") }},
		{name: "propagated false", edit: func(p map[string]any) { tensor(p, 0)["propagated"] = false }},
		{name: "partial set", edit: func(p map[string]any) { tensor(p, 0)["partial"] = "set" }},
		{name: "unknown sharding kind", edit: func(p map[string]any) {
			tensor(p, 1)["sharding"] = []any{map[string]any{"type": "DIDx", "logical_axis": json.Number("0"), "kind": "cyclic"}}
		}},
		{name: "op with input and inputs", edit: func(p map[string]any) { op(p, 0)["input"] = "x" }},
		{name: "reduction axis on relu", edit: func(p map[string]any) { op(p, 1)["axis"] = json.Number("0") }},
		{name: "unknown step type", edit: func(p map[string]any) { step(p, 0)["type"] = "Transpose" }},
		{name: "collective without teams", edit: func(p map[string]any) {
			s := firstStep(t, p, "Allreduce")
			delete(s, "teams")
		}},
		{name: "Allreduce without reduce_op", edit: func(p map[string]any) { firstStep(t, p, "Allreduce")["reduce_op"] = nil }},
		{name: "Allreduce with a root", edit: func(p map[string]any) { firstStep(t, p, "Allreduce")["root"] = json.Number("0") }},
		{name: "Matmul with func", edit: func(p map[string]any) { firstStep(t, p, "Matmul")["func"] = "add" }},
		{name: "Matmul with three dims", edit: func(p map[string]any) {
			firstStep(t, p, "Matmul")["dims"] = []any{json.Number("1"), json.Number("2"), json.Number("3")}
		}},
		{name: "Pointwise without func", edit: func(p map[string]any) { delete(firstStep(t, p, "Pointwise"), "func") }},
		{name: "Pointwise with an unknown func", edit: func(p map[string]any) { firstStep(t, p, "Pointwise")["func"] = "erfc" }},
		{name: "local step with bytes", edit: func(p map[string]any) {
			firstStep(t, p, "Matmul")["bytes"] = map[string]any{"sent_per_device": json.Number("0"), "received_per_device": json.Number("0"), "lower_bound": json.Number("0")}
		}},
		{name: "broadcast_b false", edit: func(p map[string]any) { firstStep(t, p, "Matmul")["broadcast_b"] = false }},
		{name: "summary without bytes_ratio", edit: func(p map[string]any) { delete(p["summary"].(map[string]any), "bytes_ratio") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := jsonschema.UnmarshalJSON(bytes.NewReader(src))
			if err != nil {
				t.Fatal(err)
			}
			tc.edit(v.(map[string]any))
			err = sch.Validate(v)
			if got := err == nil; got != tc.valid {
				t.Errorf("valid = %v, want %v (%v)", got, tc.valid, err)
			}
		})
	}
}

func tensor(p map[string]any, i int) map[string]any { return p["tensors"].([]any)[i].(map[string]any) }
func op(p map[string]any, i int) map[string]any     { return p["ops"].([]any)[i].(map[string]any) }
func step(p map[string]any, i int) map[string]any   { return p["steps"].([]any)[i].(map[string]any) }

// firstStep returns the plan's first step of type typ.
func firstStep(t *testing.T, p map[string]any, typ string) map[string]any {
	t.Helper()
	for _, s := range p["steps"].([]any) {
		if s := s.(map[string]any); s["type"] == typ {
			return s
		}
	}
	t.Fatalf("the plan has no %s step", typ)
	return nil
}

// TestTopologySchemaRejects: topology files that nvcomm refuses for their
// structure or ranges are rejected by the topology schema too.
func TestTopologySchemaRejects(t *testing.T) {
	sch := compile(t, Topology)
	base := string(cost.DefaultYAML())
	for _, tc := range []struct {
		name  string
		src   string
		valid bool
	}{
		{name: "built-in", src: base, valid: true},
		{name: "without compute", src: base[:strings.Index(base, "\ncompute:\n")+1], valid: true},
		{name: "format 2", src: strings.Replace(base, "format: 1", "format: 2", 1)},
		{name: "no devices per node", src: strings.Replace(base, "devices_per_node: 8", "devices_per_node: 0", 1)},
		{name: "negative device memory", src: strings.Replace(base, "device_memory_bytes: 150109880320", "device_memory_bytes: -1", 1)},
		{name: "device memory not known", src: strings.Replace(base, "device_memory_bytes: 150109880320\n", "", 1), valid: true},
		{name: "unknown key", src: base + "gpus: 8\n"},
		{name: "unknown collective", src: strings.Replace(base, "    AllToAll:", "    Alltoall:", 1)},
		{name: "unknown key in a link", src: strings.Replace(base, "network:\n", "network:\n  hops: 2\n", 1)},
		{name: "zero bandwidth", src: strings.Replace(base, "bandwidth_gbps: 40", "bandwidth_gbps: 0", 1)},
		{name: "negative launch", src: strings.Replace(base, "launch_us: 24.5", "launch_us: -1", 1)},
		{name: "a dtype nvcomm has no use for", src: strings.Replace(base, "float64: 67", "float8: 1979", 1), valid: true},
		{name: "zero peak", src: strings.Replace(base, "float64: 67", "float64: 0", 1)},
		{name: "negative peak", src: strings.Replace(base, "float64: 67", "float64: -67", 1)},
		{name: "missing memory", src: strings.Replace(base, "memory:\n  bandwidth_gbps: 4000\n  latency_us: 10\n", "", 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.src == base && tc.name != "built-in" {
				t.Fatal("the edit changed nothing")
			}
			v, err := fromYAML([]byte(tc.src))
			if err != nil {
				t.Fatal(err)
			}
			err = sch.Validate(v)
			if got := err == nil; got != tc.valid {
				t.Errorf("valid = %v, want %v (%v)", got, tc.valid, err)
			}
			_, perr := cost.ParseTopology("t.yaml", []byte(tc.src))
			if got := perr == nil; got != tc.valid {
				t.Errorf("nvcomm accepts it: %v, want %v (%v)", got, tc.valid, perr)
			}
		})
	}
}
