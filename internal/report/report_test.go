package report

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/net/html"

	"github.com/nvcomm/nvcomm/internal/cost"
	"github.com/nvcomm/nvcomm/internal/explain"
	"github.com/nvcomm/nvcomm/internal/plan"
)

// update rewrites the goldens (make golden sets it); review their diff
// before committing.
var update = os.Getenv("NVCOMM_UPDATE") != ""

// example is one example's optimal plan and its report.
type example struct {
	name string
	plan *plan.Plan
	html []byte
}

// examples reports the optimal plan of every example of testdata/examples
// on the default topology.
func examples(t *testing.T) []example {
	t.Helper()
	paths, err := filepath.Glob("../../testdata/examples/*.optimal.json")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no example plans: %v", err)
	}
	var out []example
	for _, path := range paths {
		src, readErr := os.ReadFile(path)
		p, err := plan.Decode(path, src)
		if err = errors.Join(readErr, err); err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := Write(&b, p, Options{Topology: cost.Default()}); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, example{strings.TrimSuffix(filepath.Base(path), ".optimal.json"), p, b.Bytes()})
	}
	return out
}

// TestExamplesGolden compares every example's report with
// testdata/NAME.html, and a second report of the same plan with the
// first: the page is the same bytes every time.
func TestExamplesGolden(t *testing.T) {
	for _, ex := range examples(t) {
		t.Run(ex.name, func(t *testing.T) {
			var again bytes.Buffer
			if err := Write(&again, ex.plan, Options{Topology: cost.Default()}); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(again.Bytes(), ex.html) {
				t.Errorf("two reports of one plan differ")
			}
			golden := filepath.Join("testdata", ex.name+".html")
			if update {
				if err := os.WriteFile(golden, ex.html, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (NVCOMM_UPDATE=1 writes it)", err)
			}
			if diff := cmp.Diff(string(want), string(ex.html)); diff != "" {
				t.Errorf("report %s (-want +got):\n%s", ex.name, diff)
			}
		})
	}
}

// TestSelfContained parses every example's report as HTML (as a browser
// would, golang.org/x/net/html) and checks that it refers to nothing
// outside itself: no element that loads a resource, no attribute or style
// with a URL, no script; and that it has what the page promises: a
// picture for every tensor, a row for every step, a timeline box for
// every device of every step.
func TestSelfContained(t *testing.T) {
	for _, ex := range examples(t) {
		t.Run(ex.name, func(t *testing.T) {
			doc, err := html.Parse(bytes.NewReader(ex.html))
			if err != nil {
				t.Fatalf("not HTML: %v", err)
			}
			if bytes.Contains(ex.html, []byte("http://")) || bytes.Contains(ex.html, []byte("https://")) {
				t.Errorf("the page names an http(s) address")
			}
			var got counts
			got.walk(t, doc)
			if diff := cmp.Diff(wantCounts(ex.plan), got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// counts are the parts of a page that TestSelfContained counts.
type counts struct {
	Tensors  []string // data-tensor of each tensor's box that holds a picture
	Steps    int      // rows of the steps table that have a step id
	Boxes    int      // rects of the timeline
	Timeline bool
}

// wantCounts is what p's report must have.
func wantCounts(p *plan.Plan) counts {
	c := counts{Steps: len(p.Steps), Timeline: true}
	for _, t := range p.Tensors {
		c.Tensors = append(c.Tensors, t.Name)
	}
	for i := range p.Steps {
		c.Boxes += len(explainDevices(&p.Steps[i]))
	}
	return c
}

// explainDevices lists the devices that run a step: its teams' members or
// its devices, each once.
func explainDevices(s *plan.Step) []int {
	ds := slices.Concat(append([][]int{s.Devices}, s.Teams...)...)
	slices.Sort(ds)
	return slices.Compact(ds)
}

// loaders are the elements that fetch or run something.
var loaders = map[string]bool{"script": true, "link": true, "img": true, "iframe": true, "object": true,
	"embed": true, "image": true, "use": true, "audio": true, "video": true, "source": true, "base": true, "form": true}

// walk counts n's parts and fails on anything that loads a resource.
func (c *counts) walk(t *testing.T, n *html.Node) {
	if n.Type == html.ElementNode {
		if loaders[n.Data] {
			t.Errorf("element <%s> loads or runs something", n.Data)
		}
		for _, a := range n.Attr {
			v := strings.ToLower(a.Val)
			if strings.Contains(v, "url(") || strings.Contains(v, "//") || strings.HasPrefix(a.Key, "on") || strings.HasPrefix(v, "javascript:") {
				t.Errorf("<%s %s=%q> refers outside the page or runs script", n.Data, a.Key, a.Val)
			}
			if (a.Key == "href" || a.Key == "src") && !strings.HasPrefix(a.Val, "#") {
				t.Errorf("<%s %s=%q> is not a link within the page", n.Data, a.Key, a.Val)
			}
		}
		c.element(n)
	}
	if n.Type == html.TextNode && n.Parent != nil && n.Parent.Data == "style" && (strings.Contains(n.Data, "url(") || strings.Contains(n.Data, "@import")) {
		t.Errorf("the style sheet loads something")
	}
	for k := n.FirstChild; k != nil; k = k.NextSibling {
		c.walk(t, k)
	}
}

// element counts one element.
func (c *counts) element(n *html.Node) {
	switch {
	case attr(n, "data-tensor") != "" && hasPicture(n):
		c.Tensors = append(c.Tensors, attr(n, "data-tensor"))
	case n.Data == "tr" && n.FirstChild != nil && attr(n.FirstChild, "class") == "num":
		c.Steps++
	case n.Data == "rect" && attr(n, "class") == "step":
		c.Boxes++
	case n.Data == "svg" && attr(n, "class") == "timeline":
		c.Timeline = true
	}
}

// hasPicture reports whether an element holds one with class picture.
func hasPicture(n *html.Node) bool {
	for k := n.FirstChild; k != nil; k = k.NextSibling {
		if k.Type == html.ElementNode && (strings.Contains(attr(k, "class"), "picture") || hasPicture(k)) {
			return true
		}
	}
	return false
}

// attr is n's attribute key, "" when it has none.
func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

// TestLayoutGrid places a 2-D grid's blocks: labels sized cells, rows
// below the column heads, colours by set of devices: the next colour for a
// set not seen before on the page, the same for one seen.
func TestLayoutGrid(t *testing.T) {
	g := &explain.Grid{Rows: []string{"0:4", "4:8"}, Cols: []string{"0:8", "8:16"},
		Blocks: [][]explain.Block{{{Devices: "0", Set: 0}, {Devices: "1", Set: 1}}, {{Devices: "0,4", Set: 2}, {Devices: "0-3", Set: 3}}}}
	dc := deviceColours{"1": palette[0]} // an earlier picture's set
	got := layoutGrid(g, dc)
	const hw = 3*charWidth + 12 // the row labels' width: "0:4" and a margin
	want := &gridView{Width: hw + 2*minCell + 2, Height: headHeight + 2*cellHeight + 2,
		Cols: []label{{X: hw + 1 + 28, Y: 14, Text: "0:8"}, {X: hw + 1 + 84, Y: 14, Text: "8:16"}},
		Rows: []label{{X: hw - 6, Y: 36, Text: "0:4"}, {X: hw - 6, Y: 66, Text: "4:8"}},
		Blocks: []blockView{
			{X: hw + 1, Y: 21, W: 56, H: 30, CX: hw + 29, CY: 36, Fill: palette[1], Devices: "0"},
			{X: hw + 57, Y: 21, W: 56, H: 30, CX: hw + 85, CY: 36, Fill: palette[0], Devices: "1"},
			{X: hw + 1, Y: 51, W: 56, H: 30, CX: hw + 29, CY: 66, Fill: palette[2], Devices: "0,4"},
			{X: hw + 57, Y: 51, W: 56, H: 30, CX: hw + 85, CY: 66, Fill: palette[3], Devices: "0-3"},
		}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if layoutGrid(nil, dc) != nil {
		t.Error("a grid laid out from none")
	}
}

// TestTimeline lays out an example's timeline: a row per device, each
// step's boxes starting where the steps before it end and as wide as its
// share of the predicted total, the last ending at the plot's right edge;
// without a topology, no timeline and a sentence saying why.
func TestTimeline(t *testing.T) {
	src, readErr := os.ReadFile("../../testdata/examples/dp_tp_mlp.optimal.json")
	p, err := plan.Decode("dp_tp_mlp", src)
	if err = errors.Join(readErr, err); err != nil {
		t.Fatal(err)
	}
	topo := cost.Default()
	pr, err := cost.Predict(topo, p)
	if err != nil {
		t.Fatal(err)
	}
	m := explain.NewModel(p, explain.Options{Op: -1, Topology: topo})
	tl, why := newTimeline(p, m, topo)
	if tl == nil {
		t.Fatalf("no timeline: %s", why)
	}
	if len(tl.Rows) != 8 || tl.Rows[7].Text != "device 7" {
		t.Errorf("rows %v, want devices 0 to 7", tl.Rows)
	}
	start, k := 0.0, 0
	for i, st := range pr.Steps {
		x, w := gutter+plotWidth*start/pr.Total, max(plotWidth*st.Seconds/pr.Total, 1)
		for range explainDevices(&p.Steps[i]) {
			b := tl.Boxes[k]
			if !near(b.X, x) || !near(b.W, w) || !strings.HasPrefix(b.Title, fmt.Sprintf("step %d %s ", st.Step, st.Type)) {
				t.Errorf("box %d: x %g w %g %q, want step %d at x %g w %g", k, b.X, b.W, b.Title, st.Step, x, w)
			}
			k++
		}
		start += st.Seconds
	}
	if last := tl.Boxes[len(tl.Boxes)-1]; !near(last.X+last.W, gutter+plotWidth) {
		t.Errorf("the last box ends at %g, want %g", last.X+last.W, gutter+plotWidth)
	}
	if tl, why := newTimeline(p, m, nil); tl != nil || !strings.Contains(why, "--topology none") {
		t.Errorf("without a topology: %v, %q", tl, why)
	}
}

// near compares pixels to a hundredth: the trace rounds times to the
// nanosecond.
func near(a, b float64) bool { return math.Abs(a-b) < 0.01 }

// TestOneColourPerDeviceSet: on every example's page, the blocks of all
// pictures held by one set of devices have one colour, and two sets have
// two colours (while the palette lasts): device 0, device 2, "0,1" and
// "0-3" are told apart across the page, as docs/explain.md promises.
func TestOneColourPerDeviceSet(t *testing.T) {
	blocks := 0
	for _, ex := range examples(t) {
		t.Run(ex.name, func(t *testing.T) {
			doc, err := html.Parse(bytes.NewReader(ex.html))
			if err != nil {
				t.Fatal(err)
			}
			fills := map[string]string{} // devices -> fill
			sets := map[string]string{}  // fill -> devices
			for _, b := range pictureBlocks(doc) {
				if f, ok := fills[b.devices]; ok && f != b.fill {
					t.Errorf("devices %s are drawn in %s and %s", b.devices, f, b.fill)
				}
				if d, ok := sets[b.fill]; ok && d != b.devices && len(fills) < len(palette) {
					t.Errorf("devices %s and %s share the colour %s", d, b.devices, b.fill)
				}
				fills[b.devices], sets[b.fill] = b.fill, b.devices
				blocks++
			}
		})
	}
	if blocks == 0 {
		t.Error("no example's page has a picture")
	}
}

// TestPaletteDistinct: no colour of the palette appears twice.
func TestPaletteDistinct(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range palette {
		if seen[c] {
			t.Errorf("%s appears twice in the palette", c)
		}
		seen[c] = true
	}
}

// pictureBlock is a block of a tensor's picture: its devices and fill.
type pictureBlock struct{ devices, fill string }

// pictureBlocks lists the blocks of every picture of a page, in order.
func pictureBlocks(n *html.Node) []pictureBlock {
	var out []pictureBlock
	if n.Type == html.ElementNode && n.Data == "svg" && strings.Contains(attr(n, "class"), "grid") {
		for k := n.FirstChild; k != nil; k = k.NextSibling {
			if k.Type == html.ElementNode && k.Data == "rect" && k.FirstChild != nil && k.FirstChild.FirstChild != nil {
				devices := strings.TrimPrefix(k.FirstChild.FirstChild.Data, "devices ")
				out = append(out, pictureBlock{devices, attr(k, "fill")})
			}
		}
		return out
	}
	for k := n.FirstChild; k != nil; k = k.NextSibling {
		out = append(out, pictureBlocks(k)...)
	}
	return out
}
