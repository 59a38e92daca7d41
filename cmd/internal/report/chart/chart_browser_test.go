package chart

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/torchmem/torchmem/chrometrace"
	"github.com/torchmem/torchmem/cmd/internal/report/chart/browsertest"
	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/memtimeline/exported"
	"github.com/torchmem/torchmem/memtimeline/memtest"
	"github.com/torchmem/torchmem/rules"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
)

// The browser harness lives in internal/browsertest, shared with the
// report's tests.

type browserReport = browsertest.Report

// TestMain stops the browser that the browser tests share.
func TestMain(m *testing.M) {
	code := m.Run()
	browsertest.Close()
	os.Exit(code)
}

func openPage(t *testing.T, path string, checkClean bool) (context.Context, *browserReport) {
	return browsertest.OpenPage(t, path, checkClean)
}

func writePage(t *testing.T, name, title string, specs ...Spec) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteStandalonePage(f, title, specs...); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	// Quality 100 gives a PNG; anything lower a JPEG.
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if len(png) < 10_000 {
		t.Errorf("screenshot is only %d bytes: blank page?", len(png))
	}
	if dir := os.Getenv("TORCHMEM_SCREENSHOT_DIR"); dir != "" {
		if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// inkedPixels counts pixels of the chart's canvas that are not background:
// a chart whose code failed leaves an empty canvas.
const inkedPixelsJS = `(function () {
  var c = document.querySelector(".torchmem-chart canvas");
  var d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
  var n = 0;
  for (var i = 0; i < d.length; i += 4) {
    if (d[i + 3] > 0 && (d[i] < 240 || d[i + 1] < 240 || d[i + 2] < 240)) n++;
  }
  return n;
})()`

func hover(ctx context.Context, x, y float64) error {
	return chromedp.Do(ctx,
		chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, x, y),
		chromedp.Sleep(300*time.Millisecond),
	)
}

// eval runs a JS expression and decodes its value, failing the test on error.
func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	return browsertest.Eval[T](t, ctx, expr)
}

func TestChartRendersInBrowser(t *testing.T) {
	spec := demoSpec(t)
	spec.ID = "demo"
	// A second device's chart on the same page, from another real run's
	// coalesced file (categories only): one chart per device.
	other, err := exported.ReadFile(memtest.Testdata("timeline", "leak_eval_no_grad", "memory_timeline.json.gz"))
	if err != nil {
		t.Fatal(err)
	}
	second := Spec{ID: "second", Title: "cuda:1 (leak_eval_no_grad)", StartNs: other.Times[0], Categories: other.CategorySeries(), HeightPx: 300}
	path := writePage(t, "demo.html", "torchmem demo: big_transformer", spec, second)
	ctx, _ := openPage(t, path, true)
	if n := eval[int](t, ctx, `document.querySelectorAll(".torchmem-chart canvas").length`); n != 2 {
		t.Errorf("%d chart canvases on a two-device page, want 2", n)
	}
	secondSeries := eval[int](t, ctx, `echarts.getInstanceByDom(document.getElementById("second")).getOption().series.length`)
	if secondSeries != len(second.Categories) {
		t.Errorf("second chart has %d series, want %d", secondSeries, len(second.Categories))
	}

	canvases := eval[int](t, ctx, `document.querySelectorAll("#demo canvas").length`)
	inked := eval[int](t, ctx, inkedPixelsJS)
	names := eval[[]string](t, ctx, `echarts.getInstanceByDom(document.getElementById("demo")).getOption().series.map(function (s) { return s.name; })`)
	chartBox := eval[[]float64](t, ctx, `(function(){var r=document.getElementById("demo").getBoundingClientRect();return [r.left,r.top,r.width,r.height];})()`)
	// The x axis must end at the data's last time: echarts once stacked the
	// x values of the category areas and drew an axis 8x too long.
	xMax := eval[float64](t, ctx, `echarts.getInstanceByDom(document.getElementById("demo")).getModel().getComponent("xAxis", 0).axis.scale.getExtent()[1]`)
	lastNs := spec.Allocated.T[len(spec.Allocated.T)-1]
	for _, c := range spec.Categories {
		lastNs = max(lastNs, c.T[len(c.T)-1])
	}
	if wantMax := float64(lastNs-spec.StartNs) / 1e6; xMax < wantMax-0.01 || xMax > wantMax+0.01 {
		t.Errorf("x axis ends at %.3f ms, data at %.3f ms", xMax, wantMax)
	}
	if canvases != 1 {
		t.Errorf("%d canvases, want 1", canvases)
	}
	if inked < 20_000 {
		t.Errorf("only %d drawn pixels on the canvas: chart not drawn", inked)
	}
	want := 2 + len(spec.Categories)
	if len(names) != want {
		t.Errorf("echarts has series %v, want %d", names, want)
	}
	// Hover the middle of the plot: the tooltip shows time and bytes.
	if err := hover(ctx, chartBox[0]+chartBox[2]/2, chartBox[1]+chartBox[3]/2); err != nil {
		t.Fatal(err)
	}
	text := eval[string](t, ctx, `document.getElementById("demo").innerText`)
	if !strings.Contains(text, " ms — ProfilerStep#") || !strings.Contains(text, "allocated: ") || !regexp.MustCompile(`[0-9] [KMG]B\b`).MatchString(text) || strings.Contains(text, "iB") {
		t.Errorf("tooltip text %q lacks time, step and allocated bytes", text)
	}
	t.Logf("%d drawn pixels, series %v, tooltip %q", inked, names, text)
	screenshot(t, ctx, "demo.png")
}

// TestNamesCannotInjectInBrowser hovers over every place a name is shown
// on a chart (tooltip, step band, marker) and checks no element or dialog
// came from the payload; the explorer's names are checked on the same page
// (checkExplorerNamesAreText: a page load costs seconds of CPU).
func TestNamesCannotInjectInBrowser(t *testing.T) {
	s := memtimeline.Series{Name: xssName, T: []int64{0, 1e6, 2e6, 3e6, 4e6}, V: []int64{1 << 30, 3 << 30, 2 << 30, 4 << 30, 1 << 30}}
	spec := Spec{
		ID:         "xss",
		Title:      xssName,
		Allocated:  s,
		Categories: []memtimeline.Series{{Name: xssName + "cat", T: s.T, V: s.V}},
		Steps:      []StepSpan{{Name: xssName, StartNs: 0, EndNs: 2e6}, {Name: "ProfilerStep#2", StartNs: 2e6, EndNs: 4e6}},
		Markers:    []Marker{{Name: xssName, TNs: 3e6, Bytes: 4 << 30}},
	}
	path := writePage(t, "xss.html", xssName, spec, hostileExplorerSpec())
	ctx, _ := openPage(t, path, true)
	box := eval[[]float64](t, ctx, `(function(){var r=document.getElementById("xss").getBoundingClientRect();return [r.left,r.top,r.width,r.height];})()`)
	sawName := false
	for _, fx := range []float64{0.2, 0.5, 0.8} {
		for _, fy := range []float64{0.15, 0.5, 0.7} {
			if err := hover(ctx, box[0]+box[2]*fx, box[1]+box[3]*fy); err != nil {
				t.Fatal(err)
			}
			text := eval[string](t, ctx, `document.getElementById("xss").innerText`)
			imgs := eval[int](t, ctx, `document.querySelectorAll("img").length`)
			if imgs != 0 {
				t.Fatalf("an <img> element appeared after hovering at (%.2f, %.2f)", fx, fy)
			}
			if strings.Contains(text, xssName) {
				sawName = true // shown as text, which is right
			}
		}
	}
	if !sawName {
		t.Errorf("the tooltip never showed the name as text: hovering missed the chart, test proves nothing")
	}
	title, err := chromedp.Run(ctx, chromedp.Title())
	if err != nil {
		t.Fatal(err)
	}
	if title != xssName {
		t.Errorf("page title %q, want the payload as text", title)
	}
	screenshot(t, ctx, "xss.png")
	t.Run("Explorer", func(t *testing.T) { checkExplorerNamesAreText(t, ctx) })
}

// TestBrowserCheckCatchesProblems plants a request, a console error, an
// exception and an alert in a page and checks that the report sees each:
// otherwise the clean results above would prove nothing. (The request and
// the alert come after load: either can stall the navigation.)
func TestBrowserCheckCatchesProblems(t *testing.T) {
	var page strings.Builder
	s := memtimeline.Series{Name: "allocated", T: []int64{0, 1e6}, V: []int64{1, 2}}
	if err := WriteStandalonePage(&page, "sabotaged", Spec{Allocated: s}); err != nil {
		t.Fatal(err)
	}
	// Without the CSP the planted request leaves the page (to a closed
	// local port: nothing outside the machine).
	html := regexp.MustCompile(`<meta http-equiv="Content-Security-Policy"[^>]*>`).ReplaceAllString(page.String(), "")
	cut := strings.LastIndex(html, "</body>") // the library has "</body>" in a string too
	html = html[:cut] + `<script>console.error("planted error");
window.addEventListener("load", function () {
  setTimeout(function () {
    document.body.appendChild(document.createElement("img")).src = "http://127.0.0.1:9/planted.png";
    setTimeout(function () { alert("planted alert"); }, 100);
  }, 50);
});
throw new Error("planted exception");</script>
` + html[cut:]
	path := filepath.Join(t.TempDir(), "sabotaged.html")
	if err := os.WriteFile(path, []byte(html), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, rep := openPage(t, path, false)
	if err := chromedp.Do(ctx, chromedp.Sleep(time.Second)); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(rep.Problems(), "\n")
	for _, want := range []string{"request: http://127.0.0.1:9/planted.png", "planted error", "planted exception", "planted alert"} {
		if !strings.Contains(got, want) {
			t.Errorf("the browser check missed %q; it saw:\n%s", want, got)
		}
	}
}

// Two charts of a real trace (leak_module_cache) on one page (a page load
// costs seconds of CPU): the first's tooltip lists the lines holding the
// most memory at the hovered time, from the trace's lifetimes, a hostile
// line name as text; the second's explorer is bounded (checkExplorerBound).
func TestRealTraceChartsInBrowser(t *testing.T) {
	tr := memtest.NamedTrace(t, "leak_module_cache")
	attr, lts := chrometrace.Attribute(tr), memtimeline.Lifetimes(tr, -1)
	c := rules.TraceCharts(tr)[0]
	spec := Spec{ID: "holders0", Title: c.Title, StartNs: c.StartNs, Allocated: c.Allocated, Reserved: c.Reserved}
	spec.Holders = memtimeline.HolderSamples(tr, attr, lts, 0, 200, 3)
	if len(spec.Holders) < 100 {
		t.Fatalf("%d holder samples", len(spec.Holders))
	}
	spec.Holders[len(spec.Holders)/2].Lines = append(spec.Holders[len(spec.Holders)/2].Lines, memtimeline.Share{Name: `<img id=pwn src=x onerror=alert(1)>`, Bytes: 1})
	bound := boundSpec(tr, attr, lts)
	path := writePage(t, "holders.html", "holders", spec, bound)
	ctx, _ := openPage(t, path, true)
	box := eval[[]float64](t, ctx, `(function(){var r=document.getElementById("holders0").getBoundingClientRect();return [r.left,r.top,r.width,r.height];})()`)
	seen := false
	for _, fx := range []float64{0.5, 0.3, 0.7} {
		if err := hover(ctx, box[0]+box[2]*fx, box[1]+box[3]/2); err != nil {
			t.Fatal(err)
		}
		text := eval[string](t, ctx, `document.getElementById("holders0").innerText`)
		if strings.Contains(text, "alive then, by line:") && strings.Contains(text, ".py(") {
			seen = true
			break
		}
	}
	if !seen {
		t.Error("the tooltip never listed the lines alive at the hovered time")
	}
	if n := eval[int](t, ctx, `document.querySelectorAll("#pwn").length`); n != 0 {
		t.Error("a holder name became an element")
	}
	t.Run("ExplorerBound", func(t *testing.T) { checkExplorerBound(t, ctx, bound) })
}
