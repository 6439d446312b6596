package plan

// The writers of the plan's types. Each writes the fields of its struct in
// declaration order, under their json tags, and follows encoding/json's
// rules: an omitempty field is left out when zero (nil, empty or false),
// any other nil pointer, slice or map is null. A field added to a struct
// must be added here too: TestEncodeMatchesReference fills every field of
// random plans and compares with encoding/json.

func (e *encoder) plan(p *Plan) {
	e.object(func() {
		e.key("format")
		e.int(p.Format)
		e.key("fusion")
		e.str(p.Fusion)
		e.key("policy")
		e.str(p.Policy)
		if p.Objective != "" {
			e.key("objective")
			e.str(p.Objective)
		}
		e.key("meshes")
		e.meshes(p.Meshes)
		e.key("tensors")
		if p.Tensors == nil {
			e.null()
		} else {
			e.list(len(p.Tensors), func(i int) { e.tensor(&p.Tensors[i]) })
		}
		e.key("ops")
		if p.Ops == nil {
			e.null()
		} else {
			e.list(len(p.Ops), func(i int) { e.op(&p.Ops[i]) })
		}
		e.key("steps")
		if p.Steps == nil {
			e.null()
		} else {
			e.list(len(p.Steps), func(i int) { e.step(&p.Steps[i]) })
		}
		e.key("summary")
		e.summary(&p.Summary)
	})
}

func (e *encoder) meshes(ms map[string]Mesh) {
	if ms == nil {
		e.null()
		return
	}
	e.object(func() {
		for _, name := range sortedKeys(ms) {
			m := ms[name]
			e.mapKey(name)
			e.object(func() {
				e.key("shape")
				e.ints(m.Shape)
				e.key("devices")
				e.ints(m.Devices)
			})
		}
	})
}

func (e *encoder) tensor(t *Tensor) {
	e.object(func() {
		e.key("name")
		e.str(t.Name)
		e.key("dtype")
		e.str(t.DType)
		e.key("mesh")
		e.str(t.Mesh)
		e.key("shape")
		e.ints(t.Shape)
		if len(t.ReductionAxes) > 0 {
			e.key("reduction_axes")
			e.ints(t.ReductionAxes)
		}
		if len(t.Schedule) > 0 {
			e.key("schedule")
			e.list(len(t.Schedule), func(i int) { e.scheduleStep(&t.Schedule[i]) })
		}
		if len(t.Allocation) > 0 {
			e.key("allocation")
			e.ints(t.Allocation)
		}
		e.key("sharding")
		e.shardings(t.Sharding)
		e.key("local_shape")
		e.ints(t.LocalShape)
		if len(t.PaddedShape) > 0 {
			e.key("padded_shape")
			e.ints(t.PaddedShape)
		}
		e.key("layout")
		e.ints(t.Layout)
		if t.Propagated {
			e.key("propagated")
			e.bool(true)
		}
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
				e.key("axis")
				e.int(s.Merge.Axis)
			})
		}
		if len(s.Reorder) > 0 {
			e.key("reorder")
			e.ints(s.Reorder)
		}
		if p := s.Parallelize; p != nil {
			e.key("parallelize")
			e.object(func() {
				e.key("axis")
				e.int(p.Axis)
				e.key("type")
				e.str(p.Type)
			})
		}
	})
}

func (e *encoder) splitArgs(a *SplitArgs) {
	e.object(func() {
		e.key("axis")
		e.int(a.Axis)
		e.key("factor")
		e.int(a.Factor)
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
			e.key("type")
			e.str(s.Type)
			e.key("logical_axis")
			e.int(s.LogicalAxis)
			if s.ShapeAxis != nil {
				e.key("shape_axis")
				e.int(*s.ShapeAxis)
			}
			e.key("kind")
			e.str(s.Kind)
			if len(s.LogicalAxes) > 0 {
				e.key("logical_axes")
				e.ints(s.LogicalAxes)
			}
		})
	})
}

func (e *encoder) op(o *Op) {
	e.object(func() {
		e.key("index")
		e.int(o.Index)
		e.key("op")
		e.str(o.Op)
		if o.Input != "" {
			e.key("input")
			e.str(o.Input)
		}
		if len(o.Inputs) > 0 {
			e.key("inputs")
			e.strs(o.Inputs)
		}
		e.key("output")
		e.str(o.Output)
		e.key("axis")
		e.optInt(o.Axis)
		if len(o.Axes) > 0 {
			e.key("axes")
			e.ints(o.Axes)
		}
	})
}

func (e *encoder) step(s *Step) {
	e.object(func() {
		e.key("id")
		e.int(s.ID)
		e.key("op")
		e.int(s.Op)
		e.key("expr")
		e.str(s.Expr)
		e.key("kind")
		e.str(s.Kind)
		e.key("type")
		e.str(s.Type)
		if len(s.Teams) > 0 {
			e.key("teams")
			e.intLists(s.Teams)
		}
		if len(s.Devices) > 0 {
			e.key("devices")
			e.ints(s.Devices)
		}
		e.key("root")
		e.optInt(s.Root)
		e.key("reduce_op")
		e.optStr(s.ReduceOp)
		e.stepBuffers(s)
		e.stepGeometry(s)
		if s.Bytes != nil {
			e.key("bytes")
			e.bytes(s.Bytes)
		}
	})
}

// stepBuffers writes the fields of a step from input to count.
func (e *encoder) stepBuffers(s *Step) {
	if s.Input != "" {
		e.key("input")
		e.str(s.Input)
	}
	if len(s.Inputs) > 0 {
		e.key("inputs")
		e.strs(s.Inputs)
	}
	e.key("output")
	e.str(s.Output)
	e.key("axis")
	e.optInt(s.Axis)
	e.key("count")
	e.object(func() {
		e.key("input")
		e.int(s.Count.Input)
		e.key("output")
		e.int(s.Count.Output)
	})
}

// stepGeometry writes the fields of a step from dims to transpose_b.
func (e *encoder) stepGeometry(s *Step) {
	if len(s.Dims) > 0 {
		e.key("dims")
		e.ints(s.Dims)
	}
	if len(s.Perm) > 0 {
		e.key("perm")
		e.ints(s.Perm)
	}
	if len(s.ReduceDims) > 0 {
		e.key("reduce_dims")
		e.ints(s.ReduceDims)
	}
	if len(s.Valid) > 0 {
		e.key("valid")
		e.intLists(s.Valid)
	}
	if s.Fill != nil {
		e.key("fill")
		e.str(*s.Fill)
	}
	if s.Func != nil {
		e.key("func")
		e.str(*s.Func)
	}
	if len(s.InputDims) > 0 {
		e.key("input_dims")
		e.intLists(s.InputDims)
	}
	if s.BroadcastB {
		e.key("broadcast_b")
		e.bool(true)
	}
	if s.TransposeB {
		e.key("transpose_b")
		e.bool(true)
	}
}

func (e *encoder) bytes(b *Bytes) {
	e.object(func() {
		e.key("sent_per_device")
		e.int64(b.SentPerDevice)
		e.key("received_per_device")
		e.int64(b.ReceivedPerDevice)
		e.key("lower_bound")
		e.int64(b.LowerBound)
	})
}

func (e *encoder) summary(s *Summary) {
	e.object(func() {
		e.key("collectives")
		e.int(s.Collectives)
		e.key("local_steps")
		e.int(s.LocalSteps)
		e.key("by_type")
		e.byType(s.ByType)
		e.key("bytes_received_max")
		e.int64(s.BytesReceivedMax)
		e.key("bytes_lower_bound")
		e.int64(s.BytesLowerBound)
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
		for _, k := range sortedKeys(m) {
			e.mapKey(k)
			e.int(m[k])
		}
	})
}
