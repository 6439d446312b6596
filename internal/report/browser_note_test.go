package report

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestBrowserNote: make test says once that TestBrowser is skipped when
// none of the browsers it looks for is there (go test shows no skip
// without -v), and says nothing when one is; the Makefile looks where
// findBrowser does.
func TestBrowserNote(t *testing.T) {
	src, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^BROWSERS := (.*)$`).FindSubmatch(src)
	if m == nil {
		t.Fatal("the Makefile has no BROWSERS line")
	}
	if d := cmp.Diff(browsers, strings.Fields(string(m[1]))); d != "" {
		t.Errorf("the Makefile's BROWSERS are not findBrowser's (-want +got):\n%s", d)
	}
	makePath, err := exec.LookPath("make")
	if err != nil {
		t.Skip("no make")
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "fake-chromium"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		browsers string
		want     int // lines saying the test is skipped
	}{
		{"nvcomm-no-such-browser /nonexistent/chromium", 1},
		{"nvcomm-no-such-browser fake-chromium", 0},
	}
	// make test runs the note once (-n lists the commands it would run).
	dry, err := exec.Command(makePath, "-n", "--no-print-directory", "-C", "../..", "test").CombinedOutput()
	if err != nil {
		t.Fatalf("make -n test: %v\n%s", err, dry)
	}
	if got := strings.Count(string(dry), "TestBrowser) is skipped"); got != 1 {
		t.Errorf("make test would print the browser note %d times, want once:\n%s", got, dry)
	}
	for _, tt := range tests {
		cmd := exec.Command(makePath, "-s", "--no-print-directory", "-C", "../..", "browser-note", "BROWSERS="+tt.browsers)
		cmd.Env = []string{"PATH=" + dir}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("make browser-note BROWSERS=%q: %v\n%s", tt.browsers, err, out)
		}
		if got := strings.Count(string(out), "TestBrowser) is skipped"); got != tt.want {
			t.Errorf("make browser-note BROWSERS=%q says the browser test is skipped %d times, want %d:\n%s", tt.browsers, got, tt.want, out)
		}
	}
}
