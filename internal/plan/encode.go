package plan

import (
	"maps"
	"slices"

	"github.com/nvcomm/nvcomm/internal/ops"
)

// The writers of the plan's types. Each writes the fields of its struct in
// declaration order, under their json tags, and follows encoding/json's
// rules: an omitempty field is left out when zero (nil, empty or false),
// any other nil pointer, slice or map is null. A field added to a struct
// must be added here too: TestEncodeMatchesReference fills every field of
// random plans and compares with encoding/json.

func (e *encoder) meshes(ms map[string]Mesh) {
	if ms == nil {
		e.null()
		return
	}
	e.object(func() {
		for _, name := range slices.Sorted(maps.Keys(ms)) {
			m := ms[name]
			e.mapKey(name)
			e.object(func() {
				e.intsField("shape", m.Shape)
				e.intsField("devices", m.Devices)
			})
		}
	})
}

func (e *encoder) tensor(t *Tensor) {
	e.wideObject(func() {
		e.strField("name", t.Name)
		e.strField("dtype", t.DType)
		e.strField("mesh", t.Mesh)
		e.intsField("shape", t.Shape)
		e.intsIf("reduction_axes", t.ReductionAxes)
		if len(t.Schedule) > 0 {
			e.key("schedule")
			e.list(len(t.Schedule), func(i int) { e.scheduleStep(&t.Schedule[i]) })
		}
		e.intsIf("allocation", t.Allocation)
		e.key("sharding")
		e.shardings(t.Sharding)
		e.intsField("local_shape", t.LocalShape)
		e.intsIf("padded_shape", t.PaddedShape)
		e.intsField("layout", t.Layout)
		e.strIf("partial", t.Partial)
		e.trueIf("propagated", t.Propagated)
	})
}

func (e *encoder) scheduleStep(s *ScheduleStep) {
	e.object(func() {
		if s.Split != nil {
			e.key("split")
			e.splitArgs(s.Split)
		}
		if s.OuterSplit != nil {
			e.key("outer_split")
			e.splitArgs(s.OuterSplit)
		}
		if s.Merge != nil {
			e.key("merge")
			e.object(func() {
				e.intField("axis", s.Merge.Axis)
			})
		}
		e.intsIf("reorder", s.Reorder)
		if p := s.Parallelize; p != nil {
			e.key("parallelize")
			e.object(func() {
				e.intField("axis", p.Axis)
				e.strField("type", p.Type)
			})
		}
	})
}

func (e *encoder) splitArgs(a *SplitArgs) {
	e.object(func() {
		e.intField("axis", a.Axis)
		e.intField("factor", a.Factor)
	})
}

func (e *encoder) shardings(ss []Sharding) {
	if ss == nil {
		e.null()
		return
	}
	e.list(len(ss), func(i int) {
		s := &ss[i]
		e.object(func() {
			e.strField("type", s.Type)
			e.intField("logical_axis", s.LogicalAxis)
			if s.ShapeAxis != nil {
				e.intField("shape_axis", *s.ShapeAxis)
			}
			e.strField("kind", s.Kind)
			e.intsIf("logical_axes", s.LogicalAxes)
		})
	})
}

func (e *encoder) op(o *Op) {
	e.object(func() {
		e.intField("index", o.Index)
		e.strField("op", o.Op)
		e.strIf("input", o.Input)
		e.strsIf("inputs", o.Inputs)
		e.strField("output", o.Output)
		e.optIntField("axis", o.Axis)
		e.intsIf("axes", o.Axes)
		for _, v := range o.Attrs {
			e.attr(v)
		}
		e.scalarIf(o.Scalar)
		if of := o.Of; of != nil {
			e.key("of")
			e.of(of)
		}
		if in := o.Inserted; in != nil {
			e.key("inserted")
			e.object(func() {
				e.intField("for", in.For)
				e.intsIf("operands", in.Operands)
				if in.Output {
					e.key("output")
					e.bool(true)
				}
			})
		}
		e.optIntIf("within", o.Within)
	})
}

// scalarIf writes an op's or a step's number operand, when it has one.
func (e *encoder) scalarIf(s *ops.Scalar) {
	if s == nil {
		return
	}
	e.key("scalar")
	e.object(func() {
		e.intField("slot", s.Slot)
		e.key("value")
		e.float(s.Value)
	})
}

// of writes the composite op an op's expansion comes from.
func (e *encoder) of(of *Of) {
	e.object(func() {
		e.strField("op", of.Op)
		e.key("inputs")
		e.strs(of.Inputs)
		e.strField("output", of.Output)
		if of.Axis != nil {
			e.intField("axis", *of.Axis)
		}
		e.intsIf("axes", of.Axes)
		if of.Eps != nil {
			e.key("eps")
			e.float(*of.Eps)
		}
		if of.Reduction != "" {
			e.strField("reduction", of.Reduction)
		}
		e.trueIf("causal", of.Causal)
		e.strIf("cp", of.CP)
		e.trueIf("enable_gqa", of.GQA)
		if of.TopK != 0 {
			e.intField("top_k", of.TopK)
		}
		if of.Capacity != 0 {
			e.intField("capacity", of.Capacity)
		}
		if of.Grad {
			e.key("grad")
			e.bool(true)
		}
	})
}

// attr writes an op's attribute v as a field, by its kind.
func (e *encoder) attr(v ops.Value) {
	e.key(string(v.Key))
	switch spec := ops.AttrOf(string(v.Key)); {
	case spec == nil:
		e.null()
	case spec.Kind == ops.IntAttr:
		e.int(v.Int)
	case spec.Kind == ops.IntsAttr:
		e.ints(append([]int{}, v.Ints...)) // [] for none, never null
	case spec.Kind == ops.FloatAttr:
		e.float(v.Float)
	case spec.Kind == ops.BoolAttr:
		e.bool(v.Bool)
	default:
		e.str(v.Str)
	}
}

func (e *encoder) step(s *Step) {
	e.wideObject(func() {
		e.intField("id", s.ID)
		e.intField("op", s.Op)
		e.strField("expr", s.Expr)
		e.strField("kind", s.Kind)
		e.strField("type", s.Type)
		e.strIf("stream", s.Stream)
		e.intsIf("after", s.After)
		e.intListsIf("teams", s.Teams)
		e.intsIf("devices", s.Devices)
		e.optIntField("root", s.Root)
		e.optStrField("reduce_op", s.ReduceOp)
		e.strIf("input", s.Input)
		e.strsIf("inputs", s.Inputs)
		e.strField("output", s.Output)
		e.optIntField("axis", s.Axis)
		e.key("count")
		e.object(func() {
			e.intField("input", s.Count.Input)
			e.intField("output", s.Count.Output)
		})
		e.intsIf("dims", s.Dims)
		e.intsIf("perm", s.Perm)
		e.intsIf("reduce_dims", s.ReduceDims)
		e.intListsIf("valid", s.Valid)
		if s.Fill != nil {
			e.strField("fill", *s.Fill)
		}
		if s.Func != nil {
			e.strField("func", *s.Func)
		}
		e.scalarIf(s.Scalar)
		e.intListsIf("input_dims", s.InputDims)
		e.trueIf("broadcast_b", s.BroadcastB)
		e.trueIf("transpose_b", s.TransposeB)
		e.intListsIf("send_counts", s.SendCounts)
		e.intsIf("offsets", s.Offsets)
		e.intListsIf("windows", s.Windows)
		if s.Bytes != nil {
			e.key("bytes")
			e.bytes(s.Bytes)
		}
	})
}

func (e *encoder) bytes(b *Bytes) {
	e.object(func() {
		e.int64Field("sent_per_device", b.SentPerDevice)
		e.int64Field("received_per_device", b.ReceivedPerDevice)
		e.int64Field("lower_bound", b.LowerBound)
	})
}

func (e *encoder) summary(s *Summary) {
	e.object(func() {
		e.intField("collectives", s.Collectives)
		e.intField("local_steps", s.LocalSteps)
		e.key("by_type")
		e.byType(s.ByType)
		e.int64Field("bytes_received_max", s.BytesReceivedMax)
		e.int64Field("bytes_lower_bound", s.BytesLowerBound)
		e.key("bytes_ratio")
		if s.BytesRatio == nil {
			e.null()
		} else {
			e.float(*s.BytesRatio)
		}
	})
}

func (e *encoder) byType(m map[string]int) {
	if m == nil {
		e.null()
		return
	}
	e.object(func() {
		for _, k := range slices.Sorted(maps.Keys(m)) {
			e.mapKey(k)
			e.int(m[k])
		}
	})
}

// The fields of an object: a key and its value; an If variant leaves the
// field out when the value is empty (omitempty).

func (e *encoder) intField(k string, x int)        { e.key(k); e.int(x) }
func (e *encoder) int64Field(k string, x int64)    { e.key(k); e.int64(x) }
func (e *encoder) strField(k, s string)            { e.key(k); e.str(s) }
func (e *encoder) intsField(k string, xs []int)    { e.key(k); e.ints(xs) }
func (e *encoder) optIntField(k string, x *int)    { e.key(k); e.optInt(x) }
func (e *encoder) optStrField(k string, s *string) { e.key(k); e.optStr(s) }

func (e *encoder) strIf(k, s string) {
	if s != "" {
		e.strField(k, s)
	}
}

func (e *encoder) intsIf(k string, xs []int) {
	if len(xs) > 0 {
		e.intsField(k, xs)
	}
}

func (e *encoder) intListsIf(k string, xss [][]int) {
	if len(xss) > 0 {
		e.key(k)
		e.intLists(xss)
	}
}

func (e *encoder) strsIf(k string, xs []string) {
	if len(xs) > 0 {
		e.key(k)
		e.strs(xs)
	}
}

func (e *encoder) optIntIf(k string, x *int) {
	if x != nil {
		e.intField(k, *x)
	}
}

func (e *encoder) trueIf(k string, b bool) {
	if b {
		e.key(k)
		e.bool(true)
	}
}
