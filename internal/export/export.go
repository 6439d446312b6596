// Package export turns a plan into a program for a real distributed engine.
//
// [Torch] writes a standalone Python program for torchrun, one process
// per device (device id d on global rank d). Its first part is the plan as
// straight-line code: one Python function, one block of statements per
// step (the torch.distributed call of a collective, the torch ops of a
// local step), where consecutive local steps that allow it are fused into
// one pass over memory (fuse.go; the plan itself is unchanged, so the plan
// that runs is the plan `nvcomm simulate` proves). Its second part,
// runtime.py, the same in every program, builds the input data of `nvcomm
// simulate`, calls the function, checks every op's output on every device
// against a float64 reference and times the blocks. [CalibrationProgram]
// is the program `nvcomm calibrate` writes, which measures collectives and
// local copies on the GPUs at hand.
//
// The package reads plans (internal/plan) and nothing else of nvcomm;
// predicted times and simulate's data come in through [Options].
package export

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/nvcomm/nvcomm/internal/plan"
)

//go:embed runtime.py
var runtimeSrc string

//go:embed calibrate.py
var calibrateSrc string

//go:embed timing.py
var timing string

// calibrate is the calibration program; it times calls with timing.py, so
// that calibration measures collectives exactly as --bench measures steps.
var calibrate = []byte(withTiming(calibrateSrc))

// runtime is the generic part of exported programs: runtime.py with the
// ops' tables from the registry, timing its calls with timing.py as
// calibrate does. It is built on each call, so that an op registered
// after start-up is in it.
func runtime() string { return withTiming(withOps(runtimeSrc)) }

// runtimeOf is the runtime of p's program: a plan of format 2's adds
// overlap.py (graph.go).
func runtimeOf(p *plan.Plan) string {
	if p.Graph() {
		return beforeEntry(runtime(), overlapSrc)
	}
	return runtime()
}

// withTiming puts timing.py's definitions before a program's entry point.
func withTiming(src string) string { return beforeEntry(src, timing) }

// beforeEntry puts definitions before a program's entry point.
func beforeEntry(src, defs string) string {
	const entry = "\n\nif __name__ == \"__main__\":"
	i := strings.LastIndex(src, entry)
	if i < 0 {
		panic("export: program has no entry point") // embedded files, checked by tests
	}
	return src[:i] + "\n\n" + strings.TrimRight(defs, "\n") + src[i:]
}

// Options tune [Torch].
type Options struct {
	// Seed is the program's default seed of the input data.
	Seed uint64
	// Probes are, per fusion input, the first values `nvcomm simulate`
	// fills it with for Seed; the program checks its own data against
	// them. Nil checks nothing.
	Probes map[string][]float64
	// Predicted is every block's predicted time in seconds, in the order
	// of [Blocks], printed beside the measured times of --bench; nil
	// predicts nothing.
	Predicted []float64
	// Topology names the topology Predicted comes from.
	Topology string
	// DataScale, when positive, multiplies the program's floating-point
	// input data by 2^-DataScale (at most MaxDataScale): simulate's
	// values in a range where a long chain of floating-point ops (a
	// model's attention scores, their exponentials) stays checkable.
	// The program then claims no result exact; every check is within
	// its error bound (docs/export.md, "Data and the check").
	DataScale int
	// Data names the data set of the inputs, one of DataSets: "auto"
	// (or "") is simulate's own for the plan (sim.DataOf), any other the
	// set named, whatever the plan's ops.
	Data string
	// Makespan is, for a plan of format 2, its predicted time as a step
	// graph (cost.Predict's total), which --bench compares one call of
	// the function with; 0 predicts none.
	Makespan float64
}

// DataSets are the names Options.Data takes: auto, then simulate's data
// sets (docs/simulate.md, "Data").
var DataSets = []string{"auto", "small", "wide", "positive"}

// MaxDataScale is the largest DataScale: simulate's values times 2^-60
// are still far from float32's and bfloat16's smallest normal numbers
// (2^-126) after a product of two of them.
const MaxDataScale = 60

// Blocks returns the blocks of the function [Torch] writes for p: its
// steps, grouped where the exporter fuses them, with what each moves.
func Blocks(p *plan.Plan) ([]Block, error) {
	g := newGen(p)
	if _, err := g.function(); err != nil {
		return nil, err
	}
	return g.blocks, nil
}

// Torch writes the Python program that runs p on torch.distributed and
// checks it (docs/export.md).
func Torch(w io.Writer, p *plan.Plan, o Options) error {
	g := newGen(p)
	fn, err := g.function()
	if err != nil {
		return err
	}
	if o.Predicted != nil && len(o.Predicted) != len(g.blocks) {
		return fmt.Errorf("export: %d predicted times for %d blocks", len(o.Predicted), len(g.blocks))
	}
	src, err := plan.Marshal(p)
	if err != nil {
		return err
	}
	var b bytes.Buffer
	writeHeader(&b, p)
	if p.Graph() {
		b.WriteString("import contextlib\n\n")
	}
	b.WriteString("import torch\nimport torch.distributed as dist\n\n\n")
	if p.Graph() {
		b.WriteString(graphHelpers + "\n\n")
	}
	if g.helpers["exact"] {
		b.WriteString(exactHelper + "\n\n")
	}
	if g.helpers["lookup"] {
		b.WriteString(lookupHelper + "\n\n")
	}
	if g.helpers["scatter_add"] {
		b.WriteString(scatterHelper + "\n\n")
	}
	b.WriteString(strings.Join(fn, "\n") + "\n\n\n")
	b.WriteString("# --- What the runtime below needs: the plan, simulate's data, the predictions. ---\n")
	b.WriteString("import json  # noqa: E402\n\n")
	fmt.Fprintf(&b, "RUN = %s\n", funcName(p))
	fmt.Fprintf(&b, "PLAN = json.loads(%s)\n", pyString(src))
	fmt.Fprintf(&b, "DEFAULT_SEED = %d\n", o.Seed)
	fmt.Fprintf(&b, "# The floating-point inputs are simulate's values times 2^-DATA_SCALE (export torch --data-scale).\n")
	fmt.Fprintf(&b, "DATA_SCALE = %d\n", o.DataScale)
	data := "None"
	if o.Data != "" && o.Data != "auto" {
		data = pyRepr(o.Data)
	}
	fmt.Fprintf(&b, "# The data set of the inputs (export torch --data); None: simulate's for the plan.\n")
	fmt.Fprintf(&b, "DATA = %s\n", data)
	fmt.Fprintf(&b, "# First values of each fusion input in `nvcomm simulate --seed %d`.\n", o.Seed)
	fmt.Fprintf(&b, "PROBES = %s\n", pyProbes(o.Probes))
	fmt.Fprintf(&b, "# Predicted seconds per block of %s (topology %s).\n", funcName(p), pyRepr(o.Topology))
	fmt.Fprintf(&b, "TOPOLOGY = %s\n", pyRepr(o.Topology))
	if p.Graph() {
		fmt.Fprintf(&b, "PREDICTED = %s\n", pyFloats(o.Predicted))
		fmt.Fprintf(&b, "# Predicted seconds of one call of %s: the plan's makespan as a step graph.\n", funcName(p))
		fmt.Fprintf(&b, "MAKESPAN = %s\n\n\n", pyFloat(o.Makespan))
	} else {
		fmt.Fprintf(&b, "PREDICTED = %s\n\n\n", pyFloats(o.Predicted))
	}
	b.WriteString(runtimeOf(p))
	_, err = w.Write(b.Bytes())
	return err
}

// exactHelper is the function the plan's function calls for a local
// computation in a dtype some devices have no kernel for.
const exactHelper = `def exact(fn, *xs, **kw):
    """fn(*xs, **kw) in the inputs' dtype; where the device has no kernel for it
    (integer matmuls on CUDA, float16 on older CPUs), in float64 rounded back once,
    as the dtype's own kernel rounds (exact while results stay below 2**53)."""
    dtype = xs[0].dtype
    try:
        return fn(*xs, **kw).to(dtype)
    except (RuntimeError, NotImplementedError) as e:
        if "not implemented" not in str(e).lower() and "support" not in str(e).lower():
            raise
    y = fn(*(x.double() for x in xs), **kw)
    return (y if dtype.is_floating_point else y.round()).to(dtype)
`

// CalibrationProgram returns the Python program that measures collectives
// with torch.distributed and writes a calibration CSV for `nvcomm calibrate
// --fit` (docs/export.md).
func CalibrationProgram() []byte { return slices.Clone(calibrate) }

func writeHeader(b *bytes.Buffer, p *plan.Plan) {
	need := maxDevice(p) + 1
	fmt.Fprintf(b, `#!/usr/bin/env python3
# Generated by nvcomm export torch from plan %q (%d steps). Do not edit.
#
# The function %s
# below runs the plan on one rank: a block of statements per step, local steps
# fused where the plan allows. The rest of this file (the runtime) builds the
# input data, runs it on every rank, checks every op's output against a float64
# reference and prints PASS, or FAIL and the first mismatch (exit code 1).
# Device d is global rank d, so start at least %d processes; extra ranks idle.
# Needs PyTorch 1.13 or later.
#   torchrun --nproc_per_node=%d run.py                  # one node, NCCL on GPUs
#   torchrun --nproc_per_node=%d run.py --backend gloo   # CPU processes
#   torchrun --nproc_per_node=%d run.py --bench 20       # and time every block
#   torchrun --nnodes=2 --nproc_per_node=G --node_rank=R \
#            --rdzv_backend=c10d --rdzv_endpoint=HOST:29500 run.py   # several nodes
# See docs/export.md.
`, p.Fusion, len(p.Steps), funcName(p), need, need, need, need)
}

// maxDevice is the largest device id a mesh or a step names.
func maxDevice(p *plan.Plan) int {
	m := 0
	for _, mesh := range p.Meshes {
		for _, d := range mesh.Devices {
			m = max(m, d)
		}
	}
	for _, s := range p.Steps {
		for _, d := range slices.Concat(slices.Concat(s.Teams...), s.Devices) {
			m = max(m, d)
		}
	}
	return m
}

// pyString quotes JSON text as a Python string literal: a raw
// triple-quoted string when possible, for readers.
func pyString(src []byte) string {
	s := string(src)
	if !strings.Contains(s, "'''") && !strings.HasSuffix(strings.TrimRight(s, "\n"), `\`) {
		return "r'''\n" + s + "'''"
	}
	q, _ := json.Marshal(s) // a JSON string literal is a Python one
	return string(q)
}

// pyRepr quotes a string for Python, or gives None when it is empty.
func pyRepr(s string) string {
	if s == "" {
		return "None"
	}
	q, _ := json.Marshal(s)
	return string(q)
}

// pyFloat renders a positive number, or None.
func pyFloat(x float64) string {
	if x <= 0 {
		return "None"
	}
	return strconv.FormatFloat(x, 'g', 6, 64)
}

func pyFloats(xs []float64) string {
	if xs == nil {
		return "None"
	}
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = strconv.FormatFloat(x, 'g', 6, 64)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func pyProbes(probes map[string][]float64) string {
	names := make([]string, 0, len(probes))
	for n := range probes {
		names = append(names, n)
	}
	slices.Sort(names)
	var parts []string
	for _, n := range names {
		vals := make([]string, len(probes[n]))
		for i, v := range probes[n] {
			vals[i] = strconv.FormatFloat(v, 'g', -1, 64)
		}
		parts = append(parts, fmt.Sprintf("%s: [%s]", pyRepr(n), strings.Join(vals, ", ")))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}
