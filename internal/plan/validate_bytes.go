package plan

import (
	"math"
	"strconv"

	"github.com/nvcomm/nvcomm/internal/checked"
)

// checkTraffic checks a collective's bytes against what [Traffic] computes
// from the step itself, and books what each device receives for the
// summary. It runs only on a step with no other problem.
func (v *validator) checkTraffic(i int, s *Step, op *Op) {
	if s.Kind != KindCollective || s.Bytes == nil || op == nil {
		return
	}
	in := v.tensor(valueOperand(op)) // an op's values share one dtype
	if in == nil {
		return
	}
	if !v.opOK[s.Op] {
		v.trafficUnknown = true // the op's dtypes or tensors are in question
		return
	}
	elem := DTypeSize(in.t.DType)
	if elem == 0 {
		v.trafficUnknown = true // an unknown dtype, reported with the tensor
		return
	}
	holders := v.holders(s.Input)
	if v.sent == nil {
		v.sent, v.recv = newDeviceBook(&v.devIndex), newDeviceBook(&v.devIndex)
	}
	sent, recv := v.sent, v.recv
	sent.reset()
	recv.reset()
	ok := trafficInto(s, int64(elem), func(d int) bool { return holders != nil && holders.has(&v.devIndex, d) }, sent, recv)
	if !ok {
		v.stepf(i, "the bytes of count {%d, %d} overflow a 64-bit integer", s.Count.Input, s.Count.Output)
		v.trafficUnknown = true
		return
	}
	want := Bytes{SentPerDevice: sent.largest(), ReceivedPerDevice: recv.largest()}
	if got := s.Bytes; got.SentPerDevice != want.SentPerDevice || got.ReceivedPerDevice != want.ReceivedPerDevice {
		v.stepf(i, "bytes are {sent %d, received %d} per device, but the step moves {%d, %d} (docs/plan.md, Bytes)",
			got.SentPerDevice, got.ReceivedPerDevice, want.SentPerDevice, want.ReceivedPerDevice)
	}
	for _, d := range recv.touched {
		total, ok := checked.Add(v.received.get(d), recv.get(d))
		if !ok {
			v.stepf(i, "the bytes device %d receives in the plan overflow a 64-bit integer", d)
			v.trafficUnknown = true
			return
		}
		v.received.set(d, total)
	}
}

// checkBytesReceivedMax checks bytes_received_max against the steps' bytes
// per device, once every step's traffic is known.
func (v *validator) checkBytesReceivedMax() {
	if v.trafficUnknown {
		return // a step has problems; its traffic is not certain
	}
	want, got := v.received.largest(), v.p.Summary.BytesReceivedMax
	if got != want {
		v.planf("summary: bytes_received_max is %d, but the steps make a device receive at most %d bytes", got, want)
	}
}

// checkBytesRatio checks bytes_lower_bound's sign and bytes_ratio against
// the two totals it divides.
func (v *validator) checkBytesRatio() {
	sum := v.p.Summary
	if sum.BytesLowerBound < 0 {
		v.planf("summary: bytes_lower_bound is %d, want >= 0", sum.BytesLowerBound)
		return
	}
	want := BytesRatio(sum.BytesReceivedMax, sum.BytesLowerBound)
	if !sameRatio(want, sum.BytesRatio) {
		v.planf("summary: bytes_ratio is %s, want %s (bytes_received_max / bytes_lower_bound, to 3 decimals)",
			ratioText(sum.BytesRatio), ratioText(want))
	}
}

// BytesRatio is a plan's bytes_ratio: received / bound rounded to three
// decimals, 1 when both are 0, and nil (null) when only the bound is 0.
func BytesRatio(received, bound int64) *float64 {
	switch {
	case bound > 0:
		r := math.Round(float64(received)/float64(bound)*1000) / 1000
		return &r
	case received == 0:
		r := 1.0
		return &r
	}
	return nil
}

func sameRatio(a, b *float64) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func ratioText(r *float64) string {
	if r == nil {
		return "null"
	}
	return strconv.FormatFloat(*r, 'g', -1, 64)
}
