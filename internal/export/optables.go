package export

import (
	"cmp"
	"fmt"
	"strings"

	"github.com/nvcomm/nvcomm/internal/ops"
)

// opsMarker is the line of runtime.py that the ops' tables replace.
const opsMarker = "#@ops\n"

// withOps writes the ops' tables from the registry into runtime.py, at
// its marker: what each op computes with torch, the magnitudes that bound
// its rounding, its operand counts and rounding rule, the reductions, and
// the ops whose fusions get simulate's positive data.
// The program then knows every op nvcomm knows, and knows it as the
// compiler and the simulator do.
func withOps(src string) string {
	if strings.Count(src, opsMarker) != 1 {
		panic("export: runtime.py has no single " + strings.TrimSpace(opsMarker) + " line") // embedded, checked by tests
	}
	return strings.Replace(src, opsMarker, opTables(ops.Default.All()), 1)
}

// opTables is the Python source of the ops' tables.
func opTables(all []*ops.Op) string {
	var layer, magnitude, arity, rounding, reduce, attrs, positive, indexes, views, sums []string
	for _, o := range all {
		lo, hi := o.Arity()
		n := fmt.Sprint(lo)
		switch {
		case o.Variadic:
			n = fmt.Sprintf("(%d, None)", lo)
		case lo != hi:
			n = fmt.Sprintf("(%d, %d)", lo, hi)
		}
		arity = append(arity, fmt.Sprintf("%q: %s", o.Name, n))
		if o.Family == ops.Reduction {
			reduce = append(reduce, fmt.Sprintf("%q", o.Name))
		}
		if x := o.Indexed; x != nil {
			indexes = append(indexes, fmt.Sprintf("%q: (%d, %d, %d)", o.Name, x.Indices, x.Table, x.Rows))
		}
		if o.Family == ops.View {
			views = append(views, fmt.Sprintf("%q", o.Name))
		}
		if o.PassesSums {
			sums = append(sums, fmt.Sprintf("%q", o.Name))
		}
		if keys := storedAttrs(o); len(keys) > 0 {
			attrs = append(attrs, fmt.Sprintf("%q: (%s,)", o.Name, strings.Join(keys, ", ")))
		}
		if o.Torch == nil {
			continue
		}
		layer = append(layer, fmt.Sprintf("%q: %s", o.Name, o.Torch.Func))
		magnitude = append(magnitude, fmt.Sprintf("%q: %s", o.Name, cmp.Or(o.Torch.Magnitude, o.Torch.Func)))
		if o.Torch.Rounding != "" {
			rounding = append(rounding, fmt.Sprintf("%q: %q", o.Name, o.Torch.Rounding))
		}
		if o.Torch.PositiveData {
			positive = append(positive, fmt.Sprintf("%q", o.Name))
		}
	}
	var b strings.Builder
	table := func(name string, entries []string) {
		fmt.Fprintf(&b, "%s = {%s}\n", name, strings.Join(entries, ", "))
	}
	table("LAYER_OPS", layer)
	table("LAYER_MAGNITUDES", magnitude)
	table("ARITY", arity)
	table("ROUNDING", rounding)
	fmt.Fprintf(&b, "REDUCE_OPS = (%s)\n", strings.Join(reduce, ", "))
	table("ATTRS", attrs)
	fmt.Fprintf(&b, "POSITIVE_DATA = (%s)\n", strings.Join(append(positive, ""), ", "))
	table("INDEX_OPS", indexes)
	fmt.Fprintf(&b, "VIEW_OPS = (%s)\n", strings.Join(append(views, ""), ", "))
	fmt.Fprintf(&b, "PASSES_SUMS = (%s)\n", strings.Join(append(sums, ""), ", "))
	return b.String()
}

// storedAttrs are the keys, quoted, of the attributes but axes that op o
// takes, which its torch function takes as keywords; a reduction's axis
// too is left out, since the runtime reduces by REDUCE_OPS, and so are
// the attributes that only choose how the op is planned (a linear's
// overlap), which compute nothing.
func storedAttrs(o *ops.Op) []string {
	var keys []string
	for _, a := range o.Attrs {
		spec := ops.AttrOf(string(a))
		if spec.Stored() && !spec.Planning || a == ops.AttrAxis && o.Family != ops.Reduction {
			keys = append(keys, fmt.Sprintf("%q", a))
		}
	}
	return keys
}
