package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/memtimeline/memtest"
)

// The snippet's watchdog captures (testdata/gpu/watch, recorded on an
// H200 by examples/record/run_watch.sh) are read by every command that
// takes their kind, and the on-leak snapshot, whose history marks each
// captured step ProfilerStep#n, tells the leak and its line by itself.
func TestTorchmemReadsTheWatchdogsCaptures(t *testing.T) {
	t.Parallel() // see torchmem: which tests may run side by side
	root := memtest.Testdata("gpu", "watch")
	dirs, err := filepath.Glob(filepath.Join(root, "*", "truth.json"))
	if err != nil || len(dirs) < 5 {
		t.Fatalf("watch recordings: %v %v", dirs, err)
	}
	var leakSnapshots []string
	for _, truth := range dirs {
		dir := filepath.Dir(truth)
		t.Run(filepath.Base(dir), func(t *testing.T) {
			if _, errOut, code := torchmem(t, "analyze", dir, "--format", "json"); code == exitBadInput {
				t.Fatalf("analyze: exit 2: %s", errOut)
			}
			entries, _ := os.ReadDir(dir)
			for _, e := range entries {
				p := filepath.Join(dir, e.Name())
				if !strings.HasSuffix(e.Name(), ".snapshot.pickle.gz") {
					continue
				}
				if strings.HasSuffix(e.Name(), ".leak.snapshot.pickle.gz") {
					leakSnapshots = append(leakSnapshots, p)
				}
				for _, cmd := range []string{"snapshot", "leaks", "frag"} {
					if _, errOut, code := torchmem(t, cmd, p); code == exitBadInput {
						t.Errorf("%s %s: exit 2: %s", cmd, e.Name(), errOut)
					}
				}
			}
		})
	}
	// The plain leak (4 MiB kept at one line every step): its capture alone.
	leak, _ := filepath.Glob(filepath.Join(root, "leak", "*.leak.snapshot.pickle.gz"))
	if len(leak) != 1 {
		t.Fatalf("watch/leak: %d leak snapshots", len(leak))
	}
	out, errOut, code := torchmem(t, "leaks", leak[0])
	if code != exitFindings || !strings.Contains(out, "LEAK, 4.00 MB per step") || !strings.Contains(out, "watch_proof.py") {
		t.Errorf("leaks %s: exit %d\n%s%s", filepath.Base(leak[0]), code, out, errOut)
	}
	if len(leakSnapshots) < 4 {
		t.Errorf("%d on-leak snapshots, want one per leaking recording", len(leakSnapshots))
	}
}
