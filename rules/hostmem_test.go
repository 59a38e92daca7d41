package rules

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/memtimeline/memtest"
	"github.com/torchmem/torchmem/rules/leak"
)

// Pinned host memory recorded on the H200 (testdata/gpu/round4): a loop
// that keeps a 16 MiB pinned tensor per step is a pinned-host leak of
// 16 MiB per step with its own line and finding, while the GPU stays
// clean; a DataLoader with pin_memory=True (one pinned block reused every
// step) stays clean, though torch 2.11's active_bytes.current climbs
// 1 MiB a step there.
func TestRealPinnedHostMemory(t *testing.T) {
	for _, c := range []struct {
		run  string
		leak bool
	}{{"pinned_host_leak", true}, {"pinned_loader_clean", false}} {
		t.Run(c.run, func(t *testing.T) {
			dir := memtest.Testdata("gpu", "round4", c.run)
			var truth struct {
				Leak *struct {
					BytesPerStep int64 `json:"bytes_per_step"`
				} `json:"leak"`
			}
			memtest.ReadJSON(t, filepath.Join(dir, "truth.json"), &truth)
			ins := loadInputs(t, filepath.Join(dir, "run_rank0.steps.jsonl"))
			ev := Evaluate(ins, DefaultOptions())
			v := ev.Verdicts[0]
			if v.Host == nil {
				t.Fatal("no pinned host answer")
			}
			var found bool
			for _, f := range ev.Findings {
				found = found || f.Rule == "steps.pinned-host-growth"
			}
			if v.Leak.Verdict != leak.VerdictClean {
				t.Errorf("device: %s, want clean (the GPU keeps nothing)", v.Leak.Verdict)
			}
			if !c.leak {
				if v.Host.Verdict != leak.VerdictClean || found || v.Status() != "CLEAN" {
					t.Errorf("host %s (%s), finding %v, status %s: want clean", v.Host.Verdict, v.Host.Reason, found, v.Status())
				}
				return
			}
			want := "pinned host memory grows 16.00 MB per step"
			if v.Host.Verdict != leak.VerdictLeak || v.Host.BytesPerStep != truth.Leak.BytesPerStep || !strings.HasPrefix(v.Host.Reason, want) || !found || v.Status() != "LEAK" {
				t.Errorf("host %s %d B/step (%s), finding %v, status %s: want %q", v.Host.Verdict, v.Host.BytesPerStep, v.Host.Reason, found, v.Status(), want)
			}
		})
	}
}
