package cli

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestMemoryLimit reads the process's memory limit from a fake /proc and
// /sys: physical memory, lowered by a cgroup v1 or v2 limit of the
// process's group or of the root, and "max" or garbage ignored.
func TestMemoryLimit(t *testing.T) {
	const meminfo = "MemTotal:       24684092 kB\nMemFree:         1000 kB\n"
	const phys = 24684092 << 10
	tests := map[string]struct {
		files map[string]string
		want  int64
	}{
		"nothing readable": {files: nil, want: 0},
		"physical only":    {files: map[string]string{"proc/meminfo": meminfo}, want: phys},
		"v2 group limit": {files: map[string]string{
			"proc/meminfo":                        meminfo,
			"proc/self/cgroup":                    "0::/job/42\n",
			"sys/fs/cgroup/job/42/memory.max":     "2147483648\n",
			"sys/fs/cgroup/memory.max":            "max\n",
			"sys/fs/cgroup/job/memory.max":        "1024\n", // a parent: not read
			"sys/fs/cgroup/job/42/memory.current": "5\n",
		}, want: 2 << 30},
		"v2 root max": {files: map[string]string{
			"proc/meminfo": meminfo, "proc/self/cgroup": "0::/\n", "sys/fs/cgroup/memory.max": "max\n",
		}, want: phys},
		"v1 group limit": {files: map[string]string{
			"proc/meminfo":     meminfo,
			"proc/self/cgroup": "5:devices:/x\n4:memory:/process_api/abc\n0::/\n",
			"sys/fs/cgroup/memory/process_api/abc/memory.limit_in_bytes": "1073741824\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes":                 "9223372036854771712\n",
		}, want: 1 << 30},
		"v1 unlimited": {files: map[string]string{
			"proc/meminfo": meminfo, "proc/self/cgroup": "4:cpu,memory:/\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n",
		}, want: phys},
		"cgroup without meminfo": {files: map[string]string{"sys/fs/cgroup/memory.max": "4096\n"}, want: 4096},
		"garbage": {files: map[string]string{
			"proc/meminfo": "MemTotal: lots kB\n", "sys/fs/cgroup/memory.max": "-5\n",
		}, want: 0},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			for f, content := range tt.files {
				p := filepath.Join(root, f)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if d := cmp.Diff(tt.want, memoryLimitUnder(root)); d != "" {
				t.Errorf("memory limit (-want +got):\n%s", d)
			}
		})
	}
}

// MemoryLimit is memoryLimit, for the tests of package cli_test.
var MemoryLimit = memoryLimit
