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
	"github.com/nvcomm/nvcomm/internal/syntax"
)

// TestStreamAsLower lowers every golden fusion and a few generated ones
// under every policy both ways, Stream's fusion with and without
// ShareAlike: Stream must write the bytes that Encode writes of Lower's
// plan, or fail with Lower's error (and its positions).
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
			f, err := syntax.Parse(in.name, in.src)
			if err != nil {
				continue // a parse error: nothing to lower
			}
			want, wantErr := lowered(f, lower.Policy(policy))
			for _, share := range []bool{false, true} {
				name := fmt.Sprintf("%s/%s/share=%v", in.name, policy, share)
				f, _ = syntax.Parse(in.name, in.src) // a fresh fusion: nothing Lower did to it is seen
				if share {
					f.ShareAlike()
				}
				var got bytes.Buffer
				gotErr := lower.Stream(f, lower.Options{Policy: lower.Policy(policy)}, plan.NewWriter(&got))
				if d := cmp.Diff(fmt.Sprint(wantErr), fmt.Sprint(gotErr)); d != "" {
					t.Errorf("%s: error (-Lower +Stream):\n%s", name, d)
					continue
				}
				if wantErr == nil && !bytes.Equal(want, got.Bytes()) {
					t.Errorf("%s: Stream wrote other bytes than Encode of Lower's plan:\n%s", name, cmp.Diff(string(want), got.String()))
				}
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
