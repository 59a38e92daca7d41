package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/torchmem/torchmem/cmd/internal/report/chart/browsertest"
	"github.com/torchmem/torchmem/memtimeline/memtest"
)

// The report, opened in a real headless Chromium: the chart draws on a
// canvas, nothing is logged as an error, nothing is requested but the page.
func TestReportRendersInBrowser(t *testing.T) {
	t.Parallel() // see torchmem: which tests may run side by side
	out := filepath.Join(t.TempDir(), "report.html")
	if _, errOut, code := torchmem(t, "report", realTrace("leak_module_cache"), memtest.Testdata("snapshots", "leak_module_cache.pickle.gz"), "-o", out); code != exitFindings { // the leak fails the report like check
		t.Fatalf("exit %d: %s", code, errOut)
	}
	ctx, _ := browsertest.OpenPage(t, out, true) // fails the test on any request, error or dialog
	canvases, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll(".torchmem-chart canvas").length`))
	if err != nil {
		t.Fatal(err)
	}
	if canvases < 2 {
		t.Errorf("%d chart canvases, want the trace's and the snapshot's", canvases)
	}
}

// An operator named like markup is shown as text and runs nothing.
func TestReportHostileNamesInBrowser(t *testing.T) {
	t.Parallel() // see torchmem: which tests may run side by side
	dir := t.TempDir()
	trace := filepath.Join(dir, "hostile.json")
	if err := os.WriteFile(trace, []byte(hostileTrace), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "r.html")
	if _, errOut, code := torchmem(t, "report", trace, "-o", out); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	ctx, _ := browsertest.OpenPage(t, out, true) // a dialog from alert() would fail the test
	imgs, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("img").length`))
	if err != nil {
		t.Fatal(err)
	}
	text, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`))
	if err != nil {
		t.Fatal(err)
	}
	if imgs != 0 {
		t.Errorf("%d <img> elements: a name became markup", imgs)
	}
	if !strings.Contains(text, "<img src=x onerror=alert(1)>") {
		t.Error("the hostile operator name is not shown as text")
	}
}

// The answer is on the first screen: the verdict block at the top with
// its memory chart right below the verdict lines, the findings within the
// first 1800 px (they were ~3,100 px down before the layout put the
// verdict and findings first; the chart moved up takes ~450 px).
func TestReportAnswerOnFirstScreen(t *testing.T) {
	t.Parallel() // see torchmem: which tests may run side by side
	out := filepath.Join(t.TempDir(), "report.html")
	torchmem(t, "report", realTrace("leak_module_cache"), "-o", out)
	ctx, _ := browsertest.OpenPage(t, out, true)
	tops, err := chromedp.Run(ctx, chromedp.Evaluate[[]float64](`(function () {
  function top(el) { return el ? el.getBoundingClientRect().top + window.scrollY : -1; }
  var h2 = Array.prototype.filter.call(document.querySelectorAll("h2"), function (h) { return h.textContent === "Findings"; })[0];
  return [top(document.querySelector("section.answer")), top(h2), top(document.querySelector(".torchmem-chart"))];
})()`))
	if err != nil {
		t.Fatal(err)
	}
	answer, findings, chart := tops[0], tops[1], tops[2]
	t.Logf("verdict at %.0f px, findings at %.0f px, first chart at %.0f px", answer, findings, chart)
	if answer < 0 || answer > 300 || findings < 0 || findings > 1800 || chart < answer || chart > findings {
		t.Errorf("verdict at %.0f px, findings at %.0f px, chart at %.0f px", answer, findings, chart)
	}
}
