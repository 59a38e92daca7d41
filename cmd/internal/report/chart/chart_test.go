package chart

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"html"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/memtimeline/exported"
	"github.com/torchmem/torchmem/memtimeline/memtest"
)

// xssName is the payload every untrusted string is tested with.
const xssName = `</script><img src=x onerror=alert(1)>`

type stepsFixture struct {
	TraceStartNs int64 `json:"trace_start_ns"`
	Steps        []struct {
		Name    string `json:"name"`
		StartNs int64  `json:"start_ns"`
		EndNs   int64  `json:"end_ns"`
	} `json:"steps"`
}

// demoSpec builds a chart from big_transformer's real files: categories
// from export_memory_timeline (raw, ns resolution), allocated and reserved
// from the trace's CUDA [memory] events and the ProfilerStep spans (both
// extracted from trace.json.gz by testdata/timeline/extract_trace_fixture.py).
func demoSpec(t testing.TB) Spec {
	t.Helper()
	dir := memtest.Testdata("timeline", "big_transformer")
	tl, err := exported.ReadFile(filepath.Join(dir, "memory_timeline.raw.json.gz"))
	if err != nil {
		t.Fatal(err)
	}
	var fx stepsFixture
	memtest.ReadJSON(t, filepath.Join(dir, "profiler_steps.json"), &fx)
	var events [][3]int64
	memtest.ReadJSON(t, filepath.Join(dir, "memory_events_cuda0.json.gz"), &events)
	alloc := memtimeline.Series{Name: "allocated"}
	reserved := memtimeline.Series{Name: "reserved"}
	for _, e := range events {
		alloc.T = append(alloc.T, e[0])
		alloc.V = append(alloc.V, e[1])
		reserved.T = append(reserved.T, e[0])
		reserved.V = append(reserved.V, e[2])
	}
	spec := Spec{
		Title:      "cuda:0 (big_transformer)",
		StartNs:    fx.TraceStartNs,
		Allocated:  alloc,
		Reserved:   reserved,
		Categories: tl.CategorySeries(),
	}
	for _, s := range fx.Steps {
		spec.Steps = append(spec.Steps, StepSpan{Name: s.Name, StartNs: s.StartNs, EndNs: s.EndNs})
	}
	i, peak, _ := alloc.Max()
	spec.Markers = []Marker{{Name: "peak " + memtimeline.FormatBytes(peak), TNs: alloc.T[i], Bytes: peak}}
	return spec
}

// snippetOption extracts and decodes the JSON options of a snippet.
func snippetOption(t *testing.T, snippet string) map[string]any {
	t.Helper()
	m := regexp.MustCompile(`(?s)<script type="application/json" id="[^"]+">(.*?)</script>`).FindStringSubmatch(snippet)
	if m == nil {
		t.Fatal("no options element in snippet")
	}
	var opt map[string]any
	if err := json.Unmarshal([]byte(m[1]), &opt); err != nil {
		t.Fatalf("options are not JSON: %v", err)
	}
	return opt
}

func seriesByName(t *testing.T, opt map[string]any) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, s := range opt["series"].([]any) {
		m := s.(map[string]any)
		out[m["name"].(string)] = m
	}
	return out
}

// dataMax returns the largest y of a series' [x, y] pairs, exactly.
func dataMax(t *testing.T, s map[string]any) (int64, int) {
	t.Helper()
	data := s["data"].([]any)
	yi := 1 // stacked series carry [y, x] with encode {x: 1, y: 0}
	if enc, ok := s["encode"].(map[string]any); ok && enc["x"] == 1.0 {
		yi = 0
	}
	var best int64
	for i, p := range data {
		pair := p.([]any)
		if len(pair) != 2 {
			t.Fatalf("data point %d is not an [x, y] pair: %v", i, p)
		}
		y, err := strconv.ParseInt(string(mustNumber(t, pair[yi])), 10, 64)
		if err != nil {
			t.Fatalf("y %v is not an exact integer: %v", pair[yi], err)
		}
		if i == 0 || y > best {
			best = y
		}
	}
	return best, len(data)
}

func mustNumber(t *testing.T, v any) json.Number {
	t.Helper()
	f, ok := v.(float64)
	if !ok {
		t.Fatalf("%v is not a number", v)
	}
	return json.Number(strconv.FormatFloat(f, 'f', -1, 64))
}

func TestSnippetFromRealTimeline(t *testing.T) {
	spec := demoSpec(t)
	snippet, err := Snippet(spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("big_transformer: %d allocated/reserved points, %d category points x %d categories -> snippet %d bytes (+%d echarts)",
		spec.Allocated.Len(), spec.Categories[0].Len(), len(spec.Categories), len(snippet), len(EchartsJS()))
	opt := snippetOption(t, string(snippet))
	series := seriesByName(t, opt)
	wantNames := []string{"allocated", "reserved"}
	for _, c := range spec.Categories {
		wantNames = append(wantNames, c.Name)
	}
	if len(series) != len(wantNames) {
		t.Fatalf("%d series, want %d (%v)", len(series), len(wantNames), wantNames)
	}
	for _, name := range wantNames {
		s, ok := series[name]
		if !ok {
			t.Fatalf("no series %q", name)
		}
		if s["sampling"] != "lttb" || s["type"] != "line" {
			t.Errorf("%s: sampling %v type %v", name, s["sampling"], s["type"])
		}
		if _, n := dataMax(t, s); n == 0 || n > DefaultMaxPoints {
			t.Errorf("%s: %d points (limit %d)", name, n, DefaultMaxPoints)
		}
	}
	// The drawn peak is the real peak, to the byte.
	for _, in := range []memtimeline.Series{spec.Allocated, spec.Reserved} {
		_, want, _ := in.Max()
		got, _ := dataMax(t, series[in.Name])
		if got != want {
			t.Errorf("%s: chart max %d, input max %d", in.Name, got, want)
		}
	}
	for _, c := range spec.Categories {
		if series[c.Name]["stack"] != "categories" || series[c.Name]["areaStyle"] == nil {
			t.Errorf("category %s is not a stacked area", c.Name)
		}
		if got, _ := dataMax(t, series[c.Name]); got <= 0 {
			t.Errorf("category %s drawn with max %d", c.Name, got)
		}
	}
	// Step bands carry the step names, markers their names.
	ma := series["allocated"]["markArea"].(map[string]any)["data"].([]any)
	if len(ma) != len(spec.Steps) {
		t.Fatalf("%d step bands, want %d", len(ma), len(spec.Steps))
	}
	for i, band := range ma {
		first := band.([]any)[0].(map[string]any)
		if first["name"] != spec.Steps[i].Name {
			t.Errorf("band %d named %v, want %s", i, first["name"], spec.Steps[i].Name)
		}
	}
	if ml := series["allocated"]["markLine"].(map[string]any)["data"].([]any); len(ml) != 1 {
		t.Errorf("%d marker lines, want 1", len(ml))
	}
	if mp := series["allocated"]["markPoint"].(map[string]any)["data"].([]any); len(mp) != 1 {
		t.Errorf("%d marker pins, want 1", len(mp))
	}
	zooms := opt["dataZoom"].([]any)
	var types []string
	for _, z := range zooms {
		types = append(types, z.(map[string]any)["type"].(string))
	}
	if strings.Join(types, ",") != "inside,slider" {
		t.Errorf("dataZoom types %v, want inside and slider", types)
	}
	if x := opt["xAxis"].([]any)[0].(map[string]any); x["type"] != "value" {
		t.Errorf("x axis type %v, want value", x["type"])
	}
}

func TestMsNumber(t *testing.T) {
	cases := []struct {
		t, start int64
		want     string
	}{
		{0, 0, "0"},
		{1_000_000, 0, "1"},
		{1_234_567, 0, "1.235"}, // rounded to the µs
		{1_000, 0, "0.001"},
		{1_200_000, 0, "1.2"},
		{5, 10, "0"},
		{0, 2_500_000, "-2.5"},
		{1795973406492435000, 1795973406490814300, "1.621"},
	}
	for _, c := range cases {
		if got := msNumber(c.t, c.start); string(got) != c.want {
			t.Errorf("msNumber(%d, %d) = %s, want %s", c.t, c.start, got, c.want)
		}
		if !json.Valid([]byte(msNumber(c.t, c.start))) {
			t.Errorf("%s is not a JSON number", msNumber(c.t, c.start))
		}
	}
}

// TestChartEscapesUntrustedNames: names from files end up only inside JSON
// with <, > and & escaped, and come back unchanged when parsed.
func TestChartEscapesUntrustedNames(t *testing.T) {
	s := memtimeline.Series{Name: xssName, T: []int64{0, 1e6, 2e6}, V: []int64{1, 5, 2}}
	spec := Spec{
		Title:      xssName,
		Allocated:  s,
		Categories: []memtimeline.Series{{Name: xssName + "cat", T: s.T, V: s.V}},
		Steps:      []StepSpan{{Name: xssName, StartNs: 0, EndNs: 1e6}},
		Markers:    []Marker{{Name: xssName, TNs: 1e6, Bytes: 5}},
	}
	var page bytes.Buffer
	if err := WriteStandalonePage(&page, xssName, spec); err != nil {
		t.Fatal(err)
	}
	// The pinned library itself has "<img" in its strings; check the rest.
	p := strings.Replace(page.String(), EchartsJS(), "", 1)
	for _, bad := range []string{"<img", "onerror=alert(1)>", "</script><"} {
		if strings.Contains(p, bad) {
			t.Errorf("page contains %q", bad)
		}
	}
	// Every </script> closes a script this package opened.
	if opened, closed := strings.Count(p, "<script"), strings.Count(p, "</script>"); opened != closed || opened != 3 {
		t.Errorf("%d <script> vs %d </script>, want 3 each", opened, closed)
	}
	if !strings.Contains(p, "<title>"+html.EscapeString(xssName)+"</title>") {
		t.Errorf("title not HTML-escaped")
	}
	snippet, err := Snippet(spec)
	if err != nil {
		t.Fatal(err)
	}
	opt := snippetOption(t, string(snippet))
	series := seriesByName(t, opt)
	if _, ok := series[xssName]; !ok {
		t.Errorf("series name did not round-trip through JSON")
	}
	if opt["title"].(map[string]any)["text"] != xssName {
		t.Errorf("title did not round-trip: %v", opt["title"])
	}
	if _, err := Snippet(Spec{ID: `x" onload="alert(1)`, Allocated: s}); err == nil {
		t.Errorf("an id with quotes was accepted")
	}
}

func TestSpecErrors(t *testing.T) {
	s := memtimeline.Series{Name: "a", T: []int64{0, 1}, V: []int64{1, 2}}
	cases := []struct {
		name string
		spec Spec
		want string
	}{
		{"empty", Spec{Title: "x"}, "nothing to draw"},
		{"ragged", Spec{Allocated: memtimeline.Series{T: []int64{1}, V: nil}}, "1 times but 0 values"},
		{"unaligned categories", Spec{Categories: []memtimeline.Series{s, {Name: "b", T: []int64{0, 2}, V: []int64{1, 1}}}}, "must share T"},
		{"bad id", Spec{ID: "1abc", Allocated: s}, "chart id"},
	}
	for _, c := range cases {
		_, err := Snippet(c.spec)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.name, err, c.want)
		}
	}
	if err := WriteStandalonePage(&bytes.Buffer{}, "t"); err == nil {
		t.Errorf("page without charts accepted")
	}
}

// TestEchartsScriptIsInlineSafe: the pinned library can sit in an inline
// <script> and is the file recorded in assets/NOTICE.
func TestEchartsScriptIsInlineSafe(t *testing.T) {
	js := strings.ToLower(EchartsJS())
	if len(js) < 500_000 {
		t.Fatalf("embedded echarts is only %d bytes", len(js))
	}
	for _, bad := range []string{"</script", "<!--"} {
		if strings.Contains(js, bad) {
			t.Errorf("echarts.min.js contains %q: inlining it would break the page", bad)
		}
	}
	notice, err := os.ReadFile(filepath.Join("assets", "NOTICE"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(EchartsJS()))
	if !strings.Contains(string(notice), hex.EncodeToString(sum[:])) {
		t.Errorf("sha256 %x of the embedded echarts.min.js is not the one in assets/NOTICE", sum)
	}
	if !strings.Contains(string(notice), EchartsVersion) {
		t.Errorf("assets/NOTICE does not name version %s", EchartsVersion)
	}
}

// TestPageSizeFor100kPoints: a 100k-point trace (allocated, reserved and
// eight categories) must give a small page.
func TestPageSizeFor100kPoints(t *testing.T) {
	const n = 100_000
	var r memtimeline.Series
	r.T, r.V = memtest.RandomWalk(memtest.NewRand(), n)
	alloc := memtimeline.Series{Name: "allocated", T: r.T, V: make([]int64, n)}
	reserved := memtimeline.Series{Name: "reserved", T: r.T, V: make([]int64, n)}
	var cats []memtimeline.Series
	for k := 0; k < 8; k++ {
		cats = append(cats, memtimeline.Series{Name: exported.Categories[k], T: r.T, V: make([]int64, n)})
	}
	for i := range r.T {
		v := r.V[i]
		if v < 0 {
			v = -v
		}
		alloc.V[i] = v
		reserved.V[i] = v + 1<<30
		for k := range cats {
			cats[k].V[i] = v / 8
		}
	}
	spec := Spec{Title: "synthetic", StartNs: r.T[0], Allocated: alloc, Reserved: reserved, Categories: cats}
	var page bytes.Buffer
	if err := WriteStandalonePage(&page, "size", spec); err != nil {
		t.Fatal(err)
	}
	data := page.Len() - len(EchartsJS())
	t.Logf("page for %d points x 10 series: %d bytes (%d of them echarts, %d chart data and code)", n, page.Len(), len(EchartsJS()), data)
	if data > 1<<20 {
		t.Errorf("chart part of the page is %d bytes, over 1 MiB", data)
	}
	opt := snippetOption(t, page.String())
	got, _ := dataMax(t, seriesByName(t, opt)["allocated"])
	_, want, _ := alloc.Max()
	if got != want {
		t.Errorf("allocated peak %d drawn as %d", want, got)
	}
}

func TestBinaryTickInterval(t *testing.T) {
	for _, top := range []int64{0, 1, 7, 8, 9, 1000, 162 << 20, 7_999_999_999, 1 << 40, 1<<50 + 5} {
		iv := binaryTickInterval(top)
		if iv&(iv-1) != 0 {
			t.Errorf("interval %d for %d is not a power of two", iv, top)
		}
		if top > 8*iv {
			t.Errorf("interval %d splits %d into more than 8", iv, top)
		}
		if iv > 1 && top <= 4*iv {
			t.Errorf("interval %d for %d is not the smallest", iv, top)
		}
	}
}

// The x axis spans a marker after the last sample (an OOM is the last
// thing a run records) with a margin, and the y axis a pin above the data.
func TestAxesSpanMarkers(t *testing.T) {
	s := memtimeline.Series{Name: "allocated", T: []int64{0, 50e6, 100e6}, V: []int64{1 << 20, 3 << 20, 2 << 20}}
	opt, err := chartOption(Spec{Allocated: s, Markers: []Marker{{Name: "OOM", TNs: 120e6, Bytes: 40 << 20}}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(opt)
	var o struct {
		XAxis []struct{ Min, Max float64 } `json:"xAxis"`
		YAxis []struct{ Max float64 }      `json:"yAxis"`
	}
	if err := json.Unmarshal(b, &o); err != nil {
		t.Fatal(err)
	}
	if o.XAxis[0].Min != 0 || o.XAxis[0].Max <= 120 {
		t.Errorf("x axis [%v, %v] ms, want [0, past the marker at 120]", o.XAxis[0].Min, o.XAxis[0].Max)
	}
	if o.YAxis[0].Max < 40<<20 {
		t.Errorf("y axis ends at %v, below the marker's 40 MiB", o.YAxis[0].Max)
	}
	opt, _ = chartOption(Spec{Allocated: s})
	b, _ = json.Marshal(opt)
	json.Unmarshal(b, &o)
	if o.XAxis[0].Max != 100 {
		t.Errorf("without markers the x axis ends at %v ms, want the last sample's 100", o.XAxis[0].Max)
	}
}
