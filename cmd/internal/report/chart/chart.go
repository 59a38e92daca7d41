package chart

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/go-echarts/go-echarts/v2/charts"
	"github.com/go-echarts/go-echarts/v2/opts"

	"github.com/torchmem/torchmem/memtimeline"
)

// echartsMinJS is dist/echarts.min.js of the echarts 5.6.0 npm package,
// embedded so that reports open offline and make no network request
// (go-echarts' AssetsHost only moves the URL). Apache-2.0: see
// assets/NOTICE.
//
//go:embed assets/echarts.min.js
var echartsMinJS string

// EchartsVersion is the version of the embedded echarts.
const EchartsVersion = "5.6.0"

// EchartsJS returns the embedded echarts library source.
func EchartsJS() string { return echartsMinJS }

// EchartsScript returns the embedded echarts as one inline <script>
// element, for a page's <head>; include it once, before any Snippet.
func EchartsScript() template.HTML {
	// The library is trusted, pinned content; it contains no "</script"
	// (TestEchartsScriptIsInlineSafe), so inlining it cannot end the element.
	return template.HTML("<script>" + echartsMinJS + "</script>")
}

// DefaultMaxPoints bounds the points each series keeps in a chart.
// 4000 min/max-preserving points keep every peak and keep a 100k-point
// trace's page small; zooming shows the same points spread wider.
const DefaultMaxPoints = 4000

// Spec is one memory-over-time chart, normally one per device.
// Every string in it may come from a file and is treated as untrusted.
type Spec struct {
	// ID is the chart element's id; letters, digits, '-' and '_', starting
	// with a letter. Generated when empty.
	ID string
	// Title is shown above the chart, e.g. "cuda:0".
	Title string
	// StartNs is the x origin (trace start): x = (t - StartNs) in ms.
	StartNs int64
	// Allocated and Reserved are drawn as lines; either may be empty.
	Allocated memtimeline.Series
	Reserved  memtimeline.Series
	// Lines are more lines drawn after them (other sources of one run);
	// PointLines[i] shows line i's points (a per-step log's few samples).
	Lines      []memtimeline.Series
	PointLines []bool
	// Categories are drawn as stacked areas (e.g. exported.Timeline's
	// CategorySeries); they must share one T.
	Categories []memtimeline.Series
	// Steps are shaded bands, e.g. ProfilerStep#N.
	Steps []StepSpan
	// Markers are vertical lines with a pin, e.g. out-of-memory events.
	Markers []Marker
	// MaxPoints per series after peak-preserving downsampling
	// (DefaultMaxPoints when 0).
	MaxPoints int
	// HeightPx is the chart's height in CSS pixels (420 when 0).
	HeightPx int
	// Holders are what held the most memory at moments of the chart; the
	// tooltip lists the last sample at or before the hovered time.
	Holders []memtimeline.HolderSample
	// Explorer, when set, lists the allocations of a brushed time range
	// under the chart (explorer.go).
	Explorer *Explorer
}

// StepSpan is a named interval on the time axis.
type StepSpan struct {
	Name           string
	StartNs, EndNs int64
}

// Marker is a named instant, drawn at Bytes on the value axis.
type Marker struct {
	Name  string
	TNs   int64
	Bytes int64
}

// categoryColors are the colours torch's own memory timeline plot gives
// each category (torch/profiler/_memory_profiler.py), so the two pictures
// read the same, and a category keeps its colour from chart to chart.
var categoryColors = map[string]string{
	"PARAMETER":       "darkgreen",
	"OPTIMIZER_STATE": "goldenrod",
	"INPUT":           "black",
	"TEMPORARY":       "mediumpurple",
	"ACTIVATION":      "red",
	"GRADIENT":        "mediumblue",
	"AUTOGRAD_DETAIL": "royalblue",
	"Unknown":         "grey",
}

// Line colours, apart from every category colour.
const (
	allocatedColor = "#c2185b"
	reservedColor  = "#00838f"
)

// maxLabelledSteps is the most step bands drawn with their name.
const maxLabelledSteps = 24

var chartIDPattern = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]{0,63}$`)

var chartCounter atomic.Int64

// chartRuntimeJS turns the JSON options into a chart. It is static code:
// the page's only dynamic parts are the element id (validated against
// chartIDPattern) and the options, which travel as JSON inside a
// type="application/json" element with <, > and & escaped, and are read with
// JSON.parse, so no name from a file is ever parsed as HTML or JS. Names
// shown in the tooltip (rendered as HTML by echarts) go through esc().
const chartRuntimeJS = `(function () {
  var id = %s;
  var el = document.getElementById(id);
  var opt = JSON.parse(document.getElementById(id + "-option").textContent);
  // [[x_ms, [[name, bytes], ...]], ...], sorted by x: not an echarts option.
  var holders = opt.torchmemHolders || [];
  delete opt.torchmemHolders;
  // The allocations the explorer lists (explorer.go), and brushing a time
  // range to pick them.
  var explorer = opt.torchmemExplorer || null;
  delete opt.torchmemExplorer;
  if (explorer) {
    opt.brush = {xAxisIndex: 0, brushType: "lineX", brushMode: "single", transformable: false, throttleType: "debounce", throttleDelay: 120,
      brushStyle: {color: "rgba(30,100,220,0.12)", borderColor: "rgba(30,100,220,0.7)"}, outOfBrush: {colorAlpha: 1, opacity: 1}};
    opt.toolbox = {right: 30, top: 0, feature: {brush: {type: ["lineX", "clear"], title: {lineX: "select a time range", clear: "clear the selection"}}}};
  }
  function esc(s) {
    return String(s).replace(/[&<>"']/g, function (c) {
      return {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}[c];
    });
  }
  function fmtBytes(b) {
    var a = Math.abs(b);
    // As torch prints and the text says: GB = 2^30 bytes, MB = 2^20.
    if (a >= 1073741824) return (b / 1073741824).toFixed(2) + " GB";
    if (a >= 1048576) return (b / 1048576).toFixed(2) + " MB";
    if (a >= 1024) return (b / 1024).toFixed(2) + " KB";
    return b + " B";
  }
  opt.yAxis[0].axisLabel = {formatter: fmtBytes};
  opt.xAxis[0].axisLabel = {formatter: function (v) { return v + " ms"; }};
  // Memory is a step function and each series has its own sample times,
  // so echarts' axis tooltip (nearest point of one series) would show one
  // line only: look every visible series up at the hovered time instead,
  // taking the last point at or before it.
  function valueAt(s, x) {
    var xi = (s.encode && s.encode.x === 1) ? 1 : 0, data = s.data;
    var lo = 0, hi = data.length - 1, found = -1;
    while (lo <= hi) {
      var mid = (lo + hi) >> 1;
      if (data[mid][xi] <= x) { found = mid; lo = mid + 1; } else { hi = mid - 1; }
    }
    return found >= 0 ? data[found][1 - xi] : null;
  }
  var chart;
  opt.tooltip.formatter = function (ps) {
    if (!Array.isArray(ps)) ps = [ps];
    if (ps.length === 0) return "";
    if (ps[0].componentType !== "series") return esc(ps[0].name);
    var x = Number(ps[0].axisValue);
    var cur = chart.getOption();
    var selected = (cur.legend && cur.legend[0] && cur.legend[0].selected) || {};
    var palette = cur.color || [];
    var out = [esc(x.toFixed(3)) + " ms"];
    // The step band under the pointer, by name (labels may be hidden).
    for (var k = 0; k < opt.series.length; k++) {
      var bands = (opt.series[k].markArea && opt.series[k].markArea.data) || [];
      for (var b = 0; b < bands.length; b++) {
        if (bands[b][0].xAxis <= x && x < bands[b][1].xAxis) out[0] += " \u2014 " + esc(bands[b][0].name);
      }
    }
    for (var i = opt.series.length - 1; i >= 0; i--) {
      var s = opt.series[i];
      if (selected[s.name] === false) continue;
      var v = valueAt(s, x);
      if (v === null) continue;
      // The colour echarts actually drew the series with.
      var model = chart.getModel().getSeriesByIndex(i);
      var style = model && model.getData().getVisual("style");
      var color = (style && (style.stroke || style.fill)) || (palette.length ? palette[i %% palette.length] : "#888");
      out.push('<span style="display:inline-block;margin-right:4px;border-radius:5px;width:10px;height:10px;background:' +
        esc(color) + '"></span>' + esc(s.name) + ": " + esc(fmtBytes(v)));
    }
    var h = null;
    for (var j = 0; j < holders.length && holders[j][0] <= x; j++) h = holders[j];
    if (h && h[1].length) {
      out.push("<b>alive then, by line:</b>");
      for (var q = 0; q < h[1].length; q++) out.push(esc(h[1][q][0]) + ": " + esc(fmtBytes(h[1][q][1])));
    }
    return out.join("<br>");
  };
  chart = echarts.init(el, null, {renderer: "canvas"});
  chart.setOption(opt);
  // The legend wraps onto as many rows as its names need (a scrolling
  // legend pages and cuts long file names): the plot starts below it.
  function fitLegend() {
    var lm = chart.getModel().getComponent("legend");
    var view = lm && chart.getViewOfComponentModel(lm);
    if (!view) return;
    var r = view.group.getBoundingRect();
    var top = Math.max(70, Math.ceil(view.group.y + r.y + r.height + 24));
    if (chart.getOption().grid[0].top !== top) chart.setOption({grid: [{top: top}]});
  }
  fitLegend();
  window.addEventListener("resize", function () { chart.resize(); fitLegend(); });
  if (explorer) window.torchmemExplorer(chart, document.getElementById(id + "-explorer"), explorer, fmtBytes);
})();`

// Snippet renders c as HTML to embed in a page that has included
// EchartsScript once: a <div> for the chart, its options as JSON, and a
// small script that draws it. Series are downsampled with DownsampleIndices
// (peaks kept exactly) and echarts' 'lttb' sampling thins them further on
// screen; data are [x_ms, bytes] pairs.
func Snippet(c Spec) (template.HTML, error) {
	id := c.ID
	if id == "" {
		id = "torchmem-chart-" + strconv.FormatInt(chartCounter.Add(1), 10)
	}
	if !chartIDPattern.MatchString(id) {
		return "", fmt.Errorf("chart id %q: want a letter then letters, digits, '-' or '_'", id)
	}
	option, err := chartOption(c)
	if err != nil {
		return "", err
	}
	if len(c.Holders) > 0 {
		hs := make([][2]any, len(c.Holders))
		for i, h := range c.Holders {
			lines := make([][2]any, len(h.Lines))
			for k, l := range h.Lines {
				lines[k] = [2]any{l.Name, l.Bytes}
			}
			hs[i] = [2]any{msNumber(h.TNs, c.StartNs), lines}
		}
		option["torchmemHolders"] = hs
	}
	if c.Explorer != nil {
		option["torchmemExplorer"] = toJSON(c.Explorer, c.StartNs)
	}
	// json.Marshal escapes <, >, &, U+2028 and U+2029, so the JSON cannot
	// close the <script> element that carries it.
	optJSON, err := json.Marshal(option)
	if err != nil {
		return "", fmt.Errorf("chart %q: %w", c.Title, err)
	}
	idJS, _ := json.Marshal(id)
	height := c.HeightPx
	if height <= 0 {
		height = 420
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<div class="torchmem-chart" id="%s" style="width:100%%;height:%dpx"></div>`+"\n", id, height)
	fmt.Fprintf(&b, `<script type="application/json" id="%s-option">%s</script>`+"\n", id, optJSON)
	if c.Explorer != nil {
		fmt.Fprintf(&b, `<div class="torchmem-explorer" id="%s-explorer"></div>`+"\n", id)
		b.WriteString(explorerCSS)
		b.WriteString("<script>" + strings.Replace(explorerRuntimeJS, "__MAX__", strconv.Itoa(explorerMaxRows), 1) + "</script>\n")
	}
	fmt.Fprintf(&b, "<script>"+chartRuntimeJS+"</script>\n", idJS)
	return template.HTML(b.String()), nil
}

// chartOption builds the echarts option object with go-echarts: the
// spec checked, the axes, the stacked categories, the lines with the step
// bands and markers on the first of them.
func chartOption(c Spec) (map[string]any, error) {
	if err := checkSpec(c); err != nil {
		return nil, err
	}
	maxPoints := c.MaxPoints
	if maxPoints <= 0 {
		maxPoints = DefaultMaxPoints
	}
	d := &drawing{c: c, line: newLine(c), maxPoints: maxPoints, v: &chartVisitor{data: map[int][][2]json.Number{}, swapped: map[int]bool{}}}
	d.categories() // first, so that the lines stay on top
	d.lines(markerOpts(c))
	d.line.Accept(d.v)
	d.line.Validate()
	option := d.line.JSON()
	if d.v.err != nil {
		return nil, fmt.Errorf("chart %q: %w", c.Title, d.v.err)
	}
	return option, nil
}

// checkSpec refuses a spec whose series cannot be drawn, or that has none.
func checkSpec(c Spec) error {
	if err := checkSeries(c.Allocated); err != nil {
		return fmt.Errorf("chart %q: allocated: %w", c.Title, err)
	}
	if err := checkSeries(c.Reserved); err != nil {
		return fmt.Errorf("chart %q: reserved: %w", c.Title, err)
	}
	for i, s := range c.Categories {
		if err := checkSeries(s); err != nil {
			return fmt.Errorf("chart %q: category %q: %w", c.Title, s.Name, err)
		}
		if !equalInt64s(s.T, c.Categories[0].T) {
			return fmt.Errorf("chart %q: category %d (%q) has other times than category 0: stacked areas must share T", c.Title, i, s.Name)
		}
	}
	for _, l := range c.Lines {
		if err := checkSeries(l); err != nil {
			return fmt.Errorf("chart %q: line %q: %w", c.Title, l.Name, err)
		}
	}
	if c.Allocated.Len() == 0 && c.Reserved.Len() == 0 && len(c.Categories) == 0 && len(c.Lines) == 0 {
		return fmt.Errorf("chart %q: nothing to draw (no allocated, reserved or category series)", c.Title)
	}
	return nil
}

// newLine is the chart with its title, legend, tooltip, zoom and axes.
func newLine(c Spec) *charts.Line {
	yTick := float64(binaryTickInterval(chartMaxBytes(c)))
	// The axes span the markers as well as the data: echarts' "dataMin" and
	// "dataMax" see the series only, and an out-of-memory marker after the
	// last sample fell outside the chart.
	lo, hi := timeExtent(c)
	xMin, xMax := msNumber(lo, c.StartNs), msNumber(hi, c.StartNs)
	var yMax any
	if top, data := chartMaxBytes(c), seriesMaxBytes(c); top > data {
		yMax = json.Number(strconv.FormatInt((top+int64(yTick)-1)/int64(yTick)*int64(yTick), 10))
	}
	line := charts.NewLine()
	line.SetGlobalOptions(
		charts.WithAnimation(false),
		charts.WithTitleOpts(opts.Title{Title: c.Title}),
		charts.WithLegendOpts(opts.Legend{Show: opts.Bool(true), Top: "28", Left: "80", Right: "30", Type: "plain"}),
		charts.WithTooltipOpts(opts.Tooltip{Show: opts.Bool(true), Trigger: "axis"}),
		charts.WithGridOpts(opts.Grid{Left: "80", Right: "30", Top: "70", Bottom: "70"}),
		charts.WithXAxisOpts(opts.XAxis{Type: "value", Name: "time (ms)", NameLocation: "middle", NameGap: 25, Min: xMin, Max: xMax}),
		// Ticks at a power of two bytes read as round MiB/GiB values
		// (1 GiB, 512 MiB), where echarts' decimal steps would give 953.7 MiB.
		charts.WithYAxisOpts(opts.YAxis{Type: "value", Name: "memory", MinInterval: yTick, MaxInterval: yTick, Max: yMax}),
		charts.WithDataZoomOpts(
			opts.DataZoom{Type: "inside", XAxisIndex: 0, FilterMode: "none"},
			opts.DataZoom{Type: "slider", XAxisIndex: 0, FilterMode: "none"},
		),
	)
	return line
}

// drawing adds a spec's series to its chart.
type drawing struct {
	c         Spec
	line      *charts.Line
	v         *chartVisitor
	maxPoints int
}

// add adds one series drawn as a step line with data (as [x, y] pairs).
func (d *drawing) add(s memtimeline.Series, data [][2]json.Number, options ...charts.SeriesOpts) {
	d.v.data[len(d.line.MultiSeries)] = data
	base := []charts.SeriesOpts{charts.WithLineChartOpts(opts.LineChart{
		Step: "end", ShowSymbol: opts.Bool(false), Symbol: "none",
	})}
	d.line.AddSeries(s.Name, nil, append(base, options...)...)
}

// categories draws the categories as stacked areas, downsampled alike.
func (d *drawing) categories() {
	c := d.c
	if len(c.Categories) == 0 {
		return
	}
	total := make([]int64, c.Categories[0].Len())
	for _, s := range c.Categories {
		for i, x := range s.V {
			total[i] += x
		}
	}
	idx := memtimeline.DownsampleIndices(total, d.maxPoints)
	for _, s := range c.Categories {
		if idx != nil {
			s = s.Pick(idx)
		}
		d.v.swapped[len(d.line.MultiSeries)] = true
		color := categoryColors[s.Name] // "" (palette) for other names
		d.add(s, stackedPairs(s, c.StartNs),
			charts.WithLineChartOpts(opts.LineChart{Stack: "categories", Step: "end", ShowSymbol: opts.Bool(false), Symbol: "none"}),
			charts.WithAreaStyleOpts(opts.AreaStyle{Opacity: opts.Float(0.55), Color: color}),
			charts.WithLineStyleOpts(opts.LineStyle{Width: 0, Color: color}),
			charts.WithItemStyleOpts(opts.ItemStyle{Color: color}),
		)
	}
}

// markerOpts are the step bands and the markers, as series options.
func markerOpts(c Spec) []charts.SeriesOpts {
	var markers []charts.SeriesOpts
	if len(c.Steps) > 0 {
		for i, st := range c.Steps {
			color := "rgba(120,120,120,0.10)"
			if i%2 == 1 {
				color = "rgba(120,120,120,0.04)"
			}
			markers = append(markers, charts.WithMarkAreaData([]opts.MarkAreaData{
				{Name: st.Name, XAxis: msNumber(st.StartNs, c.StartNs), MarkAreaStyle: opts.MarkAreaStyle{ItemStyle: &opts.ItemStyle{Color: color}}},
				{XAxis: msNumber(st.EndNs, c.StartNs)},
			}))
		}
		// Beyond a few dozen bands the labels overlap into a smear; the
		// tooltip names the band under the pointer anyway.
		markers = append(markers, charts.WithMarkAreaStyleOpts(opts.MarkAreaStyle{
			Label: &opts.Label{Show: opts.Bool(len(c.Steps) <= maxLabelledSteps), Position: "insideTop", Color: "#666"},
		}))
	}
	if len(c.Markers) > 0 {
		for _, m := range c.Markers {
			markers = append(markers,
				charts.WithMarkLineNameXAxisItemOpts(opts.MarkLineNameXAxisItem{Name: m.Name, XAxis: msNumber(m.TNs, c.StartNs)}),
				charts.WithMarkPointNameCoordItemOpts(opts.MarkPointNameCoordItem{
					Name: m.Name, Coordinate: []any{msNumber(m.TNs, c.StartNs), json.Number(strconv.FormatInt(m.Bytes, 10))},
					Value: "!",
				}),
			)
		}
		markers = append(markers,
			charts.WithMarkLineStyleOpts(opts.MarkLineStyle{
				Symbol:    []string{"none", "none"},
				Label:     &opts.Label{Show: opts.Bool(true), Formatter: "{b}", Position: "insideEndTop", Color: "#c00"},
				LineStyle: &opts.LineStyle{Color: "#c00", Type: "dashed", Width: 1.5},
			}),
			charts.WithMarkPointStyleOpts(opts.MarkPointStyle{Symbol: []string{"pin"}, SymbolSize: 36}),
		)
	}
	return markers
}

// lines draws allocated, reserved and the other lines, the bands and
// markers hung on the first line series drawn (allocated, else reserved,
// else the top category), so they show whatever the legend has on.
func (d *drawing) lines(markers []charts.SeriesOpts) {
	c := d.c
	attached := false
	attach := func() []charts.SeriesOpts {
		if attached {
			return nil
		}
		attached = true
		return markers
	}
	if c.Allocated.Len() > 0 {
		s := memtimeline.Downsample(c.Allocated, d.maxPoints)
		if s.Name == "" {
			s.Name = "allocated"
		}
		d.add(s, pairs(s, c.StartNs), append([]charts.SeriesOpts{
			charts.WithLineStyleOpts(opts.LineStyle{Width: 1.5, Color: allocatedColor}),
			charts.WithItemStyleOpts(opts.ItemStyle{Color: allocatedColor}),
		}, attach()...)...)
	}
	if c.Reserved.Len() > 0 {
		s := memtimeline.Downsample(c.Reserved, d.maxPoints)
		if s.Name == "" {
			s.Name = "reserved"
		}
		d.add(s, pairs(s, c.StartNs), append([]charts.SeriesOpts{
			charts.WithLineStyleOpts(opts.LineStyle{Width: 1.5, Type: "dashed", Color: reservedColor}),
			charts.WithItemStyleOpts(opts.ItemStyle{Color: reservedColor}),
		}, attach()...)...)
	}
	for i, l := range c.Lines {
		if l.Len() == 0 {
			continue
		}
		s := memtimeline.Downsample(l, d.maxPoints)
		few := i < len(c.PointLines) && c.PointLines[i]
		d.add(s, pairs(s, c.StartNs), append([]charts.SeriesOpts{
			charts.WithLineChartOpts(opts.LineChart{Step: "end", ShowSymbol: opts.Bool(few), Symbol: "circle", SymbolSize: 5}),
			charts.WithLineStyleOpts(opts.LineStyle{Width: 1.5}),
		}, attach()...)...)
	}
	if !attached && len(markers) > 0 {
		last := len(d.line.MultiSeries) - 1
		d.line.MultiSeries[last].ConfigureSeriesOpts(markers...)
	}
}

// chartVisitor adds what go-echarts has no field for: echarts' 'lttb'
// sampling per series, and data as compact [x, y] pairs (~30% smaller than
// opts.LineData objects).
type chartVisitor struct {
	charts.BaseConfigurationVisitor
	data map[int][][2]json.Number
	// swapped series carry [y, x] pairs: see stackedPairs.
	swapped map[int]bool
	err     error
}

func (v *chartVisitor) VisitSeriesOpt(series charts.MultiSeries) any {
	out := make([]map[string]any, len(series))
	for i, s := range series {
		b, err := json.Marshal(s)
		if err != nil {
			v.err = err
			return nil
		}
		m := map[string]any{}
		if err := json.Unmarshal(b, &m); err != nil {
			v.err = err
			return nil
		}
		m["sampling"] = "lttb"
		if v.swapped[i] {
			m["encode"] = map[string]int{"x": 1, "y": 0}
		}
		data := v.data[i]
		if data == nil {
			data = [][2]json.Number{}
		}
		m["data"] = data
		out[i] = m
	}
	return out
}

// timeExtent is the first and last time the chart shows: every series'
// samples, step band and marker.
func timeExtent(c Spec) (lo, hi int64) {
	first := true
	see := func(t int64) {
		if first || t < lo {
			lo = t
		}
		if first || t > hi {
			hi = t
		}
		first = false
	}
	for _, s := range append([]memtimeline.Series{c.Allocated, c.Reserved}, append(c.Lines, c.Categories...)...) {
		if n := s.Len(); n > 0 {
			see(s.T[0])
			see(s.T[n-1])
		}
	}
	dataLo, dataHi := lo, hi
	for _, m := range c.Markers {
		see(m.TNs)
	}
	// A marker beyond the data gets a margin, so that its line and pin are
	// not drawn on the axis' edge.
	pad := (hi - lo) / 40
	if lo < dataLo {
		lo -= pad
	}
	if hi > dataHi {
		hi += pad
	}
	return lo, hi
}

// chartMaxBytes is the highest value any drawn series or marker reaches,
// stacked categories summed.
func chartMaxBytes(c Spec) int64 {
	top := seriesMaxBytes(c)
	for _, m := range c.Markers {
		top = max(top, m.Bytes)
	}
	return top
}

// seriesMaxBytes is the highest value any drawn series reaches, stacked
// categories summed.
func seriesMaxBytes(c Spec) int64 {
	var top int64
	for _, s := range append([]memtimeline.Series{c.Allocated, c.Reserved}, c.Lines...) {
		if _, v, ok := s.Max(); ok {
			top = max(top, v)
		}
	}
	if len(c.Categories) > 0 {
		for i := range c.Categories[0].V {
			var sum int64
			for _, s := range c.Categories {
				sum += s.V[i]
			}
			top = max(top, sum)
		}
	}
	return top
}

// binaryTickInterval is the smallest power of two that splits [0, top]
// into at most 8 intervals.
func binaryTickInterval(top int64) int64 {
	iv := int64(1)
	for iv <= math.MaxInt64/16 && top > 8*iv { // bounded: 8*iv must not overflow
		iv *= 2
	}
	return iv
}

func checkSeries(s memtimeline.Series) error {
	if len(s.T) != len(s.V) {
		return fmt.Errorf("%d times but %d values", len(s.T), len(s.V))
	}
	return nil
}

func equalInt64s(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// stackedPairs writes [bytes, x_ms] for series drawn with encode {x: 1,
// y: 0}. echarts (5.6, dataStackHelper.enableDataStack) stacks the first
// numeric data column that is not time or ordinal; with [x, y] pairs on a
// value x axis that is x, so the times of stacked series were summed (an
// axis 8 times too long, seen in the browser test's screenshot). Typing x
// as "time" in series.dimensions does not help: axis types override it.
func stackedPairs(s memtimeline.Series, startNs int64) [][2]json.Number {
	out := pairs(s, startNs)
	for i := range out {
		out[i][0], out[i][1] = out[i][1], out[i][0]
	}
	return out
}

func pairs(s memtimeline.Series, startNs int64) [][2]json.Number {
	out := make([][2]json.Number, len(s.T))
	for i := range s.T {
		out[i] = [2]json.Number{msNumber(s.T[i], startNs), json.Number(strconv.FormatInt(s.V[i], 10))}
	}
	return out
}

// msNumber is (t - start) in milliseconds, rounded to the µs (the
// profiler's resolution in coalesced files), without float noise.
func msNumber(t, start int64) json.Number {
	d := t - start
	neg := d < 0
	if neg {
		d = -d
	}
	us := (d + 500) / 1000
	s := strconv.FormatInt(us/1000, 10)
	if frac := us % 1000; frac != 0 {
		f := strings.TrimRight(fmt.Sprintf("%03d", frac), "0")
		s += "." + f
	}
	if neg && s != "0" {
		s = "-" + s
	}
	return json.Number(s)
}

// standalonePage is a minimal offline page around charts; html/template
// escapes the title, the snippets are already safe HTML.
var standalonePage = template.Must(template.New("page").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:">
<title>{{.Title}}</title>
<style>body{font-family:sans-serif;margin:1em 2em}</style>
{{.Echarts}}
</head>
<body>
<h1>{{.Title}}</h1>
{{range .Charts}}{{.}}{{end}}
</body>
</html>
`))

// WriteStandalonePage writes a self-contained HTML page (echarts inline, no
// network request; a Content-Security-Policy forbids any) with one chart
// per spec, e.g. one per device.
func WriteStandalonePage(w io.Writer, title string, specs ...Spec) error {
	if len(specs) == 0 {
		return errors.New("no charts to write")
	}
	var snippets []template.HTML
	for _, c := range specs {
		s, err := Snippet(c)
		if err != nil {
			return err
		}
		snippets = append(snippets, s)
	}
	return standalonePage.Execute(w, struct {
		Title   string
		Echarts template.HTML
		Charts  []template.HTML
	}{title, EchartsScript(), snippets})
}
