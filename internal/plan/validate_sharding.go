package plan

import "slices"

// The checks of a tensor's sharding entries (validate.go).

// checkShardings checks the sharding entries and returns, per non-reduction
// axis, the number of devices that split it, or nil when that is unknown.
func (v *validator) checkShardings(what tensorRef, t *Tensor, info *tensorInfo) []int {
	var divisors []int
	if info.rank >= 0 {
		divisors = make([]int, info.rank)
		for a := range divisors {
			divisors[a] = 1
		}
	}
	seen := make([]bool, len(deviceTypes))
	for k, s := range t.Sharding {
		entry := what
		entry.sharding = k
		if !v.checkSharding(entry, t, s, info, seen) {
			divisors = nil
			continue
		}
		if s.Kind == "merged" {
			divisors = nil // how the devices split each axis is in the schedule
			continue
		}
		if divisors != nil {
			m := info.mesh.Shape
			size := m[len(m)-1-slices.Index(deviceTypes, s.Type)]
			d, ok := mul(divisors[s.LogicalAxis], size)
			if !ok || size < 1 {
				divisors = nil // an invalid mesh, reported there
				continue
			}
			divisors[s.LogicalAxis] = d
		}
	}
	return divisors
}

// checkSharding checks one sharding entry and reports whether it is valid
// and its mesh axis known.
func (v *validator) checkSharding(what tensorRef, t *Tensor, s Sharding, info *tensorInfo, seen []bool) bool {
	ok := true
	switch ti := slices.Index(deviceTypes, s.Type); {
	case ti < 0:
		v.planf("%s: type %q is not DIDx, DIDy or DIDz", what, s.Type)
		ok = false
	case seen[ti]:
		v.planf("%s: %s shards the tensor more than once", what, s.Type)
		ok = false
	case info.mesh == nil:
		seen[ti] = true
		ok = false
	case len(info.mesh.Shape) <= ti:
		seen[ti] = true
		v.planf("%s: mesh %q has no %s axis", what, t.Mesh, s.Type)
		ok = false
	default:
		seen[ti] = true
	}
	if !slices.Contains(shardKinds, s.Kind) {
		v.planf("%s: kind %q is not block, strided, nested or merged", what, s.Kind)
	}
	if (s.Kind == "merged") != (len(s.LogicalAxes) > 0) {
		v.planf("%s: logical_axes must be given exactly for a merged sharding", what)
	}
	for _, a := range s.LogicalAxes {
		if info.rank >= 0 && (a < 0 || a >= info.rank) {
			v.planf("%s: logical_axes %v are not among the %d non-reduction axes", what, s.LogicalAxes, info.rank)
			break
		}
	}
	if len(s.LogicalAxes) > 0 && s.LogicalAxes[0] != s.LogicalAxis {
		v.planf("%s: logical_axis %d is not the first of logical_axes %v", what, s.LogicalAxis, s.LogicalAxes)
	}
	if info.rank < 0 {
		ok = false
	} else if s.LogicalAxis < 0 || s.LogicalAxis >= info.rank {
		v.planf("%s: logical_axis %d is not among the %d non-reduction axes", what, s.LogicalAxis, info.rank)
		ok = false
	} else {
		v.checkShapeAxis(what, s, info.values[s.LogicalAxis])
	}
	return ok
}

// checkShapeAxis checks that shape_axis is given exactly where the
// position in shape of logical_axis differs from it, and is that position.
func (v *validator) checkShapeAxis(what tensorRef, s Sharding, want int) {
	switch {
	case want == s.LogicalAxis && s.ShapeAxis != nil:
		v.planf("%s: shape_axis is given, but logical_axis %d is also its position in shape (give shape_axis only where they differ)", what, s.LogicalAxis)
	case want != s.LogicalAxis && s.ShapeAxis == nil:
		v.planf("%s: logical_axis %d is position %d in shape, which counts the reduction axes: shape_axis %d is missing", what, s.LogicalAxis, want, want)
	case want != s.LogicalAxis && *s.ShapeAxis != want:
		v.planf("%s: shape_axis is %d, but logical_axis %d is position %d in shape", what, *s.ShapeAxis, s.LogicalAxis, want)
	}
}
