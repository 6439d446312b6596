package export

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/ops"
)

// TestTorchFuncsTakeTheirAttrs checks, without PyTorch, that the runtime's
// function of every op with a torch function takes the attributes the
// runtime passes it as keywords (ATTRS): a function missing one fails
// only when a program runs (gather's lost its axis once so).
func TestTorchFuncsTakeTheirAttrs(t *testing.T) {
	params := map[string][]string{}
	for _, m := range regexp.MustCompile(`(?m)^def (_\w+)\(([^)]*)\):`).FindAllStringSubmatch(runtimeSrc, -1) {
		for p := range strings.SplitSeq(m[2], ",") {
			p = strings.TrimLeft(strings.TrimSpace(p), "*")
			params[m[1]] = append(params[m[1]], strings.TrimSpace(strings.SplitN(p, "=", 2)[0]))
		}
	}
	var missing []string
	checked := 0
	for _, o := range ops.Default.All() {
		if o.Torch == nil || !strings.HasPrefix(o.Torch.Func, "_") {
			continue
		}
		ps, ok := params[o.Torch.Func]
		if !ok {
			missing = append(missing, o.Name+": no def "+o.Torch.Func)
			continue
		}
		checked++
		for _, k := range storedAttrs(o) {
			if k = strings.Trim(k, `"`); !slices.Contains(ps, k) {
				missing = append(missing, o.Name+": "+o.Torch.Func+" takes no "+k)
			}
		}
	}
	if d := cmp.Diff([]string(nil), missing); d != "" || checked < 5 {
		t.Errorf("%d functions checked; missing (-want +got):\n%s", checked, d)
	}
}
