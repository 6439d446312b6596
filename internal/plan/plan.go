// Package plan defines nvcomm's communication plan (JSON, format 1): the
// meshes, tensors and ops of a fusion and the ordered steps — collectives and
// local buffer operations — that every device runs. It encodes plans
// deterministically, decodes them strictly, and validates their meaning.
//
// Steps act on flat per-device buffers, as NCCL does; docs/plan.md gives the
// exact semantics of every step type.
package plan

import (
	"strconv"
	"strings"

	"github.com/nvcomm/nvcomm/internal/ops"
)

// Format is the plan format of a list of steps run one after another,
// which lower writes; this package reads and writes it and [FormatGraph].
const Format = 1

// FormatGraph is the plan format whose steps form a graph: each step runs
// on a stream of each of its devices and may wait for earlier steps
// (Step.After, Step.Stream; docs/plan.md, "The step graph"). Its list of
// steps is one order that the graph allows.
const FormatGraph = 2

// Graph reports whether p's steps form a graph (format 2) rather than a
// sequence.
func (p *Plan) Graph() bool { return p.Format == FormatGraph }

// KnownFormat reports whether this package reads plans of format f.
func KnownFormat(f int) bool { return f == Format || f == FormatGraph }

// Plan is a lowered fusion.
type Plan struct {
	Format int    `json:"format"`
	Fusion string `json:"fusion"`
	Policy string `json:"policy"`
	// Objective is what policy optimal minimized when it is not the
	// default, predicted time: "bytes" (docs/lowering.md). Certify lowers
	// the plan's fusion again under it.
	Objective string          `json:"objective,omitempty"`
	Meshes    map[string]Mesh `json:"meshes"`
	// Pipeline is, for a fusion with a pipeline section, its stages,
	// micro-batches and schedule (docs/pipeline.md); nil for none. Its
	// ops are then each micro-batch's, named t@mbK, and its steps a graph.
	Pipeline *Pipeline `json:"pipeline,omitempty"`
	Tensors  []Tensor  `json:"tensors"`
	Ops      []Op      `json:"ops"`
	Steps    []Step    `json:"steps"`
	Summary  Summary   `json:"summary"`
}

// Pipeline is a plan's pipeline: the meshes of its stages, stage 0 first,
// the number of micro-batches and the schedule that orders them ("gpipe",
// "1f1b" or "interleaved", whose stages share device groups).
type Pipeline struct {
	Stages       []string `json:"stages"`
	Microbatches int      `json:"microbatches"`
	Schedule     string   `json:"schedule"`
}

// Mesh is an n-D array of device ids, row-major.
type Mesh struct {
	Shape   []int `json:"shape"`
	Devices []int `json:"devices"`
}

// Tensor describes one tensor of the fusion: enough to rebuild every device's
// shard from the global tensor (Shape, Schedule, Allocation, Mesh) and the
// analyses' results for readers (Sharding, LocalShape, Layout).
type Tensor struct {
	Name  string `json:"name"`
	DType string `json:"dtype"`
	Mesh  string `json:"mesh"`
	// Shape is the logical domain, reduction axes included.
	Shape []int `json:"shape"`
	// ReductionAxes are the positions in Shape that are reduction axes.
	ReductionAxes []int `json:"reduction_axes,omitempty"`
	// Schedule is the loop transforms, replayed on Shape; positions are
	// non-negative and count reduction axes.
	Schedule []ScheduleStep `json:"schedule,omitempty"`
	// Allocation is the memory order as loop positions, outermost first;
	// absent means each device stores its elements in row-major order of
	// their logical index.
	Allocation []int      `json:"allocation,omitempty"`
	Sharding   []Sharding `json:"sharding"`
	// LocalShape is the per-device extent of each non-reduction axis (the
	// largest over devices when the tensor is uneven).
	LocalShape []int `json:"local_shape"`
	// PaddedShape is, for an uneven tensor, the extent of each
	// non-reduction axis that its shards tile; absent when even.
	PaddedShape []int `json:"padded_shape,omitempty"`
	// Layout is the non-reduction axes in memory order, outermost first.
	Layout []int `json:"layout"`
	// Partial is, for a fusion input with a Partial(op) placement, the
	// reduce op (sum, prod, max or min) of the terms its logical axis 0
	// holds, one per device along the mesh axis that parallelizes that
	// axis; the ops that read it reduce them. Absent otherwise.
	Partial string `json:"partial,omitempty"`
	// Propagated marks a tensor whose mesh and schedule the fusion file
	// did not give: format 2 propagated them from the tensors around it
	// (docs/fusion.md, "format 2: propagation"). Absent when given.
	Propagated bool `json:"propagated,omitempty"`
}

// ScheduleStep is one loop transform; exactly one field is set.
type ScheduleStep struct {
	Split       *SplitArgs       `json:"split,omitempty"`
	OuterSplit  *SplitArgs       `json:"outer_split,omitempty"`
	Merge       *AxisArgs        `json:"merge,omitempty"`
	Reorder     []int            `json:"reorder,omitempty"`
	Parallelize *ParallelizeArgs `json:"parallelize,omitempty"`
}

// SplitArgs are the arguments of split and outer_split.
type SplitArgs struct {
	Axis   int `json:"axis"`
	Factor int `json:"factor"`
}

// AxisArgs are the arguments of merge.
type AxisArgs struct {
	Axis int `json:"axis"`
}

// ParallelizeArgs are the arguments of parallelize.
type ParallelizeArgs struct {
	Axis int    `json:"axis"`
	Type string `json:"type"`
}

// Sharding says which logical axis a device type shards and how.
type Sharding struct {
	Type        string `json:"type"`
	LogicalAxis int    `json:"logical_axis"` // among non-reduction axes; the first for merged
	// ShapeAxis is LogicalAxis as a position in the tensor's shape, which
	// counts its reduction axes too: present only where the two numberings
	// differ (an axis after a reduction's kept reduced axis), so that a
	// reader never has to guess which one a number means.
	ShapeAxis *int   `json:"shape_axis,omitempty"`
	Kind      string `json:"kind"` // block, strided, nested or merged
	// LogicalAxes lists every axis a merged device axis spans.
	LogicalAxes []int `json:"logical_axes,omitempty"`
}

// Op is one op of the fusion, for the reference computation.
type Op struct {
	Index int    `json:"index"`
	Op    string `json:"op"` // set, sum, prod, max, min, or a layer op (docs/plan.md)
	// Input is the operand of an op with one; Inputs the operands, in
	// order, of an op with several (and then Input is empty).
	Input  string   `json:"input,omitempty"`
	Inputs []string `json:"inputs,omitempty"`
	Output string   `json:"output"`
	Axis   *int     `json:"axis"` // reduced axis among the input's non-reduction axes
	// Axes are, for broadcast, the output's new axes.
	Axes []int `json:"axes,omitempty"`
	// Attrs are the op's other attributes (permute's dims, reshape's
	// shape, cast's dtype), each a field of the op's object under its
	// key, in the order of the op's registry entry (docs/plan.md, "ops").
	Attrs ops.Values `json:"-"`
	// Scalar is, for a binary elementwise op, the number it takes as one
	// of its operands, in slot Slot; Input is then its one tensor
	// (docs/plan.md, "ops").
	Scalar *ops.Scalar `json:"scalar,omitempty"`
	// Of is, on an op that the expansion of a composite op (softmax,
	// mean, rms_norm, layer_norm) wrote, that op as the fusion wrote it;
	// nil on the others (docs/plan.md, "ops").
	Of *Of `json:"of,omitempty"`
	// Inserted marks a set that nvcomm inserted, and says what for; nil
	// on the fusion's own ops (docs/plan.md, "ops").
	Inserted *Inserted `json:"inserted,omitempty"`
	// Within is, on an op that the lowering computes inside another op's
	// steps, that op's index: an op of a composite's expansion (or a set
	// inserted for one) when the expansion's last op computes the whole
	// composite from its operands, as ring attention does (docs/plan.md,
	// "ops"). No step implements such an op and no device holds its
	// output. Nil on the others.
	Within *int `json:"within,omitempty"`
}

// Of is a composite op of the fusion, which its expansion's ops point at:
// its name, operands and output, and its attributes.
type Of struct {
	Op     string   `json:"op"`
	Inputs []string `json:"inputs"`
	Output string   `json:"output"`
	// Axis is softmax's and mean's axis among the input's non-reduction
	// axes; absent for the norms.
	Axis *int `json:"axis,omitempty"`
	// Axes are the norms' normalized axes; absent for the others.
	Axes []int `json:"axes,omitempty"`
	// Eps is the norms' epsilon; absent for the others.
	Eps *float64 `json:"eps,omitempty"`
	// Reduction is cross_entropy's reduction as written (mean, none);
	// empty where the fusion left it out (mean) and for the others.
	Reduction string `json:"reduction,omitempty"`
	// Causal is sdpa's causal flag, written when true.
	Causal bool `json:"causal,omitempty"`
	// CP is sdpa's form under context parallelism as written (ring,
	// expansion); empty where the fusion left it to the objective.
	CP string `json:"cp,omitempty"`
	// GQA is sdpa's enable_gqa, written when true: k and v have fewer
	// heads than q, each serving a group of query heads.
	GQA bool `json:"enable_gqa,omitempty"`
	// TopK is moe_topk's top_k and Capacity moe_dispatch's capacity;
	// absent (0) for the others.
	TopK     int `json:"top_k,omitempty"`
	Capacity int `json:"capacity,omitempty"`
	// Grad says that the op is part of the gradient of this op of the
	// fusion, of any kind, which a backward section appended
	// (docs/training.md); false for a composite's expansion.
	Grad bool `json:"grad,omitempty"`
}

// What says what the op is to the ops that point at it: "the gradient
// of" for a backward's, "" for a composite's expansion.
func (o *Of) What() string {
	if o.Grad {
		return "the gradient of "
	}
	return ""
}

// Expr renders the composite op as a call: "y = softmax(x, axis=1)",
// "y = rms_norm(x, w, axes=[1], eps=1e-06)".
func (o *Of) Expr() string {
	args := strings.Join(o.Inputs, ", ")
	if o.Axis != nil {
		args += ", axis=" + strconv.Itoa(*o.Axis)
	}
	if o.Axes != nil {
		args += ", axes=" + intList(o.Axes)
	}
	if o.Eps != nil {
		args += ", eps=" + strconv.FormatFloat(*o.Eps, 'g', -1, 64)
	}
	if o.Causal {
		args += ", causal=true"
	}
	if o.Reduction != "" {
		args += ", reduction=" + o.Reduction
	}
	if o.CP != "" {
		args += ", cp=" + o.CP
	}
	if o.GQA {
		args += ", enable_gqa=true"
	}
	if o.TopK != 0 {
		args += ", top_k=" + strconv.Itoa(o.TopK)
	}
	if o.Capacity != 0 {
		args += ", capacity=" + strconv.Itoa(o.Capacity)
	}
	return o.Output + " = " + o.Op + "(" + args + ")"
}

// Inserted is why nvcomm inserted a set: to reshard operands of op For
// before it computes, or For's output after it. Exactly one of Operands
// and Output is set.
type Inserted struct {
	// For is the index of the op the set serves.
	For int `json:"for"`
	// Operands are the operand slots of op For that read the set's output,
	// in increasing order: every slot that reads it.
	Operands []int `json:"operands,omitempty"`
	// Output reports a set that reads op For's output, which For computed
	// in its operand's sharding, and writes the tensor the fusion asked for.
	Output bool `json:"output,omitempty"`
}

// Operands returns the op's inputs in order, whichever field holds them.
func (o *Op) Operands() []string {
	if len(o.Inputs) > 0 {
		return o.Inputs
	}
	return []string{o.Input}
}

// Expr renders the op as steps name it, as ir.Op.Expr does: "out =
// set(in)", "out = sum(in, axis=k)", "c = matmul(a, b)", "w =
// broadcast(v, axes=[0, 2])".
func (o Op) Expr() string {
	// Concatenated, not formatted: validate renders every op of a plan.
	args := strings.Join(o.Scalar.Args(o.Operands()), ", ")
	switch {
	case o.Op == "broadcast":
		args += ", axes=" + intList(o.Axes)
	case o.Op != "set" && o.Axis != nil:
		args += ", axis=" + strconv.Itoa(*o.Axis)
	}
	if len(o.Attrs) > 0 {
		args += string(o.Attrs.AppendArgs(nil))
	}
	return o.Output + " = " + o.Op + "(" + args + ")"
}

// intList renders xs as "[0, 2]", the way fusion files write lists.
func intList(xs []int) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = strconv.Itoa(x)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// Step kinds.
const (
	KindCollective = "collective"
	KindLocal      = "local"
)

// Collective step types.
const (
	Scatter       = "Scatter"
	Gather        = "Gather"
	Allgather     = "Allgather"
	Broadcast     = "Broadcast"
	Reduce        = "Reduce"
	Allreduce     = "Allreduce"
	ReduceScatter = "ReduceScatter"
	SendRecv      = "SendRecv"
	AllToAll      = "AllToAll"
	// AllToAllV is an all-to-all with split sizes: member k sends the
	// next SendCounts[k][r] elements of its input to member r
	// (torch.distributed's all_to_all_single with input_split_sizes).
	AllToAllV = "AllToAllV"
)

// Local step types.
const (
	Copy        = "Copy"
	Permute     = "Permute"
	Slice       = "Slice"
	LocalReduce = "LocalReduce"
	Pad         = "Pad"
	Unpad       = "Unpad"
	// Matmul and Pointwise compute: the local steps of layer ops.
	Matmul    = "Matmul"
	Pointwise = "Pointwise"
	// Lookup reads rows of a table at integer indices, a zero row for an
	// index outside the device's rows: the local step of embedding.
	Lookup = "Lookup"
	// ScatterAdd adds rows of values into a zeroed block of a table at
	// integer indices, an index outside the device's rows adding
	// nothing: the local step of scatter_add, a Lookup's adjoint.
	ScatterAdd = "ScatterAdd"
	// Concat writes windows of its inputs, in order, along one dim of its
	// output: slice's and cat's local step (Windows).
	Concat = "Concat"
	// Tril zeroes the entries above each device's diagonal of its block
	// (Offsets): tril's local step.
	Tril = "Tril"
)

// CollectiveTypes lists the collective step types.
var CollectiveTypes = []string{Scatter, Gather, Allgather, Broadcast, Reduce, Allreduce, ReduceScatter, SendRecv, AllToAll, AllToAllV}

// LocalTypes lists the local step types.
var LocalTypes = []string{Copy, Permute, Slice, LocalReduce, Pad, Unpad, Matmul, Pointwise, Lookup, ScatterAdd, Concat, Tril}

// IsRooted reports whether a collective type has a root.
func IsRooted(typ string) bool {
	switch typ {
	case Scatter, Gather, Broadcast, Reduce, SendRecv:
		return true
	}
	return false
}

// IsReduction reports whether a step type combines values with a reduce op.
func IsReduction(typ string) bool {
	switch typ {
	case Reduce, Allreduce, ReduceScatter, LocalReduce:
		return true
	}
	return false
}

// ReduceOps lists the reduce operators, those of the registry's
// reductions (package ops): a new slice.
func ReduceOps() []string { return ops.FamilyNames(ops.Reduction) }

// Step is one collective or local operation. Buffers are named: a tensor of
// the fusion, or an intermediate buffer "out/what" that an earlier step of
// the same op produced.
type Step struct {
	ID   int    `json:"id"`
	Op   int    `json:"op"`   // index into Plan.Ops
	Expr string `json:"expr"` // the op, for readers
	Kind string `json:"kind"` // collective or local
	Type string `json:"type"`
	// Stream names, in a plan of format 2, the stream the step runs on on
	// each of its devices; empty is the kind's own: comm for a
	// collective, compute for a local step ([Step.StreamName]).
	Stream string `json:"stream,omitempty"`
	// After lists, in a plan of format 2, the ids of the steps this one
	// waits for, each earlier in the list: it starts once they have
	// completed on all their devices. Steps on one stream of a device run
	// in list order without it.
	After []int `json:"after,omitempty"`
	// Teams are the groups of a collective, absolute device ids; each team
	// runs the collective independently, ranks in list order.
	Teams [][]int `json:"teams,omitempty"`
	// Devices run a local step, each on its own buffers.
	Devices  []int   `json:"devices,omitempty"`
	Root     *int    `json:"root"`      // absolute device id, rooted types only
	ReduceOp *string `json:"reduce_op"` // reduction types only
	Input    string  `json:"input,omitempty"`
	// Inputs are the buffers of a local step that reads several
	// (Matmul, a binary Pointwise); Input is then empty.
	Inputs []string `json:"inputs,omitempty"`
	Output string   `json:"output"`
	// Axis is the logical axis (non-reduction position) of the input whose
	// sharding the collective changes, when there is one.
	Axis  *int  `json:"axis"`
	Count Count `json:"count"`
	// Dims views the input buffer of a local step as a row-major array.
	Dims []int `json:"dims,omitempty"`
	// Perm orders a Permute's output: output dimension k is input
	// dimension Perm[k].
	Perm []int `json:"perm,omitempty"`
	// ReduceDims are the dimensions of Dims that a LocalReduce combines;
	// the output keeps the other dimensions in order.
	ReduceDims []int `json:"reduce_dims,omitempty"`
	// Valid gives, for Pad and Unpad, each device's real box (in the order
	// of Devices): the leading entries of each dim that hold elements; the
	// rest of the padded buffer are holes.
	Valid [][]int `json:"valid,omitempty"`
	// Fill is what a Pad writes into holes: "0", "1", "-inf" or "inf".
	Fill *string `json:"fill,omitempty"`
	// Func is a Pointwise step's function: add, sub, mul, maximum,
	// minimum, relu, neg, abs or copy.
	Func *string `json:"func,omitempty"`
	// Scalar is, for a Pointwise step of a binary function, the number
	// that stands for one of its two operands, in slot Slot: the step then
	// reads one buffer.
	Scalar *ops.Scalar `json:"scalar,omitempty"`
	// InputDims view each input of a Pointwise step with the rank of Dims
	// (its output's dims), an extent of 1 broadcasting along that dim.
	InputDims [][]int `json:"input_dims,omitempty"`
	// BroadcastB says a Matmul's second input is one [K, N] matrix for
	// every batch rather than [Bt, K, N].
	BroadcastB bool `json:"broadcast_b,omitempty"`
	// TransposeB says a Matmul's second input is stored [Bt, N, K] (or
	// [N, K]): the step reads its transpose, as a linear reads its
	// weight, with no separate pass over memory.
	TransposeB bool `json:"transpose_b,omitempty"`
	// SendCounts are an AllToAllV's split sizes, the same for every team:
	// member k's input is cut, in order, into chunks of SendCounts[k][r]
	// elements, chunk r going to member r; member r's output is the
	// chunks it receives in member order. Row k sums to count.input,
	// column r to count.output.
	SendCounts [][]int `json:"send_counts,omitempty"`
	// Offsets are, for a Lookup, each device's first row of the table (in
	// the order of Devices): its table block holds rows Offsets[k] to
	// Offsets[k] + V - 1; for a ScatterAdd, of its output's block alike. For a Tril, each device's diagonal of its block
	// (dims [Bt, R, C]): tril's diagonal plus the block's first row minus
	// its first column, so that the block keeps the entries the whole
	// tensor's tril keeps.
	Offsets []int `json:"offsets,omitempty"`
	// Windows are a Concat's: dims [outer, N, inner] view its output, and
	// windows[k] = [m, start, len] views input k as [outer, m, inner] and
	// takes its entries start to start+len along the middle dim, written
	// after those of the inputs before it (the lens sum to N).
	Windows [][]int `json:"windows,omitempty"`
	Bytes   *Bytes  `json:"bytes,omitempty"`
}

// The streams a step runs on when its Stream is empty.
const (
	StreamCompute = "compute"
	StreamComm    = "comm"
)

// StreamName is the stream the step runs on: Stream, or its kind's own.
func (s *Step) StreamName() string {
	switch {
	case s.Stream != "":
		return s.Stream
	case s.Kind == KindCollective:
		return StreamComm
	}
	return StreamCompute
}

// Operands returns the buffers the step reads, in order, whichever field
// holds them: Inputs for a step that reads several, else Input.
func (s *Step) Operands() []string {
	if len(s.Inputs) > 0 {
		return s.Inputs
	}
	return []string{s.Input}
}

// Count is the number of elements in one device's input and output buffer
// of a step (see docs/plan.md for rooted collectives).
type Count struct {
	Input  int `json:"input"`
	Output int `json:"output"`
}

// Bytes is what one device sends and receives in a step: the largest over
// devices.
type Bytes struct {
	SentPerDevice     int64 `json:"sent_per_device"`
	ReceivedPerDevice int64 `json:"received_per_device"`
	// LowerBound is what the busiest device must receive in this step
	// because it does not hold it yet (docs/lowering.md, "Lower bounds").
	LowerBound int64 `json:"lower_bound"`
}

// Summary totals a plan.
type Summary struct {
	Collectives int            `json:"collectives"`
	LocalSteps  int            `json:"local_steps"`
	ByType      map[string]int `json:"by_type"`
	// BytesReceivedMax is the largest total, over devices, of the bytes a
	// device receives in the whole plan.
	BytesReceivedMax int64 `json:"bytes_received_max"`
	// BytesLowerBound is the largest total, over devices, of the bytes a
	// device must receive for the plan's ops whatever the plan.
	BytesLowerBound int64 `json:"bytes_lower_bound"`
	// BytesRatio is BytesReceivedMax / BytesLowerBound (1 when both are 0,
	// null when only the bound is 0).
	BytesRatio *float64 `json:"bytes_ratio"`
}

// Remade returns the forward tensor that the tensor name of a training
// step's plan stands for when the backward makes it again rather than
// keeping the forward's (docs/training.md, "Recomputation"): t for
// y.grad/recomputed_t, x for y.grad/regathered_x (regathered true); ""
// for any other tensor.
func Remade(name string) (t string, regathered bool) { return ops.Remade(name) }
