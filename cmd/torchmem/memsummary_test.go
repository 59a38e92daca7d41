package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/memtimeline/memtest"
	"github.com/torchmem/torchmem/rules"
)

// A memory_summary() log is read as a log of steps but named as what it
// is: the verdict's evidence says memory-summary and "the memory_summary()
// log", never "the step log" (the run's own steps log, a different file,
// may be beside it).
func TestMemorySummaryEvidenceIsNamedAsItself(t *testing.T) {
	t.Parallel()
	log := memtest.Testdata("gpu", "logged_memory_summary", "train.log")
	out, _, code := torchmem(t, "analyze", "--format", "json", log)
	if code != exitFindings {
		t.Fatalf("exit %d, want 1 (the log's planted leak)", code)
	}
	var doc struct {
		Verdicts []struct {
			Leak struct {
				Verdict  string `json:"verdict"`
				From     string `json:"from"`
				Evidence []struct {
					Input string `json:"input"`
				} `json:"evidence"`
			} `json:"leak"`
		} `json:"verdicts"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || len(doc.Verdicts) != 1 {
		t.Fatalf("analyze JSON (%v): %s", err, out)
	}
	l := doc.Verdicts[0].Leak
	if l.Verdict != "leak" || len(l.Evidence) != 1 || l.Evidence[0].Input != string(rules.SourceMemSummary) {
		t.Errorf("leak %q from %d sources %+v, want one leak from %q", l.Verdict, len(l.Evidence), l.Evidence, rules.SourceMemSummary)
	}
	if !strings.HasPrefix(l.From, "the memory_summary() log") {
		t.Errorf("from %q, want the memory_summary() log", l.From)
	}
}
