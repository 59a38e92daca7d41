package leak_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/memtimeline/memtest"
	"github.com/torchmem/torchmem/memtimeline/snapshot"
	"github.com/torchmem/torchmem/rules"
	"github.com/torchmem/torchmem/rules/leak"
	"github.com/torchmem/torchmem/rules/site"
)

func TestSnapshotLeaks(t *testing.T) {
	for _, c := range []struct {
		name, verdict string
		perStep       int64
		file          string
	}{
		{"leak_module_cache", leak.VerdictLeak, 4 << 20, "gen_traces.py"},
		{"leak_eval_no_grad", leak.VerdictLeak, 0, "gen_traces.py"},
		{"frag_small_allocs", leak.VerdictClean, 0, ""},
	} {
		rep := leak.AnalyzeSnapshot(snapshot.Analyze(memtest.Decode(t, memtest.NamedSnapshot(c.name), snapshot.Read), 0), leak.DefaultOptions())
		if rep.Verdict != c.verdict {
			t.Errorf("%s: %s (%s)", c.name, rep.Verdict, rep.Reason)
			continue
		}
		if c.perStep != 0 && rep.GrowthBytesPerStep != c.perStep {
			t.Errorf("%s: %d bytes/step", c.name, rep.GrowthBytesPerStep)
		}
		if c.file != "" {
			loc := site.LocationOf(rep.Suspects[0].Stack)
			if loc == nil || filepath.Base(loc.File) != c.file {
				t.Errorf("%s: suspect at %v, want the user's %s", c.name, loc, c.file)
			}
		}
	}
}

// Snapshot leaks get a kind, real step numbers and the user's whole call
// chain: from the script's <module> through the loop line that holds the
// tensors down to the allocating line, C++ frames dropped (these
// snapshots were recorded with C++ stacks, outer frames after _start),
// library paths shortened, files named as the trace names them.
func TestSnapshotLeakKindsAndChains(t *testing.T) {
	for _, c := range []struct {
		path, kind string
		perStep    int64
		caller     string // a frame of the chain: the line that holds
		alloc      string // the innermost user frame
	}{
		{memtest.Testdata("snapshots", "leak_module_cache.pickle.gz"), leak.KindContainer, 4 << 20, "gen_traces.py(155): step", "gen_traces.py(145): forward"},
		// 329.26 MiB: the snapshot records requested sizes, the step log
		// (332.04 MiB) the allocator's rounded blocks.
		// A graph kept (eval without no_grad) and a retained graph: the
		// snapshot records no autograd graph, so it says unknown (kept
		// tensors: a container or a graph), not a kind it cannot see.
		{memtest.Testdata("snapshots", "leak_eval_no_grad.pickle.gz"), leak.KindUnknown, 345250048, "gen_traces.py(94): run", "gen_traces.py(130): step"},
		{memtest.Testdata("gpu", "leak_retain_graph", "snapshot.pickle"), leak.KindUnknown, 6291456, "record_common.py(160): run_profiled", "leak_retain_graph.py(30): step"},
		{memtest.Testdata("gpu", "leak_hook_every_step", "snapshot.pickle"), leak.KindHook, 2097152, "leak_hook_every_step.py(51): step", "leak_hook_every_step.py(35): hook"},
	} {
		t.Run(filepath.Base(filepath.Dir(c.path))+"/"+filepath.Base(c.path), func(t *testing.T) {
			in := &rules.Input{Source: c.path, Snapshot: memtest.Decode(t, c.path, snapshot.Read)}
			rep := in.SnapshotLeaks()
			if rep.Verdict != leak.VerdictLeak || len(rep.Leaks) != 1 {
				t.Fatalf("%s with %d leaks (%s)", rep.Verdict, len(rep.Leaks), rep.Reason)
			}
			l := rep.Leaks[0]
			if l.Kind != c.kind || l.BytesPerStep != c.perStep || rep.GrowthBytesPerStep != c.perStep {
				t.Errorf("kind %s, %d bytes/step; want %s, %d", l.Kind, l.BytesPerStep, c.kind, c.perStep)
			}
			top := l.Sites[0]
			if top.FirstStep < 0 || top.LastStep <= top.FirstStep || top.Kind != c.kind || top.Evidence == "" || top.Fix == "" {
				t.Errorf("top site steps #%d..#%d kind %q evidence %q", top.FirstStep, top.LastStep, top.Kind, top.Evidence)
			}
			chain := strings.Join(top.Stack, " > ")
			if !strings.HasSuffix(top.Stack[0], ": <module>") || !strings.Contains(chain, c.caller) || !strings.Contains(chain, c.alloc) {
				t.Errorf("chain %s: want <module> ... %s ... %s", chain, c.caller, c.alloc)
			}
			if strings.Contains(chain, "site-packages") || strings.Contains(chain, "/work/") || strings.Contains(chain, "::") {
				t.Errorf("chain not shortened or with C++ frames: %s", chain)
			}
			var fs []rules.Finding
			for _, f := range rules.Run(rules.Builtin(), in) {
				if f.Rule == "snapshot.leak" {
					fs = append(fs, f)
				}
			}
			if len(fs) != 1 || !strings.Contains(fs[0].Title, "("+c.kind+")") || fs[0].Location == nil {
				t.Errorf("findings %+v, want one %s finding", fs, c.kind)
			}
		})
	}
}

// A history without ProfilerStep annotations (TORCHMEM_TRACE=0) and no
// step log beside it: a site whose never-freed blocks recur at regular
// intervals is a leak per recurrence, with the line; one-time allocations
// (weights, a warm-up) do not recur.
func TestSnapshotLeakByRecurrence(t *testing.T) {
	path := memtest.Testdata("gpu", "evidence", "trace_off_leak", "run_rank0.snapshot.pickle.gz")
	in := &rules.Input{Source: path, Snapshot: memtest.Decode(t, path, snapshot.Read)}
	rep := in.SnapshotLeaks()
	if rep.Verdict != leak.VerdictLeak || rep.GrowthBytesPerStep != 256<<10 || !strings.Contains(rep.Reason, "recurrence") {
		t.Fatalf("%s %d B (%s), want a 256 KiB leak per recurrence", rep.Verdict, rep.GrowthBytesPerStep, rep.Reason)
	}
	if loc := rep.Suspects[0].Location(); loc == nil || loc.Line != 173 || filepath.Base(loc.File) != "evidence_cases.py" {
		t.Errorf("location %v, want evidence_cases.py:173 (truth.json)", loc)
	}
}
