package cli

import (
	"encoding/csv"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/nvcomm/nvcomm/internal/cost"
	"github.com/nvcomm/nvcomm/internal/plan"
)

// TestLocalBlocksWithinBand holds the prices of exported programs' local
// blocks to the times measured on an H200 (docs/export-results/local-h200:
// the transitions of scripts/export-check/peer_dtensor.py from 1 MiB to
// 1 GiB, timed by local_blocks.py, the topology fitted to calibrate.py's
// local copies in the same job). Each plan's blocks are priced again as
// export prices them now (export.Blocks, cost.Topology.Pass): from 16 MiB,
// every block within 25% of its measured time.
func TestLocalBlocksWithinBand(t *testing.T) {
	dir := filepath.Join("..", "..", "docs", "export-results", "local-h200")
	src, err := os.ReadFile(filepath.Join(dir, "..", "topology-h200-local.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	topo, err := cost.ParseTopology("topology-h200-local.yaml", src)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(dir, "local-blocks.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	plans := plansIn(t, filepath.Join(dir, "plans"))
	checked, worst := 0, 0.0
	for _, r := range rows[1:] { // program,block,steps,type,measured_s,predicted_s
		p := plans[r[0]]
		if p == nil || outputBytes(p) < 16<<20 {
			continue
		}
		block, _ := strconv.Atoi(r[1])
		measured, _ := strconv.ParseFloat(r[4], 64)
		pred, err := predictBlocks(topo, p)
		if err != nil {
			t.Fatal(err)
		}
		if pred[block] == 0 { // a view: nothing to price
			continue
		}
		e := pred[block]/measured - 1
		worst = max(worst, math.Abs(e))
		if math.Abs(e) > 0.25 {
			t.Errorf("%s block %d (%s): predicted %.1f us, measured %.1f us (%+.0f%%)", r[0], block, r[3], pred[block]*1e6, measured*1e6, 100*e)
		}
		checked++
	}
	if checked < 20 {
		t.Fatalf("only %d blocks of 16 MiB or more checked", checked)
	}
	t.Logf("%d blocks, largest error %.0f%%", checked, 100*worst)
}

// plansIn decodes every plan of a directory, by file name without .json
// (the measurements below 16 MiB keep no plan).
func plansIn(t *testing.T, dir string) map[string]*plan.Plan {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no plans in %s: %v", dir, err)
	}
	plans := map[string]*plan.Plan{}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err == nil {
			plans[strings.TrimSuffix(filepath.Base(f), ".json")], err = plan.Decode(f, src)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return plans
}

// outputBytes is the size of the plan's last op's output, float32.
func outputBytes(p *plan.Plan) int64 {
	out := p.Ops[len(p.Ops)-1].Output
	for _, tv := range p.Tensors {
		if tv.Name == out {
			n := int64(4)
			for _, e := range tv.Shape {
				n *= int64(e)
			}
			return n
		}
	}
	return 0
}
