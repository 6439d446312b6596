package scale_test

// The measurements the benchmarks and the report share: each times one
// piece of work on a generated input beside its baseline, measured in the
// same call so that a busy machine slows both.

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"time"

	"github.com/nvcomm/nvcomm/internal/ir"
	"github.com/nvcomm/nvcomm/internal/lower"
	"github.com/nvcomm/nvcomm/internal/plan"
	"github.com/nvcomm/nvcomm/internal/scale"
	"github.com/nvcomm/nvcomm/internal/sim"
)

// lowering is one `nvcomm lower` done in process: parse, lower (policy
// optimal) and encode the plan, each timed, beside the YAML decode of the
// same file.
type lowering struct {
	decode, parse, lower, encode time.Duration
	cpu                          time.Duration // the three together, CPU
	plan                         *plan.Plan
	planBytes                    int
}

// total is the wall time of the whole lowering.
func (l lowering) total() time.Duration { return l.parse + l.lower + l.encode }

// lowerSource measures one lowering of src.
func lowerSource(name string, src []byte) (lowering, error) {
	var l lowering
	var err error
	if l.decode, err = scale.YAMLDecode(src); err != nil {
		return l, err
	}
	cpu, start := scale.CPUTime(), time.Now()
	f, err := ir.Parse(name+".yaml", src)
	if err != nil {
		return l, err
	}
	parsed := time.Now()
	if l.plan, err = lower.Lower(f, lower.Options{}); err != nil {
		return l, err
	}
	lowered := time.Now()
	w := &countingWriter{}
	if err := plan.Encode(w, l.plan); err != nil {
		return l, err
	}
	l.parse, l.lower, l.encode = parsed.Sub(start), lowered.Sub(parsed), time.Since(lowered)
	l.cpu, l.planBytes = scale.CPUTime()-cpu, w.n
	return l, nil
}

// countingWriter counts the bytes written to it and keeps none.
type countingWriter struct{ n int }

func (w *countingWriter) Write(b []byte) (int, error) {
	w.n += len(b)
	return len(b), nil
}

// validation is `nvcomm validate` done in process on a plan's JSON:
// decoding it and lower.Check (plan.Validate and lower.Certify, which
// lowers the plan's fusion again, at once), each timed.
type validation struct{ decode, check, cpu time.Duration }

// total is the wall time of the whole validation.
func (v validation) total() time.Duration { return v.decode + v.check }

// validateSource lowers src, encodes the plan and measures validating
// it as `nvcomm validate` does.
func validateSource(name string, src []byte) (validation, error) {
	var v validation
	js, err := planJSON(name, src)
	if err != nil {
		return v, err
	}
	runtime.GC() // the lowering's garbage is not the validation's
	cpu, start := scale.CPUTime(), time.Now()
	p, err := plan.Decode(name+".json", js)
	if err != nil {
		return v, err
	}
	decoded := time.Now()
	if problems, unproven := lower.Check(p); len(problems) > 0 || len(unproven) > 0 {
		return v, fmt.Errorf("%s: not valid or not certified: %v, unproven ops %v", name, problems, unproven)
	}
	v.decode, v.check = decoded.Sub(start), time.Since(decoded)
	v.cpu = scale.CPUTime() - cpu
	return v, nil
}

// planJSON is the plan `nvcomm lower` writes for src.
func planJSON(name string, src []byte) ([]byte, error) {
	l, err := lowerSource(name, src)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	err = plan.Encode(&buf, l.plan)
	return buf.Bytes(), err
}

// simulate runs p (seed 1) and fails unless it passes; it returns the wall
// and CPU time of the run.
func simulate(p *plan.Plan) (wall, cpu time.Duration, err error) {
	cpu, start := scale.CPUTime(), time.Now()
	res, err := sim.Run(p, sim.Options{Seed: 1, MaxBytes: 16 << 30})
	wall, cpu = time.Since(start), scale.CPUTime()-cpu
	if err == nil && !res.Pass {
		err = fmt.Errorf("%s: FAIL: %+v", p.Fusion, res.Mismatch)
	}
	return wall, cpu, err
}

// heldBytes is what the devices hold once p has run, as the simulation
// holds it (8 bytes an element): every fusion input's shards and every
// step output on each device that gets one.
func heldBytes(p *plan.Plan) int64 {
	var n int64
	produced := map[string]bool{}
	for _, op := range p.Ops {
		produced[op.Output] = true
	}
	for _, t := range p.Tensors {
		if !produced[t.Name] {
			shard := int64(1)
			for _, e := range t.LocalShape {
				shard *= int64(e)
			}
			n += shard * int64(len(p.Meshes[t.Mesh].Devices))
		}
	}
	for _, s := range p.Steps {
		members := len(s.Devices)
		for _, team := range s.Teams {
			members += len(team)
		}
		if s.Type == plan.Gather || s.Type == plan.Reduce {
			members = 1
		}
		n += int64(s.Count.Output) * int64(members)
	}
	return 8 * n
}

// bandwidth is one big-tensor simulation beside copy() of the bytes the
// devices hold; user and system are the CPU time of a simulation run as
// a command (zero in process).
type bandwidth struct {
	held           int64
	simulate, copy time.Duration
	user, system   time.Duration
}

// ratio is the simulation's bandwidth over the bytes held relative to
// copy()'s: at 0.5 simulating costs two copies of what the devices hold.
func (b bandwidth) ratio() float64 { return b.copy.Seconds() / b.simulate.Seconds() }

// simulateBig lowers a big-tensor fusion and measures its simulation and
// copy() over the bytes its devices hold.
func simulateBig(big scale.Big) (bandwidth, error) {
	l, err := lowerSource(big.Name, big.Src)
	if err != nil {
		return bandwidth{}, err
	}
	bw := bandwidth{held: heldBytes(l.plan)}
	bw.copy = scale.CopyTime(bw.held)
	bw.simulate, _, err = simulate(l.plan)
	return bw, err
}

// simulateBigCommand measures `nvcomm simulate` of a big-tensor fusion as
// a user runs it: this test binary as nvcomm in a child process, on the
// fusion file written to dir, timed from its start to its exit (reading
// and lowering the file, page faults and zeroing of fresh memory
// included), beside copy() of the bytes its devices hold.
func simulateBigCommand(dir string, big scale.Big) (bandwidth, error) {
	l, err := lowerSource(big.Name, big.Src)
	if err != nil {
		return bandwidth{}, err
	}
	file := filepath.Join(dir, big.Name+".yaml")
	if err := os.WriteFile(file, big.Src, 0o644); err != nil {
		return bandwidth{}, err
	}
	bw := bandwidth{held: heldBytes(l.plan)}
	bw.copy = scale.CopyTime(bw.held)
	cmd := exec.Command(os.Args[0], "simulate", "--max-bytes", "17179869184", file)
	cmd.Env = append(os.Environ(), cliEnv+"=1")
	start := time.Now()
	out, err := cmd.CombinedOutput()
	bw.simulate = time.Since(start)
	if err != nil || !bytes.HasPrefix(out, []byte("PASS\n")) {
		return bw, fmt.Errorf("nvcomm simulate %s: %v\n%s", file, err, out)
	}
	bw.user, bw.system = cmd.ProcessState.UserTime(), cmd.ProcessState.SystemTime()
	return bw, nil
}
