package cli_test

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/nvcomm/nvcomm/internal/cli"
)

// TestMain lets the test binary double as the nvcomm command: testscript puts
// an "nvcomm" in $PATH that re-runs this binary, which then runs cli.Main and
// exits with its code.
func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"nvcomm": func() {
			code := cli.Main()
			if path := os.Getenv("NVCOMM_TEST_HWM"); path != "" {
				writeHWM(path)
			}
			os.Exit(code)
		},
	})
}

// writeHWM writes this process's peak resident memory, the VmHWM line of
// /proc/self/status, to path. Unlike ru_maxrss, which a child started by
// vfork inherits from its parent (the test binary, whose own resident
// memory grows with the in-process tests), VmHWM is the memory of this
// program's image alone: exec gave it a new address space.
func writeHWM(path string) {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			_ = os.WriteFile(path, []byte(strings.TrimSpace(strings.TrimPrefix(line, "VmHWM:"))), 0o644)
		}
	}
}

// TestScripts runs the end-to-end scripts in testdata/script. Set
// NVCOMM_UPDATE=1 to rewrite the archives' files that a cmp compares with
// stdout or stderr.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:                 "testdata/script",
		RequireExplicitExec: true,
		RequireUniqueNames:  true,
		UpdateScripts:       os.Getenv("NVCOMM_UPDATE") != "",
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"exitcode": cmdExitCode,
		},
	})
}

// cmdExitCode implements "exitcode N program [args...]": it runs program as
// exec does (so stdin, stdout and stderr work as after exec) and fails unless
// the program exits with exactly N. "! exec" only tells zero from non-zero,
// but nvcomm's exit codes distinguish bad input (1) from bad usage (2).
func cmdExitCode(ts *testscript.TestScript, neg bool, args []string) {
	if neg {
		ts.Fatalf("unsupported: ! exitcode")
	}
	if len(args) < 2 {
		ts.Fatalf("usage: exitcode N program [args...]")
	}
	want, err := strconv.Atoi(args[0])
	if err != nil || want < 0 {
		ts.Fatalf("exitcode: bad exit code %q", args[0])
	}
	got := 0
	if err := ts.Exec(args[1], args[2:]...); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			ts.Fatalf("exitcode: %v", err)
		}
		got = ee.ExitCode()
	}
	if got != want {
		ts.Fatalf("%s exited with code %d, want %d", args[1], got, want)
	}
}
