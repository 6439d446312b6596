package lower

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestPassesDocumented checks that docs/architecture.md lists Lower's
// passes, in order, as its numbered list of bold names (the last is the
// plan's assembly, which Lower runs after them).
func TestPassesDocumented(t *testing.T) {
	src, err := os.ReadFile("../../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(src), "## The passes of `lower.Lower`")
	section, _, _ = strings.Cut(section, "\n## ")
	var got []string
	for _, m := range regexp.MustCompile(`(?m)^\d+\. \*\*([^*]+)\*\*`).FindAllStringSubmatch(section, -1) {
		got = append(got, strings.ToLower(strings.TrimSuffix(m[1], ".")))
	}
	var want []string
	for _, p := range passes {
		want = append(want, p.name)
	}
	want = append(want, "assemble the plan")
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("docs/architecture.md's passes differ from lower's (-code +docs):\n%s", d)
	}
}
