package memsummary

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/chrometrace"
	"github.com/torchmem/torchmem/chrometrace/bombtest"
	"github.com/torchmem/torchmem/memtimeline/memtest"
	"github.com/torchmem/torchmem/memtimeline/steplog"
)

// summaryTables reads the real memory_summary() tables recorded every 10
// steps of the nvidia_smi_leak run (64 MiB leaked per step).
func summaryTables(t testing.TB) []string {
	t.Helper()
	var out []string
	for step := 0; step <= 70; step += 10 {
		b, err := os.ReadFile(memtest.Testdata("summary", fmt.Sprintf("nvidia_smi_leak_memory_summary_%03d.txt", step)))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(b))
	}
	return out
}

// prefixed puts a logger prefix before every line.
func prefixed(prefix, text string) string {
	var b strings.Builder
	for _, l := range strings.SplitAfter(text, "\n") {
		if l != "" {
			b.WriteString(prefix + l)
		}
	}
	return b.String()
}

func TestReadReal(t *testing.T) {
	tables := summaryTables(t)
	const mib = 1 << 20
	plain := strings.Join(tables, "")
	var logged strings.Builder
	for i, tab := range tables {
		ts := fmt.Sprintf("2026-11-30 12:00:%02d", 10+i)
		fmt.Fprintf(&logged, "%s INFO rank0: step %d loss 2.31 lr 1e-4\n", ts, i*10)
		fmt.Fprintf(&logged, "%s WARNING rank0: some unrelated | pipe in a message\n", ts)
		logged.WriteString(prefixed(ts+",123 INFO rank0: ", tab))
	}
	cases := []struct {
		name        string
		text        string
		steps       bool
		perInterval int64
	}{
		{"tables alone", plain, false, 640 * mib},
		{"training log with logger prefixes", logged.String(), true, 64 * mib},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			log, err := Read(strings.NewReader(c.text))
			if err != nil {
				t.Fatal(err)
			}
			if len(log.Samples) != 8 {
				t.Fatalf("%d samples, want 8", len(log.Samples))
			}
			first, last := log.Samples[0], log.Samples[7]
			if first.AllocatedBytes != 65536*1024 || last.AllocatedBytes != 4544*mib || last.ReservedBytes != 4544*mib || last.Device != 0 {
				t.Errorf("first %+v last %+v", first, last)
			}
			if c.steps && (first.Step != 0 || last.Step != 70 || last.Rank != 0 || last.Time.IsZero()) {
				t.Errorf("steps/rank/time not read from the log: %+v", last)
			}
			if !c.steps && last.Step != -1 {
				t.Errorf("step %d from a log without steps", last.Step)
			}
			a := steplog.Analyze(log.StepLog(), steplog.DefaultOptions())
			if len(a.Series) != 1 {
				t.Fatalf("%d series", len(a.Series))
			}
			s := a.Series[0]
			if s.Verdict != steplog.VerdictGrowing || s.BytesPerStep != c.perInterval {
				t.Errorf("verdict %s, %d bytes per step (want growing, %d): %s", s.Verdict, s.BytesPerStep, c.perInterval, s.Reason)
			}
			fr := log.Frag()
			if len(fr) != 1 || fr[0].Retries != 0 || fr[0].NonReleasableBytes != 0 || fr[0].Samples != 8 {
				t.Errorf("frag %+v", fr)
			}
		})
	}
}

// Tables of two ranks interleaved line by line (two processes writing one
// log) come apart by their prefixes.
func TestReadInterleavedRanks(t *testing.T) {
	tables := summaryTables(t)
	a := strings.SplitAfter(prefixed("INFO rank0: ", tables[1]), "\n")
	b := strings.SplitAfter(prefixed("INFO rank1: ", tables[7]), "\n")
	var mixed strings.Builder
	for i := 0; i < max(len(a), len(b)); i++ {
		if i < len(a) {
			mixed.WriteString(a[i])
		}
		if i < len(b) {
			mixed.WriteString(b[i])
		}
	}
	log, err := Read(strings.NewReader(mixed.String()))
	if err != nil {
		t.Fatal(err)
	}
	if len(log.Samples) != 2 || log.Samples[0].Rank != 0 || log.Samples[1].Rank != 1 ||
		log.Samples[0].AllocatedBytes != 720896*1024 || log.Samples[1].AllocatedBytes != 4544<<20 {
		t.Errorf("%+v", log.Samples)
	}
	if s := log.StepLog(); len(s.Series) != 2 {
		t.Errorf("%d series, want one per rank", len(s.Series))
	}
}

func TestReadEdges(t *testing.T) {
	tables := summaryTables(t)
	retries := strings.Replace(tables[7], "cudaMalloc retries: 0 ", "cudaMalloc retries: 12", 1)
	retries = strings.Replace(retries, "| Non-releasable memory |      0 B   |", "| Non-releasable memory |   1024 MiB |", 1)
	long := strings.Repeat("x", summaryMaxLine*3) + "\n"
	cases := []struct {
		name    string
		text    string
		samples int
		err     bool
		warn    string
	}{
		{"no table", "just a training log\nstep 1 loss 2\n", 0, true, ""},
		{"empty", "", 0, true, ""},
		{"overlong line skipped", long + tables[0] + long, 1, false, "longer than"},
		{"cut before the numbers", tables[0][:400], 0, true, ""},
		{"cut after the allocated row", tables[0][:strings.Index(tables[0], "| Active memory")], 1, false, ""},
		{"retries and non-releasable", tables[0] + retries, 2, false, ""},
	}
	for _, c := range cases {
		log, err := Read(strings.NewReader(c.text))
		if (err != nil) != c.err {
			t.Errorf("%s: error %v", c.name, err)
			continue
		}
		if err != nil {
			continue
		}
		if len(log.Samples) != c.samples {
			t.Errorf("%s: %d samples", c.name, len(log.Samples))
		}
		if c.warn != "" && !strings.Contains(strings.Join(log.Warnings, ";"), c.warn) {
			t.Errorf("%s: warnings %q", c.name, log.Warnings)
		}
		if c.name == "retries and non-releasable" {
			f := log.Frag()[0]
			if f.Retries != 12 || f.RetriesDuringLog != 12 || f.NonReleasableBytes != 1<<30 || f.NonReleasableFraction < 0.2 {
				t.Errorf("frag %+v", f)
			}
		}
	}
}

func TestSummaryValue(t *testing.T) {
	for in, want := range map[string]int64{
		" 720896 KiB ": 720896 << 10, "   1344 MiB": 1344 << 20, "     0 B  ": 0, "  11  ": 11, "  12K ": 12000,
		"   2 GiB": 2 << 30, "99999999999 PiB": 1<<63 - 1, "x": 0, "-5 MiB": 0,
	} {
		if got := summaryValue(in); got != want {
			t.Errorf("%q: %d, want %d", in, got, want)
		}
	}
}

func FuzzReadMemorySummaries(f *testing.F) {
	for _, tab := range summaryTables(f) {
		f.Add([]byte(tab))
		f.Add([]byte(prefixed("2026-11-30 12:00:01 INFO rank3: step 7 ", tab)))
	}
	f.Add([]byte("| PyTorch CUDA memory summary, device ID 99999999999999999999 |\n| Allocated memory | 1 B | 2 B |\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		log, err := Read(strings.NewReader(string(data)))
		if err != nil {
			return
		}
		for _, s := range log.Samples {
			if s.AllocatedBytes < 0 || s.ReservedBytes < 0 || s.NonReleasableBytes < 0 {
				t.Fatalf("negative bytes: %+v", s)
			}
		}
		steplog.Analyze(log.StepLog(), steplog.DefaultOptions())
		log.Frag()
	})
}

// The recorder's training log: logging prints memory_summary() every 2
// steps while a dict keeps 8 MiB per step (truth.json), once with the
// logger's prefix on every line (train.log) and once as one record per
// table (train_block.log: only the line before the table is prefixed).
func TestReadRecordedLog(t *testing.T) {
	dir := memtest.Testdata("gpu", "logged_memory_summary")
	var truth struct {
		Leak struct {
			BytesPerStep int64 `json:"bytes_per_step"`
		} `json:"leak"`
		Expect struct {
			Summaries int `json:"summaries_per_log"`
		} `json:"expect"`
		StepsLog struct {
			NumAllocRetries int64 `json:"num_alloc_retries"`
		} `json:"steps_log"`
	}
	memtest.ReadJSON(t, filepath.Join(dir, "truth.json"), &truth)
	for _, name := range []string{"train.log", "train_block.log"} {
		log := memtest.Decode(t, filepath.Join(dir, name), Read)
		if len(log.Samples) != truth.Expect.Summaries {
			t.Errorf("%s: %d tables, truth %d", name, len(log.Samples), truth.Expect.Summaries)
		}
		for i, s := range log.Samples {
			if want := int64(2*i + 1); s.Step != want {
				t.Errorf("%s: table %d at step %d, want %d (printed after steps 1, 3, ...)", name, i, s.Step, want)
			}
		}
		a := steplog.Analyze(log.StepLog(), steplog.DefaultOptions())
		if len(a.Series) != 1 || a.Series[0].Verdict != steplog.VerdictGrowing || a.Series[0].BytesPerStep != truth.Leak.BytesPerStep {
			t.Errorf("%s: %+v, truth %d bytes per step", name, a.Series, truth.Leak.BytesPerStep)
		}
		if fr := log.Frag(); len(fr) != 1 || fr[0].Retries != truth.StepsLog.NumAllocRetries || fr[0].NonReleasableBytes <= 0 {
			t.Errorf("%s: frag %+v", name, fr)
		}
	}
}

// The reader stops at the caps every reader shares (--max-records).
func TestReadLimits(t *testing.T) {
	tables := strings.Join(summaryTables(t), "")
	_, err := ReadLimited(strings.NewReader(tables), chrometrace.Limits{Records: 3})
	var le *chrometrace.CountLimitError
	if !errors.As(err, &le) || le.Flag != "max-records" {
		t.Errorf("8 tables over a cap of 3: %v", err)
	}
}

// A gzipped log cut off while written is read up to the cut, with a
// warning.
func TestReadCutGzip(t *testing.T) {
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte(strings.Join(summaryTables(t), "")))
	zw.Close()
	cut := gz.Bytes()[:gz.Len()*3/4]
	in, err := chrometrace.NewInput(bytes.NewReader(cut))
	if err != nil {
		t.Fatal(err)
	}
	log, err := Read(in)
	if err != nil || len(log.Samples) == 0 || !strings.Contains(strings.Join(log.Warnings, ";"), "cut off") {
		t.Fatalf("%v %+v", err, log)
	}
}

// TestReadManyTitleLines: a log of nothing but table titles builds one
// table (150 bytes) per line; two million of them took 1.2 GB before the
// records cap stopped it. The tables now stop at maxTables, an eighth of
// the records cap, in memory bounded by it.
func TestReadManyTitleLines(t *testing.T) {
	lim := chrometrace.Limits{Records: 1 << 17}
	tables := maxTables(lim)
	line := []byte("2026-01-01 00:00:00 INFO rank0: | PyTorch CUDA memory summary, device ID 0 |\n")
	r := &bombtest.Reader{Fill: line, N: int64(len(line)) * 1 << 20}
	var err error
	peak := bombtest.PeakHeap(func() { _, err = ReadLimited(r, lim) })
	var le *chrometrace.CountLimitError
	if !errors.As(err, &le) || le.Limit != int64(tables) || !strings.Contains(err.Error(), "memory_summary() tables") {
		t.Fatalf("error %v, want the tables cap of %d", err, tables)
	}
	if peak > 16<<20 {
		t.Errorf("peak heap %d MB for %d tables, want under 16 MB", peak>>20, tables)
	}
}

// TestRequestedRow: the "Requested memory" row (torch 2.1+) is read and
// becomes the series' requested bytes, the value the growth model reads
// first, as requested_bytes in a steps log. The real log of
// testdata/gpu/logged_memory_summary (torch 2.11, 8 MiB kept a step).
func TestRequestedRow(t *testing.T) {
	f, err := os.Open(filepath.Join("..", "..", "testdata", "gpu", "logged_memory_summary", "train.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	log, err := Read(f)
	if err != nil {
		t.Fatal(err)
	}
	first := log.Samples[0]
	if first.RequestedBytes != 226384<<10 || first.RequestedPeakBytes != 250980<<10 {
		t.Errorf("requested %d (peak %d), want the row's 226384 KiB (250980 KiB)", first.RequestedBytes, first.RequestedPeakBytes)
	}
	sl := log.StepLog()
	for _, r := range sl.Series[0].Records {
		if r.RequestedBytes <= 0 {
			t.Fatalf("step %d: requested bytes %d, want the table's", r.Step, r.RequestedBytes)
		}
	}
	s := steplog.Analyze(sl, steplog.DefaultOptions()).Series[0]
	if s.Verdict != steplog.VerdictGrowing || s.Growth == nil || s.Growth.Value != "requested" || s.BytesPerStep != 8<<20 {
		t.Errorf("%s %d B/step on %+v: %s; want growing 8 MiB a step on requested bytes", s.Verdict, s.BytesPerStep, s.Growth, s.Reason)
	}
	// A table without the row (torch before 2.1): not recorded (-1), and
	// the model reads allocated bytes.
	var lines []string
	for _, l := range strings.Split(summaryTables(t)[0], "\n") {
		if !strings.Contains(l, "Requested memory") {
			lines = append(lines, l)
		}
	}
	old, err := Read(strings.NewReader(strings.Join(lines, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	if r := old.Samples[0].RequestedBytes; r != -1 {
		t.Errorf("requested %d where the table has no row, want -1", r)
	}
	if r := old.StepLog().Series[0].Records[0].RequestedBytes; r != -1 {
		t.Errorf("step record's requested %d where the table has no row, want -1", r)
	}
}
