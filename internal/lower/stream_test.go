package lower_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/ir"
	"github.com/nvcomm/nvcomm/internal/lower"
	"github.com/nvcomm/nvcomm/internal/plan"
	"github.com/nvcomm/nvcomm/internal/scale"
)

// TestStreamAsLower lowers every golden fusion and a few generated ones
// under every policy both ways: Stream must write the bytes that Encode
// writes of Lower's plan, or fail with Lower's error.
func TestStreamAsLower(t *testing.T) {
	type input struct {
		name string
		src  []byte
	}
	var inputs []input
	for _, dir := range goldenDirs {
		files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		for _, file := range files {
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			inputs = append(inputs, input{filepath.Base(file), src})
		}
	}
	for _, fam := range scale.Families {
		inputs = append(inputs, input{fam.Name, fam.Gen(300)})
	}
	for _, in := range inputs {
		for _, policy := range lower.Policies {
			f, err := ir.Parse(in.name, in.src)
			if err != nil {
				continue // a parse error: nothing to lower
			}
			want, wantErr := lowered(f, lower.Policy(policy))
			f, _ = ir.Parse(in.name, in.src) // Lower may not change f, but a fresh one proves nothing is shared
			var got bytes.Buffer
			gotErr := lower.Stream(f, lower.Options{Policy: lower.Policy(policy)}, plan.NewWriter(&got))
			if d := cmp.Diff(fmt.Sprint(wantErr), fmt.Sprint(gotErr)); d != "" {
				t.Errorf("%s/%s: error (-Lower +Stream):\n%s", in.name, policy, d)
				continue
			}
			if wantErr == nil && !bytes.Equal(want, got.Bytes()) {
				t.Errorf("%s/%s: Stream wrote other bytes than Encode of Lower's plan:\n%s", in.name, policy, cmp.Diff(string(want), got.String()))
			}
		}
	}
}

// lowered is Lower's plan of f, encoded, or its error.
func lowered(f *ir.Fusion, policy lower.Policy) ([]byte, error) {
	p, err := lower.Lower(f, lower.Options{Policy: policy})
	if err != nil {
		return nil, err
	}
	return plan.Marshal(p)
}
