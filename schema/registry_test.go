package schema

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/ops"
)

// TestSchemasListTheRegistry checks every list of ops in the schemas
// against the op registry, so that an op added there and not here (or a
// key or arity changed) fails: the op names, the ops that take "axis",
// "axes" or neither, those of one operand, of two, and of two or three,
// the reduce ops and the Pointwise functions.
func TestSchemasListTheRegistry(t *testing.T) {
	all := ops.Default.All()
	names := func(keep func(o *ops.Op) bool) []string {
		var out []string
		for _, o := range all {
			if keep(o) {
				out = append(out, o.Name)
			}
		}
		return out
	}
	arity := func(lo, hi int) func(o *ops.Op) bool {
		return func(o *ops.Op) bool { l, h := o.Arity(); return l == lo && h == hi }
	}
	every := func(*ops.Op) bool { return true }
	takes := func(a ops.Attr) func(o *ops.Op) bool { return func(o *ops.Op) bool { return o.Takes(a) } }
	neither := func(o *ops.Op) bool { return len(o.Attrs) == 0 }
	reductions := ops.FamilyNames(ops.Reduction)
	for _, tc := range []struct {
		file, pointer string
		want          []string
	}{
		{Fusion, "$defs/op/properties/op/enum", names(every)},
		{Fusion, "$defs/op/allOf/0/if/properties/op/enum", names(takes(ops.AttrAxis))},
		{Fusion, "$defs/op/allOf/1/if/properties/op/const", names(takes(ops.AttrAxes))},
		{Fusion, "$defs/op/allOf/2/if/properties/op/enum", names(neither)},
		{Fusion, "$defs/op/allOf/3/if/properties/op/enum", names(arity(1, 1))},
		{Fusion, "$defs/op/allOf/4/if/properties/op/enum", names(arity(2, 2))},
		{Fusion, "$defs/op/allOf/5/if/properties/op/const", names(arity(2, 3))},
		{Plan, "$defs/reduceOp/enum", reductions},
		{Plan, "$defs/op/properties/op/enum", names(every)},
		{Plan, "$defs/op/allOf/0/if/properties/op/enum", names(takes(ops.AttrAxis))},
		{Plan, "$defs/op/allOf/1/if/properties/op/const", names(takes(ops.AttrAxes))},
		{Plan, "$defs/step/properties/func/enum", ops.PointwiseFuncs()},
	} {
		t.Run(tc.file+"/"+tc.pointer, func(t *testing.T) {
			if d := cmp.Diff(tc.want, lookupList(t, tc.file, tc.pointer)); d != "" {
				t.Errorf("the schema and the op registry differ (-registry +schema):\n%s", d)
			}
		})
	}
}

// lookupList returns the strings at pointer (keys and indices separated by
// "/") in schema file name: a list, or one string (a const).
func lookupList(t *testing.T, name, pointer string) []string {
	t.Helper()
	src, err := Files.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(src, &v); err != nil {
		t.Fatal(err)
	}
	for _, key := range strings.Split(pointer, "/") {
		switch x := v.(type) {
		case map[string]any:
			v = x[key]
		case []any:
			i, err := strconv.Atoi(key)
			if err != nil || i >= len(x) {
				t.Fatalf("%s: no %s", name, pointer)
			}
			v = x[i]
		default:
			t.Fatalf("%s: no %s", name, pointer)
		}
	}
	switch x := v.(type) {
	case string:
		return []string{x}
	case []any:
		out := make([]string, len(x))
		for i, s := range x {
			out[i], _ = s.(string)
		}
		return out
	}
	t.Fatalf("%s: %s is %T, not a list of strings", name, pointer, v)
	return nil
}
