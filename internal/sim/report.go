package sim

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"strconv"
	"text/tabwriter"

	"github.com/nvcomm/nvcomm/internal/plan"
)

// WriteText writes "PASS" or "FAIL: " and the first mismatch, then the
// bytes every step moves and the totals per device, in B, KiB, MiB or GiB
// (plan.Size); the JSON report keeps the raw byte counts.
func (r *Result) WriteText(w io.Writer) error {
	ew := &errWriter{w: w}
	if r.Pass {
		ew.printf("PASS\n")
	} else {
		ew.printf("FAIL: %s\n", r.Mismatch)
	}
	if err := r.writeSteps(ew); err != nil {
		return err
	}
	ew.printf("\n")
	if err := r.writeDevices(ew); err != nil {
		return err
	}
	ew.printf("max received per device: %s\ntotal sent: %s\n", plan.Size(r.MaxReceived), plan.Size(r.TotalSent))
	return ew.err
}

// writeSteps writes one line per step: the bytes one device sends and
// receives at most.
func (r *Result) writeSteps(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "step\ttype\tsent\treceived\n")
	for _, s := range r.Steps {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", s.Step, s.Type, plan.Size(s.Sent), plan.Size(s.Received))
	}
	return tw.Flush()
}

// writeDevices writes the bytes each device receives in the whole plan, in
// the columns a tabwriter would give (padding 2) but line by line: a
// tabwriter holds every line until the end, hundreds of megabytes for a
// million devices.
func (r *Result) writeDevices(w io.Writer) error {
	devs := make([]int, 0, len(r.DeviceReceived))
	width := len("device")
	for d := range r.DeviceReceived {
		devs = append(devs, d)
		width = max(width, len(strconv.Itoa(d)))
	}
	slices.Sort(devs)
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "%-*s%s\n", width+2, "device", "received")
	for _, d := range devs {
		fmt.Fprintf(bw, "%-*d%s\n", width+2, d, plan.Size(r.DeviceReceived[d]))
	}
	return bw.Flush()
}

// String describes the mismatch on one line.
func (m *Mismatch) String() string {
	where := fmt.Sprintf("op %d", m.Op)
	if m.Step >= 0 {
		where += fmt.Sprintf(" (after step %d)", m.Step)
	}
	if m.Device < 0 {
		return fmt.Sprintf("%s, tensor %s: %s", where, m.Tensor, m.Reason)
	}
	where += fmt.Sprintf(", tensor %s, device %d", m.Tensor, m.Device)
	if m.FlatIndex < 0 {
		return fmt.Sprintf("%s: %s", where, m.Reason)
	}
	return fmt.Sprintf("%s, flat index %d, logical index %v: expected %v, actual %v (%s)",
		where, m.FlatIndex, m.LogicalIndex, m.Expected, m.Actual, m.Reason)
}

// errWriter remembers the first write error.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	var n int
	n, e.err = e.w.Write(p)
	return n, e.err
}

func (e *errWriter) printf(format string, args ...any) {
	fmt.Fprintf(e, format, args...)
}
