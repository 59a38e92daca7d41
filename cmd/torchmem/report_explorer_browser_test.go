package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
	"github.com/torchmem/torchmem/cmd/internal/report/chart/browsertest"
	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/memtimeline/memtest"
	"github.com/torchmem/torchmem/rules"
)

// drag presses the mouse at (x0, y), moves it to (x1, y) and releases it,
// as a user brushing a range does.
func drag(ctx context.Context, x0, x1, y float64) error {
	acts := []chromedp.Action[chromedp.Void]{
		chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, x0, y),
		chromedp.MouseEvent(input.DispatchMouseEventTypeMousePressed, x0, y, chromedp.ButtonLeft, chromedp.ClickCount(1)),
	}
	for k := 1; k <= 10; k++ {
		acts = append(acts, chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, x0+(x1-x0)*float64(k)/10, y, chromedp.ButtonLeft))
	}
	acts = append(acts,
		chromedp.MouseEvent(input.DispatchMouseEventTypeMouseReleased, x1, y, chromedp.ButtonLeft, chromedp.ClickCount(1)),
		chromedp.Sleep(600*time.Millisecond))
	return chromedp.Do(ctx, acts...)
}

var rangeNote = regexp.MustCompile(`^(\d+) allocations? alive or allocated between ([\d.]+) ms and ([\d.]+) ms`)

// The explorer on a real run: brushing a range of the memory chart with
// the mouse lists the allocations alive or allocated in it (the same ones
// the trace's lifetimes give), the table sorts by a column, and clicking a
// row shows its Python stack.
func TestReportExplorerInBrowser(t *testing.T) {
	t.Parallel() // see torchmem: which tests may run side by side
	trace := memtest.Testdata("gpu", "leak_hook_every_step", "trace.json.gz")
	out := filepath.Join(t.TempDir(), "report.html")
	if _, errOut, code := torchmem(t, "report", trace, "-o", out); code != exitFindings {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	ctx, _ := browsertest.OpenPage(t, out, true)
	box := browsertest.Eval[[]float64](t, ctx, `(function () {
  var el = document.querySelector(".torchmem-chart");
  el.scrollIntoView();
  var c = echarts.getInstanceByDom(el), g = c.getModel().getComponent("grid").coordinateSystem.getRect(), r = el.getBoundingClientRect();
  return [r.left + g.x, r.top + g.y, g.width, g.height];
})()`)
	x0, x1, y := box[0]+0.30*box[2], box[0]+0.55*box[2], box[1]+0.5*box[3]
	if err := drag(ctx, x0, x1, y); err != nil {
		t.Fatal(err)
	}
	note := browsertest.Eval[string](t, ctx, `document.querySelector(".torchmem-explorer .tx-count").textContent`)
	m := rangeNote.FindStringSubmatch(note)
	if m == nil {
		t.Fatalf("after brushing, the explorer says %q", note)
	}
	rows := browsertest.Eval[int](t, ctx, `document.querySelectorAll(".torchmem-explorer tr.tx-row").length`)
	n, _ := strconv.Atoi(m[1])
	lo, _ := strconv.ParseFloat(m[2], 64)
	hi, _ := strconv.ParseFloat(m[3], 64)
	// The same range from the trace's own lifetimes.
	tr := memtest.Trace(t, trace)
	in := &rules.Input{Source: trace, Rank: -1, Trace: tr}
	spec := rules.TraceCharts(tr)[0]
	ex := memtimeline.TraceExplorer(tr, in.Attribution(), in.Lifetimes(-1), 0, 0)
	want := 0
	ms := func(ns int64) float64 { return float64(ns-spec.StartNs) / 1e6 }
	for _, a := range ex.Allocs {
		if (a.StartNs < 0 || ms(a.StartNs) <= hi+0.0005) && (a.EndNs < 0 || ms(a.EndNs) >= lo-0.0005) {
			want++
		}
	}
	t.Logf("brushed %.3f..%.3f ms: %q, %d rows; the lifetimes give %d of %d", lo, hi, note, rows, want, len(ex.Allocs))
	if n != want || rows != min(n, 500) || n == 0 || n == len(ex.Allocs) {
		t.Errorf("the explorer lists %d (%d rows) in %.3f..%.3f ms; the trace's lifetimes give %d of %d", n, rows, lo, hi, want, len(ex.Allocs))
	}
	// Largest first; a click on Size sorts smallest first.
	sizes := func() []string {
		return browsertest.Eval[[]string](t, ctx, `Array.prototype.map.call(document.querySelectorAll(".torchmem-explorer tr.tx-row"), function (r) { return r.getAttribute("data-alloc"); })`)
	}
	first := sizes()
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`.torchmem-explorer th[data-col="0"]`)), chromedp.Sleep(100*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	second := sizes()
	byteOf := func(idx string) int64 {
		k, _ := strconv.Atoi(idx)
		return ex.Allocs[k].Bytes
	}
	if byteOf(first[0]) < byteOf(first[len(first)-1]) || byteOf(second[0]) > byteOf(second[len(second)-1]) || byteOf(first[0]) == byteOf(second[0]) {
		t.Errorf("not sorted by size: largest first %d..%d, after a click %d..%d", byteOf(first[0]), byteOf(first[len(first)-1]), byteOf(second[0]), byteOf(second[len(second)-1]))
	}
	// A row's click shows its stack: the frames the trace has for it.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`.torchmem-explorer tr.tx-row`)), chromedp.Sleep(100*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	stack := browsertest.Eval[string](t, ctx, `document.querySelector(".torchmem-explorer .tx-stack").textContent`)
	k, _ := strconv.Atoi(second[0])
	a := ex.Allocs[k]
	if !strings.Contains(stack, "Python stack (outermost first):") || len(a.Stack) > 0 && !strings.Contains(stack, a.Stack[len(a.Stack)-1]) || !strings.Contains(stack, memtimeline.FormatBytes(a.Bytes)) {
		t.Errorf("the stack shown for allocation %d (%v) is:\n%s", k, a.Stack, stack)
	}
	// ... and shades its lifetime on the chart.
	band := browsertest.Eval[[]float64](t, ctx, `(function () {
  var s = echarts.getInstanceByDom(document.querySelector(".torchmem-chart")).getOption().series.filter(function (s) { return s.id === "torchmem-selected"; })[0];
  return s ? [s.markArea.data[0][0].xAxis, s.markArea.data[0][1].xAxis] : [];
})()`)
	if len(band) != 2 || a.StartNs >= 0 && absDiff(band[0]-ms(a.StartNs)) > 0.001 || a.EndNs >= 0 && absDiff(band[1]-ms(a.EndNs)) > 0.001 {
		t.Errorf("the chart shades %v for a block alive %.3f..%.3f ms", band, ms(a.StartNs), ms(a.EndNs))
	}
	if dir := os.Getenv("TORCHMEM_SCREENSHOT_DIR"); dir != "" {
		png, _ := chromedp.Run(ctx, chromedp.CaptureScreenshot())
		os.WriteFile(filepath.Join(dir, "explorer.png"), png, 0o644)
	}
}

// An allocator snapshot's history has the explorer too: a click on a
// moment lists the blocks alive then, and a row's click shows the stack
// torch recorded for it. The same page's fill map says what its digits
// mean (checked first, on the page as loaded: one page for both, a page
// load costs seconds of CPU).
func TestReportSnapshotExplorerInBrowser(t *testing.T) {
	t.Parallel() // see torchmem: which tests may run side by side
	out := filepath.Join(t.TempDir(), "report.html")
	torchmem(t, "report", memtest.Testdata("snapshots", "leak_module_cache.pickle.gz"), "-o", out)
	ctx, _ := browsertest.OpenPage(t, out, true)
	t.Run("FillMapExplained", func(t *testing.T) {
		if text := browsertest.Eval[string](t, ctx, `document.body.innerText`); !strings.Contains(text, "'1'-'9' tenths in use, '0' under a tenth, '.' free") {
			t.Error("the fill map's digits are not explained")
		}
	})
	box := browsertest.Eval[[]float64](t, ctx, `(function () {
  var el = document.querySelector(".torchmem-chart");
  el.scrollIntoView();
  var c = echarts.getInstanceByDom(el), g = c.getModel().getComponent("grid").coordinateSystem.getRect(), r = el.getBoundingClientRect();
  return [r.left + g.x, r.top + g.y, g.width, g.height];
})()`)
	x, y := box[0]+0.6*box[2], box[1]+0.5*box[3]
	if err := chromedp.Do(ctx,
		chromedp.MouseEvent(input.DispatchMouseEventTypeMousePressed, x, y, chromedp.ButtonLeft, chromedp.ClickCount(1)),
		chromedp.MouseEvent(input.DispatchMouseEventTypeMouseReleased, x, y, chromedp.ButtonLeft, chromedp.ClickCount(1)),
		chromedp.Sleep(500*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	note := browsertest.Eval[string](t, ctx, `document.querySelector(".torchmem-explorer .tx-count").textContent`)
	headers := browsertest.Eval[string](t, ctx, `document.querySelector(".torchmem-explorer tr").textContent`)
	if !regexp.MustCompile(`^[1-9]\d* allocations? alive or allocated at [\d.]+ ms`).MatchString(note) || strings.Contains(headers, "Operator") {
		t.Fatalf("after a click on the snapshot's chart the explorer says %q, headers %q", note, headers)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`.torchmem-explorer tr.tx-row`)), chromedp.Sleep(100*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	stack := browsertest.Eval[string](t, ctx, `document.querySelector(".torchmem-explorer .tx-stack").textContent`)
	if !strings.Contains(stack, ".py(") {
		t.Errorf("no Python frame in the stack shown:\n%s", stack)
	}
	t.Logf("%s\n%s", note, stack)
}

func absDiff(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}
