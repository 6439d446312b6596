package cli

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// Version and commit, when set at link time, override what the binary's
// build information says:
//
//	go build -ldflags "-X github.com/nvcomm/nvcomm/internal/cli.version=v0.2.0 -X github.com/nvcomm/nvcomm/internal/cli.commit=$(git rev-parse HEAD)" ./cmd/nvcomm
//
// `go install github.com/nvcomm/nvcomm/cmd/nvcomm@v0.2.0` needs neither: the
// module version is in the build information.
var (
	version string
	commit  string
)

// buildInfo is what `nvcomm version` prints.
type buildInfo struct {
	Version  string // module version: v0.2.0, or (devel) for a build from a work tree
	Commit   string // VCS revision, or "" when unknown
	Modified bool   // the work tree had uncommitted changes
	Go       string // the Go toolchain that built the binary
	Platform string // GOOS/GOARCH it runs on
}

// readBuildInfo returns nvcomm's version, preferring the values set with
// -ldflags over the build information of the binary.
func readBuildInfo() buildInfo {
	bi, ok := debug.ReadBuildInfo()
	return versionOf(bi, ok, version, commit)
}

// versionOf derives the build information from bi (if ok) and the link-time
// overrides ldVersion and ldCommit (if not empty).
func versionOf(bi *debug.BuildInfo, ok bool, ldVersion, ldCommit string) buildInfo {
	info := buildInfo{Version: "(devel)", Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if ok && bi != nil {
		if v := bi.Main.Version; v != "" {
			info.Version = v
		}
		if bi.GoVersion != "" {
			info.Go = bi.GoVersion
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				info.Commit = s.Value
			case "vcs.modified":
				info.Modified = s.Value == "true"
			}
		}
	}
	if ldVersion != "" {
		info.Version = ldVersion
	}
	if ldCommit != "" {
		info.Commit, info.Modified = ldCommit, false
	}
	return info
}

// String formats the information as `nvcomm version` and `nvcomm --version`
// print it: three lines.
func (b buildInfo) String() string {
	c := b.Commit
	switch {
	case c == "":
		c = "unknown"
	case b.Modified:
		c += " (modified)"
	}
	return fmt.Sprintf("nvcomm %s\ncommit: %s\ngo: %s %s\n", b.Version, c, b.Go, b.Platform)
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print nvcomm's version, commit and Go version",
		Long: `version prints the module version (v0.2.0, or (devel) for a build from a work
tree), the commit it was built from and the Go toolchain that built it, as
nvcomm --version does.`,
		Example: `  nvcomm version
  nvcomm --version`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprint(cmd.OutOrStdout(), readBuildInfo())
			return err
		},
	}
}
