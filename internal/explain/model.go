package explain

import (
	"strings"

	"github.com/nvcomm/nvcomm/internal/plan"
)

// Model is what explain shows, as data rather than text: the same
// headline, shardings, pictures, steps and reasons that Write prints, for
// renderers of other formats (internal/report's HTML page).
type Model struct {
	Fusion, Policy string
	// Summary is the headline, one line per element: the plan's size, its
	// bytes against the bound, its predicted time, its meshes.
	Summary []string
	Tensors []TensorModel
	Ops     []OpModel
}

// TensorModel is one tensor: where its sharding comes from, its notation
// and the picture of its blocks.
type TensorModel struct {
	Name, DType, Mesh string
	// Shape is the extents of its value (non-reduction) dims.
	Shape []int
	// Origin says where the sharding comes from: "given", "propagated
	// (format 2)" or "inserted by nvcomm".
	Origin string
	// Notation is "placements [Shard(0)]", or nvcomm's notation where
	// DTensor has none.
	Notation string
	Notes    []string
	// Error is why the tensor has no sharding (a schedule that does not
	// replay); the fields below are then empty.
	Error string
	// Exactly one of Grid, Table and NoPicture is set.
	Grid *Grid
	// Table is the device table of a tensor of more than two dims, or of
	// too many blocks to draw: its header row first, then one row per
	// device.
	Table     [][]string
	NoPicture string
}

// ShapeText renders the tensor's shape as explain does: "[8, 16]".
func (t TensorModel) ShapeText() string { return intList(t.Shape) }

// Grid is a 0-, 1- or 2-D tensor's blocks: Rows along dim 0 (one row
// with an empty label for a 1-D tensor), Cols along the last dim, each
// label an index range as a Python slice.
type Grid struct {
	Rows, Cols []string
	Blocks     [][]Block
}

// Block is one block of a grid: the devices that hold it ("0-3", "0,4")
// and the index of that set of devices among the grid's distinct sets,
// which picks its colour.
type Block struct {
	Devices string
	Set     int
}

// OpModel is one op: what it reads and writes and why its sharding
// changes, its steps and its totals.
type OpModel struct {
	Index   int
	Expr    string
	Context []string
	Steps   []StepModel
	// Totals sums the op's bytes and times, as Write's last line of the op.
	Totals string
}

// StepModel is one step as explain's table lists it.
type StepModel struct {
	ID         int
	Type, Kind string
	// Buffers is "input -> output" ("a, b -> c" for several operands).
	Buffers string
	// Team is its teams, each in brackets, or its devices.
	Team string
	// Received and Bound are sizes with units, "-" for a local step.
	Received, Bound string
	// Time is the predicted time with its unit, "-" without a prediction.
	Time string
	Why  string
}

// NewModel explains p as Write does with o (its Tensor and Op filters
// aside: the model has every tensor and op), without colour.
func NewModel(p *plan.Plan, o Options) *Model {
	o.Color, o.Tensor, o.Op = false, "", -1
	e := newExplainer(p, o)
	var b strings.Builder
	e.summary(&b)
	m := &Model{Fusion: p.Fusion, Policy: p.Policy, Summary: strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")}
	for _, t := range p.Tensors {
		m.Tensors = append(m.Tensors, e.tensorModel(t))
	}
	for i, op := range p.Ops {
		m.Ops = append(m.Ops, e.opModel(i, op))
	}
	return m
}

// tensorModel is tensor t's part of the model.
func (e *explainer) tensorModel(t plan.Tensor) TensorModel {
	tm := TensorModel{Name: t.Name, DType: t.DType, Mesh: t.Mesh, Shape: t.Shape}
	s := e.sh[t.Name]
	if s == nil {
		tm.Error = e.errs[t.Name].Error()
		return tm
	}
	red := reduceOpOf(e.p, t.Name)
	tm.Shape, tm.Origin, tm.Notation, tm.Notes = s.valueShape(), e.origin(t), s.notation(red), s.notes(red)
	if len(s.Merged) > 0 {
		tm.NoPicture = noPicture
	} else if g, ok := s.grid(); ok {
		tm.Grid = g.model()
	} else {
		tm.Table = texts(s.tableRows(e.st))
	}
	return tm
}

// texts drops the styles of table cells.
func texts(rows [][]cell) [][]string {
	out := make([][]string, len(rows))
	for r, row := range rows {
		out[r] = make([]string, len(row))
		for i, c := range row {
			out[r][i] = c.text
		}
	}
	return out
}

// model is the grid's exported form.
func (g *grid) model() *Grid {
	m := &Grid{Rows: g.rows, Cols: g.cols}
	for r, labels := range g.labels {
		row := make([]Block, len(labels))
		for c, l := range labels {
			row[c] = Block{Devices: l, Set: g.colour[r][c]}
		}
		m.Blocks = append(m.Blocks, row)
	}
	return m
}

// opModel is op i's part of the model.
func (e *explainer) opModel(i int, op plan.Op) OpModel {
	om := OpModel{Index: i, Expr: op.Expr(), Context: e.opContext(i, op)}
	steps := e.stepsOf(i)
	for k, s := range steps {
		recv, bound := stepSizes(s)
		om.Steps = append(om.Steps, StepModel{ID: s.ID, Type: s.Type, Kind: s.Kind,
			Buffers: strings.Join(s.Operands(), ", ") + " -> " + s.Output, Team: plan.StepDevices(s),
			Received: recv, Bound: bound, Time: e.stepTime(s), Why: e.why(op, steps, k)})
	}
	if len(steps) > 0 {
		om.Totals = e.opTotals(steps)
	}
	return om
}
