package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
	"github.com/torchmem/torchmem/cmd/internal/report/chart/browsertest"
	"github.com/torchmem/torchmem/memtimeline/memtest"
)

// The report of a leaking run's trace and snapshot, and of a trace whose
// names are markup, opened in a real headless Chromium: one page (a page
// load costs seconds of CPU) for what each part must do there. On the
// whole page nothing is logged as an error, nothing is requested but the
// page, and no dialog opens (an alert() from a name would).
func TestReportInBrowser(t *testing.T) {
	t.Parallel() // see torchmem: which tests may run side by side
	dir := t.TempDir()
	hostile := filepath.Join(dir, "hostile.json")
	if err := os.WriteFile(hostile, []byte(hostileTrace), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "report.html")
	snapshot := memtest.Testdata("snapshots", "leak_module_cache.pickle.gz")
	if _, errOut, code := torchmem(t, "report", realTrace("leak_module_cache"), snapshot, hostile, "-o", out); code != exitFindings { // the leak fails the report like check
		t.Fatalf("exit %d: %s", code, errOut)
	}
	ctx, _ := browsertest.OpenPage(t, out, true) // fails the test on any request, error or dialog

	// The charts draw on canvases: the trace's, the snapshot's and the
	// hostile trace's.
	t.Run("Renders", func(t *testing.T) {
		if canvases := browsertest.Eval[int](t, ctx, `document.querySelectorAll(".torchmem-chart canvas").length`); canvases < 3 {
			t.Errorf("%d chart canvases, want the trace's, the snapshot's and the hostile trace's", canvases)
		}
	})

	// An operator named like markup is shown as text and runs nothing.
	t.Run("HostileNames", func(t *testing.T) {
		if imgs := browsertest.Eval[int](t, ctx, `document.querySelectorAll("img").length`); imgs != 0 {
			t.Errorf("%d <img> elements: a name became markup", imgs)
		}
		if text := browsertest.Eval[string](t, ctx, `document.body.innerText`); !strings.Contains(text, "<img src=x onerror=alert(1)>") {
			t.Error("the hostile operator name is not shown as text")
		}
	})

	// The snapshot's fill map says what its digits mean.
	t.Run("FillMapExplained", func(t *testing.T) {
		if text := browsertest.Eval[string](t, ctx, `document.body.innerText`); !strings.Contains(text, "'1'-'9' tenths in use, '0' under a tenth, '.' free") {
			t.Error("the fill map's digits are not explained")
		}
	})

	// An allocator snapshot's history has the explorer too: a click on a
	// moment of the snapshot's chart lists the blocks alive then, and a
	// row's click shows the stack torch recorded for it.
	t.Run("SnapshotExplorer", func(t *testing.T) {
		const chartJS = `Array.prototype.filter.call(document.querySelectorAll("section.answer"), function (s) {
  return s.querySelector("h2").textContent.indexOf(".pickle.gz") >= 0;
})[0].querySelector(".torchmem-chart")`
		box := browsertest.Eval[[]float64](t, ctx, `(function () {
  var el = `+chartJS+`;
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
		explorer := `document.getElementById((` + chartJS + `).id + "-explorer")`
		note := browsertest.Eval[string](t, ctx, explorer+`.querySelector(".tx-count").textContent`)
		headers := browsertest.Eval[string](t, ctx, explorer+`.querySelector("tr").textContent`)
		if !regexp.MustCompile(`^[1-9]\d* allocations? alive or allocated at [\d.]+ ms`).MatchString(note) || strings.Contains(headers, "Operator") {
			t.Fatalf("after a click on the snapshot's chart the explorer says %q, headers %q", note, headers)
		}
		id := browsertest.Eval[string](t, ctx, `(`+chartJS+`).id`)
		if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#`+id+`-explorer tr.tx-row`)), chromedp.Sleep(100*time.Millisecond)); err != nil {
			t.Fatal(err)
		}
		stack := browsertest.Eval[string](t, ctx, explorer+`.querySelector(".tx-stack").textContent`)
		if !strings.Contains(stack, ".py(") {
			t.Errorf("no Python frame in the stack shown:\n%s", stack)
		}
		t.Logf("%s\n%s", note, stack)
	})
}
