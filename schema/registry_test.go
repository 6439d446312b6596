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
// "axes" or neither, those of one operand, of two, of two or three, and
// of two or more,
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
	// A plan holds the composites expanded: its lists name the others.
	inPlan := func(keep func(o *ops.Op) bool) func(o *ops.Op) bool {
		return func(o *ops.Op) bool { return o.Family != ops.Composite && keep(o) }
	}
	takes := func(a ops.Attr) func(o *ops.Op) bool { return func(o *ops.Op) bool { return o.Takes(a) } }
	neither := func(o *ops.Op) bool { return !o.Takes(ops.AttrAxis) && !o.Takes(ops.AttrAxes) }
	reductions := ops.FamilyNames(ops.Reduction)
	for _, tc := range []struct {
		file, pointer string
		want          []string
	}{
		{Fusion, "$defs/op/properties/op/enum", names(every)},
		{Fusion, "$defs/op/allOf/0/if/properties/op/enum", names(takes(ops.AttrAxis))},
		{Fusion, "$defs/op/allOf/1/if/properties/op/enum", names(takes(ops.AttrAxes))},
		{Fusion, "$defs/op/allOf/2/if/properties/op/enum", names(neither)},
		{Fusion, "$defs/op/allOf/3/if/properties/op/enum", names(arity(1, 1))},
		{Fusion, "$defs/op/allOf/4/if/properties/op/enum", names(arity(2, 2))},
		{Fusion, "$defs/op/allOf/5/if/properties/op/const", names(arity(2, 3))},
		{Fusion, "$defs/op/allOf/12/if/properties/op/enum", names(func(o *ops.Op) bool { return o.Variadic })},
		{Fusion, "$defs/op/allOf/13/if/properties/op/enum", names(arity(3, 3))},
		{Plan, "$defs/reduceOp/enum", reductions},
		{Plan, "$defs/op/properties/op/enum", names(inPlan(every))},
		{Plan, "$defs/op/allOf/0/if/properties/op/enum", names(inPlan(takes(ops.AttrAxis)))},
		{Plan, "$defs/op/allOf/1/if/properties/op/const", names(inPlan(takes(ops.AttrAxes)))},
		{Plan, "$defs/op/properties/of/properties/op/enum", ops.FamilyNames(ops.Composite)},
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
	v := lookupValue(t, name, pointer)
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

// TestSchemasHaveTheAttributes checks that every attribute of the
// registry is a property of an op in both schemas, of its kind's JSON
// type, and that the ops that take it require it there and the others
// may not give it.
func TestSchemasHaveTheAttributes(t *testing.T) {
	types := map[ops.AttrKind]string{ops.IntAttr: "integer", ops.IntsAttr: "array", ops.FloatAttr: "number", ops.BoolAttr: "boolean"}
	for _, file := range []string{Fusion, Plan} {
		for _, spec := range ops.AttrSpecs() {
			key := string(spec.Key)
			if !spec.Stored() || file == Plan && onlyComposites(spec.Key) {
				continue // axis and axes: TestSchemasListTheRegistry; a plan holds no composite
			}
			t.Run(file+"/"+key, func(t *testing.T) {
				prop := lookup(t, file, "$defs/op/properties/"+key)
				if want := types[spec.Kind]; want != "" && prop["type"] != want {
					t.Errorf("type %v, want %s", prop["type"], want)
				}
				if spec.Kind == ops.NameAttr {
					if d := cmp.Diff(spec.Names, lookupList(t, file, "$defs/op/properties/"+key+"/enum")); d != "" {
						t.Errorf("the names (-registry +schema):\n%s", d)
					}
				}
				if takers := ops.Takers(spec.Key); len(takers) > 0 {
					if d := cmp.Diff(takers, takersIn(t, file, key, spec.Optional)); d != "" {
						t.Errorf("the ops that require %q (-registry +schema):\n%s", key, d)
					}
				}
			})
		}
	}
}

// onlyComposites reports whether only composite ops take attribute a
// (eps), which a plan never holds.
func onlyComposites(a ops.Attr) bool {
	for _, name := range ops.Takers(a) {
		if !ops.Is(name, ops.Composite) {
			return false
		}
	}
	return true
}

// takersIn returns the ops of the allOf entry of the op in schema file
// that requires key, or for an optional key the entry whose else forbids
// it.
func takersIn(t *testing.T, file, key string, optional bool) []string {
	t.Helper()
	all, _ := lookup(t, file, "$defs/op")["allOf"].([]any)
	for i, e := range all {
		then, _ := e.(map[string]any)["then"].(map[string]any)
		if optional {
			els, _ := e.(map[string]any)["else"].(map[string]any)
			then, _ = els["not"].(map[string]any)
			if _, required := e.(map[string]any)["then"].(map[string]any)["required"]; required {
				continue // an optional key is never required
			}
		}
		if req, _ := then["required"].([]any); len(req) == 1 && req[0] == key {
			return lookupList(t, file, "$defs/op/allOf/"+strconv.Itoa(i)+"/if/properties/op/enum")
		}
	}
	return nil
}

// lookup returns the object at pointer in schema file name.
func lookup(t *testing.T, name, pointer string) map[string]any {
	t.Helper()
	m, ok := lookupValue(t, name, pointer).(map[string]any)
	if !ok {
		t.Fatalf("%s: no object at %s", name, pointer)
	}
	return m
}

// lookupValue returns the value at pointer (keys and indices separated by
// "/") in schema file name.
func lookupValue(t *testing.T, name, pointer string) any {
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
	return v
}
