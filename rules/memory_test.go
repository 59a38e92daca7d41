package rules

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/chrometrace"
	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/memtimeline/memtest"
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
		// One decoded trace per test binary: the rules only read it.
		return Run([]Rule{r}, &Input{Source: trace, Trace: memtest.SharedTrace(t, memtest.Testdata("traces", trace, "trace.json.gz"))})
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
	if f.Severity != Error || f.Location == nil || f.Location.File != "gen_traces.py" || f.Location.Line != 0 || f.Location.DefLine != 143 || f.Operator != "aten::clone" || f.Metrics["bytes_per_step"] != 4<<20 {
		t.Errorf("finding %+v location %+v", f, f.Location)
	}
	if fs := findingsFor(t, "memory.leak", "resnet_train_clean", 0); len(fs) != 0 {
		t.Errorf("false alarm on a clean run: %+v", fs)
	}
}

// memory.op-self-limit judges what an operator's blocks hold. No recorded
// run has one operator over 1 GiB in one block or owning half of a peak
// over 1 GiB (big_transformer's aten::mul holds 1.12 GB of a 6.50 GB peak,
// 17%), so it stays quiet on all of them; with the limit at 100 MiB resnet's
// two convolutions fire for their single blocks over it.
func TestOpSelfLimitMeasuresHolding(t *testing.T) {
	for _, name := range []string{"resnet_train_clean", "big_transformer", "compiled_model", "leak_eval_no_grad", "frag_small_allocs", "leak_module_cache"} {
		if fs := findingsFor(t, ruleOpSelfLimit, name, 0); len(fs) != 0 {
			t.Errorf("%s: %+v", name, fs)
		}
	}
	fs := findingsFor(t, ruleOpSelfLimit, "resnet_train_clean", 100<<20)
	got := map[string]Finding{}
	for _, f := range fs {
		got[f.Operator] = f
	}
	if len(fs) != 2 || got["aten::convolution_backward"].Title != "aten::convolution_backward allocates a single 128.29 MB block" ||
		got["aten::cudnn_convolution"].Metrics["largest_alloc_bytes"] <= 100<<20 {
		t.Errorf("at 100 MiB: %+v", fs)
	}
	// Held at the peak agrees with the per-site table summed by the
	// innermost operator of each site's chain.
	tr := memtest.SharedTrace(t, memtest.Testdata("traces", "resnet_train_clean", "trace.json.gz"))
	in := &Input{Trace: tr}
	hs, peak := in.opHoldings()
	bySite := map[string]int64{}
	for _, s := range memtimeline.Sites(tr, chrometrace.Attribute(tr), memtimeline.Lifetimes(tr, -1), memtimeline.SiteOptions{Device: -1}) {
		chain := strings.Split(s.Operator, " > ")
		op := chain[len(chain)-1]
		if s.Operator == "" {
			op = "(no operator)"
		}
		bySite[op] += s.LiveBytesAtPeak
	}
	var sum int64
	for _, h := range hs {
		sum += h.HeldAtPeak
		if h.HeldAtPeak != bySite[h.Operator] {
			t.Errorf("%s: held at peak %d, sites say %d", h.Operator, h.HeldAtPeak, bySite[h.Operator])
		}
	}
	if sum > peak || sum < peak/2 {
		t.Errorf("held at peak sums to %d of a %d peak", sum, peak)
	}
}

// One operator owning most of the peak fires even with small blocks.
func TestOpSelfLimitDominantOperator(t *testing.T) {
	var s memtest.Synth
	s.Step(1, 0, 1000)
	mem := func(ts float64, addr, bytes, total int64) {
		s.Events = append(s.Events, fmt.Sprintf(`{"ph":"i","s":"t","name":"[memory]","pid":1,"tid":1,"ts":%g,"args":{"Total Reserved":%d,"Total Allocated":%d,"Bytes":%d,"Device Id":0,"Device Type":1,"Addr":%d}}`,
			ts, int64(4)<<30, total, bytes, addr))
	}
	s.Host("cpu_op", "aten::small", 10, 10, 1)
	mem(15, 1<<40, 256<<20, 256<<20)
	s.Host("cpu_op", "aten::big", 100, 300, 2)
	for i := range int64(6) {
		mem(110+float64(i)*10, 2<<40+i<<30, 256<<20, (256<<20)*(i+2))
	}
	fs := Run([]Rule{ruleNamed(t, ruleOpSelfLimit)}, &Input{Trace: s.Trace(t)})
	if len(fs) != 1 || fs[0].Operator != "aten::big" || fs[0].Title != "aten::big holds 1.50 GB at the peak (86% of 1.75 GB)" {
		t.Errorf("%+v", fs)
	}
}

// torch's rule of thumb stays as one note, per profiled step, checked
// against torch's own key_averages (Self CUDA Mem over the window / steps).
func TestOpSelfPerStepNote(t *testing.T) {
	fs := findingsFor(t, ruleOpSelfPerStep, "big_transformer", 0)
	if len(fs) != 1 || fs[0].Severity != Info || fs[0].Operator != "aten::mul" {
		t.Fatalf("%+v", fs)
	}
	var rows []struct {
		Key  string `json:"key"`
		Self int64  `json:"self_device_memory_usage"`
	}
	data, err := os.ReadFile(memtest.Testdata("traces", "big_transformer", "key_averages.json"))
	if err != nil || json.Unmarshal(data, &rows) != nil {
		t.Fatal(err)
	}
	steps := fs[0].Metrics["steps"]
	over := 0
	for _, r := range rows {
		if r.Key == "aten::mul" && fs[0].Metrics["top_self_bytes_per_step"] != float64(r.Self)/steps {
			t.Errorf("aten::mul per step %v, torch %d / %v", fs[0].Metrics["top_self_bytes_per_step"], r.Self, steps)
		}
		if strings.HasPrefix(r.Key, "aten::") && float64(r.Self)/steps > 1<<30 {
			over++
		}
	}
	if steps != 12 || int(fs[0].Metrics["operators"]) != over || !strings.Contains(fs[0].Detail, "aten::mul 6.33 GB") {
		t.Errorf("steps %v, operators %v (torch: %d): %s", steps, fs[0].Metrics["operators"], over, fs[0].Detail)
	}
	// resnet's aten::empty: 2.55 GB over 4 steps is 653 MB per step.
	if fs := findingsFor(t, ruleOpSelfPerStep, "resnet_train_clean", 0); len(fs) != 0 {
		t.Errorf("resnet: %+v", fs)
	}
}

func ruleNamed(t testing.TB, id string) Rule {
	t.Helper()
	for _, r := range Builtin() {
		if r.ID == id {
			return r
		}
	}
	t.Fatalf("no rule %s", id)
	return Rule{}
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
