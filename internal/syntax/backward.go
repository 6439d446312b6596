package syntax

import (
	"slices"

	"go.yaml.in/yaml/v3"

	"github.com/nvcomm/nvcomm/internal/ir"
)

// backwardKeys are the keys of a backward section.
var backwardKeys = []string{"seeds", "wrt", "recompute", "regather", "reshard_after_forward"}

// requiredBackwardKeys are those a backward section must have.
var requiredBackwardKeys = []string{"seeds", "wrt"}

// parseBackward reads the backward section v.
func (p *reader) parseBackward(v *yaml.Node) {
	fields, ok := p.w.mapping(v, "backward", backwardKeys)
	if !ok {
		return
	}
	b := &ir.BackwardDecl{At: posOf(v)}
	var seen []string
	for _, f := range fields {
		seen = append(seen, f.Key)
		switch f.Key {
		case "seeds":
			b.Seeds = p.seedsOf(f.Value)
		case "wrt":
			b.Wrt = p.w.names(f.Value, "backward wrt")
		case "recompute":
			b.Recompute = p.w.names(f.Value, "backward recompute")
		case "regather":
			b.Regather = p.w.names(f.Value, "backward regather")
		case "reshard_after_forward":
			b.ReshardAfterForward, _ = p.w.boolean(f.Value, "backward reshard_after_forward")
			b.ReshardAt = posOf(f.Value)
		}
	}
	for _, key := range requiredBackwardKeys {
		if !slices.Contains(seen, key) && !misspelled(v, backwardKeys, key) {
			p.errs.AddHint(b.At, "backward: {seeds: {loss: 1}, wrt: [w1, w2]}", "backward: missing key %q", key)
		}
	}
	p.src.SetBackward(b)
}

// seedsOf reads the seeds, a mapping of tensor names to 1 or to the
// name of their upstream gradient.
func (p *reader) seedsOf(n *yaml.Node) []ir.SeedDecl {
	fields, ok := p.w.mapping(n, "backward seeds", nil)
	if !ok {
		return nil
	}
	var seeds []ir.SeedDecl
	for _, f := range fields {
		if !p.w.keyIdent(f.KeyN, "backward seed") {
			continue
		}
		s := ir.SeedDecl{Name: f.Key, At: posOf(f.KeyN), DYAt: posOf(f.Value)}
		switch v := f.Value; {
		case v.Kind == yaml.ScalarNode && (v.Tag == "!!int" || v.Tag == "!!float") && (v.Value == "1" || v.Value == "1.0"):
			s.One = true
		case v.Kind == yaml.ScalarNode && v.Tag == "!!str" && ir.IsIdent(v.Value):
			s.DY = v.Value
		default:
			p.errs.AddHint(s.DYAt, "write 1 for a rank-0 tensor (a loss), or the name of a declared input of the seed's shape and dtype",
				"backward seeds: the upstream gradient of %q must be 1 or a tensor name, got %s", f.Key, kindName(v))
			continue
		}
		seeds = append(seeds, s)
	}
	return seeds
}
