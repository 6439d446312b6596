package ir

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// propSum is what the propagation tests check of a tensor: where its
// sharding comes from, its mesh, its schedule (as fusion files write it)
// and the resulting shardings ("DIDx:1" shards value axis 1 in blocks).
type propSum struct {
	Mesh       string
	Propagated bool
	Schedule   []string
	Shardings  []string
}

// stepText writes a schedule step as a fusion file does.
func stepText(s ScheduleStep) string {
	switch s.Kind {
	case StepSplit, StepOuterSplit:
		return fmt.Sprintf("%s(%d, %d)", s.Kind, s.Axis, s.Factor)
	case StepParallelize:
		return fmt.Sprintf("parallelize(%d, %s)", s.Axis, s.Type)
	case StepMerge:
		return fmt.Sprintf("merge(%d)", s.Axis)
	}
	return fmt.Sprintf("reorder(%v)", s.Order)
}

// propagation summarizes every tensor of f by name.
func propagation(f *Fusion) map[string]propSum {
	got := map[string]propSum{}
	for _, t := range f.Tensors {
		s := propSum{Propagated: t.Propagated}
		if t.Mesh != nil {
			s.Mesh = t.Mesh.Name
		}
		for _, st := range t.Schedule {
			s.Schedule = append(s.Schedule, stepText(st))
		}
		for _, sh := range t.Shardings() {
			s.Shardings = append(s.Shardings, fmt.Sprintf("%s:%d", sh.Type, sh.Axis()))
			if sh.Kind != Block {
				s.Shardings[len(s.Shardings)-1] += " " + string(sh.Kind)
			}
		}
		got[t.Name] = s
	}
	return got
}

// propagateTests are format 2 fusions and the sharding every tensor ends
// with. Unless a case says otherwise, x, w, a, b are given and the rest
// propagated.
var propagateTests = []struct {
	name string
	src  string
	want map[string]propSum
}{
	{
		// nvFuser's ShardingTest.PropagateParallelTypeOnce: both operands
		// have one device axis, so the first in operand order is the
		// reference; DIDx is then taken, and b's split of axis 1 is not
		// propagated.
		name: "propagate_parallel_type_once",
		src: `format: 2
meshes:
  m: [0, 1]
tensors:
  a:
    mesh: m
    shape: [4, 6]
    schedule: [{outer_split: {axis: 0, factor: 2}}, {parallelize: {axis: 0, type: DIDx}}]
  b:
    mesh: m
    shape: [4, 6]
    schedule: [{outer_split: {axis: 1, factor: 2}}, {parallelize: {axis: 1, type: DIDx}}]
ops:
  - {op: add, in: [a, b], out: c}
`,
		want: map[string]propSum{
			"a": {Mesh: "m", Schedule: []string{"outer_split(0, 2)", "parallelize(0, DIDx)"}, Shardings: []string{"DIDx:0"}},
			"b": {Mesh: "m", Schedule: []string{"outer_split(1, 2)", "parallelize(1, DIDx)"}, Shardings: []string{"DIDx:1"}},
			"c": {Mesh: "m", Propagated: true, Schedule: []string{"outer_split(0, 2)", "parallelize(0, DIDx)"}, Shardings: []string{"DIDx:0"}},
		},
	},
	{
		// Operands with more device axes come first: b, sharded on two
		// mesh axes, decides c although it is the second operand.
		name: "most_device_axes_first",
		src: `format: 2
meshes:
  g: [[0, 1], [2, 3]]
tensors:
  a: {mesh: g, shape: [4, 6], placements: [Replicate(), Shard(0)]}
  b: {mesh: g, shape: [4, 6], placements: [Shard(0), Shard(1)]}
ops:
  - {op: mul, in: [a, b], out: c}
`,
		want: map[string]propSum{
			"a": {Mesh: "g", Schedule: []string{"outer_split(0, 2)", "parallelize(0, DIDx)"}, Shardings: []string{"DIDx:0"}},
			"b": {Mesh: "g", Schedule: []string{"outer_split(1, 2)", "parallelize(1, DIDx)", "outer_split(0, 2)", "parallelize(0, DIDy)"},
				Shardings: []string{"DIDx:1", "DIDy:0"}},
			"c": {Mesh: "g", Propagated: true, Schedule: []string{"outer_split(1, 2)", "parallelize(1, DIDx)", "outer_split(0, 2)", "parallelize(0, DIDy)"},
				Shardings: []string{"DIDx:1", "DIDy:0"}},
		},
	},
	{
		// Ties go to the higher mesh rank: b's 2-D mesh gives c its mesh
		// and DIDy split; a's DIDx over 4 devices does not fit g's 2
		// columns and is skipped.
		name: "mesh_rank_and_size",
		src: `format: 2
meshes:
  m: [0, 1, 2, 3]
  g: [[0, 1], [2, 3]]
tensors:
  a: {mesh: m, shape: [4, 8], placements: [Shard(1)]}
  b: {mesh: g, shape: [4, 8], placements: [Shard(0), Replicate()]}
ops:
  - {op: add, in: [a, b], out: c}
`,
		want: map[string]propSum{
			"a": {Mesh: "m", Schedule: []string{"outer_split(1, 4)", "parallelize(1, DIDx)"}, Shardings: []string{"DIDx:1"}},
			"b": {Mesh: "g", Schedule: []string{"outer_split(0, 2)", "parallelize(0, DIDy)"}, Shardings: []string{"DIDy:0"}},
			"c": {Mesh: "g", Propagated: true, Schedule: []string{"outer_split(0, 2)", "parallelize(0, DIDy)"}, Shardings: []string{"DIDy:0"}},
		},
	},
	{
		// linear tries its weight first: a sequence-sharded x against a
		// column-sharded w gives y its columns (n) split, and the
		// lowering reshards x.
		name: "linear_weight_first",
		src: `format: 2
meshes:
  m: [0, 1, 2, 3]
tensors:
  x: {mesh: m, shape: [8, 16], placements: [Shard(0)]}
  w: {mesh: m, shape: [32, 16], placements: [Shard(0)]}
ops:
  - {op: linear, in: [x, w], out: y}
`,
		want: map[string]propSum{
			"x": {Mesh: "m", Schedule: []string{"outer_split(0, 4)", "parallelize(0, DIDx)"}, Shardings: []string{"DIDx:0"}},
			"w": {Mesh: "m", Schedule: []string{"outer_split(0, 4)", "parallelize(0, DIDx)"}, Shardings: []string{"DIDx:0"}},
			"y": {Mesh: "m", Propagated: true, Schedule: []string{"outer_split(1, 4)", "parallelize(1, DIDx)"}, Shardings: []string{"DIDx:1"}},
		},
	},
	{
		// linear's bias comes after the weight and before the input: a
		// replicated weight leaves DIDx to the bias's split of n, not to
		// x's split of its rows.
		name: "linear_bias_before_input",
		src: `format: 2
meshes:
  m: [0, 1]
tensors:
  x: {mesh: m, shape: [4, 6], placements: [Shard(0)]}
  w: {mesh: m, shape: [8, 6]}
  bias: {mesh: m, shape: [8], placements: [Shard(0)]}
ops:
  - {op: linear, in: [x, w, bias], out: y}
`,
		want: map[string]propSum{
			"x":    {Mesh: "m", Schedule: []string{"outer_split(0, 2)", "parallelize(0, DIDx)"}, Shardings: []string{"DIDx:0"}},
			"w":    {Mesh: "m"},
			"bias": {Mesh: "m", Schedule: []string{"outer_split(0, 2)", "parallelize(0, DIDx)"}, Shardings: []string{"DIDx:0"}},
			"y":    {Mesh: "m", Propagated: true, Schedule: []string{"outer_split(1, 2)", "parallelize(1, DIDx)"}, Shardings: []string{"DIDx:1"}},
		},
	},
	{
		// matmul tries b, then a: b's columns decide c's n; a's rows are
		// not propagated, DIDx being taken. With a replicated b, a's rows
		// give d its m.
		name: "matmul_b_then_a",
		src: `format: 2
meshes:
  m: [0, 1, 2, 3]
tensors:
  a: {mesh: m, shape: [8, 16], placements: [Shard(0)]}
  b: {mesh: m, shape: [16, 12], placements: [Shard(1)]}
  b2: {mesh: m, shape: [16, 12]}
ops:
  - {op: matmul, in: [a, b], out: c}
  - {op: matmul, in: [a, b2], out: d}
`,
		want: map[string]propSum{
			"a":  {Mesh: "m", Schedule: []string{"outer_split(0, 4)", "parallelize(0, DIDx)"}, Shardings: []string{"DIDx:0"}},
			"b":  {Mesh: "m", Schedule: []string{"outer_split(1, 4)", "parallelize(1, DIDx)"}, Shardings: []string{"DIDx:1"}},
			"b2": {Mesh: "m"},
			"c":  {Mesh: "m", Propagated: true, Schedule: []string{"outer_split(1, 4)", "parallelize(1, DIDx)"}, Shardings: []string{"DIDx:1"}},
			"d":  {Mesh: "m", Propagated: true, Schedule: []string{"outer_split(0, 4)", "parallelize(0, DIDx)"}, Shardings: []string{"DIDx:0"}},
		},
	},
	{
		// A row-parallel linear: x and w split along k give y a split of
		// its trailing reduction axis rk (nvFuser's rDID): the op sums
		// its partial products over the devices.
		name: "contracted_axis_to_reduction_axis",
		src: `format: 2
meshes:
  m: [0, 1, 2, 3]
tensors:
  x: {mesh: m, shape: [8, 16], placements: [Shard(1)]}
  w: {mesh: m, shape: [32, 16], placements: [Shard(1)]}
ops:
  - {op: linear, in: [x, w], out: y}
`,
		want: map[string]propSum{
			"x": {Mesh: "m", Schedule: []string{"outer_split(1, 4)", "parallelize(1, DIDx)"}, Shardings: []string{"DIDx:1"}},
			"w": {Mesh: "m", Schedule: []string{"outer_split(1, 4)", "parallelize(1, DIDx)"}, Shardings: []string{"DIDx:1"}},
			"y": {Mesh: "m", Propagated: true, Schedule: []string{"outer_split(2, 4)", "parallelize(2, DIDx)"}},
		},
	},
	{
		// The Megatron MLP with only x, w1 and w2 annotated: h and r
		// follow w1's rows (column-parallel), y's rk follows w2's
		// columns (row-parallel), r's split of the same k being skipped
		// once rk is split.
		name: "megatron_mlp",
		src: `format: 2
meshes:
  tp: [0, 1, 2, 3]
tensors:
  x: {mesh: tp, shape: [8, 16]}
  w1: {mesh: tp, shape: [32, 16], placements: [Shard(0)]}
  w2: {mesh: tp, shape: [16, 32], placements: [Shard(1)]}
ops:
  - {op: linear, in: [x, w1], out: h}
  - {op: relu, in: h, out: r}
  - {op: linear, in: [r, w2], out: y}
`,
		want: map[string]propSum{
			"x":  {Mesh: "tp"},
			"w1": {Mesh: "tp", Schedule: []string{"outer_split(0, 4)", "parallelize(0, DIDx)"}, Shardings: []string{"DIDx:0"}},
			"w2": {Mesh: "tp", Schedule: []string{"outer_split(1, 4)", "parallelize(1, DIDx)"}, Shardings: []string{"DIDx:1"}},
			"h":  {Mesh: "tp", Propagated: true, Schedule: []string{"outer_split(1, 4)", "parallelize(1, DIDx)"}, Shardings: []string{"DIDx:1"}},
			"r":  {Mesh: "tp", Propagated: true, Schedule: []string{"outer_split(1, 4)", "parallelize(1, DIDx)"}, Shardings: []string{"DIDx:1"}},
			"y":  {Mesh: "tp", Propagated: true, Schedule: []string{"outer_split(2, 4)", "parallelize(2, DIDx)"}},
		},
	},
	{
		// A reduction over a split axis keeps the split on its reduction
		// axis (nvFuser's rDID); the other axes map as for a set.
		name: "reduction_keeps_split",
		src: `format: 2
meshes:
  g: [[0, 1], [2, 3]]
tensors:
  a: {mesh: g, shape: [4, 6], placements: [Shard(1), Shard(0)]}
ops:
  - {op: sum, in: a, out: s, axis: 0}
  - {op: set, in: s, out: t}
`,
		want: map[string]propSum{
			"a": {Mesh: "g", Schedule: []string{"outer_split(1, 2)", "parallelize(1, DIDy)", "outer_split(0, 2)", "parallelize(0, DIDx)"},
				Shardings: []string{"DIDx:0", "DIDy:1"}},
			"s": {Mesh: "g", Propagated: true, Schedule: []string{"outer_split(1, 2)", "parallelize(1, DIDy)", "outer_split(0, 2)", "parallelize(0, DIDx)"},
				Shardings: []string{"DIDy:0"}},
			"t": {Mesh: "g", Propagated: true, Schedule: []string{"outer_split(0, 2)", "parallelize(0, DIDy)"}, Shardings: []string{"DIDy:0"}},
		},
	},
	{
		// A mesh alone is a given, replicated sharding: c is not changed
		// by its operand's split, and d, propagated from c, is
		// replicated too.
		name: "given_mesh_stays_replicated",
		src: `format: 2
meshes:
  m: [0, 1]
tensors:
  a: {mesh: m, shape: [4], placements: [Shard(0)]}
  c: {mesh: m}
ops:
  - {op: relu, in: a, out: c}
  - {op: neg, in: c, out: d}
`,
		want: map[string]propSum{
			"a": {Mesh: "m", Schedule: []string{"outer_split(0, 2)", "parallelize(0, DIDx)"}, Shardings: []string{"DIDx:0"}},
			"c": {Mesh: "m"},
			"d": {Mesh: "m", Propagated: true},
		},
	},
	{
		// Fusion inputs that declare no mesh take their consumer's in
		// the backward sweep, and no split: they are replicated. Here x
		// takes w's mesh through y; v, whose consumers have no mesh
		// either, takes z's through u, the last consumer first.
		name: "input_takes_consumer_mesh",
		src: `format: 2
meshes:
  m: [0, 1]
  n: [2, 3]
tensors:
  x: {shape: [4, 6]}
  w: {mesh: m, shape: [8, 6], placements: [Shard(0)]}
  v: {shape: [6]}
  z: {mesh: n}
ops:
  - {op: linear, in: [x, w], out: y}
  - {op: relu, in: v, out: u}
  - {op: set, in: u, out: z}
`,
		want: map[string]propSum{
			"x": {Mesh: "m", Propagated: true},
			"w": {Mesh: "m", Schedule: []string{"outer_split(0, 2)", "parallelize(0, DIDx)"}, Shardings: []string{"DIDx:0"}},
			"v": {Mesh: "n", Propagated: true},
			"y": {Mesh: "m", Propagated: true, Schedule: []string{"outer_split(1, 2)", "parallelize(1, DIDx)"}, Shardings: []string{"DIDx:1"}},
			"u": {Mesh: "n", Propagated: true},
			"z": {Mesh: "n"},
		},
	},
	{
		// nvFuser's ShardingTest.ReductionDIDxIsIgnored: p gets rk
		// split from the linear; q = p + t follows t, since a split
		// reduction axis does not count; the backward sweep then gives p
		// t's split of n too: summed over DIDx and split along n by it,
		// a ReduceScatter.
		name: "backward_adds_types",
		src: `format: 2
meshes:
  m: [0, 1]
tensors:
  x: {mesh: m, shape: [4, 6], placements: [Shard(1)]}
  w: {mesh: m, shape: [8, 6], placements: [Shard(1)]}
  t: {mesh: m, shape: [4, 8], placements: [Shard(1)]}
ops:
  - {op: linear, in: [x, w], out: p}
  - {op: add, in: [p, t], out: q}
`,
		want: map[string]propSum{
			"x": {Mesh: "m", Schedule: []string{"outer_split(1, 2)", "parallelize(1, DIDx)"}, Shardings: []string{"DIDx:1"}},
			"w": {Mesh: "m", Schedule: []string{"outer_split(1, 2)", "parallelize(1, DIDx)"}, Shardings: []string{"DIDx:1"}},
			"t": {Mesh: "m", Schedule: []string{"outer_split(1, 2)", "parallelize(1, DIDx)"}, Shardings: []string{"DIDx:1"}},
			"p": {Mesh: "m", Propagated: true, Schedule: []string{"outer_split(2, 2)", "parallelize(2, DIDx)", "outer_split(1, 2)", "parallelize(1, DIDx)"},
				Shardings: []string{"DIDx:1"}},
			"q": {Mesh: "m", Propagated: true, Schedule: []string{"outer_split(1, 2)", "parallelize(1, DIDx)"}, Shardings: []string{"DIDx:1"}},
		},
	},
	{
		// Propagation never overwrites a split: c follows a (equal
		// device axes and mesh rank, operand order), then b2's DIDy split
		// of the same axis is skipped; backward, b2 keeps its DIDy.
		name: "does_not_overwrite",
		src: `format: 2
meshes:
  g: [[0, 1], [2, 3]]
tensors:
  a: {mesh: g, shape: [4, 6], placements: [Replicate(), Shard(0)]}
  b: {mesh: g, shape: [4, 6], placements: [Shard(0), Replicate()]}
ops:
  - {op: set, in: b, out: b2}
  - {op: add, in: [a, b2], out: c}
`,
		want: map[string]propSum{
			"a":  {Mesh: "g", Schedule: []string{"outer_split(0, 2)", "parallelize(0, DIDx)"}, Shardings: []string{"DIDx:0"}},
			"b":  {Mesh: "g", Schedule: []string{"outer_split(0, 2)", "parallelize(0, DIDy)"}, Shardings: []string{"DIDy:0"}},
			"b2": {Mesh: "g", Propagated: true, Schedule: []string{"outer_split(0, 2)", "parallelize(0, DIDy)"}, Shardings: []string{"DIDy:0"}},
			"c":  {Mesh: "g", Propagated: true, Schedule: []string{"outer_split(0, 2)", "parallelize(0, DIDx)"}, Shardings: []string{"DIDx:0"}},
		},
	},
	{
		// nvFuser's ShardingTest.ResidualAdd: u, computed from an input
		// with no mesh, learns only from its consumer that it is split
		// like x; its input v gets the mesh and stays replicated.
		name: "residual_add",
		src: `format: 2
meshes:
  m: [0, 1]
tensors:
  x: {mesh: m, shape: [4, 6], placements: [Shard(0)]}
  v: {shape: [4, 6]}
ops:
  - {op: relu, in: v, out: u}
  - {op: add, in: [x, u], out: y}
`,
		want: map[string]propSum{
			"x": {Mesh: "m", Schedule: []string{"outer_split(0, 2)", "parallelize(0, DIDx)"}, Shardings: []string{"DIDx:0"}},
			"v": {Mesh: "m", Propagated: true},
			"u": {Mesh: "m", Propagated: true, Schedule: []string{"outer_split(0, 2)", "parallelize(0, DIDx)"}, Shardings: []string{"DIDx:0"}},
			"y": {Mesh: "m", Propagated: true, Schedule: []string{"outer_split(0, 2)", "parallelize(0, DIDx)"}, Shardings: []string{"DIDx:0"}},
		},
	},
	{
		// Backward, an intermediate gains the types it lacks from its
		// consumer (b: DIDy from c), and an operand of a contraction
		// summed over DIDx gets the split of its contracted axis, not of
		// the output axis DIDx also splits (r: k, not n).
		name: "backward_intermediates",
		src: `format: 2
meshes:
  g: [[0, 1], [2, 3]]
  m: [0, 1]
tensors:
  a: {mesh: g, shape: [4, 8], placements: [Replicate(), Shard(1)]}
  c: {placements: [Shard(0), Shard(1)]}
  x: {mesh: m, shape: [4, 6]}
  w0: {mesh: m, shape: [8, 6]}
  y:
    mesh: m
    schedule:
      - outer_split: {axis: 2, factor: 2}
      - parallelize: {axis: 2, type: DIDx}
      - outer_split: {axis: 1, factor: 2}
      - parallelize: {axis: 1, type: DIDx}
ops:
  - {op: relu, in: a, out: b}
  - {op: neg, in: b, out: c}
  - {op: relu, in: x, out: r}
  - {op: neg, in: w0, out: w}
  - {op: linear, in: [r, w], out: y}
`,
		want: map[string]propSum{
			"a": {Mesh: "g", Schedule: []string{"outer_split(1, 2)", "parallelize(1, DIDx)"}, Shardings: []string{"DIDx:1"}},
			"b": {Mesh: "g", Propagated: true, Schedule: []string{"outer_split(1, 2)", "parallelize(1, DIDx)", "outer_split(0, 2)", "parallelize(0, DIDy)"},
				Shardings: []string{"DIDx:1", "DIDy:0"}},
			"c": {Mesh: "g", Schedule: []string{"outer_split(1, 2)", "parallelize(1, DIDx)", "outer_split(0, 2)", "parallelize(0, DIDy)"},
				Shardings: []string{"DIDx:1", "DIDy:0"}},
			"x":  {Mesh: "m"},
			"w0": {Mesh: "m"},
			"r":  {Mesh: "m", Propagated: true, Schedule: []string{"outer_split(1, 2)", "parallelize(1, DIDx)"}, Shardings: []string{"DIDx:1"}},
			"w":  {Mesh: "m", Propagated: true, Schedule: []string{"outer_split(1, 2)", "parallelize(1, DIDx)"}, Shardings: []string{"DIDx:1"}},
			"y": {Mesh: "m", Schedule: []string{"outer_split(2, 2)", "parallelize(2, DIDx)", "outer_split(1, 2)", "parallelize(1, DIDx)"},
				Shardings: []string{"DIDx:1"}},
		},
	},
	{
		// Splits propagation does not replay are skipped without error:
		// a strided split (the inner part on DIDx), an uneven one, and a
		// split through a merge. A logical DID (an axis of the mesh's
		// extent parallelized as is) propagates as one.
		name: "skipped_and_logical_splits",
		src: `format: 2
meshes:
  m: [0, 1]
tensors:
  s:
    mesh: m
    shape: [8]
    schedule: [{split: {axis: 0, factor: 2}}, {parallelize: {axis: 1, type: DIDx}}]
  u: {mesh: m, shape: [5], placements: [Shard(0)]}
  g:
    mesh: m
    shape: [2, 4]
    schedule: [{merge: {axis: 0}}, {outer_split: {axis: 0, factor: 2}}, {parallelize: {axis: 0, type: DIDx}}]
  l:
    mesh: m
    shape: [2, 4]
    schedule: [{parallelize: {axis: 0, type: DIDx}}]
ops:
  - {op: relu, in: s, out: s2}
  - {op: relu, in: u, out: u2}
  - {op: relu, in: g, out: g2}
  - {op: relu, in: l, out: l2}
`,
		want: map[string]propSum{
			"s":  {Mesh: "m", Schedule: []string{"split(0, 2)", "parallelize(1, DIDx)"}, Shardings: []string{"DIDx:0 strided"}},
			"u":  {Mesh: "m", Schedule: []string{"outer_split(0, 2)", "parallelize(0, DIDx)"}, Shardings: []string{"DIDx:0"}},
			"g":  {Mesh: "m", Schedule: []string{"merge(0)", "outer_split(0, 2)", "parallelize(0, DIDx)"}, Shardings: []string{"DIDx:0"}},
			"l":  {Mesh: "m", Schedule: []string{"parallelize(0, DIDx)"}, Shardings: []string{"DIDx:0"}},
			"s2": {Mesh: "m", Propagated: true},
			"u2": {Mesh: "m", Propagated: true},
			"g2": {Mesh: "m", Propagated: true},
			"l2": {Mesh: "m", Propagated: true, Schedule: []string{"parallelize(0, DIDx)"}, Shardings: []string{"DIDx:0"}},
		},
	},
	{
		// broadcast maps its input's axes to the output's others; a
		// declared shape or dtype leaves a tensor propagated.
		name: "broadcast",
		src: `format: 2
meshes:
  m: [0, 1]
tensors:
  v: {mesh: m, shape: [6], placements: [Shard(0)]}
  w: {shape: [4, 6], dtype: float32}
ops:
  - {op: broadcast, in: v, out: w, axes: [0]}
`,
		want: map[string]propSum{
			"v": {Mesh: "m", Schedule: []string{"outer_split(0, 2)", "parallelize(0, DIDx)"}, Shardings: []string{"DIDx:0"}},
			"w": {Mesh: "m", Propagated: true, Schedule: []string{"outer_split(1, 2)", "parallelize(1, DIDx)"}, Shardings: []string{"DIDx:1"}},
		},
	},
}

func TestPropagate(t *testing.T) {
	for _, tt := range propagateTests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Parse("p.yaml", []byte(tt.src))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, propagation(f), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("shardings mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPropagatedAsWritten checks that a propagated tensor is the tensor the
// same schedule written in the file gives: the Megatron MLP of format 2,
// annotated on x, w1 and w2 only, against format 1 with placements on
// every tensor (docs/fusion.md's example).
func TestPropagatedAsWritten(t *testing.T) {
	head := `meshes:
  m: [0, 1, 2, 3]
tensors:
  x: {mesh: m, shape: [8, 16]}
  w1: {mesh: m, shape: [32, 16], placements: [Shard(0)]}
  w2: {mesh: m, shape: [16, 32], placements: [Shard(1)]}
`
	ops := `ops:
  - {op: linear, in: [x, w1], out: h}
  - {op: relu, in: h, out: r}
  - {op: linear, in: [r, w2], out: y}
`
	written, err := Parse("in.yaml", []byte("format: 1\n"+head+`  h: {placements: [Shard(1)]}
  r: {placements: [Shard(1)]}
  y: {schedule: [{outer_split: {axis: 2, factor: 4}}, {parallelize: {axis: 2, type: DIDx}}]}
`+ops))
	if err != nil {
		t.Fatal(err)
	}
	propagated, err := Parse("in.yaml", []byte("format: 2\n"+head+ops))
	if err != nil {
		t.Fatal(err)
	}
	want, got := summarize(written), summarize(propagated)
	// Declared differs by construction: the format 2 file declares
	// neither h, r nor y.
	for k := range want.Tensors {
		want.Tensors[k].Declared = false
		got.Tensors[k].Declared = false
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("propagated fusion differs from the written one (-want +got):\n%s", diff)
	}
	for _, name := range []string{"h", "r", "y"} {
		w, g := written.Tensor(name), propagated.Tensor(name)
		if diff := cmp.Diff(w.Schedule, g.Schedule, cmpopts.IgnoreFields(ScheduleStep{}, "Pos")); diff != "" {
			t.Errorf("%s: schedule differs (-written +propagated):\n%s", name, diff)
		}
		if w.Propagated || !g.Propagated {
			t.Errorf("%s: Propagated is %v written and %v propagated, want false and true", name, w.Propagated, g.Propagated)
		}
	}
}

// TestFormat1Unchanged checks that format 1 propagates nothing: an
// undeclared output is unsharded on its first input's mesh, whatever its
// operands' splits, and no tensor is marked propagated.
func TestFormat1Unchanged(t *testing.T) {
	src := `meshes:
  m: [0, 1, 2, 3]
tensors:
  x: {mesh: m, shape: [8, 16], placements: [Shard(1)]}
  w: {mesh: m, shape: [32, 16], placements: [Shard(0)]}
ops:
  - {op: linear, in: [x, w], out: y}
  - {op: relu, in: y, out: z}
`
	for _, format := range []string{"", "format: 1\n"} {
		f, err := Parse("in.yaml", []byte(format+src))
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]propSum{
			"x": {Mesh: "m", Schedule: []string{"outer_split(1, 4)", "parallelize(1, DIDx)"}, Shardings: []string{"DIDx:1"}},
			"w": {Mesh: "m", Schedule: []string{"outer_split(0, 4)", "parallelize(0, DIDx)"}, Shardings: []string{"DIDx:0"}},
			"y": {Mesh: "m"},
			"z": {Mesh: "m"},
		}
		if diff := cmp.Diff(want, propagation(f), cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%q: shardings mismatch (-want +got):\n%s", format, diff)
		}
	}
}

// TestPropagateErrors checks format 2's own errors: a tensor no mesh
// reaches, a given sharding with no mesh to lie on, an allocation on a
// propagated output, and an input with no shape.
func TestPropagateErrors(t *testing.T) {
	tests := []struct {
		name, src, want string
	}{{
		name: "no_mesh_anywhere",
		src: `format: 2
meshes:
  m: [0, 1]
tensors:
  x: {shape: [4]}
ops:
  - {op: relu, in: x, out: y}
`,
		want: `in.yaml:5:3: error: tensor "x" has no mesh: it declares none, and format 2 found none to propagate to it; give "x", or a tensor an op connects it to, a mesh
in.yaml:7:28: error: tensor "y" has no mesh: it declares none, and format 2 found none to propagate to it; give "y", or a tensor an op connects it to, a mesh`,
	}, {
		name: "given_without_mesh",
		src: `format: 2
meshes:
  m: [0, 1]
tensors:
  x: {shape: [4]}
  y: {placements: [Shard(0)]}
ops:
  - {op: relu, in: x, out: y}
`,
		want: `in.yaml:6:3: error: tensor "y": its sharding is given, but it has no mesh to lie on: none of its operands has one; give it a mesh, or give one to an operand`,
	}, {
		name: "allocation_on_propagated",
		src: `format: 2
meshes:
  m: [0, 1]
tensors:
  x: {mesh: m, shape: [4, 6], placements: [Shard(0)]}
  y: {allocation: [1, 0]}
ops:
  - {op: relu, in: x, out: y}
`,
		want: `in.yaml:6:19: error: tensor "y": allocation needs a given sharding: the loop domain it counts positions of is propagated (format 2); give the tensor a mesh and a schedule or placements, or leave allocation out`,
	}, {
		name: "undeclared_input",
		src: `format: 2
meshes:
  m: [0, 1]
ops:
  - {op: relu, in: x, out: y}
`,
		want: `in.yaml:5:20: error: tensor "x" is read by an op but neither declared nor produced; declare it under tensors with a shape (and a mesh, or its consumer's is propagated to it)`,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("in.yaml", []byte(tt.src))
			if err == nil {
				t.Fatal("Parse succeeded, want an error")
			}
			if diff := cmp.Diff(tt.want, strings.TrimSpace(err.Error())); diff != "" {
				t.Errorf("diagnostics mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
