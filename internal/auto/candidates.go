package auto

import (
	"fmt"
	"strings"

	"github.com/nvcomm/nvcomm/internal/ir"
	"github.com/nvcomm/nvcomm/internal/shard"
)

// A sharding is one placement per axis of the tensor's mesh, in mesh order.
type sharding []shard.Placement

// String writes s as a fusion file does: [Shard(0), Replicate()].
func (s sharding) String() string {
	parts := make([]string, len(s))
	for i, p := range s {
		parts[i] = p.String()
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// describe writes option s of a tensor for the decisions' table: as a
// fusion file does, but for a produced tensor whose op combines its terms
// across a mesh axis (a Partial option), its complete values' placements
// and the device types the op reduces over — Partial in a fusion file
// means pending terms, which no option leaves.
func (s sharding) describe(produced bool) string {
	held := s.held(produced)
	var types []string
	names := shard.DeviceTypeNames() // DIDx is the last mesh axis
	for i, p := range s {
		if produced && p.Kind == shard.Partial && len(s)-1-i < len(names) {
			types = append(types, names[len(s)-1-i])
		}
	}
	if len(types) == 0 {
		return held.String()
	}
	return held.String() + " reduced over " + strings.Join(types, " and ") + " by its op"
}

// held is the sharding in which a consumer reads a tensor: a produced
// tensor's Partial means the op that produced it combined its terms across
// the devices (docs/fusion.md, "placements"), so its values are complete
// and replicated along that mesh axis. A fusion input's Partial is pending
// terms, and stays.
func (s sharding) held(produced bool) sharding {
	if !produced {
		return s
	}
	out := make(sharding, len(s))
	for i, p := range s {
		if p.Kind == shard.Partial {
			p = shard.Placement{Kind: shard.Replicate}
		}
		out[i] = p
	}
	return out
}

// candidates lists the shardings a decision tensor may take on its mesh:
// per mesh axis Replicate, Shard(d) for every dim at least as long as the
// axis has devices (uneven shards are padded), and for the output of a
// contraction or a reduction Partial of the op it combines with, at most
// one per tensor. Replicate comes first, so that ties go to it.
func candidates(t *ir.Tensor) []sharding {
	shape, mesh := t.Shape(), t.Mesh
	var partial string
	if op := t.Producer; op != nil && (op.Kind.IsContraction() || op.Kind.IsReduction()) {
		partial = "sum"
		if op.Kind.IsReduction() {
			partial = string(op.Kind)
		}
	}
	perAxis := make([][]shard.Placement, mesh.Rank())
	for i, n := range mesh.Shape {
		perAxis[i] = []shard.Placement{{Kind: shard.Replicate}}
		for d, e := range shape {
			if e >= n {
				perAxis[i] = append(perAxis[i], shard.Placement{Kind: shard.Shard, Dim: d})
			}
		}
		if partial != "" && n > 1 {
			perAxis[i] = append(perAxis[i], shard.Placement{Kind: shard.Partial, Op: partial})
		}
	}
	var out []sharding
	var walk func(i int, cur sharding)
	walk = func(i int, cur sharding) {
		if i == len(perAxis) {
			if fits(cur, shape, mesh.Shape) {
				out = append(out, append(sharding(nil), cur...))
			}
			return
		}
		for _, p := range perAxis[i] {
			walk(i+1, append(cur, p))
		}
	}
	walk(0, nil)
	return out
}

// fits reports whether s has at most one Partial and leaves every device
// a non-empty block of each sharded dim.
func fits(s sharding, shape, meshShape []int) bool {
	partials := 0
	ways := make([]int, len(shape))
	for i := range ways {
		ways[i] = 1
	}
	for i, p := range s {
		switch p.Kind {
		case shard.Partial:
			partials++
		case shard.Shard:
			ways[p.Dim] *= meshShape[i]
		}
	}
	for d, w := range ways {
		if w > shape[d] {
			return false
		}
	}
	return partials <= 1
}

// localBytes is what one device holds of a tensor of the given shape and
// dtype under s: each dim split by its mesh axes in mesh order, uneven
// shards rounded up (the padded block), a Partial held complete.
func localBytes(s sharding, shape, meshShape []int, dtype ir.DType) int64 {
	local := append([]int(nil), shape...)
	for i, p := range s {
		if p.Kind == shard.Shard {
			local[p.Dim] = (local[p.Dim] + meshShape[i] - 1) / meshShape[i]
		}
	}
	n := int64(dtype.Size())
	for _, e := range local {
		n *= int64(e)
	}
	return n
}

// parseSharding reads a placements list as written in a fusion file.
func parseSharding(items []string) (sharding, error) {
	var s sharding
	for _, it := range items {
		p, err := shard.ParsePlacement(it)
		if err != nil {
			return nil, fmt.Errorf("%s", err.Msg)
		}
		s = append(s, p)
	}
	return s, nil
}
