package main

import (
	"encoding/json"
	"testing"

	"github.com/torchmem/torchmem/memtimeline/memtest"
)

// diff words no leak verdict of its own: BASE's and HEAD's are what
// analyze says of each, on traces and on snapshots.
func TestDiffVerdictsAreTheEvaluations(t *testing.T) {
	snap := func(name string) string { return memtest.Testdata("snapshots", name+".pickle.gz") }
	analyzeLeak := func(path string) string {
		t.Helper()
		out, errOut, _ := torchmemShared(t, "analyze", path, "--format", "json")
		var doc struct {
			Verdicts []struct {
				Leak struct {
					Verdict string `json:"verdict"`
				} `json:"leak"`
			} `json:"verdicts"`
		}
		if err := json.Unmarshal([]byte(out), &doc); err != nil || len(doc.Verdicts) != 1 {
			t.Fatalf("analyze %s: %v\n%s%s", path, err, out, errOut)
		}
		return doc.Verdicts[0].Leak.Verdict
	}
	for _, pair := range [][2]string{
		{gpuDiff("base"), gpuDiff("head_leak")},
		{snap("leak_eval_no_grad"), snap("leak_module_cache")},
	} {
		out, errOut, _ := torchmemShared(t, "diff", pair[0], pair[1], "--format", "json")
		var d struct {
			Base string `json:"base_leak_verdict"`
			Head string `json:"head_leak_verdict"`
		}
		if err := json.Unmarshal([]byte(onlyInput(t, out)), &d); err != nil {
			t.Fatalf("diff: %v\n%s%s", err, out, errOut)
		}
		if d.Base == "" || d.Head == "" {
			t.Errorf("diff %s %s: no leak verdict\n%s", pair[0], pair[1], out)
		}
		if want := analyzeLeak(pair[0]); d.Base != want {
			t.Errorf("%s: diff says BASE %q, analyze %q", pair[0], d.Base, want)
		}
		if want := analyzeLeak(pair[1]); d.Head != want {
			t.Errorf("%s: diff says HEAD %q, analyze %q", pair[1], d.Head, want)
		}
	}
}
