package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/chrometrace/ranksynth"
	"github.com/torchmem/torchmem/cmd/internal/report"
	"github.com/torchmem/torchmem/cmd/torchmem/load"
	"github.com/torchmem/torchmem/memtimeline/memtest"
	"github.com/torchmem/torchmem/rules"
	"github.com/torchmem/torchmem/rules/digest"
	"github.com/torchmem/torchmem/rules/leak"
)

// summarizeDir summarizes args into a new temporary directory.
func summarizeDir(t *testing.T, args ...string) string {
	t.Helper()
	dir := t.TempDir()
	out, errOut, code := torchmem(t, append(append([]string{"summarize"}, args...), "-o", dir)...)
	if code != exitOK {
		t.Fatalf("summarize %v: exit %d\n%s\n%s", args, code, out, errOut)
	}
	return dir
}

// verdictsOf runs a command with --format json and returns its verdicts
// and exit code.
func verdictsOf(t *testing.T, args ...string) ([]rules.Verdict, int) {
	t.Helper()
	run := torchmem
	if onTestdata(args) {
		run = torchmemShared // the same evaluation other tests ask for
	}
	out, errOut, code := run(t, append(args, "--format", "json")...)
	if code == exitBadInput {
		t.Fatalf("%v: exit 2: %s", args, errOut)
	}
	var doc struct {
		Verdicts []rules.Verdict `json:"verdicts"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("%v: %v\n%s", args, err, out)
	}
	return doc.Verdicts, code
}

// The map step and the reduce: every command answers from the summaries of
// the snippet's and the recorder's real recordings with the verdict it gives
// from the files themselves: per run and rank, the leak verdict, its bytes
// per step, kind and holding line, the evidence of every source, the OOMs,
// fragmentation and peak.
func TestSummariesGiveTheSameVerdicts(t *testing.T) {
	t.Parallel() // see torchmem: which tests may run side by side
	for _, rec := range []string{
		"ddp_one_rank_leaks",
		"snippet_v2/gpu",
		"snippet_v2/oom_escape",
		"snippet_v2/rerun",
		"snippet_v2/rank_picked",
		"late_start_leak",
		"leak_retain_graph",
		"hf_trainer_leak",
		"logged_memory_summary",
	} {
		t.Run(rec, func(t *testing.T) {
			t.Parallel()
			dir := memtest.Testdata("gpu", rec)
			sums := summarizeDir(t, dir)
			for _, cmd := range []string{"leaks", "check", "analyze"} {
				direct, code := verdictsOf(t, cmd, dir)
				from, sumCode := verdictsOf(t, cmd, sums)
				if code != sumCode {
					t.Errorf("%s: exit %d on the files, %d on the summaries", cmd, code, sumCode)
				}
				if len(direct) == 0 || len(direct) != len(from) {
					t.Fatalf("%s: %d verdicts from the files, %d from the summaries", cmd, len(direct), len(from))
				}
				for i := range direct {
					d, s := direct[i], from[i]
					if d.Name != s.Name || d.Rank != s.Rank || d.Leak.Verdict != s.Leak.Verdict || d.Leak.BytesPerStep != s.Leak.BytesPerStep {
						t.Errorf("%s: %s rank %d %s %d B/step from the files, %s rank %d %s %d B/step from the summaries",
							cmd, d.Name, d.Rank, d.Leak.Verdict, d.Leak.BytesPerStep, s.Name, s.Rank, s.Leak.Verdict, s.Leak.BytesPerStep)
					}
					// Everything else the verdict says, torch's category split
					// at the peak aside (its timeline is downsampled).
					for _, v := range []*rules.Verdict{&d, &s} {
						if v.Peak != nil && v.Peak.Composition != nil {
							c := *v.Peak.Composition
							c.Torch, c.Agreement = nil, 0
							v.Peak.Composition = &c
						}
					}
					dj, _ := json.Marshal(d)
					sj, _ := json.Marshal(s)
					if string(dj) != string(sj) {
						t.Errorf("%s: %s: the verdicts differ\nfiles:     %s\nsummaries: %s", cmd, d.Name, dj, sj)
					}
				}
			}
		})
	}
}

// Per-step survivors and leak suspects (with their stacks) are the same
// from a trace's summary as from the trace.
func TestSummaryLeakReportMatchesTrace(t *testing.T) {
	t.Parallel() // see torchmem: which tests may run side by side
	dir := memtest.Testdata("gpu", "ddp_one_rank_leaks")
	sums := summarizeDir(t, dir)
	leaksJSON := func(args ...string) []report.RankLeakJSON {
		out, errOut, code := torchmem(t, append([]string{"leaks", "--format", "json"}, args...)...)
		if code == exitBadInput {
			t.Fatal(errOut)
		}
		var doc struct {
			Ranks []report.RankLeakJSON `json:"ranks"`
		}
		decodeJSON(t, out, &doc)
		return doc.Ranks
	}
	direct, from := leaksJSON(dir), leaksJSON(sums)
	if len(direct) != 2 || len(from) != 2 {
		t.Fatalf("%d and %d ranks, want 2", len(direct), len(from))
	}
	leaking := 0
	for i := range direct {
		d, s := direct[i], from[i]
		if !reflect.DeepEqual(d.Steps, s.Steps) {
			t.Errorf("rank %d: per-step survivors differ:\n%+v\n%+v", d.Rank, d.Steps, s.Steps)
		}
		if d.Verdict != s.Verdict || d.GrowthBytesPerStep != s.GrowthBytesPerStep || d.Outlier != s.Outlier || d.Trace != s.Trace {
			t.Errorf("rank %d: %s %d outlier %v from the trace, %s %d outlier %v from the summary", d.Rank, d.Verdict, d.GrowthBytesPerStep, d.Outlier, s.Verdict, s.GrowthBytesPerStep, s.Outlier)
		}
		if len(d.Suspects) != len(s.Suspects) {
			t.Fatalf("rank %d: %d suspects from the trace, %d from the summary", d.Rank, len(d.Suspects), len(s.Suspects))
		}
		for j := range d.Suspects {
			if !reflect.DeepEqual(d.Suspects[j].Stack, s.Suspects[j].Stack) || d.Suspects[j].Kind != s.Suspects[j].Kind || d.Suspects[j].BytesPerStep != s.Suspects[j].BytesPerStep {
				t.Errorf("rank %d suspect %d differs", d.Rank, j)
			}
		}
		if s.Verdict == leak.VerdictLeak {
			leaking++
			if s.Rank != 1 || s.GrowthBytesPerStep != 8<<20 || !s.Outlier {
				t.Errorf("the leaking rank from the summaries: rank %d, %d B/step, outlier %v; truth: rank 1, 8 MiB", s.Rank, s.GrowthBytesPerStep, s.Outlier)
			}
		}
	}
	if leaking != 1 {
		t.Errorf("%d leaking ranks from the summaries, truth: 1", leaking)
	}
}

// A summary is well under 1% of a real trace, says what it is, and the
// loader knows it by its content whatever its name.
func TestSummaryIsSmallAndVersioned(t *testing.T) {
	t.Parallel() // see torchmem: which tests may run side by side
	trace := realTrace("big_transformer")
	dir := summarizeDir(t, trace)
	path := filepath.Join(dir, "trace"+digest.Ext)
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	tst, _ := os.Stat(trace)
	if share := float64(st.Size()) / float64(tst.Size()); share >= 0.01 {
		t.Errorf("summary %d bytes is %.2f%% of the %d-byte trace, want < 1%%", st.Size(), 100*share, tst.Size())
	}
	renamed := filepath.Join(t.TempDir(), "anything.bin")
	b, _ := os.ReadFile(path)
	os.WriteFile(renamed, b, 0o644)
	f, _, err := load.Read(load.Source{Path: renamed}, &load.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := f.Summarized
	if f.Kind != load.Summarized || s == nil || s.SchemaVersion != digest.SchemaVersion || s.Format != digest.Format || s.Kind != "trace" || s.Source != trace {
		t.Fatalf("read back: kind %s, %+v", f.Kind, s)
	}
	if s.Overview == nil || s.Overview.PeakAllocatedBytes <= 0 || len(s.Operators) == 0 || len(s.Charts) == 0 || s.Leaks == nil || s.Frag == nil {
		t.Errorf("summary lacks parts: trace summary %v, %d operators, %d charts, leaks %v, frag %v", s.Overview, len(s.Operators), len(s.Charts), s.Leaks != nil, s.Frag != nil)
	}
	// The charts keep the trace's peak exactly.
	var peak int64
	for _, c := range s.Charts {
		if _, v, ok := c.Allocated.Max(); ok {
			peak = max(peak, v)
		}
		if c.Allocated.Len() > 2*rules.TimelinePoints {
			t.Errorf("chart %s has %d points", c.Title, c.Allocated.Len())
		}
	}
	if peak != s.Overview.PeakAllocatedBytes {
		t.Errorf("downsampled chart peak %d, trace peak %d", peak, s.Overview.PeakAllocatedBytes)
	}
}

// What a summary cannot answer is said, and a newer schema is refused
// with what to do.
func TestSummaryLimitsSaid(t *testing.T) {
	sums := summarizeDir(t, memtest.Testdata("gpu", "ddp_one_rank_leaks", "rank0", "trace.json.gz"))
	path := filepath.Join(sums, "rank0_trace"+digest.Ext) // the folder's rank kept in the name
	for _, cmd := range []string{"ops", "stacks", "frag"} {
		_, errOut, code := torchmem(t, cmd, path)
		if code != exitBadInput || !strings.Contains(errOut, "torchmem summary") || !strings.Contains(errOut, "needs the file it summarizes") {
			t.Errorf("%s on a summary: exit %d, %q", cmd, code, errOut)
		}
	}
	_, errOut, _ := torchmem(t, "leaks", path)
	if !strings.Contains(errOut, "summaries") || !strings.Contains(errOut, "need the trace itself") || strings.Count(errOut, "\n") != 1 {
		t.Errorf("leaks on a summary does not say in one line what needs the trace: %q", errOut)
	}
	newer := filepath.Join(t.TempDir(), "newer.json")
	os.WriteFile(newer, []byte(`{"format":"torchmem-summary","schema_version":99,"kind":"trace"}`), 0o644)
	if _, errOut, code := torchmem(t, "leaks", newer); code != exitBadInput || !strings.Contains(errOut, "newer.json") || !strings.Contains(errOut, "upgrade torchmem") {
		t.Errorf("a newer schema: exit %d, %q", code, errOut)
	}
	// summarize never overwrites an input, and a summary is not summarized.
	refused(t, "summary", "summarize", path, "-o", sums)
}

func TestSummaryNames(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want []string
	}{
		{[]string{"out/vm_rank3_step5.pt.trace.json.gz", "out/vm_rank3.snapshot.pickle.gz", "out/vm_rank3.steps.jsonl"},
			[]string{"vm_rank3_step5.summary.json.gz", "vm_rank3.snapshot.summary.json.gz", "vm_rank3.steps.summary.json.gz"}},
		{[]string{"job/rank0/trace.json.gz", "job/rank1/trace.json.gz"}, []string{"rank0_trace.summary.json.gz", "rank1_trace.summary.json.gz"}},
		{[]string{"a/x/t.json", "b/x/t.json"}, []string{"x_t.summary.json.gz", "x_t_2.summary.json.gz"}},
		{[]string{"-"}, []string{"stdin.summary.json.gz"}},
	} {
		if got := digest.Names(tc.in); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Names(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// 64 ranks made from the recorded 2-rank DDP job (distributedInfo's rank
// and world size rewritten; rank 37 is a copy of the leaking rank): leaks
// reads the directory with bounded memory (each trace reduced to its
// summary as it is read) and names rank 37, alone, as the rank that leaks
// 8 MiB per step; summarize then leaks and analyze on the summaries give
// the same per-rank verdicts and bytes per step.
func TestSixtyFourRanks(t *testing.T) {
	t.Parallel() // see torchmem: which tests may run side by side
	if testing.Short() {
		t.Skip("64 traces")
	}
	dir := t.TempDir()
	if _, err := ranksynth.Write(dir, ranksynth.DDPOneRankLeaks(filepath.Join("..", "..")), 64, 37); err != nil {
		t.Fatal(err)
	}
	type leaksDoc struct {
		Verdicts  []rules.Verdict  `json:"verdicts"`
		CrossRank *rules.CrossRank `json:"cross_rank"`
	}
	leaksOf := func(t *testing.T, arg string) (leaksDoc, string) {
		out, errOut, code := torchmem(t, "leaks", arg, "--format", "json")
		if code != exitFindings {
			t.Fatalf("leaks %s: exit %d: %s", arg, code, errOut)
		}
		var d leaksDoc
		decodeJSON(t, out, &d)
		return d, errOut
	}
	checkVerdicts := func(t *testing.T, d leaksDoc) {
		if len(d.Verdicts) != 64 {
			t.Fatalf("%d verdicts, want 64", len(d.Verdicts))
		}
		for _, v := range d.Verdicts {
			want, bytes := leak.VerdictClean, int64(0)
			if v.Rank == 37 {
				want, bytes = leak.VerdictLeak, 8<<20
			}
			if v.Leak.Verdict != want || v.Leak.BytesPerStep != bytes {
				t.Errorf("rank %d: %s %d B/step, truth %s %d", v.Rank, v.Leak.Verdict, v.Leak.BytesPerStep, want, bytes)
			}
		}
		if d.CrossRank == nil || !reflect.DeepEqual(d.CrossRank.Outliers, []int64{37}) || !strings.Contains(d.CrossRank.Headline, "rank 37 (leaks 8.00 MB per step") {
			t.Errorf("cross-rank view %+v", d.CrossRank)
		}
	}
	// The traces and their summaries are read apart: side by side.
	t.Run("traces", func(t *testing.T) {
		t.Parallel()
		direct, errOut := leaksOf(t, dir)
		if !strings.Contains(errOut, "reduced to its summary as it was read") {
			t.Errorf("64 traces were not read with bounded memory: %q", errOut)
		}
		checkVerdicts(t, direct)
	})
	t.Run("summaries", func(t *testing.T) {
		t.Parallel()
		sums := summarizeDir(t, dir)
		from, _ := leaksOf(t, sums)
		checkVerdicts(t, from)
		out, _, _ := torchmem(t, "analyze", sums, "--format", "json")
		var a struct {
			CrossRank *rules.CrossRank `json:"cross_rank"`
		}
		if err := json.Unmarshal([]byte(out), &a); err != nil || a.CrossRank == nil || !reflect.DeepEqual(a.CrossRank.Outliers, []int64{37}) {
			t.Errorf("analyze on the summaries: %v %+v", err, a.CrossRank)
		}
	})
}

// diff and report take summaries: diff compares the same figures as from
// the traces (same JSON, same exit), the report draws the summaries'
// charts and the cross-rank table naming the leaking rank.
func TestSummaryDiffAndReport(t *testing.T) {
	t.Parallel() // see torchmem: which tests may run side by side
	dir := memtest.Testdata("gpu", "ddp_one_rank_leaks")
	sums := summarizeDir(t, dir)
	base, head := filepath.Join(dir, "rank0", "trace.json.gz"), filepath.Join(dir, "rank1", "trace.json.gz")
	direct, _, code := torchmem(t, "diff", base, head, "--format", "json")
	from, errOut, sumCode := torchmem(t, "diff", filepath.Join(sums, "rank0_trace"+digest.Ext), filepath.Join(sums, "rank1_trace"+digest.Ext), "--format", "json")
	if code != exitFindings || sumCode != code || direct != from {
		t.Errorf("diff: exit %d on the traces, %d on the summaries (%s); same JSON: %v", code, sumCode, errOut, direct == from)
	}
	html := filepath.Join(t.TempDir(), "r.html")
	if _, errOut, code := torchmem(t, "report", sums, "-o", html); code != exitFindings {
		t.Fatalf("report: exit %d: %s", code, errOut)
	}
	b, _ := os.ReadFile(html)
	page := string(b)
	for _, want := range []string{"Across ranks", "rank 1 (leaks 8.00 MB per step where the others do not", "<h3>Memory over time</h3>", "read from summaries: the run on one timeline"} {
		if !strings.Contains(page, want) {
			t.Errorf("report from summaries lacks %q", want)
		}
	}
}

// summarize reads a folder as every command does (the one loader): the
// files it passes over are named in the same one warning as analyze's.
func TestSummarizeSkipsLikeEveryCommand(t *testing.T) {
	dir := memtest.Testdata("smi", "per_process")
	skipped := func(errOut string) string {
		for _, l := range strings.Split(errOut, "\n") {
			if strings.Contains(l, "torchmem does not read") {
				return l
			}
		}
		return ""
	}
	_, sumErr, code := torchmem(t, "summarize", dir, "-o", t.TempDir())
	_, anaErr, _ := torchmem(t, "analyze", dir)
	if code != 0 || skipped(sumErr) == "" || skipped(sumErr) != skipped(anaErr) || strings.Count(sumErr, "skipping") != 1 {
		t.Errorf("summarize: exit %d, stderr %q; analyze says %q", code, sumErr, skipped(anaErr))
	}
}
