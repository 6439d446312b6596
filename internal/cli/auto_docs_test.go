package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// autoDoc is the page whose commands TestDocsAutoCommands runs.
const autoDoc = "../../docs/auto.md"

// docCommand is a command a page shows: in a sh block, to be run, or
// after "$ " in a plain block, followed by the output the page shows.
type docCommand struct {
	args []string
	// shown is the output the page shows, and [start, end) its bytes in
	// the page; start < 0 for a command of a sh block, shown with none.
	shown      string
	start, end int
}

// docCommands lists the nvcomm commands of the page src's code blocks.
func docCommands(t *testing.T, src []byte) []docCommand {
	t.Helper()
	var out []docCommand
	for off := 0; ; {
		open := bytes.Index(src[off:], []byte("```"))
		if open < 0 {
			return out
		}
		open += off
		body := open + bytes.IndexByte(src[open:], '\n') + 1
		end := body + bytes.Index(src[body:], []byte("```"))
		if end < body {
			t.Fatalf("%s: a code block is not closed", autoDoc)
		}
		lang := string(src[open+3 : body-1])
		block := string(src[body:end])
		switch {
		case lang == "sh":
			for line := range strings.Lines(block) {
				line, _, _ = strings.Cut(line, " #")
				if f := strings.Fields(line); len(f) > 0 && f[0] == "nvcomm" {
					out = append(out, docCommand{args: f[1:], start: -1})
				}
			}
		case lang == "" && strings.HasPrefix(block, "$ nvcomm "):
			first, _, _ := strings.Cut(block, "\n")
			start := body + len(first) + 1
			out = append(out, docCommand{args: strings.Fields(first)[2:], shown: string(src[start:end]), start: start, end: end})
		}
		off = end + 3
	}
}

// TestDocsAutoCommands runs every command docs/auto.md shows, from a
// directory whose testdata is the repository's (so the page's paths are
// the shipped examples, testdata/examples/auto_*.yaml): each must succeed,
// and where the page shows output after "$ nvcomm ...", it must be the
// first paragraph of today's, the decisions table before the plan
// (NVCOMM_UPDATE=1 rewrites it).
func TestDocsAutoCommands(t *testing.T) {
	src, err := os.ReadFile(autoDoc)
	if err != nil {
		t.Fatal(err)
	}
	testdata, err := filepath.Abs("../../testdata")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Symlink(testdata, filepath.Join(dir, "testdata")); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	update := os.Getenv("NVCOMM_UPDATE") != ""
	cmds := docCommands(t, src)
	shown, examples := 0, map[string]bool{}
	var updated []byte
	last := 0
	for _, c := range cmds {
		for _, a := range c.args {
			if strings.HasPrefix(a, "testdata/examples/") {
				examples[a] = true
			}
		}
		var out, errb bytes.Buffer
		if code := Run(context.Background(), c.args, nil, &out, &errb); code != 0 {
			t.Errorf("nvcomm %s: exit %d: %s", strings.Join(c.args, " "), code, errb.String())
			continue
		}
		if c.start < 0 {
			continue
		}
		shown++
		first, _, _ := strings.Cut(out.String(), "\n\n")
		if want := first + "\n"; c.shown != want {
			if !update {
				t.Errorf("%s shows output of nvcomm %s that is not today's (NVCOMM_UPDATE=1 rewrites it); want:\n%s", autoDoc, strings.Join(c.args, " "), want)
			}
			updated = append(append(updated, src[last:c.start]...), want...)
			last = c.end
		}
	}
	if updated != nil && update {
		if err := os.WriteFile(filepath.Join(testdata, "../docs/auto.md"), append(updated, src[last:]...), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	autoExamples, err := filepath.Glob("testdata/examples/auto_*.yaml")
	if err != nil || len(autoExamples) < 3 {
		t.Fatalf("the examples of --auto: %v, %v", autoExamples, err)
	}
	for _, want := range autoExamples {
		if !examples[want] {
			t.Errorf("%s runs no command on %s", autoDoc, want)
		}
	}
	if shown < 2 {
		t.Errorf("%s shows the output of %d commands, want at least 2", autoDoc, shown)
	}
}
