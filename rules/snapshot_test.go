package rules

import (
	"path/filepath"
	"testing"

	"github.com/torchmem/torchmem/chrometrace"
	"github.com/torchmem/torchmem/memtimeline"
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
			loc := LocationOf(rep.Suspects[0].Stack)
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
