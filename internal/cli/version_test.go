package cli

import (
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestVersionOf: the module version and VCS settings of the build
// information, overridden by the values set with -ldflags.
func TestVersionOf(t *testing.T) {
	platform := runtime.GOOS + "/" + runtime.GOARCH
	vcs := []debug.BuildSetting{{Key: "vcs.revision", Value: "0123abc"}, {Key: "vcs.modified", Value: "true"}}
	for _, tc := range []struct {
		name                string
		bi                  *debug.BuildInfo
		ok                  bool
		ldVersion, ldCommit string
		want                buildInfo
	}{
		{name: "no build information", want: buildInfo{Version: "(devel)", Go: runtime.Version(), Platform: platform}},
		{name: "go install @v0.2.0", ok: true,
			bi:   &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "github.com/nvcomm/nvcomm", Version: "v0.2.0"}},
			want: buildInfo{Version: "v0.2.0", Go: "go1.26.0", Platform: platform}},
		{name: "work tree with changes", ok: true,
			bi:   &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: vcs},
			want: buildInfo{Version: "(devel)", Commit: "0123abc", Modified: true, Go: "go1.26.8", Platform: platform}},
		{name: "ldflags override", ok: true, ldVersion: "v1.0.0", ldCommit: "fedcba9",
			bi:   &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: vcs},
			want: buildInfo{Version: "v1.0.0", Commit: "fedcba9", Go: "go1.26.8", Platform: platform}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, versionOf(tc.bi, tc.ok, tc.ldVersion, tc.ldCommit)); d != "" {
				t.Errorf("versionOf mismatch (-want +got):\n%s", d)
			}
		})
	}
}

func TestBuildInfoString(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   buildInfo
		want string
	}{
		{"release", buildInfo{Version: "v0.2.0", Commit: "0123abc", Go: "go1.26.0", Platform: "linux/amd64"},
			"nvcomm v0.2.0\ncommit: 0123abc\ngo: go1.26.0 linux/amd64\n"},
		{"modified", buildInfo{Version: "(devel)", Commit: "0123abc", Modified: true, Go: "go1.26.8", Platform: "darwin/arm64"},
			"nvcomm (devel)\ncommit: 0123abc (modified)\ngo: go1.26.8 darwin/arm64\n"},
		{"no commit", buildInfo{Version: "(devel)", Go: "go1.26.8", Platform: "linux/amd64"},
			"nvcomm (devel)\ncommit: unknown\ngo: go1.26.8 linux/amd64\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, tc.in.String()); d != "" {
				t.Errorf("String mismatch (-want +got):\n%s", d)
			}
		})
	}
}
