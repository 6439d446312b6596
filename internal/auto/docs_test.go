package auto

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/dustin/go-humanize"
)

// docsTable is the table of docs/auto.md that shows where the choice for
// the MLP flips, between its markers.
const (
	tableStart = "<!-- table: TestDocsTable -->\n"
	tableEnd   = "<!-- end of table -->\n"
)

// TestDocsTable recomputes the table of docs/auto.md (NVCOMM_UPDATE=1
// rewrites it): Megatron's MLP (hidden 1024, ffn 4096, float32, 4 devices)
// for several batch sizes and memory budgets, what --auto chooses, its
// predicted time and the most a device holds.
func TestDocsTable(t *testing.T) {
	budgets := []int64{0, 24 << 20, 16 << 20}
	var b strings.Builder
	b.WriteString("| tokens |")
	for _, budget := range budgets {
		if budget == 0 {
			b.WriteString(" no budget |")
		} else {
			fmt.Fprintf(&b, " budget %s |", humanize.IBytes(uint64(budget)))
		}
	}
	b.WriteString("\n|---|" + strings.Repeat("---|", len(budgets)) + "\n")
	for _, tokens := range []int{8, 64, 128, 256, 1024, 2048} {
		fmt.Fprintf(&b, "| %d |", tokens)
		for _, budget := range budgets {
			res, err := Solve("mlp.yaml", []byte(mlp(tokens, 1024)), Options{MemoryBudget: budget})
			if err != nil {
				b.WriteString(" nothing fits |")
				continue
			}
			fmt.Fprintf(&b, " %s: %.3g µs, %s |", layout(chosen(res)), res.Seconds*1e6, humanize.IBytes(uint64(res.PeakBytes)))
		}
		b.WriteString("\n")
	}
	const path = "../../docs/auto.md"
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	start, end := bytes.Index(doc, []byte(tableStart)), bytes.Index(doc, []byte(tableEnd))
	if start < 0 || end < start {
		t.Fatalf("%s has no table between %q and %q", path, tableStart, tableEnd)
	}
	got := string(doc[start+len(tableStart) : end])
	if os.Getenv("NVCOMM_UPDATE") != "" {
		out := slices.Concat(doc[:start+len(tableStart)], []byte(b.String()), doc[end:])
		if err := os.WriteFile(path, out, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if got != b.String() {
		t.Errorf("%s's table is out of date (NVCOMM_UPDATE=1 rewrites it); want:\n%s", path, b.String())
	}
}

// layout names the MLP's decisions.
func layout(decisions []string) string {
	switch strings.Join(decisions, ", ") {
	case "w1 [Replicate()], w2 [Replicate()], h [Replicate()], a [Replicate()]":
		return "replicated"
	case "w1 [Shard(0)], w2 [Shard(1)], h [Shard(1)], a [Shard(1)]":
		return "column → row"
	}
	return strings.Join(decisions, ", ")
}
