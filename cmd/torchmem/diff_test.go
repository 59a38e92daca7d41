package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDiffSelfExitsZero(t *testing.T) {
	out, _, code := torchmem(t, "diff", realTrace("leak_module_cache"), realTrace("leak_module_cache"), "--fail-if", "peak_allocated>+0%", "--fail-if", "new_suspects>0")
	if code != exitOK || !strings.Contains(out, "no change") {
		t.Errorf("exit %d\n%s", code, out)
	}
}

func TestDiffBudgetAndJSON(t *testing.T) {
	out, _, code := torchmem(t, "diff", realTrace("compiled_model"), realTrace("leak_module_cache"), "--fail-if", "peak_allocated>+5%", "--format", "json")
	if code != exitFindings {
		t.Errorf("exit %d", code)
	}
	var d struct {
		WithinBudget bool     `json:"within_budget"`
		Violations   []string `json:"violations"`
		HeadVerdict  string   `json:"head_leak_verdict"`
		Metrics      []struct {
			Metric string  `json:"metric"`
			Delta  int64   `json:"delta"`
			Pct    float64 `json:"percent"`
		} `json:"metrics"`
		NewSuspects []json.RawMessage `json:"new_suspects"`
	}
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatal(err)
	}
	if d.WithinBudget || len(d.Violations) != 1 || d.HeadVerdict != "leak" || len(d.NewSuspects) != 1 || d.Metrics[0].Metric != "peak_allocated" || d.Metrics[0].Pct < 5 {
		t.Errorf("diff %+v", d)
	}
	// The same budget from the rules YAML.
	cfg := filepath.Join(t.TempDir(), "torchmem.yaml")
	os.WriteFile(cfg, []byte("diff:\n  fail_if:\n    - peak_allocated>+50%\n"), 0o644)
	if _, _, code := torchmem(t, "diff", realTrace("compiled_model"), realTrace("leak_module_cache"), "--rules", cfg); code != exitOK {
		t.Errorf("13.7%% growth over a 50%% budget: exit %d", code)
	}
	md, _, _ := torchmem(t, "diff", realTrace("compiled_model"), realTrace("leak_module_cache"), "--format", "markdown")
	if !strings.HasPrefix(md, "✅ **torchmem diff:") || !strings.Contains(md, "| Metric |") {
		t.Errorf("markdown:\n%s", md)
	}
	_, errOut, code := torchmem(t, "diff", realTrace("compiled_model"), realTrace("leak_module_cache"), "--fail-if", "peak>5%")
	if code != exitBadInput || !strings.Contains(errOut, "unknown metric") {
		t.Errorf("bad budget: exit %d %q", code, errOut)
	}
}
