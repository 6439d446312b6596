package explain

import (
	"fmt"
	"strings"
)

// maxRunsListed bounds the runs of an axis that indexSet walks: beyond it,
// a device's indices are described by a formula instead of listed.
const maxRunsListed = 1 << 16

// indexSet describes the indices of value axis a that the device with mesh
// coordinates c holds, in Python's slice notation: ":" for all of them,
// "8:16" for a block, "1:16:4" for every fourth from 1, a list of blocks
// otherwise; "none" when it holds none (an uneven split's last devices).
func (s *sharding) indexSet(c []int, a int) string {
	ax := s.Axes[a]
	if len(ax.Digits) == 0 {
		return ":"
	}
	if ax.runs() > maxRunsListed {
		return s.formula(c, ax)
	}
	var spans []span
	for r := range ax.runs() {
		sp := ax.run(r)
		if !s.holds(c, ax, sp.Lo) {
			continue
		}
		if n := len(spans); n > 0 && spans[n-1].Hi == sp.Lo {
			spans[n-1].Hi = sp.Hi
		} else {
			spans = append(spans, sp)
		}
	}
	return spansText(spans, ax.Extent)
}

// spansText renders disjoint increasing intervals of an axis of extent n.
func spansText(spans []span, n int) string {
	switch {
	case len(spans) == 0:
		return "none"
	case len(spans) == 1 && spans[0] == span{0, n}:
		return ":"
	case len(spans) == 1:
		return fmt.Sprintf("%d:%d", spans[0].Lo, spans[0].Hi)
	}
	if step, ok := singlesStep(spans); ok {
		return fmt.Sprintf("%d:%d:%d", spans[0].Lo, spans[len(spans)-1].Hi, step)
	}
	parts := make([]string, 0, 4)
	for i, sp := range spans {
		if i == 3 {
			parts = append(parts, fmt.Sprintf("… (%d blocks)", len(spans)))
			break
		}
		parts = append(parts, fmt.Sprintf("%d:%d", sp.Lo, sp.Hi))
	}
	return strings.Join(parts, ", ")
}

// singlesStep reports whether spans are single indices equally spaced, and
// their spacing.
func singlesStep(spans []span) (int, bool) {
	step := spans[1].Lo - spans[0].Lo
	for i, sp := range spans {
		if sp.Hi != sp.Lo+1 || (i > 0 && sp.Lo-spans[i-1].Lo != step) {
			return 0, false
		}
	}
	return step, true
}

// formula describes a device's indices along ax by the digits' equations,
// for axes with too many runs to list.
func (s *sharding) formula(c []int, ax axisSharding) string {
	parts := make([]string, 0, len(ax.Digits))
	for _, d := range ax.Digits {
		dim := meshDim(s.Mesh, d.Type)
		if dim < 0 {
			continue
		}
		if d.Stride == 1 {
			parts = append(parts, fmt.Sprintf("i %% %d = %d", d.Extent, c[dim]))
		} else {
			parts = append(parts, fmt.Sprintf("(i / %d) %% %d = %d", d.Stride, d.Extent, c[dim]))
		}
	}
	return "i < " + fmt.Sprint(ax.Extent) + " with " + strings.Join(parts, " and ")
}
