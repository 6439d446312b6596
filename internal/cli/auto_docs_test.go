package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/txtar"
)

// TestDocsAutoExample runs the command docs/auto.md shows on the fusion
// of lower_auto.txtar that it describes (blocks.yaml) and compares the
// decisions the page prints with today's (NVCOMM_UPDATE=1 rewrites them).
func TestDocsAutoExample(t *testing.T) {
	const (
		doc     = "../../docs/auto.md"
		command = "$ nvcomm lower --auto --memory-budget 40MiB --format text blocks.yaml\n"
	)
	ar, err := txtar.ParseFile("testdata/script/lower_auto.txtar")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, f := range ar.Files {
		if f.Name == "blocks.yaml" {
			if err := os.WriteFile(filepath.Join(dir, f.Name), f.Data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	var out, errb bytes.Buffer
	args := strings.Fields(strings.TrimPrefix(strings.TrimSpace(command), "$ nvcomm"))
	args[len(args)-1] = filepath.Join(dir, "blocks.yaml")
	if code := Run(context.Background(), args, nil, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	decisions, _, _ := strings.Cut(out.String(), "\n\n") // the table, before the plan
	src, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	start := bytes.Index(src, []byte(command))
	if start < 0 {
		t.Fatalf("%s does not show %q", doc, command)
	}
	start += len(command)
	end := start + bytes.Index(src[start:], []byte("```"))
	if got, want := string(src[start:end]), decisions+"\n"; got != want {
		if os.Getenv("NVCOMM_UPDATE") != "" {
			if err := os.WriteFile(doc, append(append(src[:start:start], want...), src[end:]...), 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
		t.Errorf("%s shows decisions that are not today's (NVCOMM_UPDATE=1 rewrites them); want:\n%s", doc, want)
	}
}
