package plan

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/diag"
)

// TestDecodeDuplicateKeys: encoding/json keeps the last of two equal keys,
// so a plan could say one thing and mean another (issue 10). Decode rejects
// a repeated key at its second occurrence.
func TestDecodeDuplicateKeys(t *testing.T) {
	for _, tc := range []struct {
		name, src, want string
	}{
		{"top level", "{\n  \"format\": 1,\n  \"format\": 1\n}",
			`p.json:3:3: error: invalid plan: duplicate key "format" (first at 2:3); a plan states each field once`},
		{"nested", `{"format": 1, "summary": {"collectives": 1, "local_steps": 0, "collectives": 2}}`,
			`p.json:1:63: error: invalid plan: duplicate key "collectives" (first at 1:27); a plan states each field once`},
		{"in an array", `{"format": 1, "steps": [{"id": 0}, {"id": 1, "op": 0, "id": 2}]}`,
			`p.json:1:55: error: invalid plan: duplicate key "id" (first at 1:37); a plan states each field once`},
		{"struct field case", `{"format": 1, "Format": 1}`,
			`p.json:1:15: error: invalid plan: duplicate key "Format" (first at 1:2); a plan states each field once`},
		{"escaped", `{"format": 1, "fusion": "a", "fusio\u006e": "b"}`,
			`p.json:1:30: error: invalid plan: duplicate key "fusion" (first at 1:15); a plan states each field once`},
		{"map", `{"format": 1, "meshes": {"m": {"shape": [1], "devices": [0]}, "m": {"shape": [1], "devices": [1]}}}`,
			`p.json:1:63: error: invalid plan: duplicate key "m" (first at 1:26); a plan states each field once`},
		{"map names differ in case", `{"format": 1, "meshes": {"m": {"shape": [1], "devices": [0]}, "M": {"shape": [1], "devices": [1]}}}`, ""},
		{"by_type names differ in case", `{"format": 1, "summary": {"by_type": {"Gather": 1, "gather": 2}}}`, ""},
		{"a key as a value", `{"format": 1, "fusion": "format", "policy": "format"}`, ""},
		{"after a map, a struct", `{"format": 1, "steps": [{"id": 0, "bytes": null}, {"Op": 1, "op": 1}]}`,
			`p.json:1:61: error: invalid plan: duplicate key "op" (first at 1:52); a plan states each field once`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode("p.json", []byte(tc.src))
			got := ""
			if err != nil {
				got = err.Error()
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Decode error mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDecodeManyKeys: an object with many keys (a map of meshes) is
// indexed, and a repeat found however far apart.
func TestDecodeManyKeys(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"format": 1, "meshes": {`)
	for i := range 100 {
		fmt.Fprintf(&b, `"m%d": {"shape": [1], "devices": [%d]}, `, i, i)
	}
	b.WriteString(`"m7": {"shape": [1], "devices": [7]}}}`)
	_, err := Decode("p.json", []byte(b.String()))
	var dl *diag.List
	if !errors.As(err, &dl) || !strings.Contains(dl.Items[0].Message, `duplicate key "m7"`) {
		t.Errorf("Decode = %v, want a duplicate key \"m7\"", err)
	}
}

// TestDecodeLargePlanFast: the duplicate-key scan of a plan of many steps
// takes a small part of decoding it with encoding/json, the path that
// runs the scan (fastDecode finds duplicates as it reads).
func TestDecodeLargePlanFast(t *testing.T) {
	p := allgatherPlan()
	step := p.Steps[0]
	p.Steps = nil
	for i := range 20_000 {
		step.ID = i
		p.Steps = append(p.Steps, step)
	}
	src, err := Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, ok := findDuplicate(src); ok {
		t.Fatal("findDuplicate found a duplicate in a marshaled plan")
	}
	scan := time.Since(start)
	start = time.Now()
	if _, err := decodeLibrary("big.json", src); err != nil {
		t.Fatal(err)
	}
	decode := time.Since(start)
	t.Logf("%d MB: scan %v, whole decode with encoding/json %v", len(src)>>20, scan, decode)
	if scan > decode {
		t.Errorf("the duplicate-key scan (%v) takes longer than the rest of Decode (%v)", scan, decode-scan)
	}
}
