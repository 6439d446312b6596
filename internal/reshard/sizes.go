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

// addBytes adds n bytes to device d's total in book b, failing the op
// when the sum overflows (and recording the booking while an op memo
// records the job, opmemo.go).
func (c lowering) addBytes(b book, d int, n int64) {
	if c.job.opRec != nil {
		c.job.opRec.books = append(c.job.opRec.books, booking{b, d, n})
	}
	m := c.ledger.book(b)
	s, ok := checked.Add(m[d], n)
	if !ok {
		c.overflow(fmt.Sprintf("the bytes device %d %s", d, bookWhat[b]))
		return
	}
	m[d] = s
}

// book names one of the ledger's per-device byte counts.
type book uint8

// The books: what each device receives over the plan, and what it must.
const (
	bookReceived book = iota
	bookBound
)

// bookWhat is what a book counts, as an overflow of it says.
var bookWhat = [...]string{bookReceived: "receives over the plan", bookBound: "must receive over the plan"}

// book returns the ledger's count b.
func (l *Ledger) book(b book) map[int]int64 {
	if b == bookBound {
		return l.bound
	}
	return l.received
}
