package report

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// browsers are where headless Chromium may be: Debian's chromium package,
// then the names other systems give it.
var browsers = []string{"/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome", "google-chrome-stable"}

// findBrowser returns the first Chromium found, "" when there is none.
func findBrowser() string {
	for _, b := range browsers {
		if path, err := exec.LookPath(b); err == nil {
			return path
		}
	}
	return ""
}

// rendered is the size a browser gave an element.
type rendered struct {
	Tensor string  `json:"tensor"`
	Width  float64 `json:"width"`
	Height float64 `json:"height"`
}

// measure lists, for every tensor's box, its picture's rendered size, and
// the timeline's as the tensor "(timeline)".
const measure = `(() => {
  const size = (name, e) => { const r = e ? e.getBoundingClientRect() : {width: 0, height: 0}; return {tensor: name, width: r.width, height: r.height}; };
  const out = Array.from(document.querySelectorAll('[data-tensor]')).map(t => size(t.dataset.tensor, t.querySelector('.picture')));
  const tl = document.querySelector('svg.timeline');
  if (tl) out.push(size('(timeline)', tl));
  return out;
})()`

// TestBrowser loads every example's report in headless Chromium (Debian's
// chromium package; chromedp drives it) and checks that the browser logs
// no error and throws no exception (the page's Content-Security-Policy
// forbids loading anything, so a reference outside the page is an error
// here), and that every tensor's picture and the timeline are drawn with
// a size. Without a browser it skips: apt-get install chromium.
func TestBrowser(t *testing.T) {
	browser := findBrowser()
	if browser == "" {
		t.Skip("no headless Chromium (looked for " + strings.Join(browsers, ", ") + "): apt-get install chromium to run the browser test")
	}
	if testing.Short() {
		t.Skip("starts a browser")
	}
	opts := append(slices.Clone(chromedp.DefaultExecAllocatorOptions[:]), chromedp.ExecPath(browser), chromedp.NoSandbox, chromedp.DisableGPU)
	actx, cancel := chromedp.NewExecAllocator(t.Context(), opts...)
	defer cancel()
	bctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("cannot start %s: %v", browser, err)
	}
	dir := t.TempDir()
	t.Run("catches", func(t *testing.T) { checkCatches(t, bctx, dir) })
	for _, ex := range examples(t) {
		t.Run(ex.name, func(t *testing.T) {
			path := filepath.Join(dir, ex.name+".html")
			if err := os.WriteFile(path, ex.html, 0o644); err != nil {
				t.Fatal(err)
			}
			got, problems := load(t, bctx, "file://"+path)
			for _, p := range problems {
				t.Errorf("browser: %s", p)
			}
			want := len(ex.plan.Tensors) + 1
			if len(got) != want {
				t.Errorf("%d pictures and timelines measured, want %d: %v", len(got), want, got)
			}
			for _, r := range got {
				if r.Width <= 0 || r.Height <= 0 {
					t.Errorf("%s: drawn %gx%g", r.Tensor, r.Width, r.Height)
				}
			}
		})
	}
}

// broken is a page with what TestBrowser must catch: an image from
// elsewhere (which the page's policy blocks, an error), an exception, and
// a tensor whose picture is not drawn.
const broken = `<!DOCTYPE html><html><head><meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'unsafe-inline'"></head>
<body><img src="https://example.com/x.png"><script>throw new Error("boom")</script>
<div data-tensor="x"><div class="picture" hidden>x</div></div></body></html>`

// checkCatches loads broken and checks that load reports its faults: the
// browser test can fail.
func checkCatches(t *testing.T, bctx context.Context, dir string) {
	path := filepath.Join(dir, "broken.html")
	if err := os.WriteFile(path, []byte(broken), 0o644); err != nil {
		t.Fatal(err)
	}
	got, problems := load(t, bctx, "file://"+path)
	text := strings.Join(problems, "\n")
	for _, want := range []string{"example.com", "boom"} {
		if !strings.Contains(text, want) {
			t.Errorf("no complaint naming %q; complaints:\n%s", want, text)
		}
	}
	if len(got) != 1 || got[0].Width != 0 {
		t.Errorf("measured %v, want x undrawn", got)
	}
}

// load opens url in a new tab of the browser, waits for the page, and
// returns the sizes of its pictures and every console message of the tab
// that is a warning, an error or an exception (chromedp.Console joins the
// console API, uncaught exceptions and the browser's log, where a
// Content-Security-Policy violation goes).
func load(t *testing.T, bctx context.Context, url string) ([]rendered, []string) {
	t.Helper()
	ctx, cancel := chromedp.NewContext(bctx)
	defer cancel()
	ctx, cancelTime := context.WithTimeout(ctx, 30*time.Second)
	defer cancelTime()
	messages := chromedp.Console(ctx)
	var problems []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m, err := range messages {
			if err != nil {
				return // the tab is closed
			}
			if m.IsException() || m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleWarning {
				problems = append(problems, m.String())
			}
		}
	}()
	err := chromedp.Do(ctx, chromedp.Navigate(url), chromedp.WaitReady("body"))
	var got []rendered
	if err == nil {
		got, err = chromedp.Run(ctx, chromedp.Evaluate[[]rendered](measure))
	}
	cancel()
	<-done
	if err != nil {
		t.Fatalf("load %s: %v", url, err)
	}
	return got, problems
}
