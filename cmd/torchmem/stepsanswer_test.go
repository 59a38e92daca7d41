package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/memtimeline/memtest"
)

// steps concludes what check concludes: the same exit code on every
// recorded step log, and growth under memory.leak's threshold is the same
// warning (exit 0) as in every other command, still said "growing".
func TestStepsExitIsTheEvaluations(t *testing.T) {
	logs, err := filepath.Glob(memtest.Testdata("steps", "*.stats_steps.jsonl"))
	if err != nil || len(logs) < 3 {
		t.Fatalf("step logs: %v %v", logs, err)
	}
	small := filepath.Join(t.TempDir(), "small.stats_steps.jsonl")
	var b strings.Builder
	for i := range 12 {
		fmt.Fprintf(&b, "{\"step\": %d, \"allocated\": %d, \"reserved\": %d}\n", i, 200<<20+int64(i)*(64<<10), 256<<20)
	}
	if err := os.WriteFile(small, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	growing := 0
	for _, path := range append(logs, small) {
		out, _, code := torchmem(t, "steps", path)
		_, _, want := torchmem(t, "check", path)
		if code != want {
			t.Errorf("%s: steps exits %d, check %d\n%s", path, code, want, out)
		}
		if strings.HasPrefix(out, "LEAK: ") {
			growing++
		}
		if path == small && (code != exitOK || !strings.HasPrefix(out, "LEAK: ")) {
			t.Errorf("64 KiB per step: exit %d (want a warning, exit 0, still growing)\n%s", code, out)
		}
	}
	if growing < 2 {
		t.Errorf("only %d growing logs: the test compares nothing", growing)
	}
}
