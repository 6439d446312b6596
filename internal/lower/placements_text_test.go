package lower_test

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/nvcomm/nvcomm/internal/plan"
	"github.com/nvcomm/nvcomm/internal/shard"
)

// TestPrintedPlacementsParse checks that the placements the propagated
// list of every golden plan prints parse back as a fusion file's do (no
// Shard(d)+Partial(op), which no placement is), and that the list prints
// an op's output that it reduced across devices as Replicate() or Shard(d),
// saying so in words.
func TestPrintedPlacementsParse(t *testing.T) {
	row := regexp.MustCompile(`^  (\S+) +on \S+ +\[(.*)\]( +reduced over .* by its op)?$`)
	reduced := 0
	for _, dir := range goldenDirs {
		files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
		for _, file := range files {
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			p, err := plan.Decode(file, src)
			if err != nil {
				t.Fatal(err)
			}
			var b bytes.Buffer
			if err := plan.WriteText(&b, p); err != nil {
				t.Fatal(err)
			}
			_, list, _ := strings.Cut(b.String(), "propagated shardings (format 2):\n")
			list, _, _ = strings.Cut(list, "\n\n")
			for line := range strings.Lines(list) {
				m := row.FindStringSubmatch(strings.TrimRight(line, "\n"))
				if m == nil {
					t.Errorf("%s: %q is not a row of the propagated list", file, line)
					continue
				}
				if m[3] != "" {
					reduced++
				}
				for _, pl := range strings.Split(m[2], ", ") {
					if _, err := shard.ParsePlacement(pl); err != nil {
						t.Errorf("%s: tensor %s: %q does not parse: %s", file, m[1], pl, err.Msg)
					}
				}
			}
		}
	}
	if reduced == 0 {
		t.Error("no golden plan has a propagated tensor that its op reduced across devices")
	}
}
