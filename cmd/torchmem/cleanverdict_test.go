package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/memtimeline/memtest"
)

// A run whose leak verdict is CLEAN carries no leak finding at error
// severity: the verdict and the gate give one answer. Where a longer clean
// source overrules a window that kept memory while a bounded queue filled
// (evidence/bounded_queue_cap, evidence/seqlen_cache), the window's finding
// stays as a note saying it was overruled, and check passes.
func TestCleanVerdictFailsNoGate(t *testing.T) {
	t.Parallel() // see torchmem: which tests may run side by side
	dirs := mustGlob(t, memtest.Testdata("gpu", "evidence", "*"))
	overruled := 0
	for _, dir := range dirs {
		if st, err := os.Stat(dir); err != nil || !st.IsDir() || filepath.Base(dir) == "logs" {
			continue
		}
		out, _, code := torchmemShared(t, "check", "--format", "json", dir) // TestEveryCommandAgrees asks too
		var doc struct {
			Verdicts []struct {
				Sources []string `json:"sources"`
				Leak    struct {
					Verdict   string `json:"verdict"`
					Agreement string `json:"agreement"`
				} `json:"leak"`
			} `json:"verdicts"`
			Findings []struct {
				Rule, Severity, Source, Title string
			} `json:"findings"`
		}
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatalf("%s: check JSON: %v", dir, err)
		}
		errors := 0
		for _, v := range doc.Verdicts {
			mine := map[string]bool{}
			for _, s := range v.Sources {
				mine[s] = true
			}
			for _, f := range doc.Findings {
				if f.Severity == "error" {
					errors++
				}
				if v.Leak.Verdict != "clean" || !mine[f.Source] || !strings.Contains(f.Rule, "leak") {
					continue
				}
				if f.Severity == "error" {
					t.Errorf("%s: verdict CLEAN but %s is an error: %s", dir, f.Rule, f.Title)
				}
				if v.Leak.Agreement != "" && strings.HasPrefix(f.Title, "Overruled: ") {
					overruled++
				}
			}
		}
		if (errors > 0) != (code == exitFindings) {
			t.Errorf("%s: %d error findings, exit %d", dir, errors, code)
		}
	}
	if overruled < 2 {
		t.Errorf("%d overruled leak findings in %d runs: want bounded_queue_cap's and seqlen_cache's at least", overruled, len(dirs))
	}
}
