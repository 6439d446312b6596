package internal_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// internalWords match references that only the project's own workspace can
// resolve: design notes, reference files and machines that a user of the
// repository does not have, and the workspace's names for nvFuser's trees.
// Documentation states the rule itself or cites a public source (nvFuser
// paths and commits, PyTorch, NCCL, nccl-tests).
var internalWords = regexp.MustCompile("DESIGN\\.md|DESIGN §|shared/(reference|calibration|design|seed)|nvfuser-cases|nvfuser-passes|peers\\.md|\\bNEWEST\\b|\\bSEED\\b|nvidia-h200|the `device` tool")

// TestDocsStandAlone: no documentation, example, script or comment of the
// repository refers to what its users cannot read.
func TestDocsStandAlone(t *testing.T) {
	exts := map[string]bool{".md": true, ".go": true, ".yaml": true, ".yml": true, ".py": true, ".sh": true, ".txtar": true, ".json": true, ".txt": true, ".csv": true}
	self, err := filepath.Abs("docs_test.go")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	err = filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != ".." && (strings.HasPrefix(name, ".") || name == "bin" || name == "build") {
				return filepath.SkipDir
			}
			return nil
		}
		if !exts[filepath.Ext(path)] && d.Name() != "Makefile" && d.Name() != "run" {
			return nil
		}
		if abs, _ := filepath.Abs(path); abs == self {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		n++
		for i, line := range strings.Split(string(src), "\n") {
			if m := internalWords.FindString(line); m != "" {
				t.Errorf("%s:%d: %q refers to what users of the repository cannot read: state the rule, or cite a public source", path, i+1, m)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 100 {
		t.Fatalf("read %d files, expected the repository's", n)
	}
}

// TestReadmeInstall: the README says how to install and which Go, as
// go.mod does, and the repository has its license and changelog. The
// module is not published, so `go install MODULE@VERSION` fails: the
// README installs from a clone, and shows no @latest until a release
// makes it work.
func TestReadmeInstall(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	goLine := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(gomod)
	if goLine == nil {
		t.Fatal("go.mod has no go line")
	}
	for _, want := range []string{
		"go install ./cmd/nvcomm",
		"make build",
		"`go " + string(goLine[1]) + "`",
		"[LICENSE](LICENSE)",
		"[CHANGELOG.md](CHANGELOG.md)",
	} {
		if !strings.Contains(string(readme), want) {
			t.Errorf("README.md does not say %q", want)
		}
	}
	if strings.Contains(string(readme), "@latest") {
		t.Error("README.md installs with @latest, which fails while the module is not published")
	}
	license, err := os.ReadFile("../LICENSE")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(license), "Apache License\n                           Version 2.0, January 2004") {
		t.Error("LICENSE is not the Apache License 2.0")
	}
	if _, err := os.Stat("../CHANGELOG.md"); err != nil {
		t.Error(err)
	}
}
