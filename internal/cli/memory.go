package cli

import (
	"bufio"
	"bytes"
	"os"
	"path"
	"strconv"
	"strings"
)

// memoryLimit returns the most memory this process can have, in bytes: the
// machine's physical memory, or its control group's limit when that is
// lower; 0 when neither can be read (not Linux). simulate caps --max-bytes
// at it, so that no flag value lets a simulation die in the middle of an
// allocation.
func memoryLimit() int64 { return memoryLimitUnder("/") }

// memoryLimitUnder is memoryLimit with /proc and /sys under root, for tests.
func memoryLimitUnder(root string) int64 {
	read := func(name string) []byte {
		b, _ := os.ReadFile(path.Join(root, name)) // a missing file is no limit
		return b
	}
	limit := memTotal(read("proc/meminfo"))
	for _, f := range cgroupLimitFiles(read("proc/self/cgroup")) {
		if n, ok := parseLimit(read(f)); ok && (limit == 0 || n < limit) {
			limit = n
		}
	}
	return limit
}

// memTotal reads MemTotal from /proc/meminfo, in bytes; 0 when absent.
func memTotal(meminfo []byte) int64 {
	sc := bufio.NewScanner(bytes.NewReader(meminfo))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 3 && f[0] == "MemTotal:" && f[2] == "kB" {
			if kb, err := strconv.ParseInt(f[1], 10, 64); err == nil && kb > 0 && kb < 1<<53 {
				return kb << 10
			}
		}
	}
	return 0
}

// cgroupLimitFiles lists the files that may hold this process's memory
// limit, from /proc/self/cgroup: cgroup v2's memory.max and v1's
// memory.limit_in_bytes, for the process's group and for the root the
// container sees.
func cgroupLimitFiles(selfCgroup []byte) []string {
	files := []string{"sys/fs/cgroup/memory.max", "sys/fs/cgroup/memory/memory.limit_in_bytes"}
	sc := bufio.NewScanner(bytes.NewReader(selfCgroup))
	for sc.Scan() {
		// hierarchy-id:controllers:path
		f := strings.SplitN(sc.Text(), ":", 3)
		if len(f) != 3 || f[2] == "/" || !path.IsAbs(f[2]) {
			continue
		}
		switch {
		case f[0] == "0" && f[1] == "":
			files = append(files, path.Join("sys/fs/cgroup", f[2], "memory.max"))
		case hasController(f[1], "memory"):
			files = append(files, path.Join("sys/fs/cgroup/memory", f[2], "memory.limit_in_bytes"))
		}
	}
	return files
}

func hasController(list, name string) bool {
	for c := range strings.SplitSeq(list, ",") {
		if c == name {
			return true
		}
	}
	return false
}

// parseLimit reads a cgroup limit: a byte count, or "max" (no limit).
func parseLimit(b []byte) (int64, bool) {
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return n, err == nil && n > 0
}
