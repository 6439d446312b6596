package difftest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/lower"
	"github.com/nvcomm/nvcomm/internal/plan"
	"github.com/nvcomm/nvcomm/internal/sim"
)

// mutantsPerPlan is how many random single-field mutants each golden plan
// gets: NVCOMM_MUTANTS, or 20 (5 with -short).
func mutantsPerPlan() int {
	if n, err := strconv.Atoi(os.Getenv("NVCOMM_MUTANTS")); err == nil && n > 0 {
		return n
	}
	if testing.Short() {
		return 5
	}
	return 20
}

// TestSingleFieldMutations is the property of issue 10 ("a plan is a
// certificate"): a random single-field mutation of a golden plan — one
// value changed, one key deleted, one list entry dropped, repeated or
// swapped with another — is either rejected by validate (decoding,
// plan.Validate, lower.Certify, the simulation of ops lowered otherwise)
// or leaves simulate's whole result unchanged: pass, traffic per step and
// per device (but for the names of devices that receive nothing). It logs
// how many mutants fell on each side.
func TestSingleFieldMutations(t *testing.T) {
	files := goldenFiles(t)
	per := mutantsPerPlan()
	counts := map[string]int{}
	for _, file := range files {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		base := simulate(t, file, src)
		// Seeded by the file's name, not its place in the list: a golden
		// added elsewhere leaves every other file's mutants as they were.
		h := fnv.New64a()
		h.Write([]byte(filepath.Base(file)))
		rng := rand.New(rand.NewPCG(h.Sum64(), 10))
		for range per {
			m := mutateJSON(t, src, rng)
			verdict := judgeMutant(m.src)
			counts[verdict]++
			if verdict != "accepted" {
				continue
			}
			if got := simulate(t, file, m.src); !cmp.Equal(base, got) {
				counts["changed"]++
				t.Errorf("%s: mutant %q passed validate, but changed simulate's result:\n%s",
					filepath.Base(file), m.what, cmp.Diff(base, got))
				continue
			}
			counts["unchanged"]++
		}
	}
	rejected := counts["decode"] + counts["validate"] + counts["certify"] + counts["proof"]
	t.Logf("%d mutants of %d golden plans: %d rejected by validate (decode %d, plan.Validate %d, lower.Certify %d, simulation of ops lowered otherwise %d), "+
		"%d accepted with simulate's result unchanged, %d changed",
		per*len(files), len(files), rejected, counts["decode"], counts["validate"], counts["certify"], counts["proof"], counts["unchanged"], counts["changed"])
}

// goldenFiles lists the plans checked in under testdata.
func goldenFiles(t *testing.T) []string {
	files, err := filepath.Glob("../../testdata/*/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden plans (%v)", err)
	}
	return files
}

// outcome of a simulation: the result, or the error.
type simOutcome struct {
	Result *sim.Result
	Err    string
}

func simulate(t *testing.T, file string, src []byte) simOutcome {
	p, err := plan.Decode(file, src)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	res, err := sim.Run(p, sim.Options{Seed: 3})
	if err != nil {
		return simOutcome{Err: err.Error()}
	}
	// A device that receives nothing is only a name: a mutant may rename a
	// device that holds an unused replica without changing what the plan
	// computes or moves.
	maps.DeleteFunc(res.DeviceReceived, func(_ int, n int64) bool { return n == 0 })
	return simOutcome{Result: res}
}

// judgeMutant says which part of validate rejects a plan, or "accepted".
func judgeMutant(src []byte) string {
	p, err := plan.Decode("mutant.json", src)
	if err != nil {
		return "decode"
	}
	stage, _ := validatePlan(p)
	if stage == "" {
		return "accepted"
	}
	return stage
}

// validatePlan runs what nvcomm validate runs after decoding (cli's
// checkPlan): plan.Validate, lower.Certify, and a simulation of the ops
// Certify leaves unproven. It returns the stage that rejects p ("validate",
// "certify" or "proof") and why, or "".
func validatePlan(p *plan.Plan) (stage, why string) {
	if problems := plan.Validate(p); problems != nil {
		return "validate", problems[0].Text()
	}
	problems, unproven := lower.Certify(p)
	switch {
	case problems != nil:
		return "certify", problems[0].Text()
	case unproven == nil:
		return "", ""
	}
	res, err := sim.Run(p, sim.Options{})
	switch {
	case err != nil:
		return "proof", err.Error()
	case !res.Pass:
		return "proof", res.Mismatch.String()
	}
	return "", ""
}

// fieldMutant is a plan's JSON with one field changed, and what changed.
type fieldMutant struct {
	what string
	src  []byte
}

// mutateJSON changes one randomly chosen place of a plan's JSON.
func mutateJSON(t *testing.T, src []byte, rng *rand.Rand) fieldMutant {
	dec := json.NewDecoder(bytes.NewReader(src))
	dec.UseNumber() // exact integers, beyond float64's 2^53
	var doc any
	if err := dec.Decode(&doc); err != nil {
		t.Fatal(err)
	}
	vocab := stringsOf(doc)
	sites := sitesOf(doc, "")
	s := sites[rng.IntN(len(sites))]
	what := s.mutate(rng, vocab)
	out, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return fieldMutant{what: what, src: out}
}

// site is one place of a JSON tree that a mutation can change: a value in
// an object (parent a map, key set) or in a list (parent a slice, index
// set).
type site struct {
	path  string
	obj   map[string]any
	key   string
	list  []any
	index int
	// listRef is where the list itself is stored, to drop or repeat an
	// entry of it.
	listRef func([]any)
}

// sitesOf lists every value in v, below path.
func sitesOf(v any, path string) []site {
	var out []site
	switch x := v.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(x)) {
			p := path + "." + k
			out = append(out, site{path: p, obj: x, key: k})
			if l, ok := x[k].([]any); ok {
				obj, key := x, k
				out = append(out, site{path: p + "[]", list: l, index: -1, listRef: func(n []any) { obj[key] = n }})
			}
			out = append(out, sitesOf(x[k], p)...)
		}
	case []any:
		for i := range x {
			p := fmt.Sprintf("%s[%d]", path, i)
			out = append(out, site{path: p, list: x, index: i})
			if l, ok := x[i].([]any); ok {
				list, idx := x, i
				out = append(out, site{path: p + "[]", list: l, index: -1, listRef: func(n []any) { list[idx] = n }})
			}
			out = append(out, sitesOf(x[i], p)...)
		}
	}
	return out
}

// mutate changes the site and says how.
func (s site) mutate(rng *rand.Rand, vocab []string) string {
	if s.listRef != nil {
		return s.mutateList(rng)
	}
	old := s.get()
	if s.obj != nil && rng.IntN(8) == 0 {
		delete(s.obj, s.key)
		return s.path + ": deleted"
	}
	v := newValue(old, rng, vocab)
	s.set(v)
	return fmt.Sprintf("%s: %s -> %s", s.path, text(old), text(v))
}

// mutateList drops, repeats or swaps entries of a list.
func (s site) mutateList(rng *rand.Rand) string {
	l := s.list
	if len(l) == 0 {
		s.listRef([]any{json.Number("0")})
		return s.path + ": [] -> [0]"
	}
	i := rng.IntN(len(l))
	switch rng.IntN(3) {
	case 0:
		s.listRef(slices.Delete(slices.Clone(l), i, i+1))
		return fmt.Sprintf("%s: entry %d dropped", s.path, i)
	case 1:
		s.listRef(slices.Insert(slices.Clone(l), i, l[i]))
		return fmt.Sprintf("%s: entry %d repeated", s.path, i)
	}
	j := rng.IntN(len(l))
	n := slices.Clone(l)
	n[i], n[j] = n[j], n[i]
	s.listRef(n)
	return fmt.Sprintf("%s: entries %d and %d swapped", s.path, i, j)
}

func (s site) get() any {
	if s.obj != nil {
		return s.obj[s.key]
	}
	return s.list[s.index]
}

func (s site) set(v any) {
	if s.obj != nil {
		s.obj[s.key] = v
		return
	}
	s.list[s.index] = v
}

// newValue returns a value other than old: a nearby or extreme number, or
// another string the plan uses or the format knows, or a value of another
// kind.
func newValue(old any, rng *rand.Rand, vocab []string) any {
	switch x := old.(type) {
	case json.Number:
		return newNumber(x, rng)
	case string:
		for {
			if s := vocab[rng.IntN(len(vocab))]; s != x {
				return s
			}
		}
	case nil:
		return []any{json.Number("0"), json.Number("1"), "sum", "x"}[rng.IntN(4)]
	case []any, map[string]any:
		return []any{nil, json.Number("0"), "x", []any{}, map[string]any{}}[rng.IntN(5)]
	}
	return nil
}

// newNumber changes a number: by one, to 0 or -1, doubled, or past int32.
func newNumber(n json.Number, rng *rand.Rand) json.Number {
	v, err := strconv.ParseInt(n.String(), 10, 64)
	if err != nil {
		f, _ := n.Float64()
		return json.Number(strconv.FormatFloat(f+0.5, 'g', -1, 64))
	}
	for {
		w := []int64{v + 1, v - 1, 0, -1, 2 * v, v + 7, 1 << 31, 1 << 40}[rng.IntN(8)]
		if w != v {
			return json.Number(strconv.FormatInt(w, 10))
		}
	}
}

// formatWords are the names the plan format knows, beside the plan's own.
var formatWords = slices.Concat(plan.CollectiveTypes, plan.LocalTypes, plan.ReduceOps(), []string{
	"collective", "local", "set", "DIDx", "DIDy", "DIDz", "Serial", "DIDw",
	"block", "strided", "nested", "merged", "float32", "float16", "bfloat16", "float64", "int32", "int64",
	"optimal", "nvfuser", "0", "1", "-inf", "inf", "", "x",
})

// stringsOf returns every string value in v and the format's words.
func stringsOf(v any) []string {
	seen := map[string]bool{}
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case string:
			seen[x] = true
		case map[string]any:
			for _, e := range x {
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	for _, w := range formatWords {
		seen[w] = true
	}
	return slices.Sorted(maps.Keys(seen))
}

func text(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return strings.TrimSpace(string(b))
}
