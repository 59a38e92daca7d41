package steplog

import (
	"bufio"
	"encoding/json"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/memtimeline/memtest"
)

func readStepFile(t *testing.T, name string) *Log {
	t.Helper()
	return memtest.Decode(t, memtest.Testdata("steps", name+".stats_steps.jsonl"), Read)
}

// stepOracle reads a stats_steps.jsonl with encoding/json into plain
// structs: an independent parse to compare with.
func stepOracle(t *testing.T, name string) (steps []int64, alloc, reserved []int64) {
	t.Helper()
	f, err := os.Open(memtest.Testdata("steps", name+".stats_steps.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r struct {
			Step      int64 `json:"step"`
			Allocated int64 `json:"allocated"`
			Reserved  int64 `json:"reserved"`
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		steps = append(steps, r.Step)
		alloc = append(alloc, r.Allocated)
		reserved = append(reserved, r.Reserved)
	}
	return steps, alloc, reserved
}

func TestReadRealFiles(t *testing.T) {
	for _, name := range []string{"leak_module_cache", "resnet_train_clean", "leak_eval_no_grad", "frag_small_allocs", "nvidia_smi_leak", "big_transformer", "compiled_model"} {
		log := readStepFile(t, name)
		steps, alloc, reserved := stepOracle(t, name)
		if len(log.Series) != 1 || len(log.Series[0].Records) != len(steps) {
			t.Fatalf("%s: %d series, want 1 of %d records", name, len(log.Series), len(steps))
		}
		for i, r := range log.Series[0].Records {
			if r.Step != steps[i] || r.AllocatedBytes != alloc[i] || r.ReservedBytes != reserved[i] || !r.HasTime {
				t.Fatalf("%s record %d = %+v, file says step %d allocated %d reserved %d", name, i, r, steps[i], alloc[i], reserved[i])
			}
		}
	}
}

// TestAnalyzeRealVerdicts compares with each scenario's truth.json:
// planted leaks grow by their planted bytes per step, clean runs are flat.
func TestAnalyzeRealVerdicts(t *testing.T) {
	for _, name := range []string{"leak_module_cache", "resnet_train_clean", "leak_eval_no_grad", "frag_small_allocs", "nvidia_smi_leak", "big_transformer", "compiled_model"} {
		t.Run(name, func(t *testing.T) {
			var truth struct {
				Planted          string `json:"planted"`
				LeakBytesPerStep int64  `json:"leak_bytes_per_step"`
				LeakSite         string `json:"leak_site"`
			}
			memtest.ReadJSON(t, memtest.Testdata("steps", name+".truth.json"), &truth)
			rep := Analyze(readStepFile(t, name), DefaultOptions()).Series[0]
			// A scenario leaks if truth names a leak site, a per-step
			// leak, or (nvidia_smi_leak) planted growth.
			leaks := truth.LeakSite != "" || truth.LeakBytesPerStep > 0 || strings.Contains(truth.Planted, "growth")
			wantVerdict := VerdictFlat
			if leaks {
				wantVerdict = VerdictGrowing
			}
			if rep.Verdict != wantVerdict {
				t.Fatalf("verdict %s (%s), truth %q", rep.Verdict, rep.Reason, truth.Planted)
			}
			if !leaks {
				return
			}
			// Bytes per step: truth's number when it gives one, else the
			// mean step-to-step difference after warm-up.
			want := float64(truth.LeakBytesPerStep)
			if want == 0 {
				_, alloc, _ := stepOracle(t, name)
				want = float64(alloc[len(alloc)-1]-alloc[1]) / float64(len(alloc)-2)
			}
			if math.Abs(rep.Allocated.SlopeBytesPerStep-want) > 0.001*want {
				t.Errorf("slope %.0f B/step, want %.0f", rep.Allocated.SlopeBytesPerStep, want)
			}
			if rep.Allocated.R2 < 0.99 {
				t.Errorf("R^2 %.4f for a planted constant leak", rep.Allocated.R2)
			}
		})
	}
}

func TestReadLenientKeys(t *testing.T) {
	cases := map[string]string{
		"memory_stats names": `{"iteration": 10, "allocated_bytes.all.current": 1048576, "reserved_bytes.all.current": 2097152, "allocated_bytes.all.peak": 3145728}
{"iteration": 11, "allocated_bytes.all.current": 2097152, "reserved_bytes.all.current": 2097152, "allocated_bytes.all.peak": 3145728}`,
		"nested memory_stats": `{"step": 10, "memory_stats": {"allocated_bytes.all.current": 1048576, "reserved_bytes.all.current": 2097152, "allocated_bytes.all.peak": 3145728}}
{"step": 11, "memory_stats": {"allocated_bytes.all.current": 2097152, "reserved_bytes.all.current": 2097152, "allocated_bytes.all.peak": 3145728}}`,
		"MiB keys and floats": `{"global_step": 10, "allocated_mb": 1.0, "reserved_mb": 2, "max_allocated_mb": 3}
{"global_step": 11, "allocated_mb": 2.0, "reserved_mb": 2, "max_allocated_mb": 3}`,
		"torch function names": `{"step": 10, "memory_allocated": 1048576, "memory_reserved": 2097152, "max_memory_allocated": 3145728}
{"step": 11, "memory_allocated": 2097152, "memory_reserved": 2097152, "max_memory_allocated": 3145728}`,
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			log, err := Read(strings.NewReader(in))
			if err != nil {
				t.Fatal(err)
			}
			r := log.Series[0].Records
			if len(r) != 2 || r[0].Step != 10 || r[1].Step != 11 || r[0].AllocatedBytes != 1<<20 || r[1].AllocatedBytes != 2<<20 ||
				r[0].ReservedBytes != 2<<20 || r[0].PeakAllocatedBytes != 3<<20 {
				t.Errorf("records %+v", r)
			}
		})
	}
}

func TestReadDevicesAndImplicitSteps(t *testing.T) {
	in := `{"rank": 0, "allocated": 100}
{"rank": 1, "allocated": 200}
{"rank": 0, "allocated": 110}
{"rank": 1, "allocated": 200}
`
	log, err := Read(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(log.Series) != 2 || log.Series[0].Device != "0" || log.Series[1].Device != "1" {
		t.Fatalf("series %+v", log.Series)
	}
	// Lines without a step key are numbered in file order.
	r := log.Series[0].Records
	if len(r) != 2 || r[0].AllocatedBytes != 100 || r[1].AllocatedBytes != 110 || r[0].Step >= r[1].Step {
		t.Errorf("rank 0 records %+v", r)
	}
}

func TestAnalyzeSynthetic(t *testing.T) {
	mk := func(vals ...int64) *Log {
		s := &Series{}
		for i, v := range vals {
			s.Records = append(s.Records, Record{Step: int64(i), AllocatedBytes: v, ReservedBytes: -1, ActiveBytes: -1, RequestedBytes: -1, PeakAllocatedBytes: -1, PeakReservedBytes: -1})
		}
		return &Log{Series: []*Series{s}}
	}
	const mb = 1 << 20
	const anyRate = math.MinInt64
	// series: a warm-up record (100 MB), then n values from f(i).
	series := func(n int, f func(i int) int64) *Log {
		v := []int64{100 * mb}
		for i := range n {
			v = append(v, 200*mb+f(i))
		}
		return mk(v...)
	}
	noise := []int64{0, 3, -1, 2, -2, 1, -3, 2, 0, -1, 3, -2, 1, 0, -3, 2, -1, 1, -2, 3, 0, -1, 2, -3, 1, 0, 2, -2, 3, -1}
	cases := []struct {
		name    string
		log     *Log
		verdict string
		perStep int64
	}{
		{"warm-up rise then flat", series(12, func(int) int64 { return 0 }), VerdictFlat, 0},
		{"steady 2 MiB/step", series(12, func(i int) int64 { return int64(i) * 2 * mb }), VerdictGrowing, 2 * mb},
		{"noise around a level", series(30, func(i int) int64 { return noise[i] * mb }), VerdictFlat, anyRate},
		// Size never decides: 1000 B kept in each step is growth.
		{"tiny steady growth", series(12, func(i int) int64 { return int64(i) * 1000 }), VerdictGrowing, 1000},
		// One one-time jump (gradient accumulation's buffers) is not growth.
		{"one-time jump mid-run", series(20, func(i int) int64 { return int64(min(i/10, 1)) * 12 * mb }), VerdictFlat, anyRate},
		{"late start", series(20, func(i int) int64 { return int64(max(i-8, 0)) * 4 * mb }), VerdictGrowing, 4 * mb},
		// A queue that fills up, then a measured plateau.
		{"bounded", series(20, func(i int) int64 { return int64(min(i, 5)) * 4 * mb }), VerdictFlat, anyRate},
		// Every 5th step keeps 8 MiB; nothing between.
		{"periodic", series(20, func(i int) int64 { return int64((i+2)/5) * 8 * mb }), VerdictGrowing, 8 * mb / 5},
		// The periodic rises stopped and it stayed flat long enough.
		{"periodic that stopped", series(40, func(i int) int64 { return int64(min((i+2)/5, 3)) * 8 * mb }), VerdictFlat, anyRate},
		// A leak of 4 MiB a step under +-3 MiB of noise.
		{"leak under noise", series(30, func(i int) int64 { return int64(i)*4*mb + noise[i]*mb }), VerdictGrowing, anyRate},
		{"too few steps", mk(100*mb, 200*mb), VerdictUnknown, anyRate},
		{"shrinking", series(12, func(i int) int64 { return -int64(i) * 20 * mb }), VerdictUnknown, anyRate},
	}
	for _, c := range cases {
		rep := Analyze(c.log, DefaultOptions()).Series[0]
		if rep.Verdict != c.verdict || (c.perStep != anyRate && abs64(rep.BytesPerStep-c.perStep) > 1) {
			t.Errorf("%s: verdict %s, %d B/step (%s); want %s, %d", c.name, rep.Verdict, rep.BytesPerStep, rep.Reason, c.verdict, c.perStep)
		}
	}
}

func TestReadErrors(t *testing.T) {
	good := `{"step": 0, "allocated": 1}` + "\n"
	cases := []struct {
		name, in, want string
		notSteps       bool
	}{
		{"empty", "", "empty", false},
		{"blank", "\n \n", "no records", true},
		{"csv", "index, timestamp, memory.used [MiB]\n", "not a JSON object", true},
		{"pretty json", "{\n \"a\": 1\n}\n", "bad JSON", true},
		{"no allocated key", `{"step": 0, "loss": 1.5}` + "\n", "no allocated", true},
		{"bad line later", good + "{broken\n" + good, "line 2", false},
		{"string bytes", good + `{"step": 1, "allocated": "12"}` + "\n", "not a number", false},
		{"negative bytes", good + `{"step": 1, "allocated": -5}` + "\n", "negative", false},
		{"huge bytes", good + `{"step": 1, "allocated": 1e300}` + "\n", "not a byte count", false},
		{"fractional step", good + `{"step": 1.5, "allocated": 5}` + "\n", "step number", false},
		{"two values on a line", good + `{"step": 1, "allocated": 5} {"x": 1}` + "\n", "more than one", false},
		{"binary", "\x00\x01{\n", "binary", true},
	}
	for _, c := range cases {
		memtest.Refuses(t, Read, ErrNotLog, c.name, c.in, c.want, c.notSteps)
	}
}

func TestReadTruncatedLastLine(t *testing.T) {
	in := `{"step": 0, "allocated": 1}` + "\n" + `{"step": 1, "allocated": 2}` + "\n" + `{"step": 2, "alloc`
	log, err := Read(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if log.Lines != 2 || len(log.Warnings) != 1 || !strings.Contains(log.Warnings[0], "line 3") {
		t.Errorf("lines %d warnings %q", log.Lines, log.Warnings)
	}
}

func TestLooksLike(t *testing.T) {
	steps := memtest.ReadAll(t, memtest.Testdata("steps", "leak_module_cache.stats_steps.jsonl"))
	smi := memtest.ReadAll(t, memtest.Testdata("smi", "nvidia_smi_leak.csv"))
	cases := []struct {
		name string
		head []byte
		want bool
	}{
		{"real steps log", steps, true},
		{"real steps log cut mid-line", steps[:130], true},
		{"nvidia-smi csv", smi[:512], false},
		{"chrome trace", []byte(`{"schemaVersion": 1, "deviceProperties": [], "traceEvents": [` + "\n"), false},
		{"pretty memory_stats.json", []byte("{\n \"active.all.allocated\": 80,\n"), false},
		{"one-line memory_stats without step", []byte(`{"allocated_bytes.all.current": 5}` + "\n"), false},
		{"two lines without step", []byte(`{"allocated": 5}` + "\n" + `{"allocated": 6}` + "\n"), true},
		{"empty", nil, false},
	}
	for _, c := range cases {
		if got := LooksLike(c.head); got != c.want {
			t.Errorf("%s: LooksLike = %v, want %v", c.name, got, c.want)
		}
	}
}
