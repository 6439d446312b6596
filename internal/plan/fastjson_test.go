package plan

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// repoPlans is every JSON file of the repository that decodeLibrary
// decodes as a plan: the examples, the conformance and regression goldens,
// the exported plans of the docs and the tests' inputs.
func repoPlans(t testing.TB) map[string][]byte {
	plans := map[string][]byte{}
	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil // another test's temporary file, gone
		case err != nil:
			return err
		case d.IsDir() && d.Name() == ".git":
			return filepath.SkipDir
		case d.IsDir() || !strings.HasSuffix(path, ".json"):
			return nil
		}
		src, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if _, err := decodeLibrary(path, src); err == nil {
			plans[path] = src
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return plans
}

// mutate returns variants of a plan that fastDecode must either decline
// or read as decodeLibrary does: each rewrites the first match of one
// pattern.
func mutate(src []byte) [][]byte {
	var out [][]byte
	for _, r := range [][2]string{
		{`"format": 1`, `"format": 1.0`},
		{`"format": 1`, `"format": 1, "format": 1`},
		{`"format": 1`, `"Format": 1`},
		{`"format": 1`, `"format": 1, "extra": 1`},
		{`"id": 0`, `"id": -0`},
		{`"id": 0`, `"id": 1e0`},
		{`"id": 0`, `"id": 00`},
		{`"root": null`, `"root": 9223372036854775808`},
		{`"axis": 0`, `"axis": -9223372036854775808`},
		{`"tv0"`, `"tv\u0030"`},
		{`"tv0"`, `"tv\/0\t"`},
		{`"tv0"`, "\"tv\xff\""},
		{`"tv0"`, `"tv€"`},
		{`"kind": "collective"`, `"kind": "collective", "kind": "local"`},
		{`"shape": [`, `"shape": null, "x": [`},
		{`"teams": [`, `"teams": [null, [], `},
		{`"sharding": [`, `"sharding": [null, {}, `},
		{`"bytes": {`, `"bytes": null, "bytez": {`},
		{`"bytes_ratio": `, `"bytes_ratio": 1e400, "x": `},
		{`"by_type": {`, `"by_type": {"Allgather": 0, `},
		{`"meshes": {`, `"meshes": {"m": null, `},
		{"\n}\n", "\n} x\n"},
		{"\n}\n", "\n}}\n"},
		{`]`, `,]`},
	} {
		if bytes.Contains(src, []byte(r[0])) {
			out = append(out, bytes.Replace(src, []byte(r[0]), []byte(r[1]), 1))
		}
	}
	return out
}

// sameAsLibrary checks that when fastDecode reads src, decodeLibrary
// decodes it too, to an equal plan, and reports whether fastDecode read it.
func sameAsLibrary(t *testing.T, name string, src []byte) bool {
	t.Helper()
	fast, ok := fastDecode(src)
	if !ok {
		return false
	}
	lib, err := decodeLibrary(name, src)
	if err != nil {
		t.Errorf("%s: fastDecode reads it, decodeLibrary: %v", name, err)
		return true
	}
	if !reflect.DeepEqual(lib, fast) {
		t.Errorf("%s: fastDecode differs from decodeLibrary (-library +fast):\n%s", name, cmp.Diff(lib, fast))
	}
	return true
}

// TestFastDecode: fastDecode reads plain plans as decodeLibrary does and
// declines the rest, whose errors decodeLibrary reports.
func TestFastDecode(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		taken     bool
	}{
		{"minimal", `{"format": 1}`, true},
		{"blanks", " \t\r\n{\"format\"\n:\t1 }\n\n", true},
		{"other format", `{"format": 3}`, false},
		{"no format", `{}`, false},
		{"empty input", ``, false},
		{"null", `null`, false},
		{"a list", `[]`, false},
		{"field case", `{"Format": 1}`, false},
		{"unknown field", `{"format": 1, "formats": 1}`, false},
		{"duplicate", `{"format": 1, "format": 1}`, false},
		{"escaped key", `{"form\u0061t": 1}`, false},
		{"trailing data", `{"format": 1} {}`, false},
		{"trailing brace", `{"format": 1}}`, false},
		{"trailing comma", `{"format": 1,}`, false},
		{"unterminated", `{"format": 1`, false},
		{"fraction", `{"format": 1.0}`, false},
		{"exponent", `{"format": 1e0}`, false},
		{"leading zero", `{"format": 01}`, false},
		{"plus", `{"format": +1}`, false},
		{"string for int", `{"format": "1"}`, false},
		{"negative zero", `{"format": 1, "summary": {"collectives": -0}}`, true},
		{"int64 bounds", `{"format": 1, "summary": {"bytes_received_max": 9223372036854775807, "bytes_lower_bound": -9223372036854775808}}`, true},
		{"int64 overflow", `{"format": 1, "summary": {"bytes_received_max": 9223372036854775808}}`, false},
		{"many digits", `{"format": 1, "summary": {"collectives": 10000000000000000000}}`, false},
		{"nulls everywhere", `{"format": 1, "fusion": null, "meshes": null, "tensors": null, "ops": null, "steps": null, "summary": null}`, true},
		{"empties", `{"format": 1, "meshes": {}, "tensors": [], "ops": [], "steps": [], "summary": {"by_type": {}}}`, true},
		{"null items", `{"format": 1, "tensors": [null, {}], "ops": [null], "steps": [{"teams": [null, [], [null, 1]], "inputs": [null, "a"]}]}`, true},
		{"null fields", `{"format": 1, "tensors": [{"name": null, "shape": null, "propagated": null, "schedule": [null, {"split": null}]}], ` +
			`"steps": [{"id": null, "root": null, "reduce_op": null, "count": null, "bytes": null, "fill": null}]}`, true},
		{"pointers", `{"format": 1, "ops": [{"axis": 0}], "steps": [{"root": 3, "reduce_op": "sum", "axis": -1, "fill": "-inf", "func": "add", ` +
			`"bytes": {"sent_per_device": 1, "received_per_device": 2, "lower_bound": 3}}], ` +
			`"tensors": [{"schedule": [{"split": {}}, {"outer_split": {"axis": 1, "factor": 2}}, {"merge": {"axis": 0}}, {"reorder": [1, 0]}, ` +
			`{"parallelize": {"axis": 0, "type": "DIDx"}}], "sharding": [{"type": "DIDx", "shape_axis": 2, "logical_axes": [0, 1]}]}], ` +
			`"summary": {"bytes_ratio": 1.5}}`, true},
		{"scalars and of", `{"format": 1, "ops": [{"scalar": {"slot": 1, "value": 1e-05}, "of": {"op": "layer_norm", "inputs": ["x", "w"], ` +
			`"output": "y", "axes": [1], "eps": 0.00001}}, {"scalar": null, "of": null}, {"of": {"op": "mean", "inputs": null, "axis": 0}}], ` +
			`"steps": [{"func": "div", "scalar": {"slot": 0, "value": -2.5}}, {"scalar": null}]}`, true},
		{"every step field", `{"format": 1, "steps": [{"id": 0, "op": 0, "expr": "", "kind": "local", "type": "Pointwise", ` +
			`"stream": "s", "after": [], "teams": [], "devices": [], "root": 0, "reduce_op": "sum", "input": "a", "inputs": [], ` +
			`"output": "b", "axis": 0, "count": {"input": 1, "output": 1}, "dims": [], "perm": [], "reduce_dims": [], "valid": [], ` +
			`"fill": "zero", "func": "add", "scalar": {"slot": 0, "value": 1}, "input_dims": [], "broadcast_b": true, "transpose_b": true, ` +
			`"send_counts": [], "offsets": [], "windows": [], "bytes": {"sent_per_device": 1}}]}`, true},
		{"scalar repeated key", `{"format": 1, "ops": [{"scalar": {"slot": 1, "slot": 0}}]}`, false},
		{"scalar unknown key", `{"format": 1, "steps": [{"scalar": {"slots": 1}}]}`, false},
		{"of unknown key", `{"format": 1, "ops": [{"of": {"op": "mean", "dims": [0]}}]}`, false},
		{"ratio forms", `{"format": 1, "summary": {"bytes_ratio": -0.25e+2}}`, true},
		{"ratio zero", `{"format": 1, "summary": {"bytes_ratio": -0}}`, true},
		{"ratio out of range", `{"format": 1, "summary": {"bytes_ratio": 1e400}}`, false},
		{"ratio as string", `{"format": 1, "summary": {"bytes_ratio": "1"}}`, false},
		{"ratio bare point", `{"format": 1, "summary": {"bytes_ratio": 1.}}`, false},
		{"bools", `{"format": 1, "tensors": [{"propagated": true}], "steps": [{"broadcast_b": false, "transpose_b": true}]}`, true},
		{"bool as int", `{"format": 1, "tensors": [{"propagated": 1}]}`, false},
		{"simple escapes", `{"format": 1, "fusion": "a\"b\\c\/d\b\f\n\r\t", "tensors": [{"name": "t\"0"}]}`, true},
		{"unicode escape", `{"format": 1, "fusion": "\u0041"}`, false},
		{"bad escape", `{"format": 1, "fusion": "\x"}`, false},
		{"utf-8", `{"format": 1, "fusion": "fusión €", "tensors": [{"name": "é\n€"}]}`, true},
		{"invalid utf-8", "{\"format\": 1, \"fusion\": \"a\xffb\"}", false},
		{"invalid utf-8 escaped", "{\"format\": 1, \"fusion\": \"\\na\xffb\"}", false},
		{"control byte", "{\"format\": 1, \"fusion\": \"a\tb\"}", false},
		{"mesh names by case", `{"format": 1, "meshes": {"m": {"shape": [1], "devices": [0]}, "M": {"shape": [1], "devices": [1]}}}`, true},
		{"mesh repeated", `{"format": 1, "meshes": {"m": {"shape": [1], "devices": [0]}, "m": {"shape": [1], "devices": [1]}}}`, false},
		{"mesh null", `{"format": 1, "meshes": {"m": null, "by_type": {"shape": [2]}}}`, true},
		{"mesh field case", `{"format": 1, "meshes": {"m": {"Shape": [1]}}}`, false},
		{"by_type repeated", `{"format": 1, "summary": {"by_type": {"Gather": 1, "Gather": 2}}}`, false},
		{"by_type escaped", `{"format": 1, "summary": {"by_type": {"Ga\"ther": 1, "Gather": null}}}`, true},
		{"list for object", `{"format": 1, "summary": []}`, false},
		{"object for list", `{"format": 1, "tensors": {}}`, false},
		{"list trailing comma", `{"format": 1, "meshes": {"m": {"shape": [1,]}}}`, false},
		{"list missing comma", `{"format": 1, "meshes": {"m": {"shape": [1 2]}}}`, false},
		{"nested too deep", `{"format": 1, "steps": [{"teams": [[[0]]]}]}`, false},
		{"tensors counted", `{"format": 1, "tensors": [{"name": "a]"}, {"name": "b,[{"}, {"name": "c\"],\\"}, null, {"shape": [1, 2]}]}`, true},
		{"tensors unterminated", `{"format": 1, "tensors": [{"name": "a"}, {"name": "b,"}`, false},
		{"truncated literal", `{"format": 1, "fusion": nul}`, false},
		{"literal run on", `{"format": 1, "fusion": nullx}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := sameAsLibrary(t, tc.name, []byte(tc.src)); got != tc.taken {
				t.Errorf("fastDecode read it: %v, want %v", got, tc.taken)
			}
		})
	}
}

// TestFastDecodeValidPlans: the plans of the validation tests, encoded,
// and their mutations.
func TestFastDecodeValidPlans(t *testing.T) {
	for name, build := range validPlans() {
		src, err := Marshal(build())
		if err != nil {
			t.Fatal(err)
		}
		if !sameAsLibrary(t, name, src) {
			t.Errorf("%s: fastDecode declined an encoded plan", name)
		}
		for _, m := range mutate(src) {
			sameAsLibrary(t, name+" mutated", m)
		}
	}
}

// TestFastDecodeRepoPlans: every plan of the repository is read by
// fastDecode, not decodeLibrary, to the same plan.
func TestFastDecodeRepoPlans(t *testing.T) {
	plans := repoPlans(t)
	for _, name := range slices.Sorted(maps.Keys(plans)) {
		if !sameAsLibrary(t, name, plans[name]) {
			t.Errorf("%s: fastDecode declined it", name)
		}
	}
	if len(plans) < 200 {
		t.Errorf("found %d plans in the repository, want at least 200", len(plans))
	}
}

// FuzzFastDecode checks that whatever fastDecode reads, decodeLibrary
// reads too, as the same plan.
func FuzzFastDecode(f *testing.F) {
	plans := repoPlans(f)
	for _, name := range slices.Sorted(maps.Keys(plans)) {
		f.Add(plans[name])
	}
	valid := validPlans()
	for _, name := range slices.Sorted(maps.Keys(valid)) {
		src, err := Marshal(valid[name]())
		if err != nil {
			f.Fatal(err)
		}
		f.Add(src)
		for _, m := range mutate(src) {
			f.Add(m)
		}
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		sameAsLibrary(t, "fuzz.json", src)
	})
}

// TestFastDecodeAlikeTensors: tensors whose bytes after their names are
// the same, with every field of a tensor given (and some null or empty),
// decode as decodeLibrary decodes them, and each has memory of its own:
// no list or pointer of one is another's, as when each is read field by
// field (a caller may change one tensor of a plan without changing
// another). Tensors that differ in one byte, or give their name later,
// are read field by field.
func TestFastDecodeAlikeTensors(t *testing.T) {
	const body = `"dtype": "float32", "mesh": "m", "shape": [16, 16, 4], "reduction_axes": [2], ` +
		`"schedule": [{"split": {"axis": 0, "factor": 2}}, {"outer_split": {"axis": 1, "factor": 8}}, {"merge": {"axis": 0}}, ` +
		`{"reorder": [1, 0]}, {"parallelize": {"axis": 0, "type": "DIDx"}}], "allocation": [0, 1, 2], ` +
		`"sharding": [{"type": "DIDx", "logical_axis": 1, "shape_axis": 1, "kind": "block", "logical_axes": [0, 1]}], ` +
		`"local_shape": [8, 2], "padded_shape": [], "layout": [0, 1], "partial": "sum", "propagated": true}`
	nulls := strings.NewReplacer(`"padded_shape": []`, `"padded_shape": null`, `"allocation": [0, 1, 2]`, `"allocation": null`).Replace(body)
	var tensors []string
	for i, b := range []string{body, body, nulls, body, nulls, strings.Replace(body, "[16, 16, 4]", "[16, 16, 5]", 1), body} {
		tensors = append(tensors, fmt.Sprintf(`{"name": "t%d", %s`, i, b))
	}
	tensors = append(tensors, `{"dtype": "float32", "name": "late"}`, `{"name": "t7", "dtype": "float32"}`, `{"name": "t8", "dtype": "float32"}`)
	src := []byte(`{"format": 1, "tensors": [` + strings.Join(tensors, ", ") + `]}`)
	if !sameAsLibrary(t, "alike", src) {
		t.Fatal("fastDecode declined the plan")
	}
	p, _ := fastDecode(src)
	owners := map[uintptr]string{}
	for _, tensor := range p.Tensors {
		for _, addr := range addresses(reflect.ValueOf(tensor)) {
			if other, ok := owners[addr]; ok && other != tensor.Name {
				t.Errorf("%s and %s share memory at %#x", other, tensor.Name, addr)
			}
			owners[addr] = tensor.Name
		}
	}
}

// addresses lists the memory v refers to: the first element of each
// non-empty list and the target of each pointer, at any depth.
func addresses(v reflect.Value) []uintptr {
	var out []uintptr
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			out = append(out, v.Pointer())
			out = append(out, addresses(v.Elem())...)
		}
	case reflect.Slice:
		if v.Len() > 0 {
			out = append(out, v.Pointer())
		}
		for i := range v.Len() {
			out = append(out, addresses(v.Index(i))...)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			out = append(out, addresses(v.Field(i))...)
		}
	}
	return out
}
