package shard

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/nvcomm/nvcomm/internal/ops"
)

// Placement is one entry of PyTorch DTensor's placements: how a tensor
// lies along one mesh axis.
type Placement struct {
	Kind PlacementKind
	Dim  int    // Shard's tensor dim
	Op   string // Partial's reduce op: sum, prod, max or min
}

// PlacementKind is Shard, Replicate or Partial.
type PlacementKind string

// The placement kinds, named as DTensor names them.
const (
	Shard     PlacementKind = "Shard"
	Replicate PlacementKind = "Replicate"
	Partial   PlacementKind = "Partial"
)

// PlacementKinds lists the kinds, for messages and suggestions.
var PlacementKinds = []string{string(Shard), string(Replicate), string(Partial)}

// String writes p in DTensor's notation: Shard(0), Replicate(),
// Partial(sum).
func (p Placement) String() string {
	switch p.Kind {
	case Shard:
		return fmt.Sprintf("Shard(%d)", p.Dim)
	case Partial:
		return fmt.Sprintf("Partial(%s)", p.Op)
	}
	return string(p.Kind) + "()"
}

// PlacementError says why a string is not a placement. Near, when set, is
// the word the user wrote where a kind was expected, for a suggestion
// among PlacementKinds; for a bad reduce op, Op is the op written.
type PlacementError struct {
	Msg  string
	Near string
	Op   string
}

func (e *PlacementError) Error() string { return e.Msg }

var placementRE = regexp.MustCompile(`^\s*(Shard|Replicate|Partial)\s*\(\s*([^)]*?)\s*\)\s*$`)

// ParsePlacement reads one placement in DTensor's notation; Partial()
// means Partial(sum), DTensor's default.
func ParsePlacement(s string) (Placement, *PlacementError) {
	m := placementRE.FindStringSubmatch(s)
	if m == nil {
		head, _, _ := strings.Cut(s, "(")
		return Placement{}, &PlacementError{
			Msg:  fmt.Sprintf("%q is not a placement (expected Shard(dim), Replicate() or Partial(%s))", s, strings.Join(ops.FamilyNames(ops.Reduction), "|")),
			Near: strings.TrimSpace(head)}
	}
	p := Placement{Kind: PlacementKind(m[1])}
	switch p.Kind {
	case Replicate:
		if m[2] != "" {
			return p, &PlacementError{Msg: fmt.Sprintf("Replicate takes no argument, got %q", m[2])}
		}
	case Shard:
		d, err := strconv.Atoi(m[2])
		if err != nil {
			return p, &PlacementError{Msg: fmt.Sprintf("Shard needs a tensor dim, got %q", m[2])}
		}
		p.Dim = d
	case Partial:
		p.Op = m[2]
		if p.Op == "" {
			p.Op = "sum" // DTensor's default
		}
		if !ops.Is(p.Op, ops.Reduction) {
			return p, &PlacementError{Msg: fmt.Sprintf("Partial needs a reduce op (%s), got %q", strings.Join(ops.FamilyNames(ops.Reduction), ", "), p.Op), Op: p.Op}
		}
	}
	return p, nil
}
