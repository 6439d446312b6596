package shard

// The ops of a fusion and of a plan, by name (docs/fusion.md, "ops"), in
// documentation order: the copy, the reductions, the elementwise binary
// and unary ops, broadcast and the contractions.
var (
	// ReduceOps are the reductions over one axis, and the ops a Partial
	// placement or a reducing collective combines terms with.
	ReduceOps = []string{"sum", "prod", "max", "min"}
	// BinaryOps apply a function to elements at equal indices of two
	// operands.
	BinaryOps = []string{"add", "sub", "mul", "maximum", "minimum"}
	// UnaryOps apply a function to each element of one operand.
	UnaryOps = []string{"relu", "neg", "abs"}
	// Contractions multiply two operands and sum over their shared axis k.
	Contractions = []string{"matmul", "linear"}
	// OpNames lists every op.
	OpNames = concat([]string{"set"}, ReduceOps, BinaryOps, UnaryOps, []string{"broadcast"}, Contractions)
)

func concat(lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}
