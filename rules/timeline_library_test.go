package rules

import (
	"path/filepath"
	"strings"
	"testing"
)

// A per-step sync made by a known library loop names that library's switch
// (transformers.Trainer's NaN/Inf loss filter, recorded on the H200 with
// TorchMemCallback); a sync in the user's own loop gets no library advice.
func TestSyncCopyNamesLibrarySwitch(t *testing.T) {
	gpu := filepath.Join("..", "testdata", "gpu")
	for _, c := range []struct {
		name, glob string
		trainer    bool
	}{
		{"hf_trainer_clean", "hf_trainer_clean/*.pt.trace.json.gz", true},
		{"hf_trainer_leak", "hf_trainer_leak/*.pt.trace.json.gz", true},
		{"logged_memory_summary (loss.item() in the user's loop)", "logged_memory_summary/*.pt.trace.json.gz", false},
		{"amp_item_sync_slow_loader", "amp_item_sync_slow_loader/trace.json.gz", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			paths, _ := filepath.Glob(filepath.Join(gpu, c.glob))
			if len(paths) != 1 {
				t.Fatalf("%d traces match %s", len(paths), c.glob)
			}
			fs := findingsOf(t, readTraceFile(t, paths[0]), ruleSyncCopy)
			if len(fs) != 1 {
				t.Fatalf("%d %s findings, want 1", len(fs), ruleSyncCopy)
			}
			named := strings.Contains(fs[0].Advice, "logging_nan_inf_filter=False")
			if named != c.trainer {
				t.Errorf("advice names Trainer's switch: %v, want %v: %s", named, c.trainer, fs[0].Advice)
			}
		})
	}
}
