package sim

import (
	"fmt"
	"slices"
)

// This file checks an op whose output holds pending terms (its plan
// tensor's partial field set, docs/plan.md): each device holds one term,
// which depends on how the op split the axis it combines over, so the
// devices' buffers are not compared with a reference of their own. The
// terms are gathered from every device, those that two devices hold
// compared with each other, and their reduction over the terms axis
// compared with the reference of the op, which holds its combined values.
// A reduction over axis 0 that reads such a tensor (a set from it) then
// has that reference as its own.

// isPending reports whether the tensor called name holds pending terms an
// op produced.
func (w *world) isPending(name string) bool {
	t, ok := w.tensors[name]
	return ok && t.pending
}

// pendingDomain is the domain of the pending terms of an op whose own
// output domain is d: the terms axis of extent terms, then d's
// non-reduction axes.
func pendingDomain(d logicalDomain, terms int) logicalDomain {
	shape := []int{terms}
	for k, e := range d.shape {
		if !slices.Contains(d.reduction, k) {
			shape = append(shape, e)
		}
	}
	return logicalDomain{shape: shape}
}

// checkPending compares the reduction of the terms of op's output, from
// every device's buffer, with the reference's values.
func (w *world) checkPending(m *machine, ref map[string]vec, op, step int) *Mismatch {
	t := w.opOutputs[op]
	name, held, shape := t.t.Name, m.named(t.t.Name), t.shard.shape
	terms := make([]float64, product(shape))
	have := make([]bool, len(terms))
	for _, d := range t.mesh.Devices {
		buf, ok := held[d]
		if !ok {
			mis := newMismatch(op, step, name, d, 0, 0)
			mis.Reason = fmt.Sprintf("device %d holds no buffer %q", d, name)
			return mis
		}
		if mis := gatherTerms(t.shard, d, buf, terms, have, &w.scratch); mis != nil {
			mis.Op, mis.Step, mis.Tensor, mis.Device = op, step, name, d
			return mis
		}
	}
	if k := slices.Index(have, false); k >= 0 {
		mis := newMismatch(op, step, name, -1, 0, 0)
		mis.LogicalIndex, mis.Reason = unflatten(k, shape), "no device holds this term"
		return mis
	}
	got, want := reduceAxis(t.t.Partial, terms, shape, 0), ref[name]
	for k, v := range got {
		if e := want.value(k); e != v {
			mis := newMismatch(op, step, name, -1, e, v)
			mis.LogicalIndex = unflatten(k, shape[1:])
			mis.Reason = fmt.Sprintf("the %s of its pending terms differs", t.t.Partial)
			return mis
		}
	}
	return nil
}

// gatherTerms copies device's buffer buf of a tensor of pending terms
// into terms, row-major over its logical shape, marking have; a term that
// an earlier device put there with another value, or a buffer of another
// size than the shard, is a mismatch (its op, step, tensor and device left
// for the caller).
func gatherTerms(s *sharder, device int, buf vec, terms []float64, have []bool, scratch *[]int) *Mismatch {
	n := 0
	var mis *Mismatch
	s.eachRun(device, scratch, func(r run) bool {
		for i := range r.n {
			if n+i >= buf.len() {
				break
			}
			off, v := r.at(i), buf.value(n+i)
			if have[off] && terms[off] != v && mis == nil {
				mis = &Mismatch{FlatIndex: n + i, LogicalIndex: unflatten(off, s.shape), Expected: Value(terms[off]), Actual: Value(v),
					Reason: "two devices hold this term with different values"}
			}
			terms[off], have[off] = v, true
		}
		n += r.n
		return true
	})
	if mis == nil && n != buf.len() {
		mis = &Mismatch{FlatIndex: -1, Expected: Value(n), Actual: Value(buf.len()),
			Reason: fmt.Sprintf("size: the buffer has %d elements, the shard has %d", buf.len(), n)}
	}
	return mis
}
