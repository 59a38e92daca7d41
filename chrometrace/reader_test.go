package chrometrace

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata")

// TestCanonicalGoldens renders every real trace's parsed model and compares
// it with testdata/traces/<name>/trace.string.
func TestCanonicalGoldens(t *testing.T) {
	dirs, _ := filepath.Glob(filepath.Join("..", "testdata", "traces", "*", "trace.json.gz"))
	if len(dirs) == 0 {
		t.Fatal("no traces in testdata/traces")
	}
	for _, p := range dirs {
		name := filepath.Base(filepath.Dir(p))
		t.Run(name, func(t *testing.T) {
			tr := readTestTrace(t, name)
			var buf bytes.Buffer
			WriteCanonical(&buf, tr)
			golden := filepath.Join(filepath.Dir(p), "trace.string")
			if *update {
				if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./chrometrace -update to create it)", err)
			}
			if !bytes.Equal(buf.Bytes(), want) {
				t.Errorf("parsed model differs from %s; run go test ./chrometrace -update and review the diff\n%s", golden, firstDiff(buf.String(), string(want)))
			}
		})
	}
}

func firstDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < max(len(g), len(w)); i++ {
		var a, b string
		if i < len(g) {
			a = g[i]
		}
		if i < len(w) {
			b = w[i]
		}
		if a != b {
			return "line " + itoa(i+1) + ":\n got: " + a + "\nwant: " + b
		}
	}
	return ""
}

func itoa(i int) string { return strconv.Itoa(i) }

func readString(t *testing.T, s string) (*Trace, error) {
	t.Helper()
	in, err := NewInput(strings.NewReader(s))
	if err != nil {
		return nil, err
	}
	return Read(in, ReadOptions{})
}

// A hand-written trace with the awkward corners real exporters produce.
const edgeTrace = `{"traceName": "x",
 "traceEvents": [
  {"ph": "X", "cat": "cpu_op", "name": "outer", "pid": 1, "tid": "7", "ts": 100.000, "dur": 50.5, "args": {"External id": 3, "Input Dims": [[2, 3], [[1], [2]], []]}},
  {"ph": "X", "cat": "cpu_op", "name": "inner \"quoted\" \\ name", "pid": 1, "tid": "7", "ts": 110, "dur": 10},
  {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": "7", "ts": 115.5,
   "args": {"Total Reserved": 2097152, "Total Allocated": 512, "Bytes": 512, "Device Id": 0, "Device Type": 1, "Addr": 18446744073709551615}},
  {"ph": "i", "s": "t", "name": "[OutOfMemory]", "pid": 1, "tid": "7", "ts": 120,
   "args": {"Total Reserved": 2097152, "Total Allocated": 512, "Bytes": 1099511627776, "Device Id": 0, "Device Type": 1}},
  {"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans", "tid": "PyTorch Profiler", "ts": 1, "dur": 2},
  {"ph": "M", "name": "thread_name", "pid": 1, "tid": "7", "args": {"name": "main"}},
  {"name": "Record Window End", "ph": "i", "s": "g", "pid": "", "tid": "", "ts": 200}
 ],
 "deviceProperties": [{"id": 0, "name": "GPU", "totalGlobalMem": 1000}],
 "distributedInfo": {"backend": "nccl", "rank": 3, "world_size": 4},
 "with_stack": 0
}`

func TestReadEdgeCases(t *testing.T) {
	tr, err := readString(t, edgeTrace)
	if err != nil {
		t.Fatal(err)
	}
	if tr.Events != 7 || len(tr.HostOps) != 2 || len(tr.Memory) != 1 || len(tr.OOMs) != 1 {
		t.Fatalf("events=%d ops=%d mem=%d ooms=%d", tr.Events, len(tr.HostOps), len(tr.Memory), len(tr.OOMs))
	}
	if got := tr.Memory[0].Addr; got != 1<<64-1 {
		t.Errorf("huge address read as %d", got)
	}
	if got := tr.OOMs[0].Bytes; got != 1<<40 {
		t.Errorf("OOM bytes %d", got)
	}
	if o := tr.HostOps[0]; o.Start != 100000 || o.Dur != 50500 || tr.Str(o.InputDims) != "[[2, 3], [], []]" {
		t.Errorf("outer op %+v dims %q", o, tr.Str(o.InputDims))
	}
	if got := tr.Str(tr.HostOps[1].Name); got != `inner "quoted" \ name` {
		t.Errorf("escaped name read as %q", got)
	}
	th := tr.Threads[tr.HostOps[0].Thread]
	if tr.Str(th.Tid) != "7" || th.TidNum != -1 || th.PidNum != 1 || tr.Str(th.Name) != "main" {
		t.Errorf("thread %+v", th)
	}
	if d := tr.Meta.Distributed; d == nil || d.Rank != 3 || d.WorldSize != 4 {
		t.Errorf("distributedInfo %+v", d)
	}
	if tr.Meta.WithStack != 0 || tr.Meta.ProfileMemory != -1 || len(tr.Meta.Devices) != 1 {
		t.Errorf("meta %+v", tr.Meta)
	}
	// The memory event lies inside both ops: torch gives it to the inner one.
	rows := Operators(tr, OperatorOptions{Device: -1})
	for _, r := range rows {
		switch r.Name {
		case "outer":
			if r.SelfDeviceMemory != 0 || r.DeviceMemory != 512 {
				t.Errorf("outer %+v", r)
			}
		case `inner "quoted" \ name`:
			if r.SelfDeviceMemory != 512 || r.Allocs != 1 {
				t.Errorf("inner %+v", r)
			}
		}
	}
}

func TestReadLegacyArrayAndKeyOrder(t *testing.T) {
	legacy := `[{"ph":"X","cat":"cpu_op","name":"a","pid":1,"tid":1,"ts":1660000000000000,"dur":5},
	            {"ph":"X","cat":"cpu_op","name":"b","pid":1,"tid":1,"ts":1660000000000001,"dur":1}]`
	tr, err := readString(t, legacy)
	if err != nil {
		t.Fatal(err)
	}
	if !tr.Meta.Legacy || len(tr.HostOps) != 2 || tr.HostOps[0].Start != 1660000000000000000 {
		t.Errorf("legacy: %+v", tr.HostOps)
	}
	// traceEvents last, metadata first, and the other way round.
	for _, s := range []string{
		`{"schemaVersion": 1, "traceEvents": [{"ph":"X","cat":"cpu_op","name":"a","pid":1,"tid":1,"ts":1,"dur":1}], "traceName": "t"}`,
		`{"traceEvents": [{"ph":"X","cat":"cpu_op","name":"a","pid":1,"tid":1,"ts":1,"dur":1}], "schemaVersion": 1, "traceName": "t"}`,
	} {
		tr, err := readString(t, s)
		if err != nil {
			t.Fatal(err)
		}
		if tr.Meta.SchemaVersion != 1 || tr.Meta.TraceName != "t" || len(tr.HostOps) != 1 {
			t.Errorf("key order: %+v", tr.Meta)
		}
	}
}

func TestReadBadInput(t *testing.T) {
	cases := []struct {
		name, in string
		want     string
	}{
		{"empty", "", "empty"},
		{"spaces", "  \n ", "empty"},
		{"not json", "hello", "not JSON"},
		{"object without events", `{"a": 1}`, "no traceEvents"},
		{"events not array", `{"traceEvents": 3}`, "not an array"},
		{"array of numbers", `[[1, 2], [3]]`, "not an object"},
		{"empty array", `[]`, "empty JSON array"},
		{"bad event json", `{"traceEvents": [{"ph": "X", "ts": 1,, "dur": 2}]}`, "malformed JSON"},
		{"garbage between events", `{"traceEvents": [{"ph":"X"} x {"ph":"X"}]}`, "expected ','"},
		{"cut in metadata", `{"schemaVersion": 1, "trace`, "before any trace event"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr, err := readString(t, c.in)
			if err == nil {
				t.Fatalf("no error; got %d events", tr.Events)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q does not say %q", err, c.want)
			}
		})
	}
}

// A trace cut at any point after its first event still reads, says where
// it stopped, and keeps every complete event before the cut.
func TestReadTruncatedRealTrace(t *testing.T) {
	full := gunzipFile(t, filepath.Join("..", "testdata", "traces", "leak_module_cache", "trace.json.gz"))
	whole, err := Read(bytes.NewReader(full), ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if whole.Truncated != nil {
		t.Fatal("complete trace reported as truncated")
	}
	prev := int64(-1)
	for _, frac := range []float64{0.05, 0.3, 0.5, 0.9, 0.999} {
		cut := int(float64(len(full)) * frac)
		tr, err := Read(bytes.NewReader(full[:cut]), ReadOptions{Workers: 2})
		if err != nil {
			t.Fatalf("cut at %d: %v", cut, err)
		}
		if tr.Truncated == nil || len(tr.Warnings) == 0 {
			t.Fatalf("cut at %d: not reported as truncated", cut)
		}
		if tr.Truncated.Offset > int64(cut) || tr.Events >= whole.Events || tr.Events < prev {
			t.Errorf("cut at %d: offset %d, %d events (whole %d, previous cut %d)", cut, tr.Truncated.Offset, tr.Events, whole.Events, prev)
		}
		prev = tr.Events
	}
	// A gzip file cut short reads the same way.
	gz := readFile(t, filepath.Join("..", "testdata", "traces", "leak_module_cache", "trace.json.gz"))
	in, err := NewInput(bytes.NewReader(gz[:len(gz)/2]))
	if err != nil {
		t.Fatal(err)
	}
	tr, err := Read(in, ReadOptions{})
	if err != nil || tr.Truncated == nil || tr.Events == 0 {
		t.Fatalf("half a gzip: err %v, truncated %v", err, tr)
	}
}

func TestReadCorruptGzip(t *testing.T) {
	gz := readFile(t, filepath.Join("..", "testdata", "traces", "leak_module_cache", "trace.json.gz"))
	bad := append([]byte(nil), gz...)
	for i := 100; i < 120; i++ {
		bad[i] ^= 0xA5
	}
	in, err := NewInput(bytes.NewReader(bad))
	if err == nil {
		_, err = Read(in, ReadOptions{})
	}
	if err == nil {
		t.Fatal("corrupt gzip read without error")
	}
	if _, err := NewInput(bytes.NewReader([]byte{0x1f, 0x8b, 0, 0})); err == nil {
		t.Error("a gzip header that is cut off gave no error")
	}
}

func TestReadWorkersAgree(t *testing.T) {
	full := gunzipFile(t, filepath.Join("..", "testdata", "traces", "resnet_train_clean", "trace.json.gz"))
	var outs []string
	for _, w := range []int{1, 3} {
		tr, err := Read(bytes.NewReader(full), ReadOptions{Workers: w})
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		WriteCanonical(&buf, tr)
		outs = append(outs, buf.String())
	}
	if outs[0] != outs[1] {
		t.Error("1 and 3 workers parsed the trace differently")
	}
}

// gunzipFile reads path whole and decompresses it into a buffer sized from
// the gzip trailer's ISIZE (the length mod 4 GiB), so that a 76 MB trace is
// not copied through a dozen doublings of a growing buffer (that took a
// third of TestFastDecodeAgreesOnRealTraces' CPU).
func gunzipFile(t testing.TB, path string) []byte {
	raw := readFile(t, path)
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	size := 0
	if len(raw) >= 4 {
		size = int(binary.LittleEndian.Uint32(raw[len(raw)-4:]))
	}
	buf := bytes.NewBuffer(make([]byte, 0, size+bytes.MinRead))
	if _, err := buf.ReadFrom(zr); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// sharedTraces holds the traces gunzipShared decompressed, by path.
var sharedTraces sync.Map

// gunzipShared is gunzipFile decompressing each path once for the whole
// package: the tests that compare decoders on every real trace
// (TestFastDecodeAgreesOnRealTraces, TestSpeculativeAgreesOnRealTraces,
// TestCanonicalGoldensSmallBatches) read the same ones. The bytes are
// shared: read them, never write them (the slice's capacity is its length,
// so an append copies).
func gunzipShared(t testing.TB, path string) []byte {
	if b, ok := sharedTraces.Load(path); ok {
		return b.([]byte)
	}
	b := gunzipFile(t, path)
	b = b[:len(b):len(b)]
	sharedTraces.Store(path, b)
	return b
}

func readFile(t testing.TB, path string) []byte {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSkipPyFrames: a trace read without its Python frames and flows has
// every other record, the same summary and the same operator table.
func TestSkipPyFrames(t *testing.T) {
	for _, name := range []string{"leak_module_cache", "big_transformer"} {
		data := gunzipFile(t, filepath.Join("..", "testdata", "traces", name, "trace.json.gz"))
		all, err := Read(bytes.NewReader(data), ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		some, err := Read(bytes.NewReader(data), ReadOptions{SkipPyFrames: true, SkipFlows: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(all.PyFrames) == 0 || len(some.PyFrames) != 0 || some.skippedPyFrames != int64(len(all.PyFrames)) || len(all.Flows) == 0 || len(some.Flows) != 0 {
			t.Fatalf("%s: %d frames, %d kept when skipping, %d counted", name, len(all.PyFrames), len(some.PyFrames), some.skippedPyFrames)
		}
		if len(all.HostOps) != len(some.HostOps) || len(all.Memory) != len(some.Memory) || len(all.DeviceOps) != len(some.DeviceOps) ||
			len(all.Steps) != len(some.Steps) || !reflect.DeepEqual(threadLabels(all), threadLabels(some)) {
			t.Errorf("%s: records differ beyond Python frames", name)
		}
		for _, by := range []GroupBy{GroupByName, GroupByShape, GroupByStack} {
			if !reflect.DeepEqual(Operators(all, OperatorOptions{Device: -1, GroupBy: by}), Operators(some, OperatorOptions{Device: -1, GroupBy: by})) {
				t.Errorf("%s: operator tables differ (group by %d)", name, by)
			}
		}
		if Summarize(all, -1) != Summarize(some, -1) {
			t.Errorf("%s: summaries differ", name)
		}
	}
}

func threadLabels(t *Trace) []string {
	var out []string
	for i, th := range t.Threads {
		out = append(out, t.ThreadLabel(ThreadID(i))+" "+t.Str(th.Name))
	}
	return out
}
