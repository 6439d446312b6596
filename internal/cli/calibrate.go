package cli

import (
	"bytes"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/nvcomm/nvcomm/internal/cost"
	"github.com/nvcomm/nvcomm/internal/export"
)

type calibrateOptions struct {
	output         string
	fit            string
	name           string
	devicesPerNode int
	minBytes       int64
}

func newCalibrateCmd() *cobra.Command {
	o := &calibrateOptions{}
	cmd := &cobra.Command{
		Use:   "calibrate [--fit MEASUREMENTS.csv]",
		Short: "Measure collectives on the GPUs at hand and fit the cost model's topology file",
		Long: `calibrate, without --fit, writes a Python program that measures the collectives
with torch.distributed on the devices at hand and writes a calibration CSV (to
calibrate.py unless -o says otherwise; -o - for standard output):

  nvcomm calibrate
  torchrun --nproc_per_node=8 calibrate.py --out calibration.csv

With --fit it fits the cost model t = max(λ, min(α + S·f(n)/busbw, α_ll +
S·f(n)/busbw_ll)) to such a CSV (nccl-tests units; the floor λ and the
low-latency line only where the samples need them) and writes the topology
file that simulate --topology and export torch --topology read; the fit,
sample by sample, goes to standard error:

  nvcomm calibrate --fit calibration.csv -o topology.yaml

See docs/export.md.`,
		Example: `  nvcomm calibrate
  torchrun --nproc_per_node=8 calibrate.py --out calibration.csv
  nvcomm calibrate --fit calibration.csv -o topology.yaml
  nvcomm simulate fusion.yaml --topology topology.yaml`,
		Args:              exactArgs(0),
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE:              func(cmd *cobra.Command, _ []string) error { return o.run(cmd) },
	}
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "write to `FILE` (atomically; - for standard output): the program, by default to "+calibrateProgram+", or with --fit the topology, by default to standard output")
	cmd.Flags().StringVar(&o.fit, "fit", "", "fit a topology to the calibration CSV `FILE` (- for standard input)")
	cmd.Flags().StringVar(&o.name, "name", "fitted", "with --fit: the fitted topology's `NAME`")
	cmd.Flags().IntVar(&o.devicesPerNode, "devices-per-node", 8, "with --fit: the fitted topology's number of devices per node, `N`")
	cmd.Flags().Int64Var(&o.minBytes, "min-bytes", cost.DefaultMinFitBytes, "with --fit: fit messages of at least `N` bytes")
	fileFlag(cmd, "output")
	fileFlag(cmd, "fit", "csv")
	return cmd
}

func (o *calibrateOptions) run(cmd *cobra.Command) error {
	if o.fit == "" {
		return o.writeProgram(cmd)
	}
	if o.devicesPerNode < 1 {
		return usageError{fmt.Errorf("--devices-per-node must be at least 1, got %d", o.devicesPerNode)}
	}
	if o.minBytes < 1 {
		return usageError{fmt.Errorf("--min-bytes must be at least 1, got %d", o.minBytes)}
	}
	name, src, err := readInput(cmd, o.fit)
	if err != nil {
		return err
	}
	samples, err := cost.ReadSamples(bytes.NewReader(src))
	if err != nil {
		return reportIn(cmd, name, err)
	}
	t, points, err := cost.Fit(samples, cost.FitOptions{Name: o.name, DevicesPerNode: o.devicesPerNode, MinBytes: o.minBytes,
		Source: fmt.Sprintf("nvcomm calibrate --fit %s (minimax relative error, messages >= %d bytes, outliers dropped)", name, o.minBytes)})
	if err != nil {
		return reportIn(cmd, name, err)
	}
	out, err := t.Marshal()
	if err != nil {
		return err
	}
	if err := writeFit(cmd.ErrOrStderr(), points); err != nil {
		return err
	}
	return writeOutput(cmd, o.output, out)
}

// calibrateProgram is where calibrate writes its program without -o: 266
// lines of Python are for a file, not a terminal.
const calibrateProgram = "calibrate.py"

// writeProgram writes the calibration program to -o, or to calibrate.py
// and says so on standard error, with how to run it.
func (o *calibrateOptions) writeProgram(cmd *cobra.Command) error {
	out := o.output
	if out == "" {
		out = calibrateProgram
	}
	if err := writeOutput(cmd, out, export.CalibrationProgram()); err != nil {
		return err
	}
	if out != "-" {
		fmt.Fprintf(cmd.ErrOrStderr(), "nvcomm: wrote %s; run it on the GPUs to measure: torchrun --nproc_per_node=N %s --out calibration.csv\n", out, out)
	}
	return nil
}

// writeFit prints every sample with the fitted model's prediction (a
// matmul's "bytes" are its floating-point operations).
func writeFit(w io.Writer, points []cost.FitPoint) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "collective\tlink\tranks\tbytes\tmeasured (us)\tpredicted (us)\terror\tused\n")
	for _, p := range points {
		used := "yes"
		switch {
		case p.Outlier:
			used = "outlier"
		case !p.Used:
			used = "small"
		}
		name := p.Collective
		if p.Link == cost.LinkCompute {
			name = "matmul " + name // its "bytes" are floating-point operations
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%.1f\t%.1f\t%+.0f%%\t%s\n", name, p.Link, p.Ranks, p.Bytes,
			p.Seconds*1e6, p.Predicted*1e6, 100*p.RelErr(), used)
	}
	return tw.Flush()
}
