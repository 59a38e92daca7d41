package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/memtimeline/memtest"
)

func TestAnalyzeLeakingTrace(t *testing.T) {
	out, _, code := torchmem(t, "analyze", realTrace("leak_module_cache"))
	if code != exitFindings {
		t.Errorf("exit %d", code)
	}
	for _, want := range []string{"peak allocated 258.10 MB", "aten::empty_strided", "gen_traces.py(143): forward", "LEAK   4.00 MB per step, container allocated in gen_traces.py (forward, def line 143; the trace\n         does not record the allocating line) via aten::clone", "[ERROR] memory.leak", "what to do:"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	// The verdict comes first, before any table.
	if v, tbl := strings.Index(out, "LEAK   4.00 MB"), strings.Index(out, "┌"); v < 0 || tbl < v {
		t.Errorf("the verdict (at %d) does not precede the first table (at %d)", v, tbl)
	}
}

func TestAnalyzeJSONSeveralInputs(t *testing.T) {
	out, _, code := torchmem(t, "analyze", realTrace("resnet_train_clean"), memtest.Testdata("snapshots", "leak_module_cache.pickle.gz"), "--format", "json")
	if code != exitFindings {
		t.Errorf("exit %d (the snapshot leaks)", code)
	}
	var doc struct {
		Inputs []struct {
			Kind  string `json:"kind"`
			Leaks struct {
				Verdict string `json:"verdict"`
			} `json:"leaks"`
			Operators []json.RawMessage `json:"operators"`
		} `json:"inputs"`
	}
	decodeJSON(t, out, &doc)
	if len(doc.Inputs) != 2 || doc.Inputs[0].Kind != "trace" || doc.Inputs[0].Leaks.Verdict != "clean" || len(doc.Inputs[0].Operators) == 0 ||
		doc.Inputs[1].Kind != "snapshot" || doc.Inputs[1].Leaks.Verdict != "leak" {
		t.Errorf("inputs %+v", doc.Inputs)
	}
}
