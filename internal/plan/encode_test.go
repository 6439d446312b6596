package plan

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// decodedGoldens decodes the plans of the repository's testdata folders,
// by file, in file order; files that do not decode (the invalid corpus)
// are left out.
func decodedGoldens(t *testing.T) ([]string, map[string]*Plan) {
	t.Helper()
	files, err := filepath.Glob("../../testdata/*/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden plans (%v)", err)
	}
	var names []string
	plans := map[string]*Plan{}
	for _, file := range files {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if p, err := Decode(file, src); err == nil {
			names = append(names, file)
			plans[file] = p
		}
	}
	return names, plans
}

// goldenPlans lists every plan checked in under testdata: the repository's
// and the packages' (not the Chrome traces of plans, NAME.trace.json, nor
// the model configurations under testdata/models).
func goldenPlans(t *testing.T) []string {
	t.Helper()
	var files []string
	for _, root := range []string{"../../testdata", "../../internal"} {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && filepath.ToSlash(path) == "../../testdata/models" {
				return filepath.SkipDir
			}
			if !d.IsDir() && strings.HasSuffix(path, ".json") && !strings.HasSuffix(path, ".trace.json") && strings.Contains(filepath.ToSlash(path), "/testdata/") {
				files = append(files, path)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(files) < 100 {
		t.Fatalf("found only %d golden plans", len(files))
	}
	return files
}

// TestEncodeGoldens decodes every golden plan and encodes it again: the
// bytes must be the file's, and the reference encoder's.
func TestEncodeGoldens(t *testing.T) {
	for _, path := range goldenPlans(t) {
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		p, err := Decode(path, src)
		if err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		got, err := Marshal(p)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if !bytes.Equal(got, src) {
			t.Errorf("%s: encoding differs from the file at byte %d", path, firstDiff(got, src))
		}
		want, err := referenceEncode(p)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: encoding differs from the reference encoder's (err %v)", path, err)
		}
	}
}

// TestEncodeMatchesReference encodes random plans, every field of every
// struct filled or left zero at random, with the streaming encoder and the
// reference one (encoding/json, re-indented): the bytes must be equal. A
// field added to the plan's types but not to encode.go fails here.
func TestEncodeMatchesReference(t *testing.T) {
	for seed := range uint64(3000) {
		checkEncodeMatches(t, seed)
		if t.Failed() {
			return
		}
	}
}

// FuzzEncode is TestEncodeMatchesReference for any seed.
func FuzzEncode(f *testing.F) {
	for seed := range uint64(8) {
		f.Add(seed)
	}
	f.Fuzz(checkEncodeMatches)
}

func checkEncodeMatches(t *testing.T, seed uint64) {
	var p Plan
	fill(rand.New(rand.NewPCG(seed, 13)), reflect.ValueOf(&p).Elem())
	got, err := Marshal(&p)
	want, refErr := referenceEncode(&p)
	if (err == nil) != (refErr == nil) {
		t.Fatalf("seed %d: error %v, reference error %v", seed, err, refErr)
	}
	if !bytes.Equal(got, want) {
		i := firstDiff(got, want)
		t.Fatalf("seed %d: differs at byte %d:\n got: %q\nwant: %q", seed, i, excerpt(got, i), excerpt(want, i))
	}
}

// fill sets v to a random value (but fields encoding/json leaves out, an
// op's Attrs, which the golden plans and TestOpAttrsRoundTrip cover): pointers, slices and maps nil, empty or
// not; lists short or long enough to break a line; strings with characters
// JSON escapes, invalid UTF-8 and lengths around the line width.
func fill(r *rand.Rand, v reflect.Value) {
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).Tag.Get("json") != "-" { // encoding/json's reference writes no such field
				fill(r, v.Field(i))
			}
		}
	case reflect.Pointer:
		if r.IntN(3) > 0 {
			v.Set(reflect.New(v.Type().Elem()))
			fill(r, v.Elem())
		}
	case reflect.Slice:
		if r.IntN(5) == 0 {
			return // nil
		}
		n := r.IntN(4)
		if r.IntN(6) == 0 {
			n = r.IntN(40)
		}
		v.Set(reflect.MakeSlice(v.Type(), n, n))
		for i := range n {
			fill(r, v.Index(i))
		}
	case reflect.Map:
		if r.IntN(5) == 0 {
			return
		}
		v.Set(reflect.MakeMap(v.Type()))
		for range r.IntN(4) {
			k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
			fill(r, k)
			fill(r, e)
			v.SetMapIndex(k, e)
		}
	case reflect.String:
		v.SetString(randomString(r))
	case reflect.Int, reflect.Int64:
		v.SetInt(randomInt(r))
	case reflect.Float64:
		v.SetFloat(randomFloat(r))
	case reflect.Bool:
		v.SetBool(r.IntN(2) == 0)
	default:
		panic("fill: no generator for " + v.Type().String())
	}
}

func randomString(r *rand.Rand) string {
	pieces := []string{"a", "tv", "0", "_", "/", " ", "\"", "\\", "\n", "\t", "\x01", "<", "&", "é", "\u2028", "\ufffd", "\xff", "\xe2\x82", "😀"}
	n := r.IntN(6)
	if r.IntN(4) == 0 {
		n = r.IntN(60)
	}
	var b strings.Builder
	for range n {
		if r.IntN(3) == 0 {
			b.WriteString(pieces[r.IntN(len(pieces))])
		} else {
			b.WriteByte(byte('a' + r.IntN(26)))
		}
	}
	return b.String()
}

func randomInt(r *rand.Rand) int64 {
	switch r.IntN(4) {
	case 0:
		return int64(r.Uint64()) // any, negative included
	case 1:
		return -r.Int64N(100)
	}
	return r.Int64N(1000)
}

func randomFloat(r *rand.Rand) float64 {
	fs := []float64{0, 1, 0.5, 1.0 / 3, 1e-7, 123456789.125, 1e21, 2.5e-300, -7, math.MaxFloat64}
	return fs[r.IntN(len(fs))]
}

// TestEncodeStreams checks that a big plan reaches the writer in pieces,
// none much larger than flushSize, that together are Marshal's bytes.
func TestEncodeStreams(t *testing.T) {
	p := &Plan{Format: 1, Meshes: map[string]Mesh{"m": {Shape: []int{1 << 17}, Devices: make([]int, 1<<17)}}}
	var w recordingWriter
	if err := Encode(&w, p); err != nil {
		t.Fatal(err)
	}
	want, err := referenceEncode(p)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(w.all, want) {
		t.Fatalf("streamed bytes differ from the reference at %d", firstDiff(w.all, want))
	}
	if w.writes < 4 || w.largest > flushSize+1024 {
		t.Errorf("%d writes, the largest %d bytes: want several of about %d", w.writes, w.largest, flushSize)
	}
}

type recordingWriter struct {
	all             []byte
	writes, largest int
}

func (w *recordingWriter) Write(p []byte) (int, error) {
	w.all = append(w.all, p...)
	w.writes++
	w.largest = max(w.largest, len(p))
	return len(p), nil
}

// TestEncodeNaN checks that a bytes_ratio JSON cannot write is encoding/json's
// error, before anything is written.
func TestEncodeNaN(t *testing.T) {
	for _, r := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		p := &Plan{Summary: Summary{BytesRatio: &r}}
		var w recordingWriter
		err := Encode(&w, p)
		_, want := json.Marshal(p)
		if err == nil || want == nil || err.Error() != want.Error() || w.writes > 0 {
			t.Errorf("ratio %v: error %v (encoding/json: %v), %d writes", r, err, want, w.writes)
		}
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func excerpt(b []byte, i int) string {
	return string(b[max(0, i-60):min(len(b), i+40)])
}
