package difftest

import (
	"fmt"
	"slices"
	"strings"

	"github.com/nvcomm/nvcomm/internal/ops"
)

// backward draws, for one float layer chain in three whose ops between
// its first input t0 and a later tensor all have gradient rules, a
// backward section (docs/training.md): the gradient of t0 with respect to
// the last such tensor, seeded with 1 when it is rank 0 and else with a
// new input of its shape, replicated on its mesh (in format 2 now and
// then left to propagation). It returns the section's text, "" for none.
func (l *layerGen) backward(t0 lt) string {
	if strings.HasPrefix(l.dtype, "int") || l.r.IntN(3) != 0 {
		return ""
	}
	kinds, ins, outs := make([]string, len(l.ops)), make([][]string, len(l.ops)), make([]string, len(l.ops))
	for i, op := range l.ops {
		kinds[i], ins[i], outs[i] = parseLine(op.line)
	}
	down := map[string]bool{t0.name: true}
	for i := range l.ops { // the ops are in dependency order until finish shuffles them
		if slices.ContainsFunc(ins[i], func(n string) bool { return down[n] }) {
			down[outs[i]] = true
		}
	}
	seed := -1
	for i := range l.ops {
		if down[outs[i]] {
			seed = i
		}
	}
	if seed < 0 {
		return ""
	}
	up := map[string]bool{outs[seed]: true}
	for i := seed; i >= 0; i-- {
		if !up[outs[i]] {
			continue
		}
		if down[outs[i]] && (ops.Lookup(kinds[i]) == nil || ops.Lookup(kinds[i]).Grad == nil) {
			return "" // an op without a rule on the chain
		}
		for _, n := range ins[i] {
			up[n] = true
		}
	}
	y := l.pool[slices.IndexFunc(l.pool, func(t lt) bool { return t.name == outs[seed] })]
	again := recomputed(kinds, ins, outs, func(i int) bool { return down[outs[i]] && up[outs[i]] }, l.n)
	if len(y.shape) == 0 {
		return fmt.Sprintf("backward:\n  seeds: {%s: 1}\n  wrt: [%s]\n%s", y.name, t0.name, again)
	}
	dy := l.name()
	l.declare(dy, y.mesh, !l.format2 || l.r.IntN(2) == 0, l.dtype, y.shape, decl{})
	return fmt.Sprintf("backward:\n  seeds: {%s: %s}\n  wrt: [%s]\n%s", y.name, dy, t0.name, again)
}

// readsOutput are the unary ops whose gradient rule reads their output,
// and readsOperand those whose rule reads their operand: on a chain, the
// backward reads those tensors, so that they may be listed under
// recompute (docs/training.md, "Recomputation").
var (
	readsOutput  = []string{"tanh", "sigmoid", "exp", "sqrt", "rsqrt", "reciprocal"}
	readsOperand = []string{"relu", "abs", "log", "square", "silu", "gelu", "gelu_tanh", "erf"}
)

// recomputed is the recompute line of a backward section, "" for none:
// for three chains in four (by n, the generator's count of names, which
// draws nothing from its stream, so that the cases it drew before stay
// as they were), the tensors on the chain (on reports which ops are)
// that a rule reads and a unary op makes: the outputs of the ops of
// readsOutput, and the operands of those of readsOperand that a unary op
// other than neg (whose output may be a pending sum) makes.
func recomputed(kinds []string, ins [][]string, outs []string, on func(int) bool, n int) string {
	if n%4 == 0 {
		return ""
	}
	var names []string
	add := func(name string) {
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	for i, k := range kinds {
		if !on(i) {
			continue
		}
		if slices.Contains(readsOutput, k) {
			add(outs[i])
		}
		if !slices.Contains(readsOperand, k) || len(ins[i]) != 1 {
			continue
		}
		if j := slices.Index(outs, ins[i][0]); j >= 0 && kinds[j] != "neg" && slices.Contains(ops.FamilyNames(ops.Unary), kinds[j]) {
			add(outs[j])
		}
	}
	if len(names) == 0 {
		return ""
	}
	return "  recompute: [" + strings.Join(names, ", ") + "]\n"
}

// parseLine reads an op line of the generator's: its kind, operands (not
// a number) and output.
func parseLine(line string) (kind string, ins []string, out string) {
	field := func(key, end string) string {
		_, rest, _ := strings.Cut(line, key)
		v, _, _ := strings.Cut(rest, end)
		return v
	}
	kind, out = field("op: ", ","), strings.TrimSuffix(field("out: ", ","), "}")
	for n := range strings.SplitSeq(strings.Trim(field("in: ", ", out:"), "[]"), ",") {
		if n = strings.TrimSpace(n); n != "" && (n[0] < '0' || n[0] > '9') && n[0] != '-' {
			ins = append(ins, n)
		}
	}
	return kind, ins, out
}
