package rules

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/memtimeline/memtest"
)

// The checklist on real recordings: each planted problem fails its item,
// a clean run passes what it can show, and what the inputs cannot show is
// "not measurable" with what to record.
func TestChecklistOnRecordings(t *testing.T) {
	gpu := func(dir string, globs ...string) []string {
		var out []string
		for _, g := range globs {
			m, _ := filepath.Glob(memtest.Testdata("gpu", dir, g))
			out = append(out, m...)
		}
		if len(out) == 0 {
			t.Fatalf("%s: no %v", dir, globs)
		}
		return out
	}
	seed := func(name string) []string {
		return []string{memtest.Testdata("traces", name, "trace.json.gz")}
	}
	all := []string{"*.pt.trace.json.gz", "*.snapshot.pickle.gz", "*.steps.jsonl"}
	cases := []struct {
		name  string
		paths []string
		want  map[string]string // item id -> status
	}{
		{"no_zero_grad", gpu("no_zero_grad", all...), map[string]string{"leak": CheckPass, "zero-grad": CheckFail, "memory-logs": CheckPass, "pinned-non-blocking": CheckPass}},
		{"grad_accum", gpu("grad_accum", all...), map[string]string{"leak": CheckPass, "zero-grad": CheckPass, "small-alloc-flood": CheckPass}},
		{"pinned_blocking", gpu("pinned_blocking", all...), map[string]string{"pinned-non-blocking": CheckFail, "zero-grad": CheckPass}},
		{"pinned_nonblocking", gpu("pinned_nonblocking", all...), map[string]string{"pinned-non-blocking": CheckPass, "item-every-step": CheckPass}},
		{"eval_keeps_logits", gpu("eval_keeps_logits", all...), map[string]string{"leak": CheckFail, "eval-no-grad": CheckFail, "kept-in-lists": CheckPass}},
		{"late_start_leak", gpu("late_start_leak", all...), map[string]string{"leak": CheckFail, "kept-in-lists": CheckFail, "eval-no-grad": CheckPass}},
		{"amp_item_sync_slow_loader", gpu("amp_item_sync_slow_loader", "trace.json.gz"),
			map[string]string{"item-every-step": CheckFail, "gpu-waits-for-data": CheckFail, "memory-logs": CheckNotMeasurable}},
		{"frag_small_allocs", seed("frag_small_allocs"), map[string]string{"small-alloc-flood": CheckFail, "leak": CheckPass, "fragmentation-cost": CheckPass}},
		{"alloc_retry", gpu("alloc_retry", all...), map[string]string{"fragmentation-cost": CheckFail, "leak": CheckPass}},
		{"big_transformer", seed("big_transformer"), map[string]string{"op-self-1gb": CheckFail, "top-five-ops": CheckPass, "leak": CheckPass}},
		{"no_memory", seed("no_memory"), map[string]string{"leak": CheckNotMeasurable, "small-alloc-flood": CheckNotMeasurable, "top-five-ops": CheckNotMeasurable, "item-every-step": CheckPass}},
		{"snapshot only", gpu("leak_hook_every_step", "snapshot.pickle"), map[string]string{"leak": CheckFail, "zero-grad": CheckNotMeasurable, "gpu-waits-for-data": CheckNotMeasurable}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ins := loadInputs(t, c.paths...)
			vs := judgeAll(ins)
			if len(vs) != 1 {
				t.Fatalf("%d verdicts", len(vs))
			}
			var fs []Finding
			for _, in := range ins {
				fs = append(fs, Run(Builtin(), in)...)
			}
			items := Checklist(vs[0], fs)
			got := map[string]CheckItem{}
			for _, it := range items {
				got[it.ID] = it
				if it.Item == "" || it.Detail == "" || (it.Status == CheckNotMeasurable) != (it.Record != "") {
					t.Errorf("%s: incomplete %+v", it.ID, it)
				}
			}
			if len(items) != 12 {
				t.Errorf("%d items", len(items))
			}
			for id, want := range c.want {
				if got[id].Status != want {
					t.Errorf("%s: %s (%s), want %s", id, got[id].Status, got[id].Detail, want)
				}
			}
		})
	}
}

// A failed item names the evidence: the zero_grad finding's line.
func TestChecklistNamesTheEvidence(t *testing.T) {
	m, _ := filepath.Glob(memtest.Testdata("gpu", "no_zero_grad", "*.pt.trace.json.gz"))
	ins := loadInputs(t, m...)
	var fs []Finding
	for _, in := range ins {
		fs = append(fs, Run(Builtin(), in)...)
	}
	for _, it := range Checklist(judgeAll(ins)[0], fs) {
		if it.ID == "zero-grad" && (it.Status != CheckFail || !strings.Contains(it.Detail, "no_zero_grad.py, def line ")) {
			t.Errorf("%+v", it)
		}
		if it.ID == "memory-logs" && (it.Status != CheckNotMeasurable || !strings.Contains(it.Record, "memory_stats")) {
			t.Errorf("%+v", it)
		}
	}
}

// On healthy runs no memory, snapshot or step-log rule warns: every
// recording planted without a leak or an OOM (truth.json expect.leak
// false), read with all its files, and the seed traces of clean training.
func TestHealthyRunsRaiseNoMemoryWarning(t *testing.T) {
	var runs [][]string
	dirs, _ := filepath.Glob(memtest.Testdata("gpu", "*"))
	for _, d := range dirs {
		r := recording{truth: map[string]any{}}
		data, err := os.ReadFile(filepath.Join(d, "truth.json"))
		if err != nil || json.Unmarshal(data, &r.truth) != nil {
			continue
		}
		e, _ := r.truth["expect"].(map[string]any)
		if leak, ok := e["leak"].(bool); !ok || leak || r.expects("oom") {
			continue
		}
		var files []string
		for _, g := range []string{"*.pt.trace.json.gz", "*.snapshot.pickle.gz", "*.steps.jsonl"} {
			m, _ := filepath.Glob(filepath.Join(d, g))
			files = append(files, m...)
		}
		if retries, _ := e["alloc_retries"].(float64); retries > 0 {
			// Not healthy: the allocator gave its cache back and retried
			// (alloc_retry: every step, at its memory cap). The churn
			// warning is what it must raise, and the only one.
			var churn int
			for _, in := range loadInputs(t, files...) {
				for _, f := range Run(Builtin(), in) {
					kind := strings.SplitN(f.Rule, ".", 2)[0]
					switch {
					case f.Rule == "memory.cudamalloc-churn" && f.Severity >= Warning:
						churn++
					case f.Severity >= Warning && (kind == "memory" || kind == "snapshot" || kind == "steps"):
						t.Errorf("%s (%v allocator retries): [%s] %s: %s", in.Source, retries, f.Severity, f.Rule, f.Title)
					}
				}
			}
			if churn == 0 {
				t.Errorf("%s: %v allocator retries and no memory.cudamalloc-churn warning", d, retries)
			}
			continue
		}
		runs = append(runs, files)
	}
	for _, name := range []string{"resnet_train_clean", "compiled_model", "big_transformer"} {
		runs = append(runs, []string{memtest.Testdata("traces", name, "trace.json.gz"), memtest.Testdata("traces", name, "stats_steps.jsonl")})
	}
	if len(runs) < 8 {
		t.Fatalf("only %d healthy runs", len(runs))
	}
	for _, files := range runs {
		for _, in := range loadInputs(t, files...) {
			for _, f := range Run(Builtin(), in) {
				kind := strings.SplitN(f.Rule, ".", 2)[0]
				if f.Severity >= Warning && (kind == "memory" || kind == "snapshot" || kind == "steps") {
					t.Errorf("%s: [%s] %s: %s", in.Source, f.Severity, f.Rule, f.Title)
				}
			}
		}
	}
}
