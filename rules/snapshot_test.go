package rules

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/chrometrace"
	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/rules/site"
)

func readSnapshot(t *testing.T, name string) *memtimeline.Snapshot {
	t.Helper()
	in, err := chrometrace.Open(filepath.Join("..", "testdata", "snapshots", name+".pickle.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	s, err := memtimeline.ReadSnapshot(in)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSnapshotLeaks(t *testing.T) {
	for _, c := range []struct {
		name, verdict string
		perStep       int64
		file          string
	}{
		{"leak_module_cache", VerdictLeak, 4 << 20, "gen_traces.py"},
		{"leak_eval_no_grad", VerdictLeak, 0, "gen_traces.py"},
		{"frag_small_allocs", VerdictClean, 0, ""},
	} {
		rep := AnalyzeSnapshotLeaks(memtimeline.AnalyzeSnapshot(readSnapshot(t, c.name), 0), DefaultLeakOptions())
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

func TestSnapshotRules(t *testing.T) {
	in := &Input{Source: "frag", Snapshot: readSnapshot(t, "frag_small_allocs")}
	var ids []string
	for _, f := range Run(Builtin(), in) {
		ids = append(ids, f.Rule)
	}
	// 130 MiB of 510 MiB reserved is split free space: over the 20% default.
	if len(ids) != 1 || ids[0] != "snapshot.inactive-split" {
		t.Errorf("findings %v", ids)
	}
	in = &Input{Source: "leak", Snapshot: readSnapshot(t, "leak_module_cache")}
	fs := Run(Builtin(), in)
	if len(fs) == 0 || fs[0].Rule != "snapshot.leak" || fs[0].Location == nil || fs[0].Location.Line != 145 {
		t.Errorf("findings %+v", fs)
	}
}

func readSnapshotFile(t *testing.T, path string) *memtimeline.Snapshot {
	t.Helper()
	in, err := chrometrace.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	s, err := memtimeline.ReadSnapshot(in)
	if err != nil {
		t.Fatal(err)
	}
	return s
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
		{filepath.Join("..", "testdata", "snapshots", "leak_module_cache.pickle.gz"), KindContainer, 4 << 20, "gen_traces.py(155): step", "gen_traces.py(145): forward"},
		// 329.26 MiB: the snapshot records requested sizes, the step log
		// (332.04 MiB) the allocator's rounded blocks.
		{filepath.Join("..", "testdata", "snapshots", "leak_eval_no_grad.pickle.gz"), KindAutogradGraph, 345250048, "gen_traces.py(94): run", "gen_traces.py(130): step"},
		{filepath.Join("..", "testdata", "gpu", "leak_retain_graph", "snapshot.pickle"), KindRetainGraph, 6291456, "record_common.py(160): run_profiled", "leak_retain_graph.py(30): step"},
		{filepath.Join("..", "testdata", "gpu", "leak_hook_every_step", "snapshot.pickle"), KindHook, 2097152, "leak_hook_every_step.py(51): step", "leak_hook_every_step.py(35): hook"},
	} {
		t.Run(filepath.Base(filepath.Dir(c.path))+"/"+filepath.Base(c.path), func(t *testing.T) {
			in := &Input{Source: c.path, Snapshot: readSnapshotFile(t, c.path)}
			rep := in.SnapshotLeaks()
			if rep.Verdict != VerdictLeak || len(rep.Leaks) != 1 {
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
			var fs []Finding
			for _, f := range Run(Builtin(), in) {
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
