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
	if len(y.shape) == 0 {
		return fmt.Sprintf("backward: {seeds: {%s: 1}, wrt: [%s]}\n", y.name, t0.name)
	}
	dy := l.name()
	l.declare(dy, y.mesh, !l.format2 || l.r.IntN(2) == 0, l.dtype, y.shape, decl{})
	return fmt.Sprintf("backward:\n  seeds: {%s: %s}\n  wrt: [%s]\n", y.name, dy, t0.name)
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
