package rules

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/chrometrace"
	"github.com/torchmem/torchmem/memtimeline/exported"
	"github.com/torchmem/torchmem/memtimeline/memsummary"
	"github.com/torchmem/torchmem/memtimeline/memtest"
	"github.com/torchmem/torchmem/memtimeline/snapshot"
	"github.com/torchmem/torchmem/memtimeline/steplog"
	"github.com/torchmem/torchmem/rules/frag"
	"github.com/torchmem/torchmem/rules/leak"
	"github.com/torchmem/torchmem/rules/site"
)

// loadInput reads one recorded file of any kind the verdict uses, by name.
func loadInput(t testing.TB, path string) *Input {
	t.Helper()
	in := &Input{Source: path, Rank: -1}
	if m := regexp.MustCompile(`rank(\d+)`).FindStringSubmatch(path); m != nil {
		in.Rank, _ = strconv.ParseInt(m[1], 10, 64) // as the loader reads it
	}
	base := strings.TrimSuffix(filepath.Base(path), ".gz")
	switch {
	case strings.HasSuffix(base, ".pickle"):
		in.Snapshot = memtest.Decode(t, path, snapshot.Read)
	case strings.HasSuffix(base, ".jsonl"):
		in.StepLog = memtest.Decode(t, path, steplog.Read)
	case strings.HasSuffix(base, ".log"):
		in.MemSummary = memtest.Decode(t, path, memsummary.Read)
	default:
		// One decoded copy per test binary (the verdict tests load the same
		// recordings many times); no test changes a loaded trace.
		in.Trace = memtest.SharedTrace(t, path)
		if d := in.Trace.Meta.Distributed; d != nil {
			in.Rank = d.Rank
		}
	}
	return in
}

func loadInputs(t testing.TB, paths ...string) []*Input {
	var out []*Input
	for _, p := range paths {
		out = append(out, loadInput(t, p))
	}
	return out
}

type recordedTruth struct {
	LeakBytesPerStep int64 `json:"leak_bytes_per_step"`
}

func readRecordedTruth(t testing.TB, dir string) recordedTruth {
	t.Helper()
	var tr recordedTruth
	memtest.ReadJSON(t, filepath.Join(dir, "truth.json"), &tr)
	return tr
}

var gpuData = memtest.Testdata("gpu")

// One verdict per input on the bundled traces: the leak with its figure
// (truth.json) and its function (a trace names frames by their def line,
// never the allocating line: the line is said not recorded, the def line
// kept as such), the clean run clean.
func TestVerdictOfOneTrace(t *testing.T) {
	for _, c := range []struct {
		dir, verdict, line string
		defLine            int
	}{
		{memtest.Testdata("traces", "leak_module_cache"), leak.VerdictLeak, "gen_traces.py, def line 143", 143},
		{memtest.Testdata("traces", "resnet_train_clean"), leak.VerdictClean, "", 0},
		{gpuData + "/diff_pair/head_leak", leak.VerdictLeak, "diff_train.py, def line 35", 35},
	} {
		t.Run(filepath.Base(c.dir), func(t *testing.T) {
			vs := judgeAll(loadInputs(t, filepath.Join(c.dir, "trace.json.gz")))
			if len(vs) != 1 {
				t.Fatalf("%d verdicts for one input", len(vs))
			}
			v := vs[0]
			if v.Leak.Verdict != c.verdict {
				t.Fatalf("verdict %s (%s), want %s", v.Leak.Verdict, v.Leak.Reason, c.verdict)
			}
			if c.verdict == leak.VerdictLeak {
				want := readRecordedTruth(t, c.dir).LeakBytesPerStep
				if v.Leak.BytesPerStep != want {
					t.Errorf("%d bytes per step, truth %d", v.Leak.BytesPerStep, want)
				}
				if v.Leak.Location == nil || v.Leak.Location.String() != c.line || v.Leak.Location.DefLine != c.defLine {
					t.Errorf("holding line %+v, want %s, def at %d", v.Leak.Location, c.line, c.defLine)
				}
				if v.Status() != "LEAK" {
					t.Errorf("status %s", v.Status())
				}
			}
			if v.Peak == nil || v.Peak.AllocatedBytes <= 0 || len(v.Peak.Holders) == 0 || len(v.Peak.Holders) > 3 {
				t.Fatalf("peak %+v", v.Peak)
			}
			if s, _ := chrometrace.Summarize(v.Inputs[0].Trace, -1), 0; s.PeakAllocatedBytes != v.Peak.AllocatedBytes {
				t.Errorf("peak %d, the trace's summary says %d", v.Peak.AllocatedBytes, s.PeakAllocatedBytes)
			}
			for i := 1; i < len(v.Peak.Holders); i++ {
				if v.Peak.Holders[i].Bytes > v.Peak.Holders[i-1].Bytes {
					t.Errorf("holders not largest first: %+v", v.Peak.Holders)
				}
			}
			if v.Frag == nil || v.Frag.Verdict == "" {
				t.Errorf("no fragmentation verdict")
			}
		})
	}
}

// The OOM recording: the trace's [OutOfMemory] event and the snapshot's
// oom entry are one out-of-memory, a capacity one (300 GiB on a 140 GiB GPU).
func TestVerdictOOMMergesTraceAndSnapshot(t *testing.T) {
	dir := gpuData + "/oom"
	vs := judgeAll(loadInputs(t, filepath.Join(dir, "trace.json.gz"), filepath.Join(dir, "snapshot.pickle"), filepath.Join(dir, "stats_steps.jsonl")))
	if len(vs) != 1 {
		t.Fatalf("%d groups, want one run", len(vs))
	}
	v := vs[0]
	if len(v.OOMs) != 1 {
		t.Fatalf("%d OOMs, want 1 (trace and snapshot see the same): %+v", len(v.OOMs), v.OOMs)
	}
	o := v.OOMs[0]
	if o.RequestBytes != 322122547200 || o.Cause != OOMCapacity {
		t.Errorf("OOM %+v", o)
	}
	if o.AllocatedBytes <= 0 || o.ReservedBytes < o.AllocatedBytes || o.FreeInCacheBytes != o.ReservedBytes-o.AllocatedBytes || o.LargestFreeBlock < 0 || o.DeviceFreeBytes < 0 {
		t.Errorf("allocator state missing: %+v", o)
	}
	if o.Composition == nil || o.Composition.AllocatedBytes != o.AllocatedBytes {
		t.Errorf("no composition at the OOM: %+v", o.Composition)
	}
	if v.Status() != "OOM" || v.Leak.Verdict == leak.VerdictLeak {
		t.Errorf("status %s, leak %s", v.Status(), v.Leak.Verdict)
	}
}

// alloc_retry_oom: under a set_per_process_memory_fraction cap of 348 MiB
// a 1 MiB small-pool request failed while 113 MiB sat free in the cache, a
// split 128 MiB large-pool segment (the torch message: "348.00 MiB allowed;
// ... 112.96 MiB is reserved by PyTorch but unallocated"). The device had
// 138 GiB free: not a capacity OOM.
func TestVerdictOOMUnderMemoryFraction(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(gpuData, "alloc_retry_oom", "vm_*"))
	vs := judgeAll(loadInputs(t, files...))
	if len(vs) != 1 || len(vs[0].OOMs) != 1 {
		t.Fatalf("want one run with one OOM: %+v", vs)
	}
	o := vs[0].OOMs[0]
	if o.Cause != OOMFragmentation || o.FreeInCacheBytes != 348*(1<<20)-o.AllocatedBytes || o.ReservedBytes != 348*(1<<20) {
		t.Errorf("OOM %s (%s): %+v", o.Cause, o.Reason, o)
	}
	if f := vs[0].Frag; f == nil || f.Verdict != frag.VerdictFragmented {
		t.Errorf("frag %+v, want fragmented (115 MiB split in the snapshot)", f)
	}
}

// The OOM's cause from the allocator at the failure: fragmentation only
// when the cache's free bytes then could hold the request.
func TestOOMCause(t *testing.T) {
	at := func(a OOMAnswer) OOMAnswer {
		a.AtFailure, a.PoolFreeBytes, a.PoolLargestFreeBlock = true, -1, -1
		return a
	}
	for _, c := range []struct {
		a    OOMAnswer
		want string
	}{
		{at(OOMAnswer{RequestBytes: 100, AllocatedBytes: 800, ReservedBytes: 1000, FreeInCacheBytes: 200, LargestFreeBlock: 50, DeviceFreeBytes: 0, CapacityBytes: 1000}), OOMFragmentation},
		{at(OOMAnswer{RequestBytes: 300, AllocatedBytes: 800, ReservedBytes: 1000, FreeInCacheBytes: 200, LargestFreeBlock: 50, DeviceFreeBytes: 0, CapacityBytes: 1000}), OOMCapacity},
		{at(OOMAnswer{RequestBytes: 2000, AllocatedBytes: 0, ReservedBytes: 0, FreeInCacheBytes: 0, LargestFreeBlock: -1, DeviceFreeBytes: 1000, CapacityBytes: 1000}), OOMCapacity},
		{OOMAnswer{RequestBytes: 100, AllocatedBytes: -1, ReservedBytes: -1, FreeInCacheBytes: -1, LargestFreeBlock: -1, DeviceFreeBytes: -1, CapacityBytes: -1, PoolLargestFreeBlock: -1}, "unknown"},
		// A memory-fraction cap: the device had the bytes, the cache held
		// enough free at the failure, in the other pool.
		{at(OOMAnswer{RequestBytes: 100, AllocatedBytes: 800, ReservedBytes: 1000, FreeInCacheBytes: 200, LargestFreeBlock: 150, DeviceFreeBytes: 5000, CapacityBytes: 6000}), OOMFragmentation},
		// A free block of the request's own pool as large as the request:
		// the allocator would have used it, so the figures are not the
		// failure's; the cap refused the segment.
		{OOMAnswer{RequestBytes: 100, AllocatedBytes: 800, ReservedBytes: 1000, FreeInCacheBytes: 200, LargestFreeBlock: 100, DeviceFreeBytes: 5000, CapacityBytes: 6000, AtFailure: true, PoolFreeBytes: 200, PoolLargestFreeBlock: 100}, OOMProcessLimit},
		// Figures of a later dump (not at the failure): no fragmentation.
		{OOMAnswer{RequestBytes: 100, AllocatedBytes: 800, ReservedBytes: 1000, FreeInCacheBytes: 200, LargestFreeBlock: 50, DeviceFreeBytes: 5000, CapacityBytes: 6000, PoolLargestFreeBlock: -1}, OOMProcessLimit},
		// Free in the cache a rounding error of the request: the cap.
		{at(OOMAnswer{RequestBytes: 256 << 20, AllocatedBytes: 1000 << 20, ReservedBytes: 1006 << 20, FreeInCacheBytes: 6 << 20, LargestFreeBlock: 4 << 20, DeviceFreeBytes: 100 << 30, CapacityBytes: 140 << 30}), OOMProcessLimit},
		// The cap with nothing free in the cache while the device had the
		// bytes: the process's own limit, not the GPU's capacity.
		{at(OOMAnswer{RequestBytes: 300, AllocatedBytes: 1000, ReservedBytes: 1000, FreeInCacheBytes: 0, LargestFreeBlock: 0, DeviceFreeBytes: 5000, CapacityBytes: 6000}), OOMProcessLimit},
		// The device full: capacity.
		{at(OOMAnswer{RequestBytes: 300, AllocatedBytes: 5900, ReservedBytes: 5900, FreeInCacheBytes: 0, LargestFreeBlock: 0, DeviceFreeBytes: 100, CapacityBytes: 6000}), OOMCapacity},
	} {
		if got, why := oomCause(c.a); got != c.want {
			t.Errorf("%+v: %s (%s), want %s", c.a, got, why, c.want)
		}
	}
}

// Every OOM recorded in testdata, with the cause the allocator's state at
// the failure gives (the snapshot's segments with the history after the
// OOM undone, the trace's event): torch's own OOM message, kept in each
// run's truth.json, says the same figures.
func TestOOMCausesOnRecordings(t *testing.T) {
	for _, c := range []struct {
		dir, cause    string
		freeAtFailure int64 // torch's "reserved by PyTorch but unallocated"
	}{
		{"alloc_retry_oom", OOMFragmentation, 118448128}, // 112.96 MiB: the split large-pool segment, the request of the small pool
		{"oom", OOMCapacity, 6209024},                    // 300 GiB on a 139.8 GiB GPU; 5.92 MiB free (the trace's event)
		{"hf_trainer_oom", OOMCapacity, -2},
		{"evidence/oom_fraction", OOMProcessLimit, 6209024}, // 5.92 MiB free for 256 MiB: the 2% fraction
		{"watch/near_oom", OOMProcessLimit, -2},
	} {
		files, _ := filepath.Glob(filepath.Join(gpuData, c.dir, "*"))
		var keep []string
		for _, f := range files {
			if !strings.HasSuffix(f, ".json") && !strings.Contains(f, "near_oom.snapshot") && !strings.Contains(f, "leak.snapshot") && !strings.HasSuffix(f, ".txt") && !strings.HasSuffix(f, "notify.jsonl") && !strings.HasSuffix(f, "memory_timeline.raw.json.gz") {
				keep = append(keep, f)
			}
		}
		vs := judgeAll(loadInputs(t, keep...))
		if len(vs) != 1 || len(vs[0].OOMs) != 1 {
			t.Errorf("%s: want one run with one OOM, got %d runs", c.dir, len(vs))
			continue
		}
		o := vs[0].OOMs[0]
		if o.Cause != c.cause || !o.AtFailure {
			t.Errorf("%s: %s (%s), want %s at the failure", c.dir, o.Cause, o.Reason, c.cause)
		}
		if c.freeAtFailure >= 0 && o.FreeInCacheBytes != c.freeAtFailure {
			t.Errorf("%s: free in cache %d, torch's message says %d", c.dir, o.FreeInCacheBytes, c.freeAtFailure)
		}
	}
}

// One run seen three ways (trace, snapshot, step log) is one verdict and
// one finding, with every source's figure.
func TestVerdictGroupsOneRunsFiles(t *testing.T) {
	dir := gpuData + "/leak_retain_graph"
	ins := loadInputs(t, filepath.Join(dir, "trace.json.gz"), filepath.Join(dir, "snapshot.pickle"), filepath.Join(dir, "stats_steps.jsonl"))
	vs := judgeAll(ins)
	if len(vs) != 1 {
		t.Fatalf("%d verdicts, want 1", len(vs))
	}
	v := vs[0]
	truth := readRecordedTruth(t, dir).LeakBytesPerStep
	if v.Leak.Verdict != leak.VerdictLeak || v.Leak.BytesPerStep != truth {
		t.Errorf("leak %s %d, truth %d", v.Leak.Verdict, v.Leak.BytesPerStep, truth)
	}
	kinds := map[SourceKind]bool{}
	for _, e := range v.Leak.Evidence {
		kinds[e.Kind] = true
	}
	if !kinds[SourceTrace] || !kinds[SourceSnapshot] || !kinds[SourceSteps] {
		t.Errorf("evidence %+v", v.Leak.Evidence)
	}
	// The figure comes from the source covering the most steps (here the
	// snapshot's history, 9 annotated steps, over the log's 8 records).
	most := v.Leak.Evidence[0]
	for _, e := range v.Leak.Evidence {
		if e.Steps > most.Steps {
			most = e
		}
	}
	if v.Leak.FromFile != most.Source {
		t.Errorf("figure from %q, want %s (%d steps, the most)", v.Leak.From, most.Source, most.Steps)
	}
	var all []Finding
	for _, in := range ins {
		all = append(all, Run(Builtin(), in)...)
	}
	merged := mergeLeakFindings(vs, all)
	var leakFindings []Finding
	for _, f := range merged {
		if IsLeakRule(f.Rule) {
			leakFindings = append(leakFindings, f)
		}
	}
	if len(leakFindings) != 1 {
		t.Fatalf("%d leak findings, want one per leak", len(leakFindings))
	}
	f := leakFindings[0]
	if f.Metrics["bytes_per_step"] != float64(truth) || f.Metrics["steps_bytes_per_step"] != float64(truth) || f.Metrics["trace_bytes_per_step"] == 0 {
		t.Errorf("metrics %v", f.Metrics)
	}
}

// The snippet's files: per rank, the traces, the snapshot and the step
// log form one group; two ranks make two.
func TestGroupInputsSnippetFiles(t *testing.T) {
	for _, c := range []struct {
		dir   string
		ranks []int64
		sizes []int
	}{
		{gpuData + "/snippet_proof/gpu", []int64{0}, []int{4}},
		{gpuData + "/snippet_proof/ddp", []int64{0, 1}, []int{3, 3}},
		{gpuData + "/ddp_one_rank_leaks", []int64{0, 1}, []int{2, 2}},
	} {
		t.Run(c.dir, func(t *testing.T) {
			var paths []string
			err := filepath.WalkDir(c.dir, func(p string, d os.DirEntry, err error) error {
				if err == nil && !d.IsDir() && (strings.Contains(p, "trace.json") || strings.HasSuffix(p, ".pickle") || strings.HasSuffix(p, "steps.jsonl")) {
					paths = append(paths, p)
				}
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			gs := groupInputs(loadInputs(t, paths...))
			if len(gs) != len(c.ranks) {
				t.Fatalf("%d groups, want %d: %+v", len(gs), len(c.ranks), gs)
			}
			for i, g := range gs {
				if g.Rank != c.ranks[i] || len(g.Inputs) != c.sizes[i] {
					t.Errorf("group %d: rank %d with %d inputs, want rank %d with %d", i, g.Rank, len(g.Inputs), c.ranks[i], c.sizes[i])
				}
			}
		})
	}
}

// Under DDP one rank leaks: the verdicts say which.
func TestVerdictPerRank(t *testing.T) {
	dir := gpuData + "/ddp_one_rank_leaks"
	var paths []string
	for _, r := range []string{"rank0", "rank1"} {
		paths = append(paths, filepath.Join(dir, r, "trace.json.gz"), filepath.Join(dir, r, "stats_steps.jsonl"))
	}
	vs := judgeAll(loadInputs(t, paths...))
	if len(vs) != 2 {
		t.Fatalf("%d verdicts", len(vs))
	}
	want := readRecordedTruth(t, filepath.Join(dir, "rank1")).LeakBytesPerStep
	if vs[0].Rank != 0 || vs[0].Leak.Verdict != leak.VerdictClean || vs[1].Rank != 1 || vs[1].Leak.Verdict != leak.VerdictLeak || vs[1].Leak.BytesPerStep != want {
		t.Errorf("rank %d %s; rank %d %s %d (truth %d)", vs[0].Rank, vs[0].Leak.Verdict, vs[1].Rank, vs[1].Leak.Verdict, vs[1].Leak.BytesPerStep, want)
	}
	if l := vs[1].Leak.Location; l == nil || l.File != "ddp_one_rank_leaks.py" {
		t.Errorf("holding line %v", l)
	}
}

// Files saved by hand in one folder, without the snippet's run ids, are one
// run (per rank where ranks are known): two windows of one run are judged
// together; a file of unknown rank joins the folder's only rank.
func TestGroupInputsOneRunPerFolder(t *testing.T) {
	a := &Input{Source: "runs/trace_step5.json.gz", Trace: &chrometrace.Trace{}, Rank: -1}
	b := &Input{Source: "runs/trace_step10.json.gz", Trace: &chrometrace.Trace{}, Rank: -1}
	if gs := groupInputs([]*Input{a, b}); len(gs) != 1 || len(gs[0].Inputs) != 2 {
		t.Errorf("groups %+v", gs)
	}
	r0 := &Input{Source: "job/trace_rank0.json.gz", Trace: &chrometrace.Trace{}, Rank: 0}
	r1 := &Input{Source: "job/trace_rank1.json.gz", Trace: &chrometrace.Trace{}, Rank: 1}
	tl := &Input{Source: "job/memory_timeline.json.gz", Timeline: &exported.Timeline{}, Rank: -1}
	if gs := groupInputs([]*Input{r0, r1, tl}); len(gs) != 3 {
		t.Errorf("two ranks and a timeline of unknown rank: %d groups, want 3 (the timeline cannot be placed)", len(gs))
	}
	one := &Input{Source: "one/trace.json.gz", Trace: &chrometrace.Trace{}, Rank: 0}
	tl1 := &Input{Source: "one/memory_timeline.json.gz", Timeline: &exported.Timeline{}, Rank: -1}
	if gs := groupInputs([]*Input{one, tl1}); len(gs) != 1 || gs[0].Rank != 0 {
		t.Errorf("a timeline beside one rank's trace: %+v", gs)
	}
}

// Disagreement is information: the sources' figures, which is trusted and
// what to record to settle it.
func TestJudgeLeakDisagreement(t *testing.T) {
	steps := LeakEvidence{Source: "r/steps.jsonl", Kind: SourceSteps, Verdict: leak.VerdictLeak, BytesPerStep: 16 << 20, Steps: 200, R2: 0.99}
	traceClean := LeakEvidence{Source: "r/trace.json.gz", Kind: SourceTrace, Verdict: leak.VerdictClean, Steps: 3, R2: 1}
	traceLeak := LeakEvidence{Source: "r/trace.json.gz", Kind: SourceTrace, Verdict: leak.VerdictLeak, BytesPerStep: 16 << 20, Steps: 3, R2: 1,
		leakCause: leakCause{Kind: leak.KindContainer, Location: &site.Location{File: "train.py", Line: 40}, Holding: []string{"train.py(10): main", "train.py(40): step"}}}
	stepsClean := LeakEvidence{Source: "r/steps.jsonl", Kind: SourceSteps, Verdict: leak.VerdictClean, Steps: 200, R2: 0.1}
	snapOff := LeakEvidence{Source: "r/s.pickle", Kind: SourceSnapshot, Verdict: leak.VerdictLeak, BytesPerStep: 40 << 20, Steps: 8, R2: 1}
	for _, c := range []struct {
		name                  string
		ev                    []LeakEvidence
		verdict, from, settle string
		kind                  string
	}{
		{"log grows, window clean", []LeakEvidence{traceClean, steps}, leak.VerdictLeak, "steps.jsonl", "starts after the window", ""},
		{"window leaks, log flat", []LeakEvidence{traceLeak, stepsClean}, leak.VerdictLeak, "trace.json.gz", "does not grow", leak.KindContainer},
		{"all agree", []LeakEvidence{traceLeak, steps}, leak.VerdictLeak, "steps.jsonl", "", leak.KindContainer},
		{"figures differ", []LeakEvidence{traceLeak, snapOff}, leak.VerdictLeak, "s.pickle", "figures differ", leak.KindContainer},
		{"all clean", []LeakEvidence{traceClean, stepsClean}, leak.VerdictClean, "steps.jsonl", "", ""},
	} {
		a := judgeLeak(c.ev)
		if a.Verdict != c.verdict || !strings.Contains(a.FromFile, c.from) || a.Kind != c.kind {
			t.Errorf("%s: %s from %q kind %q", c.name, a.Verdict, a.From, a.Kind)
		}
		if (c.settle == "") != (a.Settle == "") || !strings.Contains(a.Settle, c.settle) {
			t.Errorf("%s: settle %q, want %q", c.name, a.Settle, c.settle)
		}
		if c.verdict == leak.VerdictLeak && c.kind != "" && (a.Location == nil || a.Location.Line != 40) {
			t.Errorf("%s: holding line %v from the trace", c.name, a.Location)
		}
	}
}

// The snippet's recordings (testdata/gpu, snippet v2 names with a run id):
// one verdict per run and rank from the trace, snapshot and step log, the
// figure the truth planted, every source's figure beside it.
func TestVerdictOnSnippetRecordings(t *testing.T) {
	for _, name := range []string{"hf_trainer_leak", "hf_trainer_clean", "late_start_leak", "small_leak_big_model", "lightning_leak", "eval_keeps_logits", "grad_accum", "peak_above_steady"} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(gpuData, name)
			var truth struct {
				Leak *struct {
					Kind         string `json:"kind"`
					BytesPerStep int64  `json:"bytes_per_step"`
					Site         struct {
						File string `json:"file"`
					} `json:"site"`
					AllocSite struct {
						File string `json:"file"`
					} `json:"alloc_site"`
				} `json:"leak"`
			}
			memtest.ReadJSON(t, filepath.Join(dir, "truth.json"), &truth)
			paths, _ := filepath.Glob(filepath.Join(dir, "vm_*"))
			if len(paths) < 3 {
				t.Fatalf("%d files", len(paths))
			}
			vs := judgeAll(loadInputs(t, paths...))
			if len(vs) != 1 {
				t.Fatalf("%d verdicts for one run and rank", len(vs))
			}
			v := vs[0]
			if v.Rank != 0 || v.Run == "" || len(v.Leak.Evidence) != 3 {
				t.Errorf("rank %d run %q, %d sources", v.Rank, v.Run, len(v.Leak.Evidence))
			}
			if truth.Leak == nil {
				if v.Leak.Verdict != leak.VerdictClean {
					t.Errorf("verdict %s (%s), the run is clean", v.Leak.Verdict, v.Leak.Reason)
				}
				return
			}
			if v.Leak.Verdict != leak.VerdictLeak || v.Leak.BytesPerStep != truth.Leak.BytesPerStep {
				t.Errorf("%s %d bytes per step from %s, truth %d", v.Leak.Verdict, v.Leak.BytesPerStep, v.Leak.From, truth.Leak.BytesPerStep)
			}
			// The holding line is in the planted file (the allocating line
			// or its caller, by how deep the source's stack reaches).
			planted := truth.Leak.Site.File + truth.Leak.AllocSite.File
			if l := v.Leak.Location; l == nil || planted == "" || filepath.Base(l.File) != planted {
				t.Errorf("holding line %v, planted in %q", l, planted)
			}
			t.Logf("%s %s kind %s (truth %s) at %v; %s", v.Leak.Verdict, v.Leak.From, v.Leak.Kind, truth.Leak.Kind, v.Leak.Location, v.Leak.Agreement)
		})
	}
}

// A training log with memory_summary() tables beside the snippet's files
// joins their run (its rank read from the logger prefix) and adds its own
// figure.
func TestVerdictWithLoggedMemorySummary(t *testing.T) {
	dir := filepath.Join(gpuData, "logged_memory_summary")
	paths, _ := filepath.Glob(filepath.Join(dir, "vm_*"))
	paths = append(paths, filepath.Join(dir, "train.log"))
	vs := judgeAll(loadInputs(t, paths...))
	if len(vs) != 1 {
		t.Fatalf("%d verdicts, want the log in the run's", len(vs))
	}
	found := false
	for _, e := range vs[0].Leak.Evidence {
		if e.Kind == SourceMemSummary {
			found = e.Verdict == leak.VerdictLeak && e.BytesPerStep == 8<<20
			t.Logf("%+v", e)
		}
	}
	if !found || vs[0].Leak.BytesPerStep != 8<<20 {
		t.Errorf("memory_summary evidence missing or wrong: %+v", vs[0].Leak.Evidence)
	}
}

// An export_memory_timeline file alone: torch's own peak and categories.
func TestVerdictPeakFromTimelineAlone(t *testing.T) {
	tl, err := exported.ReadFile(memtest.Testdata("timeline", "compiled_model", "memory_timeline.json.gz"))
	if err != nil {
		t.Fatal(err)
	}
	v := judge("t", []*Input{{Source: "memory_timeline.json.gz", Timeline: tl, Rank: -1}})
	_, peak, _ := tl.Peak()
	if v.Peak == nil || v.Peak.AllocatedBytes != peak || v.Peak.Composition.Estimated || len(v.Peak.Composition.Torch) != len(exported.Categories) || v.Peak.Composition.Torch[6].Name != "AUTOGRAD_DETAIL" {
		t.Fatalf("peak %+v", v.Peak)
	}
	var sum int64
	for _, s := range v.Peak.Composition.Torch {
		sum += s.Bytes
	}
	if sum != peak {
		t.Errorf("categories sum to %d, the peak is %d", sum, peak)
	}
}

// A snapshot alone: its recorded history's highest point, by line. On the
// recordings whose trace is of the same run, it is the trace's peak to the
// byte (the blocks from before the history counted from the dump).
func TestVerdictPeakFromSnapshotAlone(t *testing.T) {
	for _, c := range []struct{ snapshot, trace string }{
		{memtest.Testdata("snapshots", "leak_module_cache.pickle.gz"), memtest.Testdata("traces", "leak_module_cache", "trace.json.gz")},
		{gpuData + "/oom/snapshot.pickle", gpuData + "/oom/trace.json.gz"},
	} {
		v := judge("s", loadInputs(t, c.snapshot))
		want := chrometrace.Summarize(memtest.Trace(t, c.trace), -1).PeakAllocatedBytes
		if v.Peak == nil || v.Peak.AllocatedBytes != want || len(v.Peak.Holders) != 3 {
			t.Errorf("%s: peak %+v, the trace's %d", c.snapshot, v.Peak, want)
			continue
		}
		if h := v.Peak.Holders[0]; !strings.Contains(h.Where, ".py(") || h.Bytes <= 0 {
			t.Errorf("%s: top holder %+v", c.snapshot, h)
		}
	}
}

// The allocator's free-and-retry is told beside the frag verdict: from
// torch's own counter in the steps log (the run), else from the trace (its
// window). Every recording with a steps log: the count is the log's own
// num_alloc_retries rise, read here from the raw lines; and alloc_retry's
// trace alone finds one retry per profiled step, as truth.json's
// retries_per_step says for those steps.
func TestVerdictRetries(t *testing.T) {
	logs, _ := filepath.Glob(filepath.Join(gpuData, "*", "vm_*.steps.jsonl"))
	withRetries := 0
	for _, logPath := range logs {
		dir := filepath.Dir(logPath)
		t.Run(filepath.Base(dir), func(t *testing.T) {
			first, last := int64(-1), int64(-1)
			for _, line := range strings.Split(strings.TrimSpace(string(memtest.ReadAll(t, logPath))), "\n") {
				var rec struct {
					Retries *int64 `json:"num_alloc_retries"`
				}
				if err := json.Unmarshal([]byte(line), &rec); err != nil || rec.Retries == nil {
					continue
				}
				if first < 0 {
					first = *rec.Retries
				}
				last = *rec.Retries
			}
			want := last - first
			paths, _ := filepath.Glob(filepath.Join(dir, "vm_*"))
			vs := judgeAll(loadInputs(t, paths...))
			var got int64
			for _, v := range vs {
				if v.Frag != nil {
					got = max(got, v.Frag.AllocRetries)
					if (v.Frag.AllocRetries > 0) != (v.Frag.Retries != "") {
						t.Errorf("%d retries, sentence %q", v.Frag.AllocRetries, v.Frag.Retries)
					}
				}
			}
			if got != want {
				t.Errorf("%d retries told, the steps log rose by %d", got, want)
			}
			if want > 0 {
				withRetries++
			}
		})
	}
	if withRetries == 0 {
		t.Errorf("no recording with allocator retries: the test proves nothing")
	}

	dir := filepath.Join(gpuData, "alloc_retry")
	var truth struct {
		RetriesPerStep []int64 `json:"retries_per_step"`
	}
	memtest.ReadJSON(t, filepath.Join(dir, "truth.json"), &truth)
	traces, _ := filepath.Glob(filepath.Join(dir, "*.pt.trace.json.gz"))
	ins := loadInputs(t, traces...)
	var want int64
	for _, s := range ins[0].Frag().Steps {
		if s.Number >= 0 && s.Number < int64(len(truth.RetriesPerStep)) {
			want += truth.RetriesPerStep[s.Number]
		}
	}
	v := judgeAll(ins)[0]
	if v.Frag == nil || v.Frag.AllocRetries != want || want == 0 {
		t.Errorf("trace alone: %+v, want %d retries (truth's retries_per_step over the window)", v.Frag, want)
	}
}

// A log overrules a window only with positive evidence: a trace window
// that saw growth is overruled by a longer log that measured a plateau
// after it (the bounded queue), never by a log the growth model finds
// inconclusive (rises at random, too short a tail), and a log that grows
// agrees with it.
func TestLogOverrulesOnlyWithEvidence(t *testing.T) {
	window := LeakEvidence{Source: "r/trace.json.gz", Kind: SourceTrace, Verdict: leak.VerdictLeak, BytesPerStep: 4 << 20, Steps: 4, FirstStep: 2, LastStep: 5,
		GrowthFirst: 2, GrowthLast: 5, Period: 1, R2: 1}
	logOf := func(dir string) LeakEvidence {
		t.Helper()
		paths, _ := filepath.Glob(filepath.Join(gpuData, dir, "*steps.jsonl"))
		ins := loadInputs(t, paths...)
		ev := ins[0].LeakEvidence()
		if len(ev) != 1 {
			t.Fatalf("%s: %d evidence", dir, len(ev))
		}
		return ev[0]
	}
	for _, c := range []struct {
		dir, verdict, agree string
	}{
		{"evidence/bounded_queue_cap", leak.VerdictClean, "measured a plateau"}, // fills 9 steps, flat 21
		{"watch/healthy", leak.VerdictLeak, ""},                                 // a cache filling at random: inconclusive
		{"watch/leak", leak.VerdictLeak, "agree"},                               // grows from step 10
	} {
		lg := logOf(c.dir)
		a := judgeLeak([]LeakEvidence{window, lg})
		if a.Verdict != c.verdict || !strings.Contains(a.Agreement, c.agree) {
			t.Errorf("%s (log %s: %s): %s, agreement %q; want %s with %q", c.dir, lg.Verdict, lg.Reason, a.Verdict, a.Agreement, c.verdict, c.agree)
		}
	}
}
