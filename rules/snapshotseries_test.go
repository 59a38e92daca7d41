package rules

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/memtimeline/memtest"
	"github.com/torchmem/torchmem/memtimeline/snapshot"
	"github.com/torchmem/torchmem/rules/leak"
)

// seriesSnap is a tiny synthetic snapshot: a parameter block that never
// changes and, when leak > 0, n leaked blocks of leak bytes allocated at
// train.py:42 (no stacks when bare). Edge cases only; the real dump trees
// are under testdata/gpu/round4.
func seriesSnap(n int, leakBytes int64, bare bool) *snapshot.Snapshot {
	stack := func(line int, fn string) []snapshot.Frame {
		if bare {
			return nil
		}
		return []snapshot.Frame{{Filename: "/job/train.py", Line: line, Name: fn}, {Filename: "/job/train.py", Line: 90, Name: "<module>"}}
	}
	seg := snapshot.Segment{TotalSize: 64 << 20, Blocks: []snapshot.Block{{Address: 1, Size: 32 << 20, State: snapshot.BlockActiveAllocated, Frames: stack(10, "build")}}}
	for i := range n {
		seg.Blocks = append(seg.Blocks, snapshot.Block{Address: uint64(100 + i), Size: leakBytes, State: snapshot.BlockActiveAllocated, Frames: stack(42, "forward")})
	}
	// A CUDA graph's private pool that grows: a pool, not a leak.
	pool := snapshot.Segment{TotalSize: 8 << 20, PoolID: [2]int64{1, 2}}
	for i := range n {
		pool.Blocks = append(pool.Blocks, snapshot.Block{Address: uint64(1000 + i), Size: 1 << 20, State: snapshot.BlockActiveAllocated, Frames: stack(77, "graphed")})
	}
	return &snapshot.Snapshot{Segments: []snapshot.Segment{seg, pool}}
}

func seriesInputs(t *testing.T, root string, iters []int, ranks int, leaky int64, bare bool) []*Input {
	t.Helper()
	var ins []*Input
	for _, it := range iters {
		for r := range ranks {
			n := 0
			if int64(r) == leaky {
				n = it / 10
			}
			p := filepath.Join(root, "memory_snapshot", fmt.Sprintf("iteration_%d", it), fmt.Sprintf("rank%d_memory_snapshot.pickle", r))
			in, err := NewInput(p, int64(r), Data{Snapshot: seriesSnap(n, 4<<20, bare)})
			if err != nil {
				t.Fatal(err)
			}
			ins = append(ins, in)
		}
	}
	return ins
}

// A TorchTitan dump tree: each rank's snapshots across iteration folders
// are one run and rank; rank 1 holds 4 MiB more per 10 steps at
// train.py:42 and is named beside rank 0, from the snapshots alone.
func TestSnapshotSeriesTitanTree(t *testing.T) {
	ins := seriesInputs(t, "dump", []int{10, 20, 30}, 2, 1, false)
	groups := groupInputs(ins)
	if len(groups) != 2 {
		t.Fatalf("%d groups, want one per rank", len(groups))
	}
	for _, g := range groups {
		if len(g.Inputs) != 3 || !strings.Contains(g.Name, "dump") || strings.Contains(g.Name, "iteration_") {
			t.Errorf("group %q: %d inputs, want the rank's 3 dumps under the dump's root", g.Name, len(g.Inputs))
		}
	}
	vs := judgeAll(ins)
	byRank := map[int64]Verdict{}
	for _, v := range vs {
		byRank[v.Rank] = v
	}
	l := byRank[1].Leak
	if l.Verdict != leak.VerdictLeak || l.BytesPerStep != (4<<20)/10 {
		t.Fatalf("rank 1: %s %d B/step (%s), want a leak of 4 MiB per 10 steps", l.Verdict, l.BytesPerStep, l.Reason)
	}
	if l.Location == nil || l.Location.Line != 42 {
		t.Errorf("rank 1's line: %+v, want train.py:42", l.Location)
	}
	if !strings.Contains(l.Reason, "+4.00 MB, +4.00 MB per dump") || l.From != "the 3 snapshots at steps 10, 20, 30" {
		t.Errorf("rank 1's reason %q from %q: want the growth per dump and the dumps' steps", l.Reason, l.From)
	}
	if v := byRank[0].Leak.Verdict; v != leak.VerdictClean {
		t.Errorf("rank 0: %s (%s), want clean (its graph pool grows: a pool, not a leak)", v, byRank[0].Leak.Reason)
	}
	cr := CompareRanks(vs)
	if cr == nil || len(cr.Outliers) != 1 || cr.Outliers[0] != 1 {
		t.Fatalf("cross-rank: %+v, want rank 1 alone", cr)
	}
}

// Blocks with no stack: the growth per dump is told, the line is not;
// two dumps cannot tell a leak from a warm-up; an OOM exit dump is left
// out of the series.
func TestSnapshotSeriesEdges(t *testing.T) {
	v := judgeAll(seriesInputs(t, "bare", []int{10, 20, 30}, 1, 0, true))[0]
	if v.Leak.Verdict != leak.VerdictLeak || v.Leak.Location != nil || !strings.Contains(v.Leak.Reason, "no recorded stack") {
		t.Errorf("no stacks: %s at %+v (%s), want a leak with no line", v.Leak.Verdict, v.Leak.Location, v.Leak.Reason)
	}
	v = judgeAll(seriesInputs(t, "two", []int{10, 20}, 1, 0, false))[0]
	if v.Leak.Verdict != leak.VerdictUnknown || !strings.Contains(v.Leak.Reason, "two dumps") {
		t.Errorf("two dumps: %s (%s), want unknown", v.Leak.Verdict, v.Leak.Reason)
	}
	ins := seriesInputs(t, "exit", []int{10, 20}, 1, 0, false)
	in, err := NewInput(filepath.Join("exit", "memory_snapshot", "iteration_29_exit", "rank0_memory_snapshot.pickle"), 0, Data{Snapshot: seriesSnap(50, 4<<20, false)})
	if err != nil {
		t.Fatal(err)
	}
	v = judgeAll(append(ins, in))[0]
	if v.Leak.Verdict == leak.VerdictLeak || len(v.Sources) != 3 {
		t.Errorf("exit dump: %s over %d sources, want it grouped but not in the series", v.Leak.Verdict, len(v.Sources))
	}
}

func TestDumpPlaceOf(t *testing.T) {
	for _, c := range []struct {
		path, root string
		iter       int64
		exit, ok   bool
	}{
		{"out/memory_snapshot/iteration_10/rank1_memory_snapshot.pickle", "out", 10, false, true},
		{"out/memory_snapshot/iteration_0_exit/rank1_memory_snapshot.pickle", "out", 0, true, true},
		{"out/profile_traces/iteration_20/rank0_trace.json", "out", 20, false, true},
		{"out/profiling/memory_snapshot/step_000000000030/000001_step_30.pickle", "out", 30, false, true},
		{"out/profiling/traces/iteration_30/leaf/rank1_trace.json.gz", "out", 30, false, true},
		{"tune/iteration_5/rank0_memory_snapshot.pickle", "tune", 5, false, true},
		{"run/vm_1_20261201-101010_rank0.snapshot.pickle.gz", "", 0, false, false},
	} {
		p, ok := dumpPlaceOf(filepath.FromSlash(c.path))
		if ok != c.ok || ok && (p.Root != filepath.FromSlash(c.root) || p.Iteration != c.iter || p.Exit != c.exit) {
			t.Errorf("%s: %+v %v", c.path, p, ok)
		}
	}
}

// A real 2-rank DDP job recorded by the snippet before it named jobs
// (testdata/gpu/watch/ddp: vm_681_..._rank0, vm_682_..._rank1, launched in
// the same second): one run, rank 1's leak compared with rank 0, and the
// verdict says the ids were joined. Two single-rank runs launched together
// stay apart.
func TestJobOfProcessRunIDs(t *testing.T) {
	dir := memtest.Testdata("gpu", "watch", "ddp")
	var paths []string
	for _, n := range []string{"vm_681_20261201-211637_rank0.steps.jsonl", "vm_682_20261201-211637_rank1.steps.jsonl", "vm_681_20261201-211637_rank0_step7.pt.trace.json.gz"} {
		paths = append(paths, filepath.Join(dir, n))
	}
	ins := loadInputs(t, paths...)
	vs := judgeAll(ins)
	if len(vs) != 2 || vs[0].Run != "vm_681_20261201-211637" || vs[1].Run != vs[0].Run || !strings.Contains(vs[1].Job, "vm_682_20261201-211637") {
		t.Fatalf("verdicts %+v: want ranks 0 and 1 of one run, joined", vs)
	}
	cr := CompareRanks(vs)
	if cr == nil || len(cr.Outliers) != 1 || cr.Outliers[0] != 1 || !strings.Contains(cr.Headline, "one job of 2 ranks") {
		t.Fatalf("cross-rank %+v: want rank 1 named, the job said", cr)
	}
	to, _ := joinJobRuns(map[string]map[int64]bool{
		"vm_10_20261201-211637": {0: true}, "vm_11_20261201-211638": {0: true},
		"vm_12_20261201-211637": {0: true, 1: true}, "vm_13_20261201-211900": {1: true},
	})
	if len(to) != 0 {
		t.Errorf("joined %v: two rank-0 runs, or a run of two ranks, are not one job's ranks", to)
	}
	to, _ = joinJobRuns(map[string]map[int64]bool{"h_1_20261201-000000": {0: true}, "h_2_20261201-000005": {1: true}, "h_3_20261201-000040": {2: true}})
	if len(to) != 2 || to["h_2_20261201-000005"] != "h_1_20261201-000000" {
		t.Errorf("joined %v: want the two launched 5 s apart, not the one 40 s later", to)
	}
}

// seriesTruth is what titan_layout.py and round4_cases.py planted.
type seriesTruth struct {
	LeakyRank        int64            `json:"leaky_rank"`
	LeakBytesPerStep map[string]int64 `json:"leak_bytes_per_step"`
	LeakSite         struct {
		File string `json:"file"`
		Line int    `json:"line"`
	} `json:"leak_site"`
}

// dumpFiles lists a dump tree's snapshots (and traces, with traces).
func dumpFiles(t *testing.T, dir string, traces bool) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		n := d.Name()
		if strings.HasSuffix(n, ".pickle") || traces && (strings.HasSuffix(n, "_trace.json") || strings.HasSuffix(n, ".pt.trace.json.gz")) {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// The round-4 framework layouts recorded on the H200 (2 gloo ranks, rank 1
// keeping 2 MiB per step, dumps at iterations 10, 20, 30): each rank's
// files across iteration folders are one run and rank; rank 1 leaks at its
// line and is named beside rank 0, from the snapshots alone as from
// snapshots and traces; the series of dumps says the same figure.
func TestRealFrameworkDumpTrees(t *testing.T) {
	for _, c := range []struct {
		name   string
		traces bool
	}{{"titan_layout", false}, {"titan_layout", true}, {"tune_layout", true}} {
		t.Run(fmt.Sprintf("%s/traces=%v", c.name, c.traces), func(t *testing.T) {
			dir := memtest.Testdata("gpu", "round4", c.name)
			var truth seriesTruth
			memtest.ReadJSON(t, filepath.Join(dir, "truth.json"), &truth)
			files := dumpFiles(t, dir, c.traces)
			want := 6
			if c.traces {
				want = 12
			}
			if len(files) != want {
				t.Fatalf("%d files, want %d", len(files), want)
			}
			vs := judgeAll(loadInputs(t, files...))
			if len(vs) != 2 {
				t.Fatalf("%d verdicts, want one per rank", len(vs))
			}
			for _, v := range vs {
				if len(v.Sources) != want/2 {
					t.Errorf("%s: %d files, want its %d", v.Name, len(v.Sources), want/2)
				}
				l := v.Leak
				if v.Rank != truth.LeakyRank {
					if l.Verdict != leak.VerdictClean {
						t.Errorf("%s: %s (%s), want clean", v.Name, l.Verdict, l.Reason)
					}
					continue
				}
				if l.Verdict != leak.VerdictLeak || l.BytesPerStep != truth.LeakBytesPerStep["1"] || l.Location == nil ||
					filepath.Base(l.Location.File) != truth.LeakSite.File || l.Location.Line != truth.LeakSite.Line {
					t.Errorf("%s: %s %d B/step at %+v, want %d at %s:%d", v.Name, l.Verdict, l.BytesPerStep, l.Location, truth.LeakBytesPerStep["1"], truth.LeakSite.File, truth.LeakSite.Line)
				}
				series := 0
				for _, e := range l.Evidence {
					if e.series != "" {
						series++
						if e.Verdict != leak.VerdictLeak || e.BytesPerStep != truth.LeakBytesPerStep["1"] || e.Location == nil || e.Location.Line != truth.LeakSite.Line {
							t.Errorf("series: %s %d B/step at %+v (%s)", e.Verdict, e.BytesPerStep, e.Location, e.Reason)
						}
					}
				}
				if series != 1 {
					t.Errorf("%d series evidences, want the rank's dumps as one", series)
				}
			}
			if cr := CompareRanks(vs); cr == nil || len(cr.Outliers) != 1 || cr.Outliers[0] != truth.LeakyRank {
				t.Errorf("cross-rank %+v: want rank %d alone", cr, truth.LeakyRank)
			}
		})
	}
}

// Four dumps taken with the history off (testdata/gpu/round4/
// snapshot_series_nohistory, 4 MiB kept per step, dumps every 10 steps):
// the leak per dump and per step from the blocks alone, no line claimed.
func TestRealSnapshotSeriesNoHistory(t *testing.T) {
	dir := memtest.Testdata("gpu", "round4", "snapshot_series_nohistory")
	var truth struct {
		Leak struct {
			BytesPerStep int64 `json:"bytes_per_step"`
			BytesPerDump int64 `json:"bytes_per_dump"`
		} `json:"leak"`
	}
	memtest.ReadJSON(t, filepath.Join(dir, "truth.json"), &truth)
	vs := judgeAll(loadInputs(t, dumpFiles(t, dir, false)...))
	if len(vs) != 1 {
		t.Fatalf("%d verdicts, want one", len(vs))
	}
	l := vs[0].Leak
	perDump := "+" + memtimeline.FormatBytes(truth.Leak.BytesPerDump)
	if l.Verdict != leak.VerdictLeak || l.BytesPerStep != truth.Leak.BytesPerStep || strings.Count(l.KindEvidence, perDump) != 3 || l.Location != nil {
		t.Errorf("%s %d B/step at %+v (%s), want %d per step, %s at each of 3 dumps, no line", l.Verdict, l.BytesPerStep, l.Location, l.KindEvidence, truth.Leak.BytesPerStep, perDump)
	}
}

// Jobs recorded with the snippet's defaults under torchrun (no
// TORCHMEM_RUN_ID; testdata/gpu/round4: the rendezvous id, or the
// launching agent under a static rendezvous): one run, and the cross-rank
// answer names the leaking rank.
func TestRealDefaultRunIDJobs(t *testing.T) {
	for _, run := range []string{"ddp4_defaults_leak", "fsdp2_defaults_leak", "ddp2_static_rdzv_leak"} {
		t.Run(run, func(t *testing.T) {
			dir := memtest.Testdata("gpu", "round4", run)
			var truth struct {
				WorldSize int   `json:"world_size"`
				LeakyRank int64 `json:"leaky_rank"`
			}
			memtest.ReadJSON(t, filepath.Join(dir, "truth.json"), &truth)
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			var paths []string
			for _, e := range entries {
				if n := e.Name(); strings.Contains(n, ".pt.trace.json") || strings.Contains(n, ".pickle") || strings.HasSuffix(n, ".steps.jsonl") {
					paths = append(paths, filepath.Join(dir, n))
				}
			}
			vs := judgeAll(loadInputs(t, paths...))
			if len(vs) != truth.WorldSize {
				t.Fatalf("%d verdicts, want one per rank", len(vs))
			}
			for _, v := range vs {
				if v.Run != vs[0].Run {
					t.Errorf("rank %d in run %q, rank %d in %q: want one run", v.Rank, v.Run, vs[0].Rank, vs[0].Run)
				}
			}
			cr := CompareRanks(vs)
			if cr == nil || len(cr.Outliers) != 1 || cr.Outliers[0] != truth.LeakyRank {
				t.Fatalf("cross-rank %+v: want rank %d", cr, truth.LeakyRank)
			}
		})
	}
}
