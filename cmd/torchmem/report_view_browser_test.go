package main

import (
	"path/filepath"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/torchmem/torchmem/cmd/internal/report/chart/browsertest"
	"github.com/torchmem/torchmem/memtimeline/memtest"
)

// chartGeometryJS reports, for every chart on the page, its x axis extent,
// the x of each marker line and the top of each line series' data, the
// legend's bottom edge, the plot's top edge and the chart's width.
const chartGeometryJS = `(function () {
  var out = [];
  document.querySelectorAll(".torchmem-chart").forEach(function (el) {
    var c = echarts.getInstanceByDom(el);
    if (!c) { return; }
    var m = c.getModel(), o = c.getOption();
    var ext = m.getComponent("xAxis", 0).axis.scale.getExtent();
    var yext = m.getComponent("yAxis", 0).axis.scale.getExtent();
    var marks = [], pins = [];
    o.series.forEach(function (s) {
      ((s.markLine && s.markLine.data) || []).forEach(function (d) { marks.push(Number(d.xAxis)); });
      ((s.markPoint && s.markPoint.data) || []).forEach(function (d) { pins.push(Number(d.coord[1])); });
    });
    var legend = c.getViewOfComponentModel(m.getComponent("legend"));
    var r = legend.group.getBoundingRect();
    var grid = m.getComponent("grid").coordinateSystem.getRect();
    out.push({id: el.id, shown: el.offsetParent !== null, x0: ext[0], x1: ext[1], y1: yext[1], marks: marks, pins: pins,
      legendBottom: legend.group.y + r.y + r.height, legendRight: legend.group.x + r.x + r.width,
      gridTop: grid.y, width: c.getWidth()});
  });
  return out;
})()`

type chartGeometry struct {
	ID                        string
	Shown                     bool
	X0, X1, Y1                float64
	Marks, Pins               []float64
	LegendBottom, LegendRight float64
	GridTop, Width            float64
}

// On a run that ends in an out-of-memory error (a trace, its snapshot and
// step log, recorded on an H200) every marker is inside its chart: the x
// axis used to end at the last sample (101.5 ms) and the OOM marker was at
// 112.6 ms, off the chart; the legend fits above the plot and the memory
// chart is on the first screen, right below the verdict.
func TestReportMarkersInViewInBrowser(t *testing.T) {
	t.Parallel() // see torchmem: which tests may run side by side
	out := filepath.Join(t.TempDir(), "report.html")
	if _, errOut, code := torchmem(t, "report", memtest.Testdata("gpu", "hf_trainer_oom"), "-o", out); code != exitFindings {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	ctx, _ := browsertest.OpenPage(t, out, true)
	charts, err := chromedp.Run(ctx, chromedp.Evaluate[[]chartGeometry](chartGeometryJS))
	if err != nil {
		t.Fatal(err)
	}
	marked := 0
	for _, c := range charts {
		for _, x := range c.Marks {
			marked++
			if x < c.X0 || x > c.X1 {
				t.Errorf("chart %s: marker at %.3f ms outside the x axis [%.3f, %.3f]", c.ID, x, c.X0, c.X1)
			}
		}
		for _, y := range c.Pins {
			if y > c.Y1 {
				t.Errorf("chart %s: marker pin at %.0f bytes above the y axis (ends at %.0f)", c.ID, y, c.Y1)
			}
		}
		if c.Shown && (c.LegendBottom > c.GridTop || c.LegendRight > c.Width) {
			t.Errorf("chart %s: the legend (bottom %.0f, right %.0f) overlaps the plot (top %.0f) or leaves the chart (width %.0f)", c.ID, c.LegendBottom, c.LegendRight, c.GridTop, c.Width)
		}
	}
	if marked < 2 {
		t.Fatalf("%d markers over %d charts: want the OOM on the trace's chart and on the run's", marked, len(charts))
	}
	tops, err := chromedp.Run(ctx, chromedp.Evaluate[[]float64](`(function () {
  function top(el) { return el ? el.getBoundingClientRect().top + window.scrollY : -1; }
  var a = document.querySelector("section.answer");
  return [top(a.querySelector("table.answer-lines")), top(a.querySelector(".torchmem-chart")), window.innerHeight];
})()`))
	if err != nil {
		t.Fatal(err)
	}
	lines, chart, screen := tops[0], tops[1], tops[2]
	t.Logf("%d charts, %d markers; verdict lines at %.0f px, memory chart at %.0f px, screen %.0f px", len(charts), marked, lines, chart, screen)
	if chart < lines || chart > screen-120 {
		t.Errorf("the memory chart starts at %.0f px: want it below the verdict lines (%.0f px) and starting on the first %.0f px screen", chart, lines, screen)
	}
}
