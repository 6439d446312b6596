package ir

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/diag"
)

// invalidDir holds one fusion file per kind of invalid input, each with the
// diagnostics it must produce in NAME.err. The CLI tests use them too.
const invalidDir = "../../testdata/invalid"

// TestInvalidGolden parses every testdata/invalid/NAME.yaml and compares the
// rendered diagnostics with NAME.err. NVCOMM_UPDATE=1 rewrites the goldens.
func TestInvalidGolden(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(invalidDir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 30 {
		t.Fatalf("found %d invalid inputs in %s, expected at least 30", len(files), invalidDir)
	}
	update := os.Getenv("NVCOMM_UPDATE") == "1"
	for _, path := range files {
		name := strings.TrimSuffix(filepath.Base(path), ".yaml")
		t.Run(name, func(t *testing.T) {
			src, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			// The table below must hold the same input, so that the two
			// tests cannot drift apart.
			i := slices.IndexFunc(invalidTests, func(c invalidTest) bool { return c.name == name })
			if i < 0 || invalidTests[i].src != string(src) {
				t.Errorf("invalidTests has no case %q with the input of %s", name, path)
			}
			// Diagnostics name the file as a command run from the module
			// root would.
			file := "testdata/invalid/" + filepath.Base(path)
			f, err := Parse(file, src)
			if err == nil {
				t.Fatalf("Parse(%s) succeeded with %d tensors, want an error", file, len(f.Tensors))
			}
			got := err.Error() + "\n"
			golden := strings.TrimSuffix(path, ".yaml") + ".err"
			if update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with NVCOMM_UPDATE=1 to create it)", err)
			}
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("Parse(%s) diagnostics mismatch (-want +got):\n%s", file, diff)
			}
		})
	}
}

type invalidTest struct {
	name string
	src  string
	want string // err.Error(): one diagnostic a line, sorted by position
}

// invalidTests hold one input for every kind of invalid input and the exact
// diagnostics, positions included, that Parse must report.
// testdata/invalid holds the same inputs as files for the CLI tests.
var invalidTests = []invalidTest{
	{
		name: "not_utf8",
		src:  "\xff\xfe(\x00 \x00(\x00",
		want: `in.yaml:1:1: error: the fusion file is not UTF-8 text; save the file as UTF-8`,
	},
	{
		name: "placements_and_schedule",
		src: `meshes:
  m: [0, 1]
tensors:
  tv0:
    mesh: m
    shape: [4]
    placements: [Shard(0)]
    schedule:
      - outer_split: {axis: 0, factor: 2}
`,
		want: `in.yaml:7:17: error: tensor "tv0": both placements and schedule are given; placements are sugar for a schedule; keep one of them`,
	},
	{
		name: "placements_count",
		src: `meshes:
  g: [[0, 1], [2, 3]]
tensors:
  tv0:
    mesh: g
    shape: [4]
    placements: [Shard(0)]
`,
		want: `in.yaml:7:17: error: tensor "tv0" placements: expected one placement per axis of mesh "g" (2), got 1`,
	},
	{
		name: "placements_shard_range",
		src: `meshes:
  m: [0, 1]
tensors:
  tv0:
    mesh: m
    shape: [4]
    placements: [Shard(1)]
`,
		want: `in.yaml:7:18: error: tensor "tv0" placements: Shard(1) is out of range for a tensor of 1 dims`,
	},
	{
		name: "placements_unknown",
		src: `meshes:
  m: [0, 1]
tensors:
  tv0:
    mesh: m
    shape: [4]
    placements: [Shart(0)]
`,
		want: `in.yaml:7:18: error: tensor "tv0" placements: "Shart(0)" is not a placement (expected Shard(dim), Replicate() or Partial(sum|prod|max|min)); did you mean "Shard"?`,
	},
	{
		name: "placements_partial_output",
		src: `meshes:
  m: [0, 1]
tensors:
  tv0:
    mesh: m
    shape: [4]
  tv1:
    placements: [Partial(sum)]
ops:
  - {op: set, in: tv0, out: tv1}
`,
		want: `in.yaml:8:18: error: tensor "tv1" placements: Partial is only allowed on fusion inputs, on the outputs of matmul, linear and the reductions, and on add, sub and neg of terms of sums; declare the partial terms as a fusion input and reduce them with a set`,
	},
	{
		name: "placements_partial_op",
		src: `meshes:
  m: [0, 1]
tensors:
  tv0:
    mesh: m
    shape: [4]
    placements: [Partial(avg)]
`,
		want: `in.yaml:7:18: error: tensor "tv0" placements: Partial needs a reduce op (sum, prod, max, min), got "avg"`,
	},
	{
		name: "alias_value",
		src: `meshes:
  m: &devices [0, 1]
tensors:
  tv0: {mesh: m, shape: *devices}
`,
		want: `in.yaml:4:25: error: tensor "tv0" shape: expected a list, got an alias`,
	},
	{
		name: "allocation_did_axis",
		src: `meshes:
  m: [0, 1]
tensors:
  tv0:
    mesh: m
    shape: [4, 8]
    schedule:
      - outer_split: {axis: 0, factor: 2}
      - parallelize: {axis: 0, type: DIDx}
    allocation: [0, 1, 2]
`,
		want: `in.yaml:10:18: error: tensor "tv0" allocation: loop axis 0 is parallelized on DIDx; list only the axes stored on each device`,
	},
	{
		name: "allocation_duplicate",
		src: `meshes:
  m: [0, 1]
tensors:
  tv0:
    mesh: m
    shape: [4, 8]
    allocation: [1, -1, 0]
`,
		want: `in.yaml:7:21: error: tensor "tv0" allocation: loop axis 1 is listed twice`,
	},
	{
		name: "allocation_interleaved",
		src: `meshes:
  m: [0, 1]
tensors:
  tv0:
    mesh: m
    shape: [4, 6]
    schedule:
      - split: {axis: 0, factor: 2}
    allocation: [0, 2, 1]
`,
		want: `in.yaml:9:17: error: tensor "tv0": allocation interleaves the pieces of logical axis 0 with other axes; store each logical axis's pieces next to each other`,
	},
	{
		name: "allocation_missing_axis",
		src: `meshes:
  m: [0, 1]
tensors:
  tv0:
    mesh: m
    shape: [4, 8]
    allocation: [1]
`,
		want: `in.yaml:7:17: error: tensor "tv0" allocation: loop axis 0 (extent 4) is missing; list every stored loop axis once`,
	},
	{
		name: "allocation_out_of_order",
		src: `meshes:
  m: [0, 1]
tensors:
  tv0:
    mesh: m
    shape: [8]
    schedule:
      - split: {axis: 0, factor: 2}
    allocation: [1, 0]
`,
		want: `in.yaml:9:17: error: tensor "tv0": allocation stores the pieces of logical axis 0 out of order (inner before outer); list the outer piece of a split before the inner one`,
	},
	{
		name: "allocation_reduction_axis",
		src: `meshes:
  m: [0, 1]
tensors:
  tv0: {mesh: m, shape: [4, 8]}
  tv1:
    allocation: [0, 1]
ops:
  - {op: sum, in: tv0, out: tv1, axis: 0}
`,
		want: `in.yaml:6:18: error: tensor "tv1" allocation: loop axis 0 is a reduction axis, which is not stored`,
	},
	{
		name: "comments_only",
		src: `# a fusion file with nothing in it
`,
		want: `in.yaml:1:1: error: empty fusion file: expected a mapping with meshes, tensors and ops`,
	},
	{
		name: "cycle",
		src: `meshes:
  m: [0, 1]
tensors:
  tv0: {mesh: m, shape: [4]}
ops:
  - {op: set, in: tv0, out: tv1}
  - {op: set, in: tv3, out: tv2}
  - {op: set, in: tv2, out: tv3}
`,
		want: `in.yaml:7:5: error: ops form a cycle through tensor "tv2"; every tensor must be computable from the fusion inputs`,
	},
	{
		name: "didy_on_1d_mesh",
		src: `meshes:
  m: [0, 1]
tensors:
  tv0:
    mesh: m
    shape: [4]
    schedule:
      - outer_split: {axis: 0, factor: 2}
      - parallelize: {axis: 0, type: DIDy}
`,
		want: `in.yaml:9:38: error: tensor "tv0" parallelize: mesh "m" of rank 1 has no DIDy axis; DIDx is the last mesh axis, DIDy the second-to-last, DIDz the third-to-last`,
	},
	{
		name: "dtype_change",
		src: `meshes:
  m: [0, 1]
tensors:
  tv0: {mesh: m, dtype: float16, shape: [4]}
  tv1: {dtype: float32}
ops:
  - {op: set, in: tv0, out: tv1}
`,
		want: `in.yaml:5:16: error: tensor "tv1": dtype float32 differs from its input's float16 (operands share a dtype; use cast); remove its dtype, or declare it float16; a cast op converts to another`,
	},
	{
		name: "duplicate_device",
		src: `meshes:
  m: [[0, 1], [2, 1]]
`,
		want: `in.yaml:2:19: error: mesh "m": duplicate device id 1`,
	},
	{
		name: "duplicate_key",
		src: `meshes:
  m: [0, 1]
tensors:
  tv0: {mesh: m, shape: [4]}
  tv0: {mesh: m, shape: [8]}
`,
		want: `in.yaml:5:3: error: tensors: duplicate key "tv0" (first at 4:3)`,
	},
	{
		name: "duplicate_top_key",
		src: `meshes:
  m: [0, 1]
meshes:
  n: [0, 1]
`,
		want: `in.yaml:3:1: error: fusion: duplicate key "meshes" (first at 1:1)`,
	},
	{
		name: "empty_file",
		src:  ``,
		want: `in.yaml:1:1: error: empty fusion file: expected a mapping with meshes, tensors and ops`,
	},
	{
		name: "empty_mesh",
		src: `meshes:
  m: []
`,
		want: `in.yaml:2:6: error: mesh "m": expected a non-empty list of device ids`,
	},
	{
		name: "float_for_int",
		src: `meshes:
  m: [0, 1]
tensors:
  tv0:
    mesh: m
    shape: [8]
    schedule:
      - split: {axis: 0, factor: 2.5}
`,
		want: `in.yaml:8:34: error: tensor "tv0" split factor: expected an integer, got number 2.5`,
	},
	{
		name: "input_without_mesh",
		src: `meshes:
  m: [0, 1]
tensors:
  tv0: {shape: [4]}
ops:
  - {op: set, in: tv0, out: tv1}
`,
		want: `in.yaml:4:3: error: tensor "tv0": an input needs a "mesh"`,
	},
	{
		// A declared tensor no op reads or writes is reported as unused,
		// not as an input without a mesh (format 1) or a tensor that
		// propagation found no mesh for (format 2).
		name: "declared_unused",
		src: `meshes:
  m: [0, 1]
tensors:
  tv0: {mesh: m, shape: [4]}
  spare: {shape: [4]}
  kept: {mesh: m, shape: [4]}
ops:
  - {op: set, in: tv0, out: tv1}
`,
		want: `in.yaml:5:3: error: tensor "spare" is declared but never used: no op reads or writes it; remove it or use it in an op; to keep it as an input that no op reads, give it a mesh and a shape`,
	},
	{
		name: "declared_unused_format2",
		src: `format: 2
meshes:
  m: [0, 1]
tensors:
  x: {mesh: m, shape: [4]}
  spare: {shape: [4]}
  empty: {}
ops:
  - {op: relu, in: x, out: y}
`,
		want: `in.yaml:6:3: error: tensor "spare" is declared but never used: no op reads or writes it; remove it or use it in an op; to keep it as an input that no op reads, give it a mesh and a shape
in.yaml:7:3: error: tensor "empty" is declared but never used: no op reads or writes it; remove it or use it in an op; to keep it as an input that no op reads, give it a mesh and a shape`,
	},
	{
		// Format 2 has no casts either, and its messages do not say
		// "format 1".
		name: "mixed_dtypes_format2",
		src: `format: 2
meshes:
  m: [0, 1]
tensors:
  a: {mesh: m, shape: [4]}
  b: {mesh: m, shape: [4], dtype: float16}
  d: {dtype: float16}
ops:
  - {op: add, in: [a, b], out: c}
  - {op: relu, in: a, out: d}
`,
		want: `in.yaml:7:14: error: tensor "d": dtype float16 differs from its input's float32 (operands share a dtype; use cast); remove its dtype, or declare it float32; a cast op converts to another
in.yaml:9:23: error: ops[0]: add operands have different dtypes: "a" is float32 and "b" is float16 (operands share a dtype; use cast); convert one first, e.g. {op: cast, in: b, out: b_float32, dtype: float32}`,
	},
	{
		name: "input_without_shape",
		src: `meshes:
  m: [0, 1]
tensors:
  tv0: {mesh: m}
ops:
  - {op: set, in: tv0, out: tv1}
`,
		want: `in.yaml:4:3: error: tensor "tv0": an input needs a "shape"`,
	},
	{
		name: "inputs_missing_input",
		src: `meshes:
  m: [0, 1]
tensors:
  tv0: {mesh: m, shape: [4]}
  tv1: {mesh: m, shape: [4]}
ops:
  - {op: set, in: tv0, out: tv2}
  - {op: set, in: tv1, out: tv3}
inputs: [tv0]
`,
		want: `in.yaml:9:9: error: inputs: tensor "tv1" is not produced by any op, so it must be listed as an input`,
	},
	{
		name: "inputs_names_produced",
		src: `meshes:
  m: [0, 1]
tensors:
  tv0: {mesh: m, shape: [4]}
ops:
  - {op: set, in: tv0, out: tv1}
inputs: [tv0, tv1]
`,
		want: `in.yaml:7:15: error: inputs: tensor "tv1" is produced by an op, so it cannot be an input`,
	},
	{
		name: "int_for_string",
		src: `meshes:
  m: [0, 1]
tensors:
  tv0: {mesh: m, dtype: 32, shape: [4]}
`,
		want: `in.yaml:4:25: error: tensor "tv0" dtype: expected a string, got integer 32`,
	},
	{
		name: "int_tag_not_number",
		src: `meshes:
  m: [0, !!int one]
`,
		want: `in.yaml:2:10: error: mesh "m" device id: expected an integer, got "one"`,
	},
	{
		name: "integer_out_of_range",
		src: `meshes:
  m: [0, 1]
tensors:
  tv0: {mesh: m, shape: [4294967296]}
`,
		want: `in.yaml:4:26: error: tensor "tv0" shape extent: integer 4294967296 is out of range (expected -2147483648 to 2147483647)`,
	},
	{
		name: "invalid_mesh_name",
		src: `meshes:
  2d: [[0, 1], [2, 3]]
`,
		want: `in.yaml:2:3: error: mesh name "2d" is not valid (expected letters, digits and _, not starting with a digit)`,
	},
	{
		name: "invalid_op_tensor_name",
		src: `meshes:
  m: [0, 1]
tensors:
  tv0: {mesh: m, shape: [4]}
ops:
  - {op: set, in: tv0, out: 1tv}
`,
		want: `in.yaml:6:29: error: ops[0] out: "1tv" is not a valid name (expected letters, digits and _, not starting with a digit)`,
	},
	{
		name: "invalid_tensor_name",
		src: `meshes:
  m: [0, 1]
tensors:
  tv-0: {mesh: m, shape: [4]}
`,
		want: `in.yaml:4:3: error: tensor name "tv-0" is not valid (expected letters, digits and _, not starting with a digit)`,
	},
	{
		name: "logical_did_extent",
		src: `meshes:
  m: [0, 1, 2, 3]
tensors:
  tv0:
    mesh: m
    shape: [8]
    schedule:
      - parallelize: {axis: 0, type: DIDx}
`,
		want: `in.yaml:8:9: error: tensor "tv0": a DIDx axis must have the extent of mesh "m" along DIDx (4), but this axis has extent 8; split the axis by 4 first (outer_split with factor 4 gives a DID loop split)`,
	},
	{
		name: "merge_did_axis",
		src: `meshes:
  m: [0, 1]
tensors:
  tv0:
    mesh: m
    shape: [2, 4]
    schedule:
      - parallelize: {axis: 0, type: DIDx}
      - merge: {axis: 0}
`,
		want: `in.yaml:9:9: error: tensor "tv0" merge: a device-parallel axis cannot be merged (positions 0 and 1); merge first, then parallelize the merged axis`,
	},
	{
		name: "merge_last_axis",
		src: `meshes:
  m: [0, 1]
tensors:
  tv0:
    mesh: m
    shape: [4, 8]
    schedule:
      - merge: {axis: -1}
`,
		want: `in.yaml:8:23: error: tensor "tv0" merge: axis -1 is the last loop axis and has no partner to merge with`,
	},
	{
		name: "merge_reduction_with_value",
		src: `meshes:
  m: [0, 1]
tensors:
  tv0: {mesh: m, shape: [4, 8]}
  tv1:
    schedule:
      - merge: {axis: 0}
ops:
  - {op: sum, in: tv0, out: tv1, axis: 0}
`,
		want: `in.yaml:7:9: error: tensor "tv1" merge: cannot merge a reduction axis with a non-reduction axis (positions 0 and 1)`,
	},
	{
		name: "mesh_rank4",
		src: `meshes:
  m: [[[[0, 1]]]]
`,
		want: `in.yaml:2:9: error: mesh "m": a mesh has at most 3 axes (DIDz, DIDy, DIDx)`,
	},
	{
		name: "mesh_ref_not_string",
		src: `meshes:
  m: [0, 1]
tensors:
  tv0: {mesh: [m], shape: [4]}
`,
		want: `in.yaml:4:15: error: tensor "tv0" mesh: expected a string, got a list`,
	},
	{
		name: "missing_meshes",
		src: `tensors:
  tv0: {shape: [4]}
`,
		want: `in.yaml:1:1: error: fusion: missing key "meshes"`,
	},
	{
		name: "name_not_string",
		src: `name: 5
meshes:
  m: [0, 1]
`,
		want: `in.yaml:1:7: error: name: expected a string, got integer 5`,
	},
	{
		name: "negative_device",
		src: `meshes:
  m: [0, -1]
`,
		want: `in.yaml:2:10: error: mesh "m": device id -1 is negative (expected >= 0)`,
	},
	{
		name: "negative_factor",
		src: `meshes:
  m: [0, 1]
tensors:
  tv0:
    mesh: m
    shape: [8]
    schedule:
      - split: {axis: 0, factor: -2}
`,
		want: `in.yaml:8:34: error: tensor "tv0" split factor: expected an integer >= 1, got -2`,
	},
	{
		name: "no_meshes",
		src: `meshes: {}
`,
		want: `in.yaml:1:9: error: meshes: expected at least one mesh`,
	},
	{
		name: "non_positive_extent",
		src: `meshes:
  m: [0, 1]
tensors:
  tv0: {mesh: m, shape: [0, 4]}
`,
		want: `in.yaml:4:26: error: tensor "tv0" shape extent: expected an integer >= 1, got 0`,
	},
	{
		name: "non_string_key",
		src: `meshes:
  m: [0, 1]
? [tensors]
: {}
`,
		want: `in.yaml:3:3: error: fusion: expected a string key, got a list`,
	},
	{
		name: "op_axis_out_of_range",
		src: `meshes:
  m: [0, 1]
tensors:
  tv0: {mesh: m, shape: [4, 8]}
ops:
  - {op: sum, in: tv0, out: tv1, axis: 2}
`,
		want: `in.yaml:6:40: error: ops[0]: sum axis 2 is out of range for "tv0", which has 2 non-reduction axes`,
	},
	{
		name: "op_missing_key",
		src: `meshes:
  m: [0, 1]
tensors:
  tv0: {mesh: m, shape: [4]}
ops:
  - {op: set, in: tv0}
`,
		want: `in.yaml:6:5: error: ops[0]: missing key "out"`,
	},
	{
		name: "op_not_mapping",
		src: `meshes:
  m: [0, 1]
ops:
  - set
`,
		want: `in.yaml:4:5: error: ops[0]: expected a mapping, got "set"`,
	},
	{
		name: "ops_not_list",
		src: `meshes:
  m: [0, 1]
ops: {op: set, in: tv0, out: tv1}
`,
		want: `in.yaml:3:6: error: ops: expected a list, got a mapping`,
	},
	{
		name: "outputs_listed_twice",
		src: `meshes:
  m: [0, 1]
tensors:
  tv0: {mesh: m, shape: [4]}
ops:
  - {op: set, in: tv0, out: tv1}
outputs: [tv1, tv1]
`,
		want: `in.yaml:7:16: error: outputs: tensor "tv1" is listed twice`,
	},
	{
		name: "outputs_unknown_tensor",
		src: `meshes:
  m: [0, 1]
tensors:
  tv0: {mesh: m, shape: [4]}
ops:
  - {op: set, in: tv0, out: tv1}
outputs: [tv2]
`,
		want: `in.yaml:7:11: error: outputs: unknown tensor "tv2"; did you mean "tv0"?`,
	},
	{
		name: "produced_twice",
		src: `meshes:
  m: [0, 1]
tensors:
  tv0: {mesh: m, shape: [4]}
ops:
  - {op: set, in: tv0, out: tv1}
  - {op: sum, in: tv0, out: tv1, axis: 0}
`,
		want: `in.yaml:7:29: error: tensor "tv1" is produced twice (first by the op at 6:5)`,
	},
	{
		name: "ragged_mesh",
		src: `meshes:
  m: [[0, 1], [2]]
`,
		want: `in.yaml:2:15: error: mesh "m": ragged mesh: this list has 1 entries, expected 2 like the first at its depth`,
	},
	{
		name: "ragged_mesh_depth",
		src: `meshes:
  m: [[0], [[1, 2]]]
`,
		want: `in.yaml:2:13: error: mesh "m": ragged mesh: expected a device id at depth 2, got a list`,
	},
	{
		name: "ragged_mesh_mixed",
		src: `meshes:
  m: [[0, 1], 2]
`,
		want: `in.yaml:2:15: error: mesh "m": ragged mesh: mixes device ids and lists at the same depth`,
	},
	{
		name: "reduction_without_axis",
		src: `meshes:
  m: [0, 1]
tensors:
  tv0: {mesh: m, shape: [4]}
ops:
  - {op: max, in: tv0, out: tv1}
`,
		want: `in.yaml:6:5: error: ops[0]: max needs an "axis" to reduce`,
	},
	{
		name: "reorder_duplicate",
		src: `meshes:
  m: [0, 1]
tensors:
  tv0:
    mesh: m
    shape: [4, 8, 2]
    schedule:
      - reorder: [2, 0, -1]
`,
		want: `in.yaml:8:25: error: tensor "tv0" reorder: position 2 appears twice (expected a permutation)`,
	},
	{
		name: "reorder_length",
		src: `meshes:
  m: [0, 1]
tensors:
  tv0:
    mesh: m
    shape: [4, 8, 2]
    schedule:
      - reorder: [1, 0]
`,
		want: `in.yaml:8:18: error: tensor "tv0" reorder: expected a permutation of the 3 loop positions, got 2 entries`,
	},
	{
		name: "same_in_out",
		src: `meshes:
  m: [0, 1]
tensors:
  tv0: {mesh: m, shape: [4]}
ops:
  - {op: set, in: tv0, out: tv0}
`,
		want: `in.yaml:6:29: error: op reads and writes the same tensor "tv0"`,
	},
	{
		name: "schedule_axis_out_of_range",
		src: `meshes:
  m: [0, 1]
tensors:
  tv0:
    mesh: m
    shape: [4, 8]
    schedule:
      - split: {axis: 0, factor: 2}
      - parallelize: {axis: -4, type: DIDx}
`,
		want: `in.yaml:9:29: error: tensor "tv0" parallelize: axis -4 is out of range for a loop domain of 3 axes`,
	},
	{
		name: "schedule_not_list",
		src: `meshes:
  m: [0, 1]
tensors:
  tv0:
    mesh: m
    shape: [4]
    schedule: {split: {axis: 0, factor: 2}}
`,
		want: `in.yaml:7:15: error: tensor "tv0" schedule: expected a list, got a mapping`,
	},
	{
		name: "second_document",
		src: `meshes:
  m: [0, 1]
---
meshes:
  n: [2, 3]
`,
		want: `in.yaml:3:1: error: expected a single YAML document, found a second one`,
	},
	{
		name: "set_with_axis",
		src: `meshes:
  m: [0, 1]
tensors:
  tv0: {mesh: m, shape: [4]}
ops:
  - {op: set, in: tv0, out: tv1, axis: 0}
`,
		want: `in.yaml:6:40: error: ops[0]: set takes no "axis"`,
	},
	{
		name: "several_errors",
		src: `ops:
  - {op: add, in: tv0, out: tv2}
  - {op: sum, in: tv1, out: tv3}
tensors:
  tv0: {mesh: m, dtype: floot32, shape: [4]}
  tv1: {mesh: n, shape: [4, 0]}
meshes:
  m: [0, 1, 1]
`,
		want: `in.yaml:2:19: error: ops[0]: add takes 2 inputs ([a, b]), got 1; write in: [a, b]
in.yaml:3:5: error: ops[1]: sum needs an "axis" to reduce
in.yaml:5:25: error: tensor "tv0": unknown dtype "floot32" (expected one of bfloat16, float16, float32, float64, int32, int64); did you mean "float32"?
in.yaml:6:15: error: tensor "tv1": unknown mesh "n"; did you mean "m"?
in.yaml:6:29: error: tensor "tv1" shape extent: expected an integer >= 1, got 0
in.yaml:8:13: error: mesh "m": duplicate device id 1`,
	},
	{
		name: "shape_mismatch",
		src: `meshes:
  m: [0, 1]
tensors:
  tv0: {mesh: m, shape: [4, 8]}
  tv1: {shape: [8, 4]}
ops:
  - {op: set, in: tv0, out: tv1}
`,
		want: `in.yaml:5:16: error: tensor "tv1": shape [8, 4] does not match the shape [4, 8] inferred from the op that produces it`,
	},
	// Sizes: a tensor's bytes, padded by uneven splits, must fit in int64
	// (issue 10: wrapped counts and bytes).
	{
		name: "shape_too_large",
		src: `meshes:
  m: [0, 1]
tensors:
  x:
    mesh: m
    shape: [65536, 65536, 65536, 65536]
    schedule:
      - outer_split: {axis: 0, factor: 2}
      - parallelize: {axis: 0, type: DIDx}
  y:
    mesh: m
ops:
  - {op: set, in: x, out: y}
`,
		want: `in.yaml:6:12: error: tensor "x" shape: [65536, 65536, 65536, 65536] of float32 elements takes more than 9223372036854775807 bytes (expected a tensor whose bytes fit in int64); nvcomm counts sizes in int64 bytes; use smaller extents`,
	},
	{
		name: "shape_too_large_partial",
		src: `meshes:
  m: [0, 1]
tensors:
  x:
    mesh: m
    shape: [1073741824, 1073741824]
    placements: [Partial(sum)]
  y:
    mesh: m
ops:
  - {op: set, in: x, out: y}
`,
		want: `in.yaml:6:12: error: tensor "x" shape: [2, 1073741824, 1073741824] (with its Partial terms axis) of float32 elements takes more than 9223372036854775807 bytes (expected a tensor whose bytes fit in int64); nvcomm counts sizes in int64 bytes; use smaller extents`,
	},
	{
		name: "padded_too_large",
		src: `meshes:
  m: [0, 1]
tensors:
  x:
    mesh: m
    shape: [1073741825, 2147483644]
    schedule:
      - split: {axis: 0, factor: 1073741824}
      - parallelize: {axis: 0, type: DIDx}
  y:
    mesh: m
ops:
  - {op: set, in: x, out: y}
`,
		want: `in.yaml:8:9: error: tensor "x" uneven split: padded to [2147483648, 2147483644] of float32 elements, the tensor takes more than 9223372036854775807 bytes (expected a tensor whose bytes fit in int64); nvcomm counts sizes in int64 bytes; split the logical axis evenly, or use smaller extents`,
	},
	{
		name: "split_did_axis",
		src: `meshes:
  m: [0, 1]
tensors:
  tv0:
    mesh: m
    shape: [4]
    schedule:
      - outer_split: {axis: 0, factor: 2}
      - parallelize: {axis: 0, type: DIDx}
      - split: {axis: 0, factor: 2}
`,
		want: `in.yaml:10:9: error: tensor "tv0" split: loop axis 0 is parallelized on DIDx and cannot be split; split first, then parallelize one of its outputs`,
	},
	{
		name: "split_misaligned_with_merge",
		src: `meshes:
  m: [0, 1, 2]
tensors:
  tv0:
    mesh: m
    shape: [2, 3]
    schedule:
      - merge: {axis: 0}
      - outer_split: {axis: 0, factor: 3}
      - parallelize: {axis: 0, type: DIDx}
`,
		want: `in.yaml:9:9: error: tensor "tv0": DIDx axis: outer_split by 3 cuts the merged axis 2 (axis 0) x 3 (axis 1) inside a logical axis, not at a divisor of it; a factor must cut the merged axis between its logical axes or at a divisor inside one; outer_split factors that align here: 2`,
	},
	{
		name: "step_missing_key",
		src: `meshes:
  m: [0, 1]
tensors:
  tv0:
    mesh: m
    shape: [4]
    schedule:
      - parallelize: {axis: 0}
`,
		want: `in.yaml:8:22: error: tensor "tv0" parallelize: missing key "type"`,
	},
	{
		name: "step_unknown_key",
		src: `meshes:
  m: [0, 1]
tensors:
  tv0:
    mesh: m
    shape: [4]
    schedule:
      - split: {axis: 0, factr: 2}
`,
		want: `in.yaml:8:26: error: tensor "tv0" split: unknown key "factr" (expected one of axis, factor); did you mean "factor"?`,
	},
	{
		name: "string_for_int",
		src: `meshes:
  m: [0, 1]
tensors:
  tv0: {mesh: m, shape: [8, "4"]}
`,
		want: `in.yaml:4:29: error: tensor "tv0" shape extent: expected an integer, got "4"`,
	},
	{
		name: "tensor_not_mapping",
		src: `meshes:
  m: [0, 1]
tensors:
  tv0: [4, 8]
`,
		want: `in.yaml:4:8: error: tensor "tv0": expected a mapping, got a list`,
	},
	{
		name: "too_many_errors",
		src: `meshes:
  m0: [0, -1]
  m1: [0, -2]
  m2: [0, -3]
  m3: [0, -4]
  m4: [0, -5]
  m5: [0, -6]
  m6: [0, -7]
  m7: [0, -8]
  m8: [0, -9]
  m9: [0, -10]
  m10: [0, -11]
  m11: [0, -12]
`,
		want: `in.yaml:2:11: error: mesh "m0": device id -1 is negative (expected >= 0)
in.yaml:3:11: error: mesh "m1": device id -2 is negative (expected >= 0)
in.yaml:4:11: error: mesh "m2": device id -3 is negative (expected >= 0)
in.yaml:5:11: error: mesh "m3": device id -4 is negative (expected >= 0)
in.yaml:6:11: error: mesh "m4": device id -5 is negative (expected >= 0)
in.yaml:7:11: error: mesh "m5": device id -6 is negative (expected >= 0)
in.yaml:8:11: error: mesh "m6": device id -7 is negative (expected >= 0)
in.yaml:9:11: error: mesh "m7": device id -8 is negative (expected >= 0)
in.yaml:10:11: error: mesh "m8": device id -9 is negative (expected >= 0)
in.yaml:11:11: error: mesh "m9": device id -10 is negative (expected >= 0)
in.yaml: too many errors (2 more)`,
	},
	{
		name: "top_level_scalar",
		src: `fusion
`,
		want: `in.yaml:1:1: error: fusion: expected a mapping, got "fusion"`,
	},
	{
		name: "top_not_mapping",
		src: `- meshes
- tensors
`,
		want: `in.yaml:1:1: error: fusion: expected a mapping, got a list`,
	},
	{
		name: "two_axes_same_did",
		src: `meshes:
  m: [0, 1]
tensors:
  tv0:
    mesh: m
    shape: [2, 2]
    schedule:
      - parallelize: {axis: 0, type: DIDx}
      - parallelize: {axis: 1, type: DIDx}
`,
		want: `in.yaml:9:9: error: tensor "tv0": two loop axes are parallelized on DIDx (the first at 8:9)`,
	},
	{
		name: "two_keys_in_step",
		src: `meshes:
  m: [0, 1]
tensors:
  tv0:
    mesh: m
    shape: [4]
    schedule:
      - split: {axis: 0, factor: 2}
        merge: {axis: 0}
`,
		want: `in.yaml:8:9: error: tensor "tv0" schedule: expected exactly one step per entry (one of split, outer_split, merge, reorder, parallelize), got 2`,
	},
	{
		name: "undeclared_input",
		src: `meshes:
  m: [0, 1]
ops:
  - {op: set, in: x, out: y}
`,
		want: `in.yaml:4:19: error: tensor "x" is read by an op but neither declared nor produced; declare it under tensors with a mesh and a shape`,
	},
	{
		name: "uneven_did_split",
		src: `meshes:
  m: [0, 1, 2, 3]
tensors:
  tv0:
    mesh: m
    shape: [12]
    schedule:
      - outer_split: {axis: 0, factor: 2}
      - outer_split: {axis: 1, factor: 4}
      - parallelize: {axis: 1, type: DIDx}
`,
		want: `in.yaml:9:9: error: tensor "tv0": DIDx axis: uneven split: extent 6 is not divisible into 4 x 2, and only the first split of a logical axis may be uneven; split the logical axis unevenly first, then split its pieces evenly`,
	},
	{
		name: "unknown_dtype",
		src: `meshes:
  m: [0, 1]
tensors:
  tv0: {mesh: m, dtype: flaot32, shape: [4]}
`,
		want: `in.yaml:4:25: error: tensor "tv0": unknown dtype "flaot32" (expected one of bfloat16, float16, float32, float64, int32, int64); did you mean "float32"?`,
	},
	{
		name: "unknown_key_no_hint",
		src: `meshes:
  m: [0, 1]
tensors:
  tv0: {mesh: m, shape: [4], layout: [0]}
`,
		want: `in.yaml:4:30: error: tensor "tv0": unknown key "layout" (expected one of mesh, dtype, shape, schedule, allocation, placements)`,
	},
	{
		name: "unknown_mesh",
		src: `meshes:
  mesh: [0, 1]
tensors:
  tv0: {mesh: mesj, shape: [4]}
`,
		want: `in.yaml:4:15: error: tensor "tv0": unknown mesh "mesj"; did you mean "mesh"?`,
	},
	{
		name: "unknown_op",
		src: `meshes:
  m: [0, 1]
tensors:
  tv0: {mesh: m, shape: [4]}
ops:
  - {op: summ, in: tv0, out: tv1, axis: 0}
`,
		want: `in.yaml:6:10: error: ops[0]: unknown op "summ" (ops are: set; reductions sum, prod, max, min; elementwise add, sub, mul, maximum, minimum, gt, eq, div, relu, neg, abs, exp, log, tanh, sigmoid, silu, gelu, gelu_tanh, erf, sqrt, rsqrt, reciprocal, square; broadcast; contractions matmul, linear, embedding, gather, scatter_add; data movement permute, reshape, cast, slice, cat, tril; composite softmax, mean, rms_norm, layer_norm, sdpa, log_softmax, cross_entropy, moe_topk, moe_dispatch); did you mean "sum"?`,
	},
	{
		// erfc is no misspelled erf (another framework's op), nor selu
		// a misspelled relu: no suggestion.
		name: "unknown_op_div",
		src: `meshes:
  m: [0, 1]
tensors:
  a: {mesh: m, shape: [4]}
ops:
  - {op: erfc, in: a, out: c}
  - {op: selu, in: c, out: d}
`,
		want: `in.yaml:6:10: error: ops[0]: unknown op "erfc" (ops are: set; reductions sum, prod, max, min; elementwise add, sub, mul, maximum, minimum, gt, eq, div, relu, neg, abs, exp, log, tanh, sigmoid, silu, gelu, gelu_tanh, erf, sqrt, rsqrt, reciprocal, square; broadcast; contractions matmul, linear, embedding, gather, scatter_add; data movement permute, reshape, cast, slice, cat, tril; composite softmax, mean, rms_norm, layer_norm, sdpa, log_softmax, cross_entropy, moe_topk, moe_dispatch); docs/fusion.md ("ops") describes what each op does
in.yaml:7:10: error: ops[1]: unknown op "selu" (ops are: set; reductions sum, prod, max, min; elementwise add, sub, mul, maximum, minimum, gt, eq, div, relu, neg, abs, exp, log, tanh, sigmoid, silu, gelu, gelu_tanh, erf, sqrt, rsqrt, reciprocal, square; broadcast; contractions matmul, linear, embedding, gather, scatter_add; data movement permute, reshape, cast, slice, cat, tril; composite softmax, mean, rms_norm, layer_norm, sdpa, log_softmax, cross_entropy, moe_topk, moe_dispatch); docs/fusion.md ("ops") describes what each op does`,
	},
	{
		name: "unknown_parallel_type",
		src: `meshes:
  m: [0, 1]
tensors:
  tv0:
    mesh: m
    shape: [2]
    schedule:
      - parallelize: {axis: 0, type: DIDw}
`,
		want: `in.yaml:8:38: error: tensor "tv0" parallelize: unknown parallel type "DIDw" (expected DIDx, DIDy, DIDz or Serial); did you mean "DIDx"?`,
	},
	{
		name: "unknown_schedule_step",
		src: `meshes:
  m: [0, 1]
tensors:
  tv0:
    mesh: m
    shape: [4]
    schedule:
      - splt: {axis: 0, factor: 2}
`,
		want: `in.yaml:8:9: error: tensor "tv0" schedule: unknown key "splt" (expected one of split, outer_split, merge, reorder, parallelize); did you mean "split"?`,
	},
	{
		name: "unknown_tensor_in_op",
		src: `meshes:
  m: [0, 1]
tensors:
  tv0: {mesh: m, shape: [4]}
ops:
  - {op: set, in: tv00, out: tv1}
`,
		want: `in.yaml:6:19: error: tensor "tv00" is read by an op but neither declared nor produced; did you mean "tv0"?`,
	},
	{
		name: "unknown_tensor_key",
		src: `meshes:
  m: [0, 1]
tensors:
  tv0: {mesh: m, shap: [4]}
`,
		want: `in.yaml:4:18: error: tensor "tv0": unknown key "shap" (expected one of mesh, dtype, shape, schedule, allocation, placements); did you mean "shape"?`,
	},
	{
		name: "unknown_top_key",
		src: `meshes:
  m: [0, 1]
tensors:
  tv0: {mesh: m, shape: [4]}
opz:
  - {op: set, in: tv0, out: tv1}
`,
		want: `in.yaml:5:1: error: fusion: unknown key "opz" (expected one of format, name, meshes, tensors, ops, inputs, outputs, backward, pipeline); did you mean "ops"?`,
	},
	{
		name: "unsupported_format",
		src: `format: 3
meshes:
  m: [0, 1]
`,
		want: `in.yaml:1:9: error: format: unsupported format 3 (expected 1 or 2); format 2 is format 1 with sharding propagation`,
	},
	{
		name: "yaml_bad_indent",
		src: `meshes:
  m: [0, 1]
tensors:
  tv0: {mesh: m, shape: [4]}
 tv1: {mesh: m, shape: [4]}
`,
		want: `in.yaml:5:1: error: invalid YAML: did not find expected key`,
	},
	{
		name: "yaml_syntax",
		src: `meshes:
  m: [0, 1
tensors: {}
`,
		want: `in.yaml:2:1: error: invalid YAML: did not find expected ',' or ']'`,
	},
	{
		name: "yaml_tab_indent",
		src:  "meshes:\n\tm: [0, 1]\n",
		want: `in.yaml:2:1: error: invalid YAML: found character that cannot start any token`,
	},
	{
		name: "zero_factor",
		src: `meshes:
  m: [0, 1]
tensors:
  tv0:
    mesh: m
    shape: [8]
    schedule:
      - outer_split: {axis: 0, factor: 0}
`,
		want: `in.yaml:8:40: error: tensor "tv0" outer_split factor: expected an integer >= 1, got 0`,
	},
	// The ops of layers: operands, keys, arity, shapes and dtypes.
	{
		name: "arity_linear",
		src: `meshes:
  m: [0, 1]
tensors:
  x: {mesh: m, shape: [4, 8]}
  w: {mesh: m, shape: [2, 8]}
  bias: {mesh: m, shape: [2]}
ops:
  - {op: linear, in: [x, w, bias, bias], out: y}
`,
		want: `in.yaml:8:22: error: ops[0]: linear takes 2 or 3 inputs ([x, w] or [x, w, bias]), got 4; write in: [x, w] or [x, w, bias]`,
	},
	{
		name: "arity_matmul",
		src: `meshes:
  m: [0, 1]
tensors:
  a: {mesh: m, shape: [4, 8]}
ops:
  - {op: matmul, in: [a], out: c}
`,
		want: `in.yaml:6:22: error: ops[0]: matmul takes 2 inputs ([a, b]), got 1; write in: [a, b]`,
	},
	{
		name: "arity_unary",
		src: `meshes:
  m: [0, 1]
tensors:
  a: {mesh: m, shape: [4]}
  b: {mesh: m, shape: [4]}
ops:
  - {op: relu, in: [a, b], out: c}
`,
		want: `in.yaml:7:20: error: ops[0]: relu takes 1 input, got 2; in names one tensor`,
	},
	{
		name: "axes_on_add",
		src: `meshes:
  m: [0, 1]
tensors:
  a: {mesh: m, shape: [4]}
ops:
  - {op: add, in: [a, a], out: c, axes: [0]}
`,
		want: `in.yaml:6:41: error: ops[0]: add takes no "axes"; only broadcast inserts axes`,
	},
	{
		name: "axes_on_sum",
		src: `meshes:
  m: [0, 1]
tensors:
  a: {mesh: m, shape: [4, 2]}
ops:
  - {op: sum, in: a, out: c, axes: [0]}
`,
		want: `in.yaml:6:36: error: ops[0]: sum reduces one "axis", not "axes"; write axis: N; reduce several axes with one op each`,
	},
	{
		name: "axis_on_matmul",
		src: `meshes:
  m: [0, 1]
tensors:
  a: {mesh: m, shape: [4, 8]}
  b: {mesh: m, shape: [8, 2]}
ops:
  - {op: matmul, in: [a, b], out: c, axis: 1}
`,
		want: `in.yaml:7:44: error: ops[0]: matmul takes no "axis"; matmul contracts a's last axis with b's second-to-last; no axis is given`,
	},
	{
		name: "broadcast_axes_not_increasing",
		src: `meshes:
  m: [0, 1]
tensors:
  v: {mesh: m, shape: [4]}
  w: {shape: [2, 4, 3]}
ops:
  - {op: broadcast, in: v, out: w, axes: [2, 0]}
`,
		want: `in.yaml:7:46: error: ops[0]: broadcast axes [2, 0] are not increasing (axis 0 comes after 2); list each new axis once, in increasing order`,
	},
	{
		name: "broadcast_axis_out_of_range",
		src: `meshes:
  m: [0, 1]
tensors:
  v: {mesh: m, shape: [4]}
  w: {shape: [2, 4]}
ops:
  - {op: broadcast, in: v, out: w, axes: [2]}
`,
		want: `in.yaml:7:43: error: ops[0]: broadcast axis 2 is out of range for the output "w" of rank 2`,
	},
	{
		name: "broadcast_empty_axes",
		src: `meshes:
  m: [0, 1]
tensors:
  v: {mesh: m, shape: [4]}
  w: {shape: [4]}
ops:
  - {op: broadcast, in: v, out: w, axes: []}
`,
		want: `in.yaml:7:42: error: ops[0]: broadcast axes: expected at least one new axis, got an empty list; a broadcast without new axes is a set`,
	},
	{
		name: "broadcast_extent_mismatch",
		src: `meshes:
  m: [0, 1]
tensors:
  v: {mesh: m, shape: [4, 6]}
  w: {shape: [4, 2, 5]}
ops:
  - {op: broadcast, in: v, out: w, axes: [1]}
`,
		want: `in.yaml:5:14: error: tensor "w" shape [4, 2, 5] does not match its input: axis 2 has extent 5, but it is axis 1 of "v", of extent 6; the output's shape is "v"'s [4, 6] with a new axis inserted at each of axes [1]`,
	},
	{
		name: "broadcast_rank_mismatch",
		src: `meshes:
  m: [0, 1]
tensors:
  v: {mesh: m, shape: [4]}
  w: {shape: [2, 3, 4]}
ops:
  - {op: broadcast, in: v, out: w, axes: [0]}
`,
		want: `in.yaml:5:14: error: tensor "w" shape [2, 3, 4] has rank 3, but broadcast of "v" (rank 1) at axes [0] gives rank 2; the output's shape is "v"'s [4] with a new axis inserted at each of axes [0]`,
	},
	{
		name: "broadcast_without_axes",
		src: `meshes:
  m: [0, 1]
tensors:
  v: {mesh: m, shape: [4]}
  w: {shape: [2, 4]}
ops:
  - {op: broadcast, in: v, out: w}
`,
		want: `in.yaml:7:5: error: ops[0]: broadcast needs "axes", the output positions of its new axes; axes: [0] inserts a leading axis`,
	},
	{
		name: "broadcast_without_shape",
		src: `meshes:
  m: [0, 1]
tensors:
  v: {mesh: m, shape: [4]}
ops:
  - {op: broadcast, in: v, out: w, axes: [0]}
`,
		want: `in.yaml:6:33: error: ops[0]: broadcast needs the shape of its output "w"; declare tensor "w" with its full shape: the new axes' extents come from it`,
	},
	{
		name: "cycle_through_second_input",
		src: `meshes:
  m: [0, 1]
tensors:
  a: {mesh: m, shape: [4]}
ops:
  - {op: add, in: [a, d], out: c}
  - {op: neg, in: c, out: d}
`,
		want: `in.yaml:6:5: error: ops form a cycle through tensor "c"; every tensor must be computable from the fusion inputs`,
	},
	{
		name: "elementwise_broadcast_mismatch",
		src: `meshes:
  m: [0, 1]
tensors:
  a: {mesh: m, shape: [4, 6]}
  b: {mesh: m, shape: [4, 3]}
ops:
  - {op: maximum, in: [a, b], out: c}
`,
		want: `in.yaml:7:27: error: ops[0]: maximum operands do not broadcast: axis 1 has extent 6 in "a" and 3 in "b"; extents must be equal, or 1 in one operand, which is then repeated (torch's broadcasting rule)`,
	},
	{
		name: "elementwise_rank_mismatch",
		src: `meshes:
  m: [0, 1]
tensors:
  a: {mesh: m, shape: [4, 6]}
  b: {mesh: m, shape: [6]}
ops:
  - {op: add, in: [a, b], out: c}
`,
		want: `in.yaml:7:23: error: ops[0]: add operands must have equal ranks, but "a" has rank 2 and "b" rank 1; insert the missing axes with a broadcast op first`,
	},
	{
		name: "layer_several_errors",
		src: `meshes:
  m: [0, 1]
tensors:
  a: {mesh: m, shape: [4, 8]}
  b: {mesh: m, shape: [8, 2]}
ops:
  - {op: matmul, in: [a, bb, a], out: c, axis: 0}
  - {op: relu, in: [a, b], out: d, axes: [1]}
  - {op: linear, in: a, out: e}
  - {op: broadcast, in: [a], out: f, axis: 0}
`,
		want: `in.yaml:7:22: error: ops[0]: matmul takes 2 inputs ([a, b]), got 3; write in: [a, b]
in.yaml:7:48: error: ops[0]: matmul takes no "axis"; matmul contracts a's last axis with b's second-to-last; no axis is given
in.yaml:8:20: error: ops[1]: relu takes 1 input, got 2; in names one tensor
in.yaml:8:42: error: ops[1]: relu takes no "axes"; only broadcast inserts axes
in.yaml:9:22: error: ops[2]: linear takes 2 or 3 inputs ([x, w] or [x, w, bias]), got 1; write in: [x, w] or [x, w, bias]
in.yaml:10:44: error: ops[3]: broadcast takes "axes", a list, not "axis"; write axes: [N], the output positions of the new axes`,
	},
	{
		name: "layer_shape_errors",
		src: `meshes:
  m: [0, 1]
tensors:
  x: {mesh: m, shape: [4, 8]}
  w: {mesh: m, shape: [2, 6]}
  b: {mesh: m, shape: [4, 3]}
  h: {mesh: m, dtype: float16, shape: [4]}
ops:
  - {op: linear, in: [x, w], out: y}
  - {op: relu, in: y, out: r}
  - {op: add, in: [x, b], out: s}
  - {op: matmul, in: [x, h], out: t}
  - {op: sub, in: [h, h], out: u}
  - {op: mul, in: [x, u], out: v}
`,
		want: `in.yaml:9:26: error: ops[0]: linear contracts axis 1 of "x" (k = 8) with axis 1 of "w" (k = 6): the extents differ; w is [n, k], as torch.nn.functional.linear's weight; for x @ w with w of shape [k, n], use matmul
in.yaml:11:23: error: ops[2]: add operands do not broadcast: axis 1 has extent 8 in "x" and 3 in "b"; extents must be equal, or 1 in one operand, which is then repeated (torch's broadcasting rule)
in.yaml:12:26: error: ops[3]: matmul operand b, "h" of shape [4], has rank 1, expected 2 or a's rank 2; b is [k, n], shared by every batch, or [..., k, n] with a's batch axes
in.yaml:12:26: error: ops[3]: matmul operands have different dtypes: "x" is float32 and "h" is float16 (operands share a dtype; use cast); convert one first, e.g. {op: cast, in: h, out: h_float32, dtype: float32}
in.yaml:14:23: error: ops[5]: mul operands must have equal ranks, but "x" has rank 2 and "u" rank 1; insert the missing axes with a broadcast op first
in.yaml:14:23: error: ops[5]: mul operands have different dtypes: "x" is float32 and "u" is float16 (operands share a dtype; use cast); convert one first, e.g. {op: cast, in: u, out: u_float32, dtype: float32}`,
	},
	{
		name: "linear_bias_shape",
		src: `meshes:
  m: [0, 1]
tensors:
  x: {mesh: m, shape: [4, 8]}
  w: {mesh: m, shape: [2, 8]}
  bias: {mesh: m, shape: [8]}
ops:
  - {op: linear, in: [x, w, bias], out: y}
`,
		want: `in.yaml:8:29: error: ops[0]: linear bias "bias" has shape [8], expected [2]; bias is [n], w's axis 0: [2]`,
	},
	{
		name: "linear_k_mismatch",
		src: `meshes:
  m: [0, 1]
tensors:
  x: {mesh: m, shape: [4, 8]}
  w: {mesh: m, shape: [8, 2]}
ops:
  - {op: linear, in: [x, w], out: y}
`,
		want: `in.yaml:7:26: error: ops[0]: linear contracts axis 1 of "x" (k = 8) with axis 1 of "w" (k = 2): the extents differ; w is [n, k], as torch.nn.functional.linear's weight; for x @ w with w of shape [k, n], use matmul`,
	},
	{
		name: "linear_rank_w",
		src: `meshes:
  m: [0, 1]
tensors:
  x: {mesh: m, shape: [4, 8]}
  w: {mesh: m, shape: [8]}
ops:
  - {op: linear, in: [x, w], out: y}
`,
		want: `in.yaml:7:26: error: ops[0]: linear operand w, "w" of shape [8], has rank 1, expected 2; w is [n, k], as torch.nn.functional.linear's weight`,
	},
	{
		name: "linear_rank_x",
		src: `meshes:
  m: [0, 1]
tensors:
  x: {mesh: m, shape: []}
  w: {mesh: m, shape: [2, 8]}
ops:
  - {op: linear, in: [x, w], out: y}
`,
		want: `in.yaml:7:23: error: ops[0]: linear operand x, "x" of shape [], has rank 0, expected at least 1; x is [..., k]`,
	},
	{
		name: "matmul_batch_mismatch",
		src: `meshes:
  m: [0, 1]
tensors:
  a: {mesh: m, shape: [3, 4, 8]}
  b: {mesh: m, shape: [1, 8, 2]}
ops:
  - {op: matmul, in: [a, b], out: c}
`,
		want: `in.yaml:7:26: error: ops[0]: matmul batch axis 0 has extent 3 in "a" and 1 in "b" (expected equal extents); batch axes are not broadcast; give b rank 2 to share it across batches`,
	},
	{
		name: "matmul_k_mismatch",
		src: `meshes:
  m: [0, 1]
tensors:
  a: {mesh: m, shape: [4, 8]}
  b: {mesh: m, shape: [2, 8]}
ops:
  - {op: matmul, in: [a, b], out: c}
`,
		want: `in.yaml:7:26: error: ops[0]: matmul contracts axis 1 of "a" (k = 8) with axis 0 of "b" (k = 2): the extents differ; a is [..., m, k] and b [..., k, n]; for x @ w.T with w of shape [n, k], use linear`,
	},
	{
		name: "matmul_output_dtype",
		src: `meshes:
  m: [0, 1]
tensors:
  a: {mesh: m, dtype: bfloat16, shape: [4, 8]}
  b: {mesh: m, dtype: bfloat16, shape: [8, 2]}
  c: {dtype: float32}
ops:
  - {op: matmul, in: [a, b], out: c}
`,
		want: `in.yaml:6:14: error: tensor "c": dtype float32 differs from its operands' bfloat16 (operands share a dtype; use cast); remove its dtype, or declare it bfloat16; a cast op converts to another`,
	},
	{
		name: "matmul_output_too_large",
		src: `meshes:
  m: [0, 1]
tensors:
  a: {mesh: m, shape: [2147483647, 1]}
  b: {mesh: m, shape: [1, 2147483647]}
ops:
  - {op: matmul, in: [a, b], out: c}
`,
		want: `in.yaml:7:5: error: ops[0]: output "c": [2147483647, 2147483647] of float32 elements takes more than 9223372036854775807 bytes (expected a tensor whose bytes fit in int64); nvcomm counts sizes in int64 bytes; use smaller extents`,
	},
	{
		name: "matmul_rank_a",
		src: `meshes:
  m: [0, 1]
tensors:
  a: {mesh: m, shape: [8]}
  b: {mesh: m, shape: [8, 2]}
ops:
  - {op: matmul, in: [a, b], out: c}
`,
		want: `in.yaml:7:23: error: ops[0]: matmul operand a, "a" of shape [8], has rank 1, expected at least 2; a is [..., m, k]; give a 1-D operand an axis of extent 1 with broadcast, or use linear`,
	},
	{
		name: "matmul_rank_b",
		src: `meshes:
  m: [0, 1]
tensors:
  a: {mesh: m, shape: [2, 4, 8]}
  b: {mesh: m, shape: [8]}
ops:
  - {op: matmul, in: [a, b], out: c}
`,
		want: `in.yaml:7:26: error: ops[0]: matmul operand b, "b" of shape [8], has rank 1, expected 2 or a's rank 3; b is [k, n], shared by every batch, or [..., k, n] with a's batch axes`,
	},
	{
		name: "matmul_schedule_axis_out_of_range",
		src: `meshes:
  m: [0, 1]
tensors:
  a: {mesh: m, shape: [4, 8]}
  b: {mesh: m, shape: [8, 2]}
  c:
    schedule:
      - outer_split: {axis: 3, factor: 2}
ops:
  - {op: matmul, in: [a, b], out: c}
`,
		want: `in.yaml:8:29: error: tensor "c" outer_split: axis 3 is out of range for a loop domain of 3 axes`,
	},
	{
		name: "matmul_shape_mismatch",
		src: `meshes:
  m: [0, 1]
tensors:
  a: {mesh: m, shape: [4, 8]}
  b: {mesh: m, shape: [8, 2]}
  c: {shape: [4, 8]}
ops:
  - {op: matmul, in: [a, b], out: c}
`,
		want: `in.yaml:6:14: error: tensor "c": shape [4, 8] does not match the shape [4, 2] inferred from the op that produces it`,
	},
	{
		name: "reshape_count",
		src: `meshes:
  m: [0, 1]
tensors:
  x: {mesh: m, shape: [8, 24]}
ops:
  - {op: reshape, in: x, out: y, shape: [8, 4, 5]}
`,
		want: `in.yaml:6:41: error: ops[0]: reshape of "x": shape [8, 4, 5] has 160 elements, but the input [8, 24] has 192; a reshape keeps the element count; write -1 for the extent to infer`,
	},
	{
		name: "reshape_two_inferred",
		src: `meshes:
  m: [0, 1]
tensors:
  x: {mesh: m, shape: [8, 24]}
ops:
  - {op: reshape, in: x, out: y, shape: [-1, 4, -1]}
`,
		want: `in.yaml:6:41: error: ops[0] shape: more than one extent is -1; one extent may be -1: the others fix it`,
	},
	{
		name: "permute_not_permutation",
		src: `meshes:
  m: [0, 1]
tensors:
  x: {mesh: m, shape: [2, 3, 4]}
ops:
  - {op: permute, in: x, out: y, dims: [0, 2, -1]}
`,
		want: `in.yaml:6:47: error: ops[0]: permute of "x": dims [0, 2, -1] is not a permutation: dim 2 appears twice; list every dim of the input once, in the output's order`,
	},
	{
		name: "permute_dims_rank",
		src: `meshes:
  m: [0, 1]
tensors:
  x: {mesh: m, shape: [2, 3, 4]}
ops:
  - {op: permute, in: x, out: y, dims: [1, 0]}
`,
		want: `in.yaml:6:40: error: ops[0]: permute of "x": dims [1, 0] has 2 entries, but the input has rank 3; list every dim of the input once, in the output's order`,
	},
	{
		name: "permute_needs_dims",
		src: `meshes:
  m: [0, 1]
tensors:
  x: {mesh: m, shape: [2, 3]}
ops:
  - {op: permute, in: x, out: y}
`,
		want: `in.yaml:6:5: error: ops[0]: permute needs "dims"; dims: the input's dims in the output's order (negative from the end), a permutation`,
	},
	{
		name: "attr_not_taken",
		src: `meshes:
  m: [0, 1]
tensors:
  x: {mesh: m, shape: [2, 3]}
ops:
  - {op: relu, in: x, out: y, dims: [1, 0]}
`,
		want: `in.yaml:6:37: error: ops[0]: relu takes no "dims"; "dims" is an attribute of permute`,
	},
	{
		name: "cast_unknown_dtype",
		src: `meshes:
  m: [0, 1]
tensors:
  x: {mesh: m, shape: [2, 3]}
ops:
  - {op: cast, in: x, out: y, dtype: float8}
`,
		want: `in.yaml:6:38: error: ops[0] dtype: unknown dtype "float8" (expected one of bfloat16, float16, float32, float64, int32, int64); did you mean "float16"?`,
	},
	{
		name: "cast_declared_dtype",
		src: `meshes:
  m: [0, 1]
tensors:
  x: {mesh: m, shape: [2, 3]}
  y: {dtype: float32}
ops:
  - {op: cast, in: x, out: y, dtype: bfloat16}
`,
		want: `in.yaml:5:14: error: tensor "y": dtype float32 differs from bfloat16, which its cast gives; remove its dtype, or declare it bfloat16`,
	},
	{
		name: "mixed_dtypes",
		src: `meshes:
  m: [0, 1]
tensors:
  a: {mesh: m, shape: [4]}
  b: {mesh: m, dtype: float16, shape: [4]}
ops:
  - {op: mul, in: [a, b], out: c}
`,
		want: `in.yaml:7:23: error: ops[0]: mul operands have different dtypes: "a" is float32 and "b" is float16 (operands share a dtype; use cast); convert one first, e.g. {op: cast, in: b, out: b_float32, dtype: float32}`,
	},
	{
		name: "op_in_empty_list",
		src: `meshes:
  m: [0, 1]
tensors:
  a: {mesh: m, shape: [4]}
ops:
  - {op: relu, in: [], out: b}
`,
		want: `in.yaml:6:20: error: ops[0] in: expected at least one tensor name, got an empty list`,
	},
	{
		name: "op_in_mapping",
		src: `meshes:
  m: [0, 1]
tensors:
  a: {mesh: m, shape: [4]}
ops:
  - {op: add, in: {a: a}, out: b}
`,
		want: `in.yaml:6:19: error: ops[0] in: expected a tensor name or a list of names, got a mapping`,
	},
	{
		name: "partial_output_not_sum",
		src: `meshes:
  m: [0, 1]
tensors:
  a: {mesh: m, shape: [4, 8]}
  b: {mesh: m, shape: [8, 2]}
  c: {placements: [Partial(max)]}
ops:
  - {op: matmul, in: [a, b], out: c}
`,
		want: `in.yaml:6:20: error: tensor "c" placements: matmul sums over its contracted axis, so its partial terms are a sum, not max; write Partial(sum): each device holds the sum over its slice of k`,
	},
	{
		name: "partial_output_of_add",
		src: `meshes:
  m: [0, 1]
tensors:
  a: {mesh: m, shape: [4]}
  c: {placements: [Partial(sum)]}
ops:
  - {op: add, in: [a, a], out: c}
`,
		want: `in.yaml:5:20: error: tensor "c" placements: add leaves pending terms only of operands that all hold terms of a sum; give every operand Partial(sum) placements alike, or leave the output's Partial out (its terms are then summed after it)`,
	},
	{
		name: "reads_own_output_in_list",
		src: `meshes:
  m: [0, 1]
tensors:
  a: {mesh: m, shape: [4]}
ops:
  - {op: add, in: [a, c], out: c}
`,
		want: `in.yaml:6:32: error: op reads and writes the same tensor "c"`,
	},
	{
		name: "unknown_tensor_in_list",
		src: `meshes:
  m: [0, 1]
tensors:
  a: {mesh: m, shape: [4]}
  bias: {mesh: m, shape: [4]}
ops:
  - {op: add, in: [a, biass], out: c}
`,
		want: `in.yaml:7:23: error: tensor "biass" is read by an op but neither declared nor produced; did you mean "bias"?`,
	},
	{
		// Issue 24: a missing axis (found while reading the ops) hid
		// the errors that checking the tensors and shapes finds.
		name: "independent_errors",
		src: `# Four independent errors, all reported in one run; the ops that read a
# broken tensor are not checked, so nothing repeats an error's cause.
meshes:
  m: [0, 1]
tensors:
  x: {mesh: m, shape: [4, 8]}
  w: {mesh: m, shape: [6, 2]}
  c: {mesh: m, shape: [4, 8], placements: [Shard(2)]}
  d: {mesh: m, shape: [4, 8], placements: [Shard(0), Replicate()]}
ops:
  - {op: sum, in: x, out: s}
  - {op: matmul, in: [x, w], out: y}
  - {op: relu, in: c, out: r}
  - {op: add, in: [d, s], out: e}
  - {op: relu, in: y, out: f}
`,
		want: `in.yaml:8:44: error: tensor "c" placements: Shard(2) is out of range for a tensor of 2 dims
in.yaml:9:43: error: tensor "d" placements: expected one placement per axis of mesh "m" (1), got 2
in.yaml:11:5: error: ops[0]: sum needs an "axis" to reduce
in.yaml:12:26: error: ops[1]: matmul contracts axis 1 of "x" (k = 8) with axis 0 of "w" (k = 6): the extents differ; a is [..., m, k] and b [..., k, n]; for x @ w.T with w of shape [n, k], use linear`,
	},
}

func TestParseInvalid(t *testing.T) {
	seen := map[string]bool{}
	for _, tt := range invalidTests {
		if seen[tt.name] {
			t.Fatalf("duplicate case %s", tt.name)
		}
		seen[tt.name] = true
		t.Run(tt.name, func(t *testing.T) {
			f, err := Parse("in.yaml", []byte(tt.src))
			if err == nil {
				t.Fatalf("Parse succeeded with %d tensors, want an error", len(f.Tensors))
			}
			if f != nil {
				t.Errorf("Parse returned a fusion along with an error")
			}
			var list *diag.List
			if !errors.As(err, &list) {
				t.Fatalf("Parse error is %T, want *diag.List", err)
			}
			if list.Len() == 0 || list.Len() > diag.MaxErrors {
				t.Errorf("Parse reported %d diagnostics, want 1..%d", list.Len(), diag.MaxErrors)
			}
			for _, d := range list.Items {
				if d.File != "in.yaml" || !d.Pos.IsKnown() || d.Pos.Col < 1 {
					t.Errorf("diagnostic %q has file %q and position %v", d.Message, d.File, d.Pos)
				}
			}
			if diff := cmp.Diff(tt.want, err.Error()); diff != "" {
				t.Errorf("Parse diagnostics mismatch (-want +got):\n%s", diff)
			}
		})
	}
	if len(invalidTests) < 30 {
		t.Errorf("only %d kinds of invalid input", len(invalidTests))
	}
}
