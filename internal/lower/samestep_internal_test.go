package lower

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/plan"
)

// jsonSameStep is sameStep's definition: the steps' JSON, but for ids,
// axes, bytes and their place in a step graph (stream and after, which
// validate checks), is the same.
func jsonSameStep(a, b plan.Step) bool {
	a.ID, b.ID, a.Axis, b.Axis, a.Bytes, b.Bytes = 0, 0, nil, nil, nil, nil
	a.Stream, b.Stream, a.After, b.After = "", "", nil, nil
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && string(ja) == string(jb)
}

// TestSameStepFields lists plan.Step's fields: a field added to Step must
// be compared by sameStep (or knowingly left out, as ID, Axis, Bytes,
// Stream and After are), and this list updated with it.
func TestSameStepFields(t *testing.T) {
	want := []string{"ID", "Op", "Expr", "Kind", "Type", "Stream", "After", "Teams", "Devices", "Root", "ReduceOp", "Input", "Inputs", "Output",
		"Axis", "Count", "Dims", "Perm", "ReduceDims", "Valid", "Fill", "Func", "Scalar", "InputDims", "BroadcastB", "TransposeB", "SendCounts", "Offsets", "Windows", "Bytes"}
	var got []string
	for f := range reflect.TypeFor[plan.Step]().Fields() {
		got = append(got, f.Name)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("plan.Step's fields changed: update sameStep, then this list (-want +got):\n%s", d)
	}
}

// TestSameStepAsJSON compares sameStep with its definition on pairs of
// the golden plans' steps: each step against itself, against every other
// step of its plan and against itself with one field changed (lists
// emptied, nil'ed, extended or edited; pointers dropped or pointed
// elsewhere).
func TestSameStepAsJSON(t *testing.T) {
	files, err := filepath.Glob("../../testdata/*/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden plans (%v)", err)
	}
	r := rand.New(rand.NewPCG(3, 4))
	pairs := 0
	for _, file := range files {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		p, err := plan.Decode(file, src)
		if err != nil {
			continue // the invalid corpus
		}
		for i, a := range p.Steps {
			others := []plan.Step{a, p.Steps[(i+1)%len(p.Steps)]}
			for range 8 {
				others = append(others, mutateStep(r, a))
			}
			for _, b := range others {
				pairs++
				if got, want := sameStep(&a, &b), jsonSameStep(a, b); got != want {
					ja, _ := json.Marshal(a)
					jb, _ := json.Marshal(b)
					t.Fatalf("%s: sameStep = %v, JSON says %v for\n%s\n%s", file, got, want, ja, jb)
				}
			}
		}
	}
	if pairs < 1000 {
		t.Fatalf("only %d pairs compared", pairs)
	}
}

// mutateStep returns a copy of s with one field changed, deeply copied
// where it changes.
func mutateStep(r *rand.Rand, s plan.Step) plan.Step {
	v := reflect.ValueOf(&s).Elem()
	f := v.Field(r.IntN(v.NumField()))
	switch f.Kind() {
	case reflect.Int, reflect.Int64:
		f.SetInt(f.Int() + int64(r.IntN(3)) - 1)
	case reflect.String:
		f.SetString([]string{"", "x", f.String() + "y"}[r.IntN(3)])
	case reflect.Bool:
		f.SetBool(!f.Bool())
	case reflect.Pointer:
		switch {
		case f.IsNil() || r.IntN(2) == 0:
			n := reflect.New(f.Type().Elem())
			if !f.IsNil() {
				n.Elem().Set(f.Elem())
			}
			if n.Elem().Kind() == reflect.Int {
				n.Elem().SetInt(n.Elem().Int() + int64(r.IntN(2)))
			}
			f.Set(n)
		default:
			f.SetZero()
		}
	case reflect.Slice:
		f.Set(mutateList(r, f))
	case reflect.Struct: // Count
		f.Field(r.IntN(f.NumField())).SetInt(int64(r.IntN(4)))
	}
	return s
}

// mutateList returns a changed copy of the list l: nil, empty, one
// element more, or an element (of an inner list too) changed, nil'ed or
// emptied.
func mutateList(r *rand.Rand, l reflect.Value) reflect.Value {
	out := reflect.MakeSlice(l.Type(), l.Len(), l.Len()+1)
	reflect.Copy(out, l)
	switch k := r.IntN(5); {
	case k == 0:
		return reflect.Zero(l.Type())
	case k == 1:
		return reflect.MakeSlice(l.Type(), 0, 0)
	case k == 2 || l.Len() == 0:
		return reflect.Append(out, reflect.Zero(l.Type().Elem()))
	default:
		e := out.Index(r.IntN(l.Len()))
		switch e.Kind() {
		case reflect.Int:
			e.SetInt(e.Int() + 1)
		case reflect.String:
			e.SetString(e.String() + "z")
		case reflect.Slice:
			e.Set(mutateList(r, e))
		}
	}
	return out
}

// TestSameStepEmpty compares steps whose lists or pointers differ only
// in being nil, empty or zero, which JSON tells apart in some fields
// only.
func TestSameStepEmpty(t *testing.T) {
	zero := 0
	tests := []struct {
		name string
		a, b plan.Step
	}{
		{"devices nil, empty", plan.Step{}, plan.Step{Devices: []int{}}},
		{"teams nil, empty", plan.Step{}, plan.Step{Teams: [][]int{}}},
		{"a team nil, empty", plan.Step{Teams: [][]int{nil}}, plan.Step{Teams: [][]int{{}}}},
		{"a box nil, empty", plan.Step{Valid: [][]int{nil}}, plan.Step{Valid: [][]int{{}}}},
		{"send counts nil, empty row", plan.Step{SendCounts: [][]int{nil}}, plan.Step{SendCounts: [][]int{{}}}},
		{"input dims nil, empty", plan.Step{InputDims: [][]int{nil, {1}}}, plan.Step{InputDims: [][]int{{}, {1}}}},
		{"root nil, 0", plan.Step{}, plan.Step{Root: &zero}},
		{"axis nil, 0 (ignored)", plan.Step{}, plan.Step{Axis: &zero}},
		{"bytes (ignored)", plan.Step{}, plan.Step{Bytes: &plan.Bytes{SentPerDevice: 1}}},
		{"ids (ignored)", plan.Step{ID: 1}, plan.Step{ID: 2}},
	}
	for _, tt := range tests {
		if got, want := sameStep(&tt.a, &tt.b), jsonSameStep(tt.a, tt.b); got != want {
			t.Errorf("%s: sameStep = %v, JSON says %v", tt.name, got, want)
		}
	}
}
