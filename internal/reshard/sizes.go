package reshard

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/nvcomm/nvcomm/internal/checked"
	"github.com/nvcomm/nvcomm/internal/ir"
)

// Overflow. ir.Parse bounds every tensor: its elements, padded where uneven
// splits leave holes, times its dtype size fit in int64. lowerPair checks the
// same of the op's factoring (both tensors' padding at once, which can
// exceed either's): every buffer of the op holds a subset of the
// factoring's digits, so a view's size, a step's counts and dims, the bytes
// of one buffer and offsets into it are safe in plain arithmetic. What
// crosses buffers is not, and goes through package checked: a collective's
// bytes times its team size (plan.Traffic), each device's bytes summed over
// steps and ops (received, reduced, bound), and the optimal policy's path
// costs, summed over devices and steps. An overflow fails the op.

// maxBytes is the most bytes nvcomm counts.
const maxBytes = math.MaxInt64

// overflowHint is the remedy for counts that do not fit in int64.
const overflowHint = "nvcomm counts bytes in int64; use smaller tensors or fewer devices"

// overflow fails the op, once, because what does not fit in int64.
func (c lowering) overflow(what string) {
	if c.job.overflowed {
		return
	}
	c.job.overflowed = true
	c.fail(fmt.Sprintf("%s exceed %d, the most nvcomm counts (int64)", what, int64(maxBytes)), overflowHint)
}

// factoringFits reports whether every buffer of the op fits in int64 bytes
// (see above), failing the op when not.
func (c lowering) factoringFits(f *factoring, dtype ir.DType) bool {
	if _, ok := ir.Bytes(f.extents, dtype); ok {
		return true
	}
	c.overflow(fmt.Sprintf("the bytes of the padded extents %s of %s that both tensors' shards tile (an op may hold them all on a device)", fmtShape(f.extents), dtype))
	return false
}

// fmtShape renders a shape as a fusion file writes it: [8, 4].
func fmtShape(shape []int) string {
	s := make([]string, len(shape))
	for i, e := range shape {
		s[i] = strconv.Itoa(e)
	}
	return "[" + strings.Join(s, ", ") + "]"
}

// addBytes adds n bytes to device d's total in m, failing the op when the
// sum overflows; what names the total for the message.
func (c lowering) addBytes(m map[int]int64, d int, n int64, what string) {
	s, ok := checked.Add(m[d], n)
	if !ok {
		c.overflow(fmt.Sprintf("the bytes device %d %s", d, what))
		return
	}
	m[d] = s
}
