package rules

import (
	"testing"

	"github.com/torchmem/torchmem/memtimeline/memtest"
)

// The recorded run with loss.item() every step and a DataLoader that
// sleeps gets the sync and starvation findings; its OOM sibling gets OOM.
func TestGPUTimelineAndOOMFindingsOnRecordedRuns(t *testing.T) {
	ids := func(rel string) map[string]Finding {
		out := map[string]Finding{}
		for _, f := range Run(Builtin(), &Input{Source: rel, Trace: memtest.GPUTrace(t, rel)}) {
			out[f.Rule] = f
		}
		return out
	}
	got := ids("amp_item_sync_slow_loader")
	for _, want := range []string{"gpu.sync-copy-every-step", "gpu.idle-gaps", "gpu.pageable-h2d"} {
		if _, ok := got[want]; !ok {
			t.Errorf("amp_item_sync_slow_loader: no %s finding (got %v)", want, keys(got))
		}
	}
	if f := got["gpu.sync-copy-every-step"]; f.Location == nil || f.Location.File != "amp_item_sync_slow_loader.py" {
		t.Errorf("sync finding not placed in the script: %+v", f.Location)
	}
	if _, ok := got["memory.leak"]; ok {
		t.Error("leak finding on a clean run")
	}
	if _, ok := ids("oom")["memory.oom"]; !ok {
		t.Error("no memory.oom finding on the run that hit OOM")
	}
	if _, ok := ids("diff_pair/base")["memory.oom"]; ok {
		t.Error("memory.oom on a run without OOM")
	}
}

func keys(m map[string]Finding) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
