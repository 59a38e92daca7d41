package rules

import (
	"path/filepath"
	"strings"
	"testing"
)

// The checklist on real recordings: each planted problem fails its item,
// a clean run passes what it can show, and what the inputs cannot show is
// "not measurable" with what to record.
func TestChecklistOnRecordings(t *testing.T) {
	gpu := func(dir string, globs ...string) []string {
		var out []string
		for _, g := range globs {
			m, _ := filepath.Glob(filepath.Join("..", "testdata", "gpu", dir, g))
			out = append(out, m...)
		}
		if len(out) == 0 {
			t.Fatalf("%s: no %v", dir, globs)
		}
		return out
	}
	seed := func(name string) []string {
		return []string{filepath.Join("..", "testdata", "traces", name, "trace.json.gz")}
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
		{"frag_small_allocs", seed("frag_small_allocs"), map[string]string{"small-alloc-flood": CheckFail, "leak": CheckPass}},
		{"big_transformer", seed("big_transformer"), map[string]string{"op-self-1gb": CheckFail, "top-five-ops": CheckPass, "leak": CheckPass}},
		{"no_memory", seed("no_memory"), map[string]string{"leak": CheckNotMeasurable, "small-alloc-flood": CheckNotMeasurable, "top-five-ops": CheckNotMeasurable, "item-every-step": CheckPass}},
		{"snapshot only", gpu("leak_hook_every_step", "snapshot.pickle"), map[string]string{"leak": CheckFail, "zero-grad": CheckNotMeasurable, "gpu-waits-for-data": CheckNotMeasurable}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ins := loadInputs(t, c.paths...)
			vs := JudgeAll(ins)
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
			if len(items) != 11 {
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
	m, _ := filepath.Glob(filepath.Join("..", "testdata", "gpu", "no_zero_grad", "*.pt.trace.json.gz"))
	ins := loadInputs(t, m...)
	var fs []Finding
	for _, in := range ins {
		fs = append(fs, Run(Builtin(), in)...)
	}
	for _, it := range Checklist(JudgeAll(ins)[0], fs) {
		if it.ID == "zero-grad" && (it.Status != CheckFail || !strings.Contains(it.Detail, "no_zero_grad.py:")) {
			t.Errorf("%+v", it)
		}
		if it.ID == "memory-logs" && (it.Status != CheckNotMeasurable || !strings.Contains(it.Record, "memory_stats")) {
			t.Errorf("%+v", it)
		}
	}
}
