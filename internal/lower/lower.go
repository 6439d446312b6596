// Package lower compiles a checked fusion into a communication plan: it finds
// every op that changes sharding and turns it into collectives and the local
// steps that make flat-buffer collectives correct (DESIGN §4).
package lower

import (
	"github.com/nvcomm/nvcomm/internal/ir"
	"github.com/nvcomm/nvcomm/internal/plan"
)

// Policy names a lowering policy.
type Policy string

// The policies. PolicyNvFuser follows nvFuser's lowering table.
const (
	PolicyNvFuser Policy = "nvfuser"
)

// Policies lists the accepted policy names.
var Policies = []string{string(PolicyNvFuser)}

// Options configure Lower.
type Options struct {
	Policy Policy
}

// Lower compiles f into a plan. Ops the policy cannot lower correctly are
// errors (a *diag.List) naming the op, its YAML position and the reason.
func Lower(f *ir.Fusion, opts Options) (*plan.Plan, error) {
	panic("not implemented yet")
}
