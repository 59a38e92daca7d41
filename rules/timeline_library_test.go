package rules

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/memtimeline/memtest"
)

// A per-step sync or blocking copy made by a known library loop names that
// library's switch (transformers.Trainer, recorded on the H200 with
// TorchMemCallback: its NaN/Inf loss filter and Accelerate's blocking batch
// copies); the same patterns in the user's own loop get no library advice.
func TestCopyRulesNameLibrarySwitch(t *testing.T) {
	gpu := memtest.Testdata("gpu")
	const nanFilter, nonBlocking = "logging_nan_inf_filter=False", `accelerator_config={"non_blocking": True}`
	for _, c := range []struct {
		name, glob, rule, switchText string
		named                        bool
	}{
		{"hf_trainer_clean", "hf_trainer_clean/*.pt.trace.json.gz", ruleSyncCopy, nanFilter, true},
		{"hf_trainer_leak", "hf_trainer_leak/*.pt.trace.json.gz", ruleSyncCopy, nanFilter, true},
		{"loss.item() in the user's loop", "logged_memory_summary/*.pt.trace.json.gz", ruleSyncCopy, nanFilter, false},
		{"amp_item_sync_slow_loader", "amp_item_sync_slow_loader/trace.json.gz", ruleSyncCopy, nanFilter, false},
		{"hf_trainer_clean", "hf_trainer_clean/*.pt.trace.json.gz", rulePinnedBlocking, nonBlocking, true},
		{"hf_trainer_leak", "hf_trainer_leak/*.pt.trace.json.gz", rulePinnedBlocking, nonBlocking, true},
		{"x.to(\"cuda\") in the user's loop", "pinned_blocking/*.pt.trace.json.gz", rulePinnedBlocking, nonBlocking, false},
	} {
		t.Run(c.rule+"/"+c.name, func(t *testing.T) {
			paths, _ := filepath.Glob(filepath.Join(gpu, c.glob))
			if len(paths) != 1 {
				t.Fatalf("%d traces match %s", len(paths), c.glob)
			}
			fs := findingsOf(t, memtest.Trace(t, paths[0]), c.rule)
			if len(fs) != 1 {
				t.Fatalf("%d %s findings, want 1", len(fs), c.rule)
			}
			if named := strings.Contains(fs[0].Advice, c.switchText); named != c.named {
				t.Errorf("advice names %s: %v, want %v: %s", c.switchText, named, c.named, fs[0].Advice)
			}
		})
	}
}
