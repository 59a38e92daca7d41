package smi

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/memtimeline/memtest"
)

var smiLeakCSV = memtest.Testdata("smi", "nvidia_smi_leak.csv")

func readSMIString(t *testing.T, s string) *Log {
	t.Helper()
	log, err := Read(strings.NewReader(s))
	if err != nil {
		t.Fatalf("Read: %v\ninput:\n%s", err, s)
	}
	return log
}

// TestReadRealFile checks the parse of the recorded log against the
// file's own text, read line by line without the parser.
func TestReadRealFile(t *testing.T) {
	log := memtest.Decode(t, smiLeakCSV, Read)
	f, err := os.Open(smiLeakCSV)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if l := sc.Text(); l != "" && !strings.HasPrefix(l, "index,") {
			rows = append(rows, l)
		}
	}
	if log.Rows != len(rows) || len(log.GPUs) != 1 || log.GPUs[0].Key != "0" || len(log.GPUs[0].Samples) != len(rows) {
		t.Fatalf("rows %d GPUs %d, want %d rows of one GPU 0", log.Rows, len(log.GPUs), len(rows))
	}
	g := log.GPUs[0]
	for i, want := range []string{rows[0], rows[len(rows)-1]} {
		s := g.Samples[0]
		if i == 1 {
			s = g.Samples[len(g.Samples)-1]
		}
		got := fmt.Sprintf("0, %s, %d MiB, %d MiB, %.0f %%, %.0f %%", s.Time.Format(TimeLayout),
			s.UsedBytes>>20, s.TotalBytes>>20, s.UtilGPUPct, s.UtilMemoryPct)
		if got != want {
			t.Errorf("sample %d = %q, file says %q", i, got, want)
		}
	}
	want := []string{ColIndex, ColTimestamp, ColMemUsed, ColMemTotal, ColUtilGPU, ColUtilMem}
	if strings.Join(log.Columns, ",") != strings.Join(want, ",") || log.HeaderInferred {
		t.Errorf("columns %v inferred %v, want %v from the header", log.Columns, log.HeaderInferred, want)
	}
}

// TestAnalyzeRealLeak: the log spans every scenario of the recording
// session; only the last process (truth.json: 64 MiB per 0.25 s for 20 s)
// leaks. Its own stats_steps.jsonl, written by the leaking process, is the
// oracle for when and how fast memory grew.
func TestAnalyzeRealLeak(t *testing.T) {
	log := memtest.Decode(t, smiLeakCSV, Read)
	a := Analyze(log, DefaultOptions())
	leaks := a.Leaks()
	if len(leaks) != 1 {
		for _, r := range a.GPUs[0].Runs {
			t.Logf("run %s..%s leak=%v %s", r.Start.Format(TimeLayout), r.End.Format(TimeLayout), r.Leak, r.Reason)
		}
		t.Fatalf("%d leaks, want exactly 1", len(leaks))
	}
	l := leaks[0]

	var truth struct {
		Planted string  `json:"planted"`
		Seconds float64 `json:"seconds"`
	}
	memtest.ReadJSON(t, memtest.Testdata("smi", "nvidia_smi_leak.truth.json"), &truth)
	// The leaking process's own per-step log: Unix times (the smi log
	// was written on a machine whose local time is UTC) and bytes.
	f, err := os.Open(memtest.Testdata("steps", "nvidia_smi_leak.stats_steps.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var first, last struct {
		T         float64 `json:"t"`
		Allocated int64   `json:"allocated"`
	}
	sc := bufio.NewScanner(f)
	for n := 0; sc.Scan(); n++ {
		if n == 0 {
			json.Unmarshal(sc.Bytes(), &first)
		}
		json.Unmarshal(sc.Bytes(), &last)
	}
	unix := func(s float64) time.Time {
		return time.Unix(0, int64(s*1e9)).UTC()
	}
	oracleRate := float64(last.Allocated-first.Allocated) / (last.T - first.T) // bytes/s

	// The first step's 64 MiB lands within one step (0.25 s) after the
	// process's first allocation; smi samples every 0.2 s.
	const slack = 600 * time.Millisecond
	if d := l.Start.Sub(unix(first.T)); d < -slack || d > slack {
		t.Errorf("leak starts %s, first step at %s", l.Start.Format(TimeLayout), unix(first.T).Format(TimeLayout))
	}
	if d := l.End.Sub(unix(last.T)); d < -slack || d > slack {
		t.Errorf("leak ends %s, last step at %s", l.End.Format(TimeLayout), unix(last.T).Format(TimeLayout))
	}
	if math.Abs(l.Duration.Seconds()-truth.Seconds) > 1 {
		t.Errorf("leak lasts %s, truth says %.2f s", l.Duration, truth.Seconds)
	}
	if rel := l.SlopeBytesPerSec/oracleRate - 1; math.Abs(rel) > 0.05 {
		t.Errorf("slope %.0f B/s, process grew %.0f B/s (%.1f%% off)", l.SlopeBytesPerSec, oracleRate, 100*rel)
	}
	if l.R2 < 0.99 {
		t.Errorf("R^2 %.4f for a constant-rate leak", l.R2)
	}
	// nvidia-smi sees the process's memory plus its CUDA context: the
	// growth is at least what the process allocated.
	if l.GrowthBytes < last.Allocated || l.GrowthBytes > last.Allocated+1<<30 {
		t.Errorf("growth %s, process allocated %s", memtimeline.FormatBytes(l.GrowthBytes), memtimeline.FormatBytes(last.Allocated))
	}
	// Every other process of the session loaded, sat on a plateau and
	// exited: each must show up as a run that is not a leak.
	nonLeak := 0
	for _, r := range a.GPUs[0].Runs {
		if !r.Leak {
			nonLeak++
			if r.Reason == "" {
				t.Errorf("run at %s has no reason", r.Start.Format(TimeLayout))
			}
		}
	}
	if nonLeak < 5 {
		t.Errorf("%d non-leak runs; the session ran 8 other processes", nonLeak)
	}
	// The big_transformer process held its memory at 0%% utilization
	// while the profiler exported its trace, until the log ends.
	st := a.GPUs[0].Starvation
	if len(st) != 1 || st[0].Duration < time.Minute || !st[0].End.After(a.GPUs[0].End) {
		t.Errorf("starvation %+v, want one period over a minute long reaching the end of the log", st)
	}
	if a.GPUs[0].AboveThreshold.Duration != 0 || a.GPUs[0].AboveThreshold.ThresholdBytes <= 0 {
		t.Errorf("above threshold %+v: the session never used 90%% of the H200", a.GPUs[0].AboveThreshold)
	}
}

// smiSynth writes nvidia-smi rows from per-GPU memory.used series (MiB),
// one sample every interval, GPUs interleaved as nvidia-smi prints them.
type smiSynth struct {
	header   string // "" for noheader
	row      func(gpu int, ts string, usedMiB int64, util int) string
	interval time.Duration
}

var smiStart = time.Date(2026, 11, 29, 17, 0, 0, 0, time.UTC)

func (s smiSynth) render(series [][]int64, util [][]int) string {
	var b strings.Builder
	if s.header != "" {
		b.WriteString(s.header + "\n")
	}
	// Series shorter than the longest hold their last value.
	n := 0
	for _, x := range series {
		n = max(n, len(x))
	}
	for i := 0; i < n; i++ {
		ts := smiStart.Add(time.Duration(i) * s.interval).Format(TimeLayout)
		for g := range series {
			u := 50
			if util != nil {
				u = util[g][min(i, len(util[g])-1)]
			}
			b.WriteString(s.row(g, ts, series[g][min(i, len(series[g])-1)], u) + "\n")
		}
	}
	return b.String()
}

var smiStandard = smiSynth{
	header: "index, timestamp, memory.used [MiB], memory.total [MiB], utilization.gpu [%], utilization.memory [%]",
	row: func(g int, ts string, used int64, util int) string {
		return fmt.Sprintf("%d, %s, %d MiB, 81559 MiB, %d %%, 3 %%", g, ts, used, util)
	},
	interval: 200 * time.Millisecond,
}

// Series shapes, in MiB per sample.

func flat(n int, v int64) []int64 {
	s := make([]int64, n)
	for i := range s {
		s[i] = v
	}
	return s
}

// linear grows by step MiB every `every` samples, from v0.
func linear(n int, v0, step int64, every int) []int64 {
	s := make([]int64, n)
	for i := range s {
		s[i] = v0 + step*int64(i/every)
	}
	return s
}

// processes is back-to-back jobs: each ramps to its plateau in a few
// samples, holds it, and exits (memory back to ~0).
func processes(jobs int, plateauMiB int64, hold int) []int64 {
	var s []int64
	for j := 0; j < jobs; j++ {
		s = append(s, 0, 0, 4)
		p := plateauMiB + int64(j)*300
		s = append(s, p/4, p/2, p)
		s = append(s, flat(hold, p)...)
	}
	return append(s, 0, 0)
}

func concat(parts ...[]int64) []int64 {
	var s []int64
	for _, p := range parts {
		s = append(s, p...)
	}
	return s
}

func TestAnalyzeSynthetic(t *testing.T) {
	opts := DefaultOptions()
	leakSeries := concat(flat(10, 4), linear(150, 500, 32, 1), flat(20, 500+32*149), flat(5, 0)) // 30 s of +32 MiB/0.2 s
	cases := []struct {
		name      string
		series    []int64
		leaks     int
		leakSlope float64 // MiB/s
	}{
		{"steady leak", leakSeries, 1, 160},
		{"back-to-back processes with plateaus", processes(12, 2000, 60), 0, 0},
		{"one long process, load then plateau", concat(flat(5, 0), linear(8, 100, 1000, 1), flat(500, 8100)), 0, 0},
		{"staircase of four big steps", concat(flat(5, 0), linear(300, 1000, 1000, 75)), 0, 0},
		{"slow staircase leak, 8 MiB every 10 samples", concat(flat(5, 300), linear(1000, 300, 8, 10)), 1, 4},
		{"flat with noise", func() []int64 {
			s := flat(600, 5000)
			for i := range s {
				s[i] += int64((i*7919)%9) - 4
			}
			return s
		}(), 0, 0},
		{"leak with small dips", func() []int64 {
			s := linear(150, 1000, 32, 1)
			for i := 5; i < len(s); i += 7 {
				s[i] -= 40 // the caching allocator releasing a segment
			}
			return s
		}(), 1, 160},
		{"leak reset by a restart is two leaks", concat(linear(100, 500, 32, 1), flat(3, 0), linear(100, 500, 32, 1)), 2, 160},
		{"fast ramp, then a slow leak", concat(flat(5, 0), linear(6, 1000, 2000, 1), linear(300, 11000, 4, 1)), 1, 20},
		{"sawtooth: grows, flushed back to a high base, grows again", concat(flat(5, 20000), linear(150, 20000, 32, 1), linear(150, 20000, 32, 1), flat(5, 20000)), 0, 0},
		{"leak, then exit on a GPU another process holds 1 GiB of", concat(flat(5, 1024), linear(150, 1024, 32, 1), flat(5, 1024)), 1, 160},
		{"short growth under the minimum duration", concat(flat(5, 0), linear(40, 100, 32, 1), flat(30, 1380)), 0, 0},
		// One jump of 30% of the growth inside a steady leak (an
		// optimizer's state allocated mid-run): the old rule's "no rise
		// over 25% of the growth" called it no leak; the growth model
		// takes the jump out and reads the trend, at its own rate.
		{"steady leak with a one-time jump inside", concat(flat(5, 0), linear(40, 1000, 4, 1), linear(40, 1000+4*39+150, 4, 1), flat(5, 0)), 1, 20},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			log := readSMIString(t, smiStandard.render([][]int64{c.series}, nil))
			a := Analyze(log, opts)
			leaks := a.Leaks()
			if len(leaks) != c.leaks {
				for _, r := range a.GPUs[0].Runs {
					t.Logf("run %s..%s %s R2 %.3f leak=%v %s", r.Start.Format("05.000"), r.End.Format("05.000"), memtimeline.FormatBytes(r.GrowthBytes), r.R2, r.Leak, r.Reason)
				}
				t.Fatalf("%d leaks, want %d", len(leaks), c.leaks)
			}
			for _, l := range leaks {
				if got := l.SlopeBytesPerSec / (1 << 20); math.Abs(got-c.leakSlope) > 0.05*c.leakSlope {
					t.Errorf("slope %.2f MiB/s, want %.2f", got, c.leakSlope)
				}
			}
		})
	}
}

// TestAnalyzeMinGrowthDuration: the same 8 s growth is a leak only when
// the user lowers --min-growth-duration under 8 s.
func TestAnalyzeMinGrowthDuration(t *testing.T) {
	log := readSMIString(t, smiStandard.render([][]int64{concat(flat(5, 0), linear(41, 100, 32, 1), flat(30, 1380))}, nil))
	for _, c := range []struct {
		min   time.Duration
		leaks int
	}{{10 * time.Second, 0}, {7 * time.Second, 1}} {
		o := DefaultOptions()
		o.MinGrowthDuration = c.min
		if n := len(Analyze(log, o).Leaks()); n != c.leaks {
			t.Errorf("min %s: %d leaks, want %d", c.min, n, c.leaks)
		}
	}
}

func TestReadTwoGPUsInterleaved(t *testing.T) {
	in := smiStandard.render([][]int64{processes(6, 3000, 40), concat(flat(10, 4), linear(200, 700, 16, 1))}, nil)
	log := readSMIString(t, in)
	if len(log.GPUs) != 2 || log.GPUs[0].Key != "0" || log.GPUs[1].Key != "1" {
		t.Fatalf("GPUs %v", smiKeys(log))
	}
	a := Analyze(log, DefaultOptions())
	if len(a.GPUs[0].Leaks) != 0 || len(a.GPUs[1].Leaks) != 1 {
		t.Fatalf("leaks per GPU: %d, %d; want 0, 1", len(a.GPUs[0].Leaks), len(a.GPUs[1].Leaks))
	}
	if got := a.GPUs[1].Leaks[0].SlopeBytesPerSec / (1 << 20); math.Abs(got-80) > 2 {
		t.Errorf("GPU 1 slope %.1f MiB/s, want 80", got)
	}
}

func smiKeys(l *Log) []string {
	var k []string
	for _, g := range l.GPUs {
		k = append(k, g.Key)
	}
	return k
}

// TestReadVariants: the same two-GPU data written every way
// nvidia-smi can write it parses to the same samples.
func TestReadVariants(t *testing.T) {
	series := [][]int64{linear(30, 100, 10, 1), linear(30, 5000, 0, 1)}
	util := [][]int{make([]int, 30), make([]int, 30)}
	for i := range util[0] {
		util[0][i], util[1][i] = i, 100-i
	}
	want := readSMIString(t, smiStandard.render(series, util))
	variants := map[string]smiSynth{
		"reordered columns": {
			header: "timestamp, utilization.gpu [%], memory.total [MiB], index, memory.used [MiB]",
			row: func(g int, ts string, used int64, u int) string {
				return fmt.Sprintf("%s, %d %%, 81559 MiB, %d, %d MiB", ts, u, g, used)
			},
		},
		"nounits": {
			header: "index, timestamp, memory.used [MiB], memory.total [MiB], utilization.gpu [%]",
			row: func(g int, ts string, used int64, u int) string {
				return fmt.Sprintf("%d, %s, %d, 81559, %d", g, ts, used, u)
			},
		},
		"nounits and no units in the header": {
			header: "index,timestamp,memory.used,memory.total,utilization.gpu",
			row: func(g int, ts string, used int64, u int) string {
				return fmt.Sprintf("%d,%s,%d,81559,%d", g, ts, used, u)
			},
		},
		"noheader": {
			row: func(g int, ts string, used int64, u int) string {
				return fmt.Sprintf("%d, %s, %d MiB, 81559 MiB, %d %%", g, ts, used, u)
			},
		},
		"pci.bus_id instead of index": {
			header: "pci.bus_id, timestamp, name, memory.used [MiB], memory.total [MiB], utilization.gpu [%]",
			row: func(g int, ts string, used int64, u int) string {
				return fmt.Sprintf("00000000:%02X:00.0, %s, NVIDIA H100 80GB HBM3, %d MiB, 81559 MiB, %d %%", 0x1b+g, ts, used, u)
			},
		},
		"uuid instead of index": {
			header: "uuid, timestamp, memory.used [MiB], memory.total [MiB], utilization.gpu [%]",
			row: func(g int, ts string, used int64, u int) string {
				return fmt.Sprintf("GPU-%08x-1111-2222-3333-444455556666, %s, %d MiB, 81559 MiB, %d %%", g, ts, used, u)
			},
		},
		"no identity column": {
			header: "timestamp, memory.used [MiB], memory.total [MiB], utilization.gpu [%]",
			row: func(g int, ts string, used int64, u int) string {
				return fmt.Sprintf("%s, %d MiB, 81559 MiB, %d %%", ts, used, u)
			},
		},
		"CRLF line ends": {
			header: "index, timestamp, memory.used [MiB], memory.total [MiB], utilization.gpu [%]\r",
			row: func(g int, ts string, used int64, u int) string {
				return fmt.Sprintf("%d, %s, %d MiB, 81559 MiB, %d %%\r", g, ts, used, u)
			},
		},
	}
	for name, v := range variants {
		t.Run(name, func(t *testing.T) {
			v.interval = smiStandard.interval
			got := readSMIString(t, v.render(series, util))
			if len(got.GPUs) != 2 {
				t.Fatalf("GPUs %v, want 2", smiKeys(got))
			}
			for g := range got.GPUs {
				a, b := got.GPUs[g].Samples, want.GPUs[g].Samples
				if len(a) != len(b) {
					t.Fatalf("GPU %d: %d samples, want %d", g, len(a), len(b))
				}
				for i := range a {
					if a[i].Time != b[i].Time || a[i].UsedBytes != b[i].UsedBytes || a[i].TotalBytes != b[i].TotalBytes || a[i].UtilGPUPct != b[i].UtilGPUPct {
						t.Fatalf("GPU %d sample %d = %+v, want %+v", g, i, a[i], b[i])
					}
				}
			}
		})
	}
}

func TestReadMissingValuesAndRepeatedHeaders(t *testing.T) {
	in := `index, timestamp, memory.used [MiB], memory.total [MiB], utilization.gpu [%], utilization.memory [%]
0, 2026/11/29 17:26:22.516, 100 MiB, 143771 MiB, [Not Supported], [N/A]
0, 2026/11/29 17:26:22.716, [N/A], 143771 MiB, [Not Supported], [N/A]

index, timestamp, memory.used [MiB], memory.total [MiB], utilization.gpu [%], utilization.memory [%]
0, 2026/11/29 17:26:22.916, 300 MiB, N/A, 5 %, 1 %
`
	log := readSMIString(t, in)
	s := log.GPUs[0].Samples
	if len(s) != 3 || s[0].UtilGPUPct != -1 || s[1].UsedBytes != -1 || s[2].TotalBytes != -1 || s[2].UsedBytes != 300<<20 || s[2].UtilGPUPct != 5 {
		t.Fatalf("samples %+v", s)
	}
	a := Analyze(log, DefaultOptions())
	if g := a.GPUs[0]; g.PeakUsedBytes != 300<<20 || g.MeanUtilGPUPct != 5 || g.TotalBytes != 143771<<20 {
		t.Errorf("report %+v", g)
	}
	// All utilization missing: no starvation check, not a crash.
	in2 := strings.ReplaceAll(strings.ReplaceAll(in, "5 %", "[N/A]"), "N/A, [N/A]", "N/A, [N/A]")
	if g := Analyze(readSMIString(t, in2), DefaultOptions()).GPUs[0]; g.MeanUtilGPUPct != -1 || g.Starvation != nil {
		t.Errorf("no utilization: %+v", g)
	}
}

func TestAnalyzeThresholdAndStarvation(t *testing.T) {
	// 81559 MiB total; 90% is 73403.1 MiB. 50 samples (10 s) at 75000 MiB
	// with 0% utilization, then 100 samples at 40000 with 90%.
	series := concat(flat(50, 75000), flat(100, 40000))
	util := make([]int, 150)
	for i := 50; i < 150; i++ {
		util[i] = 90
	}
	a := Analyze(readSMIString(t, smiStandard.render([][]int64{series}, [][]int{util})), DefaultOptions())
	al := a.GPUs[0].AboveThreshold
	if al.Duration != 10*time.Second || al.Samples != 50 || len(al.Periods) != 1 {
		t.Errorf("above threshold %s over %d samples, %d periods; want 10s, 50, 1", al.Duration, al.Samples, len(al.Periods))
	}
	if want := int64(math.Ceil(0.9 * float64(int64(81559)<<20))); al.ThresholdBytes != want {
		t.Errorf("threshold bytes %d, want %d", al.ThresholdBytes, want)
	}
	st := a.GPUs[0].Starvation
	if len(st) != 1 || st[0].Duration != 10*time.Second || st[0].MeanUsedBytes != 75000<<20 {
		t.Errorf("starvation %+v, want one 10 s period at 75000 MiB", st)
	}
}

func TestReadErrors(t *testing.T) {
	hdr := "index, timestamp, memory.used [MiB]\n"
	cases := []struct {
		name, in, want string
		notSMI         bool
	}{
		{"empty", "", "empty", false},
		{"blank lines", "\n\n  \n", "only blank", true},
		{"garbage", "hello world\nthis is not a log\n", "no header", true},
		{"json", `{"step": 0, "allocated": 1}` + "\n", "MiB", true},
		{"binary", "\x00\x01\x02\x03garbage\n", "binary", true},
		{"header only", hdr, "no samples", false},
		{"no memory.used", "index, timestamp, utilization.gpu [%]\n0, 2026/11/29 17:26:22.516, 5 %\n", "memory.used", true},
		{"no timestamp", "index, memory.used [MiB]\n0, 5 MiB\n", "timestamp", true},
		{"short row mid-file", hdr + "0, 2026/11/29 17:26:22.516, 5 MiB\n0, 2026/11/29\n0, 2026/11/29 17:26:22.916, 5 MiB\n", "line 3", false},
		{"bad number", hdr + "0, 2026/11/29 17:26:22.516, five MiB\n0, 2026/11/29 17:26:22.916, 5 MiB\n", "line 2", false},
		{"bad unit", hdr + "0, 2026/11/29 17:26:22.516, 5 parsecs\n", "unit", false},
		{"bad time", hdr + "0, yesterday, 5 MiB\n", "timestamp", false},
		{"negative index", hdr + "-1, 2026/11/29 17:26:22.516, 5 MiB\n", "index", false},
		{"long line", strings.Repeat("x", smiMaxLine+10), "longer", false},
		{"noheader nounits", "0, 2026/11/29 17:26:22.516, 5, 80000, 3\n", "noheader,nounits", true},
	}
	for _, c := range cases {
		memtest.Refuses(t, Read, ErrNotLog, c.name, c.in, c.want, c.notSMI)
	}
}

// TestReadTruncatedLastLine: a log copied while nvidia-smi was still
// writing ends mid-row; that row is dropped with a warning.
func TestReadTruncatedLastLine(t *testing.T) {
	in := "index, timestamp, memory.used [MiB]\n0, 2026/11/29 17:26:22.516, 5 MiB\n0, 2026/11/29 17:26:22.716, 7 MiB\n0, 2026/11/29 17:2"
	log := readSMIString(t, in)
	if log.Rows != 2 || len(log.Warnings) != 1 || !strings.Contains(log.Warnings[0], "line 4") {
		t.Fatalf("rows %d warnings %q", log.Rows, log.Warnings)
	}
}

func TestReadOutOfOrderTimes(t *testing.T) {
	in := "index, timestamp, memory.used [MiB]\n0, 2026/11/29 17:26:23.000, 7 MiB\n0, 2026/11/29 17:26:22.000, 5 MiB\n"
	s := readSMIString(t, in).GPUs[0].Samples
	if s[0].UsedBytes != 5<<20 || s[1].UsedBytes != 7<<20 {
		t.Errorf("samples not in time order: %+v", s)
	}
}

func TestLooksLike(t *testing.T) {
	real := memtest.ReadAll(t, smiLeakCSV)
	steps := memtest.ReadAll(t, memtest.Testdata("steps", "leak_module_cache.stats_steps.jsonl"))
	cases := []struct {
		name string
		head []byte
		want bool
	}{
		{"real log", real[:512], true},
		{"noheader", []byte("0, 2026/11/29 17:26:22.516, 0 MiB, 143771 MiB, 0 %, 0 %\n"), true},
		{"steps jsonl", steps, false},
		{"chrome trace", []byte(`{"schemaVersion": 1, "traceEvents": [`), false},
		{"other csv", []byte("name,value\nx,1\n"), false},
		{"header without memory.used", []byte("index, timestamp, temperature.gpu\n"), false},
		{"empty", nil, false},
	}
	for _, c := range cases {
		if got := LooksLike(c.head); got != c.want {
			t.Errorf("%s: LooksLike = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestBuckets(t *testing.T) {
	g := memtest.Decode(t, smiLeakCSV, Read).GPUs[0]
	b := Buckets(g, 60)
	if len(b) != 60 || !b[0].Start.Equal(g.Samples[0].Time) || !b[59].End.Equal(g.Samples[len(g.Samples)-1].Time) {
		t.Fatalf("%d buckets from %v to %v", len(b), b[0].Start, b[len(b)-1].End)
	}
	n, peak := 0, int64(-1)
	for i, x := range b {
		n += x.Samples
		peak = max(peak, x.MaxUsedBytes)
		if i > 0 && !x.Start.Equal(b[i-1].End) {
			t.Fatalf("bucket %d starts %v, previous ends %v", i, x.Start, b[i-1].End)
		}
		// Each sample lies in its bucket.
		for _, s := range g.Samples {
			if !s.Time.Before(x.Start) && s.Time.Before(x.End) && (s.UsedBytes > x.MaxUsedBytes || s.UsedBytes < x.MinUsedBytes) {
				t.Fatalf("sample %v (%d) outside bucket %d's range %d-%d", s.Time, s.UsedBytes, i, x.MinUsedBytes, x.MaxUsedBytes)
			}
		}
	}
	if n != len(g.Samples) || peak != Analyze(&Log{GPUs: []*GPU{g}}, DefaultOptions()).GPUs[0].PeakUsedBytes {
		t.Errorf("buckets hold %d samples (want %d), peak %d", n, len(g.Samples), peak)
	}
	if one := Buckets(&GPU{Samples: g.Samples[:1]}, 60); len(one) != 1 || one[0].Samples != 1 {
		t.Errorf("one sample: %+v", one)
	}
}
