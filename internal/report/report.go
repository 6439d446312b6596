// Package report writes a plan as one self-contained HTML page: the
// sharding picture of every tensor (a grid of blocks labelled with the
// devices that hold them, as JAX's visualize_array_sharding draws them),
// the table of steps with their bytes, predicted times and reasons, and the
// predicted timeline, one row per device. The page has its CSS and SVG
// inline, no script and no reference to anything outside it, so it opens
// offline and can be mailed or attached as it is.
//
// The content is internal/explain's (its Model and its Trace), so the page
// says what `nvcomm explain` and `nvcomm trace` say; the output is
// deterministic.
package report

import (
	"bytes"
	_ "embed"
	"fmt"
	"html/template"
	"io"

	"github.com/nvcomm/nvcomm/internal/cost"
	"github.com/nvcomm/nvcomm/internal/explain"
	"github.com/nvcomm/nvcomm/internal/plan"
)

// Options say how to price the plan.
type Options struct {
	// Topology prices the steps and lays out the timeline; nil leaves
	// times and the timeline out.
	Topology *cost.Topology
}

//go:embed report.html.tmpl
var pageSource string

// pageTemplate is the page; its functions format numbers for SVG.
var pageTemplate = template.Must(template.New("report").Funcs(template.FuncMap{"px": px}).Parse(pageSource))

// page is what the template renders.
type page struct {
	Model   *explain.Model
	Tensors []tensorView
	// Timeline is nil when NoTimeline says why there is none.
	Timeline   *timeline
	NoTimeline string
}

// tensorView is a tensor with its grid laid out in pixels.
type tensorView struct {
	explain.TensorModel
	Grid *gridView
}

// Write writes p's report to w.
func Write(w io.Writer, p *plan.Plan, o Options) error {
	pg := &page{Model: explain.NewModel(p, explain.Options{Op: -1, Topology: o.Topology})}
	dc := deviceColours{}
	for _, t := range pg.Model.Tensors {
		pg.Tensors = append(pg.Tensors, tensorView{TensorModel: t, Grid: layoutGrid(t.Grid, dc)})
	}
	pg.Timeline, pg.NoTimeline = newTimeline(p, pg.Model, o.Topology)
	var b bytes.Buffer
	if err := pageTemplate.Execute(&b, pg); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	_, err := w.Write(b.Bytes())
	return err
}

// px renders a length in pixels with one decimal, the same on every
// machine.
func px(x float64) string { return fmt.Sprintf("%.1f", x) }
