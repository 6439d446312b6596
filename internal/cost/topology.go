package cost

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/nvcomm/nvcomm/internal/diag"
	"github.com/nvcomm/nvcomm/internal/plan"
)

// TopologyFormat is the topology file format this package reads and writes.
const TopologyFormat = 1

// Link classes.
const (
	LinkNVLink  = "nvlink"  // every member of the team on one node
	LinkNetwork = "network" // the team spans nodes
	LinkMemory  = "memory"  // a local step, or a collective without peers
	// LinkCompute marks calibration samples of matmul throughput (their
	// bytes column holds floating-point operations); no step runs on it.
	LinkCompute = "compute"
)

// Topology describes the machines a plan runs on: how many devices share a
// node and the cost parameters of each link class. Device d is on node
// d / DevicesPerNode, as torchrun numbers global ranks.
type Topology struct {
	Format int `yaml:"format"`
	// Name identifies the topology in reports.
	Name string `yaml:"name"`
	// Source says where the parameters come from, for readers.
	Source string `yaml:"source,omitempty"`
	// DevicesPerNode is the number of devices of one node.
	DevicesPerNode int `yaml:"devices_per_node"`
	// DeviceMemory is the bytes one device can allocate; 0 when the
	// topology does not say. It is the default memory budget of
	// `nvcomm model --auto`. The built-in H200's is what
	// torch.cuda.get_device_properties reports (total_memory,
	// 150,109,880,320 bytes: nvidia-smi's 143,771 MiB less the 615 MiB
	// the driver reserves), under the datasheet's 141 GB of HBM3e.
	DeviceMemory int64 `yaml:"device_memory_bytes,omitempty"`
	// NVLink prices teams inside one node.
	NVLink Link `yaml:"nvlink"`
	// Network prices teams that span nodes.
	Network Link `yaml:"network"`
	// Memory prices local steps: Bandwidth counts bytes read plus bytes
	// written.
	Memory Memory `yaml:"memory"`
	// Compute prices the arithmetic of Matmul steps; absent, they cost
	// only their memory traffic.
	Compute *Compute `yaml:"compute,omitempty"`
}

// Compute is a device's arithmetic, one line per dtype: a product of F =
// 2·Bt·M·K·N floating-point operations takes α + F / throughput. A Matmul
// step takes the longer of that and its memory traffic (a roofline with
// a floor); a dtype not listed costs its memory traffic only.
//
// α is the fixed cost of one product: what small products pay whatever
// their size (a kernel's start, its waves that do not fill the device).
// On an H200 it is 6–10 µs, and without it products under a few hundred
// µs were predicted up to 3× fast (docs/export.md, "Calibration").
type Compute struct {
	// TFLOPS is the throughput per dtype name (float32, bfloat16, …), in
	// 1e12 operations a second: the line's slope.
	TFLOPS map[string]float64 `yaml:"tflops"`
	// Latency is α per dtype name, in microseconds; a dtype absent has
	// none.
	Latency map[string]float64 `yaml:"latency_us,omitempty"`
}

// Seconds predicts a product of flops floating-point operations in dtype:
// zero when the dtype has no throughput.
func (c *Compute) Seconds(dtype string, flops float64) float64 {
	if c == nil || !(c.TFLOPS[dtype] > 0) {
		return 0
	}
	return c.Latency[dtype]*1e-6 + flops/(c.TFLOPS[dtype]*1e12)
}

// Link is the cost parameters of one link class: defaults, and optional
// parameters per collective type (plan type names such as "Allgather").
type Link struct {
	Params      `yaml:",inline"`
	Collectives map[string]Params `yaml:"collectives,omitempty"`
}

// Params are the parameters of the model
//
//	t = max(λ, min(α + x/busbw, α_ll + x/busbw_ll)),  x = S·f(n),
//
// after NCCL's own tuning model, which prices every protocol as a line and
// runs the fastest: the optional low-latency line (smaller α, smaller
// busbw: NCCL's LL and LL128 protocols) serves small messages, the main
// line large ones.
type Params struct {
	// Bandwidth is the bus bandwidth, in GB/s (1e9 bytes a second).
	Bandwidth float64 `yaml:"bandwidth_gbps"`
	// Latency is α, in microseconds.
	Latency float64 `yaml:"latency_us"`
	// LowLatency is the low-latency line; nil when one line fits.
	LowLatency *Line `yaml:"low_latency,omitempty"`
	// Launch is λ, in microseconds: the least time a call takes when the
	// host issues calls one after another (torch.distributed's launch
	// overhead, which hides the link below a few MiB); zero when times are
	// measured with the host's overhead hidden, as nccl-tests does.
	Launch float64 `yaml:"launch_us,omitempty"`
}

// Line is one α–β line of the model: α + x/busbw.
type Line struct {
	// Bandwidth is the bus bandwidth, in GB/s.
	Bandwidth float64 `yaml:"bandwidth_gbps"`
	// Latency is α, in microseconds.
	Latency float64 `yaml:"latency_us"`
}

// For returns the parameters of collective type typ on this link.
func (l Link) For(typ string) Params {
	if p, ok := l.Collectives[typ]; ok {
		return p
	}
	return l.Params
}

//go:embed h200.yaml
var defaultYAML []byte

// Default returns the built-in topology: H200 nodes of 8 GPUs, NVLink
// parameters fitted to internal/cost/testdata/nccl-h200-2gpu.csv (see
// docs/export.md), network parameters assumed (one 400 Gb/s NIC a GPU).
func Default() *Topology {
	t, err := ParseTopology("h200.yaml", defaultYAML)
	if err != nil {
		panic(fmt.Sprintf("cost: built-in topology: %v", err))
	}
	return t
}

// DefaultYAML returns the built-in topology file.
func DefaultYAML() []byte { return slices.Clone(defaultYAML) }

// ParseTopology decodes and checks a topology file; unknown fields are
// errors. An error is a diag.Diagnostic naming the file.
func ParseTopology(name string, src []byte) (*Topology, error) {
	dec := yaml.NewDecoder(bytes.NewReader(src))
	dec.KnownFields(true)
	var t Topology
	if err := dec.Decode(&t); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, diag.Diagnostic{File: name, Message: "empty topology file"}
		}
		return nil, diag.Diagnostic{File: name, Message: yamlMessage(err)}
	}
	if problems := t.Check(); len(problems) > 0 {
		return nil, diag.Diagnostic{File: name, Message: strings.Join(problems, "; ")}
	}
	return &t, nil
}

// yamlMessage words a YAML decoding error on one line, without the Go
// types it was decoded into: "line 2: field bogus not found".
func yamlMessage(err error) string {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return strings.TrimPrefix(err.Error(), "yaml: ")
	}
	msgs := make([]string, len(te.Errors))
	for i, m := range te.Errors {
		msgs[i] = goType.ReplaceAllString(m, "")
	}
	return strings.Join(msgs, "; ")
}

// goType matches the Go type that yaml names in its errors.
var goType = regexp.MustCompile(` (in|into) (type )?[*\[\]]*[a-z]+\.[A-Za-z]+`)

// Check lists what is wrong with t; none means it is usable.
func (t *Topology) Check() []string {
	var problems []string
	if t.Format != TopologyFormat {
		problems = append(problems, fmt.Sprintf("format must be %d, got %d", TopologyFormat, t.Format))
	}
	if t.DevicesPerNode < 1 {
		problems = append(problems, fmt.Sprintf("devices_per_node must be at least 1, got %d", t.DevicesPerNode))
	}
	if t.DeviceMemory < 0 {
		problems = append(problems, fmt.Sprintf("device_memory_bytes must not be negative (0 or absent: not known), got %d", t.DeviceMemory))
	}
	problems = append(problems, checkParams("memory", t.Memory.Params)...)
	if t.Memory.Strided != nil {
		problems = append(problems, checkParams("memory.strided", *t.Memory.Strided)...)
	}
	if t.Compute != nil {
		for _, dt := range slices.Sorted(maps.Keys(t.Compute.TFLOPS)) {
			if v := t.Compute.TFLOPS[dt]; !(v > 0) || math.IsInf(v, 0) {
				problems = append(problems, fmt.Sprintf("compute.tflops.%s must be positive and finite, got %v", dt, v))
			}
		}
		for _, dt := range slices.Sorted(maps.Keys(t.Compute.Latency)) {
			if v := t.Compute.Latency[dt]; !(v >= 0) || math.IsInf(v, 0) {
				problems = append(problems, fmt.Sprintf("compute.latency_us.%s must be non-negative and finite, got %v", dt, v))
			}
		}
	}
	for _, l := range []struct {
		name string
		link Link
	}{{LinkNVLink, t.NVLink}, {LinkNetwork, t.Network}} {
		problems = append(problems, checkParams(l.name, l.link.Params)...)
		for _, typ := range slices.Sorted(maps.Keys(l.link.Collectives)) {
			if !slices.Contains(plan.CollectiveTypes, typ) {
				problems = append(problems, fmt.Sprintf("%s.collectives: unknown collective %q (expected one of %s)", l.name, typ, strings.Join(plan.CollectiveTypes, ", ")))
				continue
			}
			problems = append(problems, checkParams(l.name+".collectives."+typ, l.link.Collectives[typ])...)
		}
	}
	return problems
}

func checkParams(where string, p Params) []string {
	var problems []string
	if !(p.Bandwidth > 0) || math.IsInf(p.Bandwidth, 0) {
		problems = append(problems, fmt.Sprintf("%s: bandwidth_gbps must be positive and finite, got %v", where, p.Bandwidth))
	}
	if !(p.Latency >= 0) || math.IsInf(p.Latency, 0) {
		problems = append(problems, fmt.Sprintf("%s: latency_us must be non-negative and finite, got %v", where, p.Latency))
	}
	if ll := p.LowLatency; ll != nil {
		problems = append(problems, checkParams(where+".low_latency", Params{Bandwidth: ll.Bandwidth, Latency: ll.Latency})...)
	}
	if !(p.Launch >= 0) || math.IsInf(p.Launch, 0) {
		problems = append(problems, fmt.Sprintf("%s: launch_us must be non-negative and finite, got %v", where, p.Launch))
	}
	return problems
}

// Marshal encodes t as a topology file, collectives in sorted order.
func (t *Topology) Marshal() ([]byte, error) {
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(t); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
