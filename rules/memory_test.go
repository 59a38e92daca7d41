package rules

import (
	"testing"
)

func findingsFor(t *testing.T, id, trace string, threshold float64) []Finding {
	t.Helper()
	for _, r := range Builtin() {
		if r.ID != id {
			continue
		}
		if threshold != 0 {
			r.Threshold = threshold
		}
		return Run([]Rule{r}, &Input{Source: trace, Trace: readTrace(t, trace)})
	}
	t.Fatalf("no rule %s", id)
	return nil
}

func TestMemoryLeakRuleNamesTheLine(t *testing.T) {
	fs := findingsFor(t, "memory.leak", "leak_module_cache", 0)
	if len(fs) == 0 {
		t.Fatal("no finding")
	}
	f := fs[0]
	if f.Severity != Error || f.Location == nil || f.Location.File != "gen_traces.py" || f.Location.Line != 143 || f.Operator != "aten::clone" || f.Metrics["bytes_per_step"] != 4<<20 {
		t.Errorf("finding %+v location %+v", f, f.Location)
	}
	if fs := findingsFor(t, "memory.leak", "resnet_train_clean", 0); len(fs) != 0 {
		t.Errorf("false alarm on a clean run: %+v", fs)
	}
}

func TestOpSelfLimitRule(t *testing.T) {
	// resnet's aten::empty keeps 2.55 GB over 800 calls (torch's own table).
	fs := findingsFor(t, "memory.op-self-limit", "resnet_train_clean", 0)
	if len(fs) == 0 || fs[0].Operator != "aten::empty" {
		t.Fatalf("findings %+v", fs)
	}
	for _, f := range fs {
		if f.Metrics["self_device_memory_bytes"] <= 1<<30 {
			t.Errorf("under the limit: %+v", f)
		}
	}
	if fs := findingsFor(t, "memory.op-self-limit", "resnet_train_clean", 1<<40); len(fs) != 0 {
		t.Errorf("a 1 TiB limit still fires: %+v", fs)
	}
}

func TestPeakReservedAndOOMRulesQuietOnRealTraces(t *testing.T) {
	// Every recorded run used well under 90% of the H200 and never OOMed.
	for _, name := range []string{"resnet_train_clean", "big_transformer"} {
		if fs := findingsFor(t, "memory.peak-reserved", name, 0); len(fs) != 0 {
			t.Errorf("%s: %+v", name, fs)
		}
		if fs := findingsFor(t, "memory.oom", name, 0); len(fs) != 0 {
			t.Errorf("%s: %+v", name, fs)
		}
	}
	// With the threshold lowered below what the run reserved, it fires.
	if fs := findingsFor(t, "memory.peak-reserved", "resnet_train_clean", 0.001); len(fs) != 1 {
		t.Errorf("lowered threshold: %+v", fs)
	}
}

func TestTopOpsShareRule(t *testing.T) {
	fs := findingsFor(t, "memory.top-ops-share", "leak_module_cache", 0.1)
	if len(fs) != 1 || fs[0].Severity != Info || fs[0].Metrics["fraction"] <= 0.1 {
		t.Errorf("findings %+v", fs)
	}
}
