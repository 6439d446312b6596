package cli_test

import (
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/cli"
)

// lowerSeed returns the seed fusion's plan as lower prints it, and the
// fusion's path in dir.
func lowerSeed(t *testing.T, dir string) (fusion, plan string) {
	t.Helper()
	fusion = writeFile(t, dir, "fusion.yaml", seedFusion)
	code, plan, stderr := run(t, "", "lower", fusion)
	if code != cli.ExitOK || plan == "" {
		t.Fatalf("lower: exit code %d, stderr %q", code, stderr)
	}
	return fusion, plan
}

// TestOutputKeepsMode checks that -o over an existing regular file keeps its
// permissions (a private 0600 plan stays private) and replaces its contents.
func TestOutputKeepsMode(t *testing.T) {
	for _, mode := range []fs.FileMode{0o600, 0o640, 0o755} {
		t.Run(mode.String(), func(t *testing.T) {
			dir := t.TempDir()
			fusion, want := lowerSeed(t, dir)
			out := writeFile(t, dir, "plan.json", "old\n")
			if err := os.Chmod(out, mode); err != nil {
				t.Fatal(err)
			}
			if code, _, stderr := run(t, "", "lower", "-o", out, fusion); code != cli.ExitOK {
				t.Fatalf("exit code %d: %s", code, stderr)
			}
			fi, err := os.Stat(out)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm() != mode {
				t.Errorf("mode %v after -o, want %v", fi.Mode().Perm(), mode)
			}
			if got := readString(t, out); got != want {
				t.Errorf("contents differ from lower's output:\n%s", cmp.Diff(want, got))
			}
		})
	}
}

// TestOutputThroughSymlink checks that -o through a symbolic link (absolute,
// relative, chained, dangling) writes the link's target and keeps the link.
func TestOutputThroughSymlink(t *testing.T) {
	tests := []struct {
		name   string
		links  [][2]string // link name, its destination, in creation order
		target string      // the file that must receive the plan
	}{
		{"relative", [][2]string{{"link", "plan.json"}}, "plan.json"},
		{"chain", [][2]string{{"link2", "plan.json"}, {"link", "link2"}}, "plan.json"},
		{"into a subdirectory", [][2]string{{"link", "sub/plan.json"}}, "sub/plan.json"},
		{"dangling", [][2]string{{"link", "new.json"}}, "new.json"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			fusion, want := lowerSeed(t, dir)
			if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
				t.Fatal(err)
			}
			if tc.target != "new.json" {
				writeFile(t, dir, tc.target, "old\n")
			}
			for _, l := range tc.links {
				if err := os.Symlink(l[1], filepath.Join(dir, l[0])); err != nil {
					t.Fatal(err)
				}
			}
			link := filepath.Join(dir, "link")
			if code, _, stderr := run(t, "", "lower", "-o", link, fusion); code != cli.ExitOK {
				t.Fatalf("exit code %d: %s", code, stderr)
			}
			for _, l := range tc.links {
				fi, err := os.Lstat(filepath.Join(dir, l[0]))
				if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
					t.Errorf("%s is no longer a symbolic link (%v, %v)", l[0], fi, err)
				}
			}
			if got := readString(t, filepath.Join(dir, tc.target)); got != want {
				t.Errorf("%s does not hold the plan:\n%s", tc.target, cmp.Diff(want, got))
			}
		})
	}
}

// TestOutputToFIFO checks that -o to a named pipe writes into the pipe
// instead of renaming a regular file over it.
func TestOutputToFIFO(t *testing.T) {
	dir := t.TempDir()
	fusion, want := lowerSeed(t, dir)
	fifo := filepath.Join(dir, "pipe")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("cannot make a FIFO here: %v", err)
	}
	// A non-blocking read end lets lower's open for writing succeed at once;
	// the plan fits in the pipe's buffer, so lower finishes before we read.
	r, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	// Should a regression rename a file over the FIFO, the read must fail,
	// not wait for a writer that never comes.
	if err := r.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := run(t, "", "lower", "-o", fifo, fusion); code != cli.ExitOK {
		t.Fatalf("exit code %d: %s", code, stderr)
	}
	got, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("read from the FIFO:\n%s", cmp.Diff(want, string(got)))
	}
	if fi, err := os.Lstat(fifo); err != nil || fi.Mode()&fs.ModeNamedPipe == 0 {
		t.Errorf("%s is no longer a FIFO (%v, %v)", fifo, fi, err)
	}
}

// TestOutputToDevice checks that -o to a character device writes to the
// device and leaves its node alone: a copy of /dev/null made with mknod where
// the test may (root), and /dev/full, whose write error exits 1.
func TestOutputToDevice(t *testing.T) {
	dir := t.TempDir()
	fusion, _ := lowerSeed(t, dir)
	null := filepath.Join(dir, "null")
	// /dev/null is character device 1:3 on Linux.
	if err := syscall.Mknod(null, syscall.S_IFCHR|0o666, 1<<8|3); err != nil {
		t.Logf("cannot make a device node here (%v); using /dev/null", err)
		null = "/dev/null"
	}
	for _, cmd := range [][]string{{"lower"}, {"export", "torch"}} {
		args := append(append(cmd, "-o", null), fusion)
		if code, _, stderr := run(t, "", args...); code != cli.ExitOK {
			t.Errorf("%s: exit code %d: %s", strings.Join(args, " "), code, stderr)
		}
		if fi, err := os.Lstat(null); err != nil || fi.Mode()&fs.ModeCharDevice == 0 {
			t.Fatalf("%s: %s is no longer a character device (%v, %v)", strings.Join(args, " "), null, fi, err)
		}
	}
	if _, err := os.Stat("/dev/full"); err != nil {
		return
	}
	code, _, stderr := run(t, "", "lower", "-o", "/dev/full", fusion)
	if code != cli.ExitInput || !strings.HasPrefix(stderr, "nvcomm: cannot write /dev/full: no space left on device") {
		t.Errorf("-o /dev/full: exit code %d, stderr %q", code, stderr)
	}
	if fi, err := os.Lstat("/dev/full"); err != nil || fi.Mode()&fs.ModeCharDevice == 0 {
		t.Errorf("/dev/full is no longer a character device (%v, %v)", fi, err)
	}
}

func readString(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
