package cost

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/nvcomm/nvcomm/internal/plan"
	"github.com/nvcomm/nvcomm/internal/shard"
)

// Calibration files: the samples [Fit] fits, one measurement a line.

// Sample is one measured collective, in nccl-tests units.
type Sample struct {
	// Collective is a plan collective type, e.g. "Allgather".
	Collective string
	// Ranks is the team size.
	Ranks int
	// Bytes is nccl-tests' message size S.
	Bytes int64
	// Seconds is the measured time.
	Seconds float64
	// Link is the link class: nvlink (the default) or network.
	Link string
}

// csvNames maps the collective names of calibration files (nccl-tests'
// lower-case names) to plan types.
var csvNames = map[string]string{
	"allgather": plan.Allgather, "reducescatter": plan.ReduceScatter, "allreduce": plan.Allreduce,
	"alltoall": plan.AllToAll, "broadcast": plan.Broadcast, "reduce": plan.Reduce,
	"sendrecv": plan.SendRecv, "gather": plan.Gather, "scatter": plan.Scatter,
}

// localNames maps the local copies of calibration files, measured on one
// device (link memory), to the memory parameters they fit: copy, a
// contiguous copy (memory), and permute, a copy from a permuted view
// (memory.strided).
var localNames = map[string]string{"copy": PassCopy, "permute": PassStrided}

// matmulPrefix names the matmul samples of calibration files (link
// compute): matmul_DTYPE, the bytes column holding the floating-point
// operations of one product (2·N³ for N×N by N×N).
const matmulPrefix = "matmul_"

// matmulNames maps each matmul sample name to its dtype.
func matmulNames() map[string]string {
	names := map[string]string{}
	for _, dt := range shard.DTypeNames() {
		names[matmulPrefix+dt] = dt
	}
	return names
}

// ReadSamples reads a calibration CSV: a header line
// "collective,ranks,bytes,seconds" with an optional fifth column "link",
// then one measurement a line; lines starting with '#' are comments. A
// local copy ("copy" or "permute", link memory, ranks 1) gives as bytes
// those read plus written.
func ReadSamples(r io.Reader) ([]Sample, error) {
	cr := csv.NewReader(r)
	cr.Comment = '#'
	cr.FieldsPerRecord = -1
	rows, err := cr.ReadAll()
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 || len(rows[0]) < 4 || rows[0][0] != "collective" {
		return nil, errors.New("expected a header line collective,ranks,bytes,seconds[,link]")
	}
	var out []Sample
	for i, row := range rows[1:] {
		s, err := parseSample(row)
		if err != nil {
			return nil, fmt.Errorf("record %d: %w", i+1, err)
		}
		out = append(out, s)
	}
	return out, nil
}

func parseSample(row []string) (Sample, error) {
	if len(row) != 4 && len(row) != 5 {
		return Sample{}, fmt.Errorf("expected 4 or 5 fields, got %d", len(row))
	}
	link := LinkNVLink
	if len(row) == 5 {
		link = row[4]
	}
	names, minRanks := csvNames, 2
	switch link {
	case LinkMemory:
		names, minRanks = localNames, 1
	case LinkCompute:
		names, minRanks = matmulNames(), 1
	case LinkNVLink, LinkNetwork:
	default:
		return Sample{}, fmt.Errorf("link must be %s, %s, %s or %s, got %q", LinkNVLink, LinkNetwork, LinkMemory, LinkCompute, link)
	}
	typ, ok := names[strings.ToLower(row[0])]
	if !ok {
		what := map[string]string{LinkMemory: "local copy", LinkCompute: "matmul"}[link]
		if what == "" {
			what = "collective"
		}
		return Sample{}, fmt.Errorf("unknown %s %q", what, row[0])
	}
	ranks, err1 := strconv.Atoi(row[1])
	size, err2 := strconv.ParseInt(row[2], 10, 64)
	secs, err3 := strconv.ParseFloat(row[3], 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return Sample{}, err
	}
	if ranks < minRanks || size < 1 || !(secs > 0) || math.IsInf(secs, 0) {
		return Sample{}, fmt.Errorf("ranks must be at least %d, bytes and seconds positive (and finite): %v", minRanks, row)
	}
	return Sample{Collective: typ, Ranks: ranks, Bytes: size, Seconds: secs, Link: link}, nil
}
