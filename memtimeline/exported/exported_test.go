package exported

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/memtimeline/memtest"
)

// realTimelineRuns are runs copied from /work/shared/traces (torch 2.11,
// H200): each has both export_memory_timeline files and memory_stats.json.
var realTimelineRuns = []string{"compiled_model", "leak_eval_no_grad", "resnet_train_clean", "big_transformer"}

// TestCoalescedMatchesEncodingJSON checks the streaming scanner against an
// independent parser (encoding/json on the whole document).
func TestCoalescedMatchesEncodingJSON(t *testing.T) {
	for _, run := range realTimelineRuns {
		t.Run(run, func(t *testing.T) {
			path := memtest.Testdata("timeline", run, "memory_timeline.json.gz")
			var doc struct {
				Times []int64
				Sizes [][]int64
			}
			var raw [2]json.RawMessage
			memtest.ReadJSON(t, path, &raw)
			if err := json.Unmarshal(raw[0], &doc.Times); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(raw[1], &doc.Sizes); err != nil {
				t.Fatal(err)
			}
			tl, err := ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if tl.Format != FormatCoalesced {
				t.Fatalf("format = %v, want coalesced", tl.Format)
			}
			if len(tl.Times) != len(doc.Times) || len(tl.Times) == 0 {
				t.Fatalf("%d points, encoding/json has %d", len(tl.Times), len(doc.Times))
			}
			for i := range doc.Times {
				if tl.Times[i] != doc.Times[i]*1000 {
					t.Fatalf("Times[%d] = %d, want %d µs", i, tl.Times[i], doc.Times[i])
				}
				for k := 0; k < 8; k++ {
					if tl.Bytes[k][i] != doc.Sizes[i][k+1] {
						t.Fatalf("Bytes[%d][%d] = %d, want %d", k, i, tl.Bytes[k][i], doc.Sizes[i][k+1])
					}
				}
			}
		})
	}
}

// TestRawReplaysToCoalesced: the two files torch writes for one run are
// independent records of the same events; replaying the raw events and
// grouping them by torch's µs rule must give the coalesced file exactly.
func TestRawReplaysToCoalesced(t *testing.T) {
	for _, run := range realTimelineRuns {
		t.Run(run, func(t *testing.T) {
			coalesced, err := ReadFile(memtest.Testdata("timeline", run, "memory_timeline.json.gz"))
			if err != nil {
				t.Fatal(err)
			}
			raw, err := ReadFile(memtest.Testdata("timeline", run, "memory_timeline.raw.json.gz"))
			if err != nil {
				t.Fatal(err)
			}
			if raw.Format != FormatRaw {
				t.Fatalf("format = %v, want raw", raw.Format)
			}
			if !raw.HasPreexisting {
				t.Errorf("every real run has pre-existing tensors (parameters), HasPreexisting is false")
			}
			if raw.Len() < coalesced.Len() {
				t.Errorf("raw has %d ns points, fewer than the %d µs points", raw.Len(), coalesced.Len())
			}
			got := raw.CoalesceMicros()
			if !reflect.DeepEqual(got.Times, coalesced.Times) {
				t.Fatalf("times differ (%d vs %d points); first difference at %d", len(got.Times), len(coalesced.Times), firstDiff(got.Times, coalesced.Times))
			}
			if !reflect.DeepEqual(got.Bytes, coalesced.Bytes) {
				t.Fatal("per-category bytes differ")
			}
			// Same peak at both resolutions is not guaranteed in general (µs
			// grouping can hide a transient), so only the order is checked.
			_, rawPeak, _ := raw.Peak()
			_, coPeak, _ := coalesced.Peak()
			if rawPeak < coPeak {
				t.Errorf("ns-resolution peak %d below µs-resolution peak %d", rawPeak, coPeak)
			}
			t.Logf("%s: %d raw ns points, %d µs points, peak %s (ns) / %s (µs)", run, raw.Len(), coalesced.Len(), memtimeline.FormatBytes(rawPeak), memtimeline.FormatBytes(coPeak))
		})
	}
}

func firstDiff(a, b []int64) int {
	for i := range a {
		if i >= len(b) || a[i] != b[i] {
			return i
		}
	}
	return len(a)
}

// TestRawFinalStateIsSumOfEvents checks the replay against a direct sum of
// the events' signed bytes per category, decoded with encoding/json.
func TestRawFinalStateIsSumOfEvents(t *testing.T) {
	for _, run := range realTimelineRuns {
		path := memtest.Testdata("timeline", run, "memory_timeline.raw.json.gz")
		var events [][4]int64
		memtest.ReadJSON(t, path, &events)
		var want [8]int64
		for _, e := range events {
			want[e[3]] += e[2]
		}
		tl, err := ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		last := tl.Len() - 1
		for k := range want {
			if tl.Bytes[k][last] != want[k] {
				t.Errorf("%s: final %s = %d, sum of events %d", run, Categories[k], tl.Bytes[k][last], want[k])
			}
		}
	}
}

// TestTimelinePeakWithinAllocatorPeak: the allocator's lifetime peak
// (memory_stats allocated_bytes.all.peak) bounds the profiler's view from
// above: it covers the whole process, including unprofiled steps, and counts
// blocks rounded up to 512 bytes. Equality is possible (frag_small_allocs
// hits it exactly) but the timeline can never exceed it.
func TestTimelinePeakWithinAllocatorPeak(t *testing.T) {
	for _, run := range realTimelineRuns {
		var stats map[string]int64
		memtest.ReadJSON(t, memtest.Testdata("timeline", run, "memory_stats.json"), &stats)
		allocPeak, ok := stats["allocated_bytes.all.peak"]
		if !ok || allocPeak <= 0 {
			t.Fatalf("%s: no allocated_bytes.all.peak", run)
		}
		for _, name := range []string{"memory_timeline.json.gz", "memory_timeline.raw.json.gz"} {
			tl, err := ReadFile(memtest.Testdata("timeline", run, name))
			if err != nil {
				t.Fatal(err)
			}
			_, peak, _ := tl.Peak()
			if peak <= 0 || peak > allocPeak {
				t.Errorf("%s/%s: timeline peak %d outside (0, allocator peak %d]", run, name, peak, allocPeak)
			}
			for k, row := range tl.Bytes {
				for i, v := range row {
					if v < 0 {
						t.Fatalf("%s/%s: %s negative (%d) at point %d", run, name, tl.Categories[k], v, i)
					}
				}
			}
			t.Logf("%s/%s: peak %s = %.1f%% of allocator peak %s", run, name, memtimeline.FormatBytes(peak), 100*float64(peak)/float64(allocPeak), memtimeline.FormatBytes(allocPeak))
		}
	}
}

// TestFormatDetectedByContent swaps the names: the content decides.
func TestFormatDetectedByContent(t *testing.T) {
	dir := t.TempDir()
	src := memtest.Testdata("timeline", "compiled_model")
	cases := []struct {
		from, to string
		want     Format
	}{
		{"memory_timeline.raw.json.gz", "looks_coalesced.json", FormatRaw},
		{"memory_timeline.json.gz", "looks.raw.json.gz", FormatCoalesced},
	}
	for _, c := range cases {
		plain := memtest.ReadAll(t, filepath.Join(src, c.from)) // also: not gzipped
		p := filepath.Join(dir, c.to)
		if err := os.WriteFile(p, plain, 0o644); err != nil {
			t.Fatal(err)
		}
		tl, err := ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if tl.Format != c.want {
			t.Errorf("%s (content of %s): format %v, want %v", c.to, c.from, tl.Format, c.want)
		}
	}
}

func TestParseSmallAndEdgeDocuments(t *testing.T) {
	cases := []struct {
		name   string
		doc    string
		format Format
		times  []int64
		total  []int64
	}{
		{"empty raw", "[]", FormatRaw, []int64{}, []int64{}},
		{"empty coalesced", "[[], []]", FormatCoalesced, []int64{}, []int64{}},
		{"one raw event", "[[5000, 2, 100, 3]]", FormatRaw, []int64{5000}, []int64{100}},
		{"coalesced 4 times", "[[1,2,3,4],[[0,1,0,0,0,0,0,0,0],[0,1,2,0,0,0,0,0,0],[0,0,2,0,0,0,0,0,0],[0,0,0,0,0,0,0,0,7]]]",
			FormatCoalesced, []int64{1000, 2000, 3000, 4000}, []int64{1, 3, 2, 7}},
		{"raw preexisting then events", "[[-1,1,10,0],[-1,1,5,7],[3000,2,4,4],[3000,3,-4,4],[3000,3,4,5],[9000,4,-10,0]]",
			FormatRaw, []int64{3000, 3000, 9000}, []int64{15, 19, 9}},
		{"raw only preexisting", "[[-1,1,10,0]]", FormatRaw, []int64{-1}, []int64{10}},
		{"whitespace", " \n[ [ 7 , 1 , 8 , 0 ] ]\n", FormatRaw, []int64{7}, []int64{8}},
	}
	for _, c := range cases {
		tl, err := Read(strings.NewReader(c.doc))
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if tl.Format != c.format {
			t.Errorf("%s: format %v, want %v", c.name, tl.Format, c.format)
		}
		if !reflect.DeepEqual(tl.Times, c.times) {
			t.Errorf("%s: times %v, want %v", c.name, tl.Times, c.times)
		}
		total := tl.Total("t").V
		if !reflect.DeepEqual(total, c.total) {
			t.Errorf("%s: totals %v, want %v", c.name, total, c.total)
		}
		for k := range tl.Bytes {
			if len(tl.Bytes[k]) != len(tl.Times) {
				t.Errorf("%s: Bytes[%d] has %d points, Times %d", c.name, k, len(tl.Bytes[k]), len(tl.Times))
			}
		}
	}
}

func TestBadTimelineFilesGiveOneClearError(t *testing.T) {
	dir := t.TempDir()
	real := memtest.ReadAll(t, memtest.Testdata("timeline", "compiled_model", "memory_timeline.json.gz"))
	realRaw := memtest.ReadAll(t, memtest.Testdata("timeline", "compiled_model", "memory_timeline.raw.json.gz"))
	gz := func(b []byte) []byte {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		zw.Write(b)
		zw.Close()
		return buf.Bytes()
	}
	realGz := gz(real)
	cases := []struct {
		name, content, wantErr string
	}{
		{"empty", "", "empty"},
		{"whitespace only", "  \n", "no JSON content"},
		{"object", `{"times": []}`, "not an export_memory_timeline file"},
		{"kineto trace", `{"traceEvents": [{"ph": "X"}]}`, "not an export_memory_timeline file"},
		{"string element", `[["a"]]`, "expected an integer"},
		{"float time", `[[1.5, 2], [[0,0,0,0,0,0,0,0,0],[0,0,0,0,0,0,0,0,0]]]`, "fractional"},
		{"short row", `[[1], [[0,1,2]]]`, "want 9"},
		{"long row", `[[1], [[0,1,2,3,4,5,6,7,8,9]]]`, "more than 9"},
		{"row count mismatch", `[[1,2], [[0,0,0,0,0,0,0,0,0]]]`, "2 times but 1 sizes rows"},
		{"extra rows", `[[1], [[0,0,0,0,0,0,0,0,0],[0,0,0,0,0,0,0,0,0]]]`, "more sizes rows"},
		{"index 0 used", `[[1], [[5,0,0,0,0,0,0,0,0]]]`, "want 0"},
		{"unknown action", `[[1,9,100,0],[2,2,1,0]]`, "unknown action 9"},
		{"category out of range", `[[1,2,100,8],[2,2,1,0]]`, "category 8"},
		{"negative category", `[[1,2,100,0],[2,2,1,-1]]`, "category -1"},
		{"raw short event", `[[1,2,100,0],[2,2,1]]`, "want 4"},
		{"one element not event", `[[1,2,3]]`, "one raw event"},
		{"trailing garbage", `[[1,2,100,0]] x`, "after the end"},
		{"overflow", `[[99999999999999999999,2,1,0]]`, "out of 64-bit range"},
		{"overflow by one", `[[9223372036854775808,2,1,0]]`, "out of 64-bit range"},
		{"leading garbage", `[[+1,2,1,0]]`, "expected an integer"},
		{"lone minus", `[[-,2,1,0]]`, "expected an integer"},
		{"overflow us", `[[9999999999999999], [[0,0,0,0,0,0,0,0,0]]]`, "overflows"},
		{"truncated coalesced", string(real[:len(real)/2]), "truncated"},
		{"truncated raw", string(realRaw[:len(realRaw)-3]), "truncated"},
		{"truncated gzip", string(realGz[:len(realGz)/2]), ""},
		{"corrupt gzip", string(append(append([]byte{}, realGz[:20]...), bytes.Repeat([]byte{0xff}, 200)...)), ""},
		{"binary", "\x00\x01\x02", "not an export_memory_timeline file"},
		{"html export", `<html><img src="data:image/png;base64,iVBO"></html>`, "HTML export"},
	}
	for _, c := range cases {
		p := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "_")+".json")
		if err := os.WriteFile(p, []byte(c.content), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := ReadFile(p)
		if err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		if !strings.Contains(err.Error(), p) {
			t.Errorf("%s: error %q does not name the file", c.name, err)
		}
		if !strings.Contains(err.Error(), c.wantErr) {
			t.Errorf("%s: error %q does not say %q", c.name, err, c.wantErr)
		}
	}
	if _, err := ReadFile(filepath.Join(dir, "missing.json")); err == nil || !strings.Contains(err.Error(), "missing.json") {
		t.Errorf("missing file: %v", err)
	}
}

// TestPythonMicrosIsCorrectlyRounded checks pythonMicros against torch's
// own output: every raw ns time lands in the coalesced file at int(t/1000)
// as Python computed it, which is t//1000 or t//1000+1. Where only one of
// the two is a time in the coalesced file, that one is Python's answer.
func TestPythonMicrosIsCorrectlyRounded(t *testing.T) {
	dir := memtest.Testdata("timeline", "resnet_train_clean")
	var doc [2]json.RawMessage
	memtest.ReadJSON(t, filepath.Join(dir, "memory_timeline.json.gz"), &doc)
	var us []int64
	if err := json.Unmarshal(doc[0], &us); err != nil {
		t.Fatal(err)
	}
	present := map[int64]bool{}
	for _, u := range us {
		present[u] = true
	}
	var events [][4]int64
	memtest.ReadJSON(t, filepath.Join(dir, "memory_timeline.raw.json.gz"), &events)
	checked, roundedUp, naiveWrong := 0, 0, 0
	for _, e := range events {
		ns := e[0]
		if ns < 0 {
			continue
		}
		down, up := ns/1000, ns/1000+1
		if present[down] == present[up] {
			continue // ambiguous (or neither): no oracle for this one
		}
		want := down
		if present[up] {
			want = up
			roundedUp++
		}
		checked++
		if got := pythonMicros(ns); got != want {
			t.Errorf("pythonMicros(%d) = %d, torch wrote %d", ns, got, want)
		}
		if int64(float64(ns)/1000) != want {
			naiveWrong++
		}
	}
	if roundedUp == 0 || naiveWrong == 0 {
		t.Fatalf("%d checked, %d rounded up, %d where float64(t)/1000 is wrong: the file no longer exercises the rounding", checked, roundedUp, naiveWrong)
	}
	t.Logf("%d timestamps checked, %d rounded up by Python, float64(t)/1000 gets %d wrong", checked, roundedUp, naiveWrong)
}

func BenchmarkParseExportedTimeline(b *testing.B) {
	for _, name := range []string{"memory_timeline.json.gz", "memory_timeline.raw.json.gz"} {
		doc := memtest.ReadAll(b, memtest.Testdata("timeline", "big_transformer", name))
		b.Run(name+"/scanner", func(b *testing.B) {
			b.SetBytes(int64(len(doc)))
			for i := 0; i < b.N; i++ {
				if _, err := Read(bytes.NewReader(doc)); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/encoding_json", func(b *testing.B) {
			b.SetBytes(int64(len(doc)))
			for i := 0; i < b.N; i++ {
				var v []any
				dec := json.NewDecoder(bytes.NewReader(doc))
				dec.UseNumber()
				if err := dec.Decode(&v); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// FuzzParseExportedTimeline: any input gives a timeline or an error, never
// a panic, and an accepted timeline is consistent. Seeds in
// testdata/fuzz/FuzzParseExportedTimeline plus small real-shaped documents.
func FuzzParseExportedTimeline(f *testing.F) {
	for _, seed := range []string{
		"[]", "[[], []]", "[[1,2,3,4]]", "[[-1,1,10,0],[5,2,3,7]]",
		"[[1,2],[[0,1,2,3,4,5,6,7,8],[0,0,0,0,0,0,0,0,0]]]",
		"[[1.5]]", "[[", "[[1,2,3,4],[", `{"a":1}`, "[[9999999999999999999]]",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		tl, err := Read(bytes.NewReader(doc))
		if err != nil {
			if tl != nil {
				t.Fatal("timeline returned with an error")
			}
			return
		}
		if len(tl.Bytes) != len(Categories) || len(tl.Categories) != len(Categories) {
			t.Fatalf("%d category rows", len(tl.Bytes))
		}
		for k := range tl.Bytes {
			if len(tl.Bytes[k]) != len(tl.Times) {
				t.Fatalf("row %d has %d points, %d times", k, len(tl.Bytes[k]), len(tl.Times))
			}
		}
		c := tl.CoalesceMicros()
		if c.Len() > tl.Len() {
			t.Fatalf("coalescing grew %d points to %d", tl.Len(), c.Len())
		}
		if tl.Len() > 0 {
			last, clast := tl.Len()-1, c.Len()-1
			if tl.TotalAt(last) != c.TotalAt(clast) {
				t.Fatalf("coalescing changed the final total")
			}
		}
		_ = memtimeline.Downsample(tl.Total("t"), 5)
	})
}

// TestRawTimelineTracksTraceAllocated compares the raw timeline with an
// independent record of the same run: the Kineto trace's CUDA [memory]
// events (extracted to memory_events_cuda0.json.gz). Every event's time is
// a point of the ns timeline, and "Total Allocated" exceeds the timeline's
// total by one constant at every event: memory allocated before profiling
// that the memory profiler never saw as a tensor (84.5 MiB here).
func TestRawTimelineTracksTraceAllocated(t *testing.T) {
	dir := memtest.Testdata("timeline", "big_transformer")
	tl, err := ReadFile(filepath.Join(dir, "memory_timeline.raw.json.gz"))
	if err != nil {
		t.Fatal(err)
	}
	var events [][3]int64 // t_ns, Total Allocated, Total Reserved
	memtest.ReadJSON(t, filepath.Join(dir, "memory_events_cuda0.json.gz"), &events)
	if len(events) < 1000 {
		t.Fatalf("only %d events", len(events))
	}
	at := map[int64]int{}
	for i, ts := range tl.Times {
		at[ts] = i // the last point with that time: the state after it
	}
	var offset int64
	for n, e := range events {
		i, ok := at[e[0]]
		if !ok {
			t.Fatalf("trace event at %d ns is not a timeline point", e[0])
		}
		d := e[1] - tl.TotalAt(i)
		if n == 0 {
			offset = d
		} else if d != offset {
			t.Fatalf("event %d: Total Allocated - timeline total = %d, earlier %d", n, d, offset)
		}
	}
	if offset < 0 {
		t.Errorf("the trace sees less memory (%d) than the timeline", offset)
	}
	t.Logf("%d trace events: Total Allocated = timeline total + %s at every one", len(events), memtimeline.FormatBytes(offset))
}
