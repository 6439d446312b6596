package syntax

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/nvcomm/nvcomm/internal/scale"
)

// fastCorpus is every YAML file of the repository, the generated scale
// inputs and a few edge cases: what fastDecode is held to the YAML
// library on.
func fastCorpus(t testing.TB) map[string][]byte {
	files := map[string][]byte{
		"chain1d":    scale.Chain(50, scale.Mesh1D),
		"chain2d":    scale.Chain(50, scale.Mesh2x4),
		"bigmesh":    scale.BigMesh(100),
		"meshchange": scale.MeshChange(2, 2, 4, scale.MeshChanges[0]),
	}
	for i, s := range []string{
		"a: 1\n", "a: [1, 2]\nb: {c: d}\n", "a:\n- 1\n- 2\nb: x\n", "a:\n  - b: 1\n    c: 2\n  - d: 3\n",
		"a: {}\nb: []\n", "a:\n\n  b: 1\n\n", "a: 1\n  b: 2\n", "a: -1\nb: 007\nc: 1_0\n", "a: true\n",
		"a: b c\n", "a: [1,\n 2]\n", "a:\n", "a: [1, 2,]\n", "a: {b: 1, c}\n", "- a\n- b\n", "a: Shard(0)\n",
		"a: x(y)z\n", "a:b\n", "a: [b:c]\n", "---\na: 1\n", "a: 1\n---\nb: 2\n", "", "\n\n", "a: 99999999999999999999\n",
		"a:\n- - 1\n", "y: yes\nn: [on, off, Null, _x]\n", "a:\n  -\n    b: 1\n", "a: [Partial(), Replicate()]\n", "  a: 1\n  b: 2\n", "a: 1\n b: 2\n",
	} {
		files[fmt.Sprintf("case%d", i)] = []byte(s)
	}
	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if !d.IsDir() && (strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml")) {
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			files[path] = src
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestFastDecode checks that every file fastDecode reads decodes to the
// library's tree, and that it reads the generated inputs.
func TestFastDecode(t *testing.T) {
	read := 0
	for name, src := range fastCorpus(t) {
		if sameAsLibrary(t, name, src) {
			read++
		} else if !strings.HasPrefix(name, "case") && !strings.Contains(name, "/") {
			t.Errorf("%s: fastDecode gave up on a generated input", name)
		}
	}
	t.Logf("fastDecode read %d files", read)
	if read < 20 {
		t.Errorf("fastDecode read only %d files", read)
	}
}

// FuzzFastDecode checks that whatever fastDecode reads, the YAML library
// reads as one document with the same tree.
func FuzzFastDecode(f *testing.F) {
	for _, src := range fastCorpus(f) {
		f.Add(src)
	}
	f.Fuzz(func(t *testing.T, src []byte) { sameAsLibrary(t, "fuzz", src) })
}

// sameAsLibrary compares fastDecode's tree of src with the library's, when
// fastDecode reads src; it reports whether it did.
func sameAsLibrary(t *testing.T, name string, src []byte) bool {
	t.Helper()
	doc, ok := fastDecode(src)
	if !ok {
		return false
	}
	dec := yaml.NewDecoder(bytes.NewReader(src))
	var want, extra yaml.Node
	if err := dec.Decode(&want); err != nil {
		t.Errorf("%s: fastDecode read it, the library fails: %v\n%s", name, err, src)
		return true
	}
	if err := dec.Decode(&extra); err != io.EOF {
		t.Errorf("%s: fastDecode read it, the library finds a second document (%v)", name, err)
	}
	if want.Kind != yaml.DocumentNode || len(want.Content) != 1 {
		t.Errorf("%s: the library's document has %d nodes", name, len(want.Content))
		return true
	}
	if d := nodeDiff(doc.Content[0], want.Content[0], "root"); d != "" {
		t.Errorf("%s: fastDecode differs from the library at %s\n%s", name, d, src)
	}
	return true
}

// nodeDiff is the path to the first difference between two trees in what
// a node says (not its comments, which fastDecode never reads), or "".
func nodeDiff(got, want *yaml.Node, path string) string {
	g := fmt.Sprintf("kind %d tag %s value %q style %d at %d:%d, %d nodes", got.Kind, got.Tag, got.Value, got.Style, got.Line, got.Column, len(got.Content))
	w := fmt.Sprintf("kind %d tag %s value %q style %d at %d:%d, %d nodes", want.Kind, want.Tag, want.Value, want.Style, want.Line, want.Column, len(want.Content))
	if g != w || want.Anchor != "" || want.Alias != nil {
		return fmt.Sprintf("%s: got %s, want %s", path, g, w)
	}
	for i := range got.Content {
		if d := nodeDiff(got.Content[i], want.Content[i], fmt.Sprintf("%s/%d", path, i)); d != "" {
			return d
		}
	}
	return ""
}

// BenchmarkDecode decodes a chain of 10k ops with fastDecode and with the
// YAML library.
func BenchmarkDecode(b *testing.B) {
	src := scale.Chain(10_000, scale.Mesh1D)
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := fastDecode(src); !ok {
				b.Fatal("fastDecode gave up")
			}
		}
	})
	b.Run("library", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var n yaml.Node
			if err := yaml.Unmarshal(src, &n); err != nil {
				b.Fatal(err)
			}
		}
	})
}
