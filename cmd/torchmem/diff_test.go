package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/memtimeline/memtest"
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
	decodeJSON(t, onlyInput(t, out), &d)
	if d.WithinBudget || len(d.Violations) != 1 || d.HeadVerdict != "leak" || len(d.NewSuspects) != 1 || d.Metrics[0].Metric != "peak_allocated" || d.Metrics[0].Pct < 5 {
		t.Errorf("diff %+v", d)
	}
	// The same budget from the rules YAML (the leak gate turned off there).
	cfg := filepath.Join(t.TempDir(), "torchmem.yaml")
	os.WriteFile(cfg, []byte("rules:\n  memory.leak:\n    disabled: true\ndiff:\n  fail_if:\n    - peak_allocated>+50%\n"), 0o644)
	if _, _, code := torchmem(t, "diff", realTrace("compiled_model"), realTrace("leak_module_cache"), "--rules", cfg); code != exitOK {
		t.Errorf("13.7%% growth over a 50%% budget, leak gate off: exit %d", code)
	}
	md, _, _ := torchmem(t, "diff", gpuDiff("base"), gpuDiff("head"), "--format", "markdown")
	if !strings.HasPrefix(md, "✅ **torchmem diff:") || !strings.Contains(md, "| Metric |") {
		t.Errorf("markdown:\n%s", md)
	}
	refused(t, "unknown metric", "diff", realTrace("compiled_model"), realTrace("leak_module_cache"), "--fail-if", "peak>5%")
}

func gpuDiff(side string) string {
	return memtest.Testdata("gpu", "diff_pair", side, "trace.json.gz")
}

// A change that starts leaking fails the diff without any flag, and its
// headline says so in every format; a fixed leak and a clean change pass.
func TestDiffFailsOnNewLeak(t *testing.T) {
	t.Parallel() // see torchmem: which tests may run side by side
	cases := []struct {
		base, head string
		args       []string
		code       int
		headline   string
	}{
		{gpuDiff("base"), gpuDiff("head_leak"), nil, exitFindings, "❌ **torchmem diff: LEAK (new in HEAD): HEAD leaks 4.00 MB per step at diff\\_train.py(35): forward via aten::clone (BASE clean)"},
		{realTrace("compiled_model"), realTrace("leak_module_cache"), nil, exitFindings, "❌ **torchmem diff: LEAK (new in HEAD): HEAD leaks 4.00 MB per step at gen\\_traces.py(143)"},
		{realTrace("leak_module_cache"), gpuDiff("head_leak"), nil, exitFindings, "❌ **torchmem diff: LEAK (new in HEAD): new leak suspect in HEAD: 4.00 MB per step at diff\\_train.py(35)"},
		{realTrace("leak_module_cache"), gpuDiff("head_leak"), []string{"--leak-threshold", "8MiB"}, exitOK, "✅"},
		{realTrace("leak_module_cache"), realTrace("compiled_model"), nil, exitOK, "✅ **torchmem diff: peak allocated"},
		// Recorded with the snippet: a leak that starts mid-window, and a
		// 512 KiB leak under the 1 MiB threshold (HEAD leaks, BASE does not).
		{recorded(t, "pinned_nonblocking"), recorded(t, "late_start_leak"), nil, exitFindings, "❌ **torchmem diff: LEAK (new in HEAD): HEAD leaks 4.00 MB per step at late\\_start\\_leak.py(27): step via aten::clone (BASE clean)"},
		{recorded(t, "grad_accum"), recorded(t, "small_leak_big_model"), nil, exitFindings, "❌ **torchmem diff: LEAK (new in HEAD): HEAD leaks 512.00 KB per step at small\\_leak\\_big\\_model.py(38)"},
		{recorded(t, "late_start_leak"), recorded(t, "pinned_nonblocking"), nil, exitOK, "✅"},
		// Budgets still apply on top of the leak gate.
		{gpuDiff("base"), gpuDiff("head"), []string{"--fail-if", "peak_allocated>+5%"}, exitFindings, "❌ **torchmem diff: OVER BUDGET"},
		{gpuDiff("base"), gpuDiff("head_leak"), []string{"--fail-if", "peak_allocated>+1000%"}, exitFindings, "❌ **torchmem diff: LEAK (new in HEAD)"},
	}
	for _, c := range cases {
		args := append([]string{"diff", c.base, c.head, "--format", "markdown"}, c.args...)
		out, errOut, code := torchmem(t, args...)
		if code != c.code || !strings.HasPrefix(out, c.headline) {
			t.Errorf("%v: exit %d (want %d)\n%s%s", args[1:], code, c.code, firstLine(out), errOut)
		}
	}
	out, _, code := torchmemShared(t, "diff", gpuDiff("base"), gpuDiff("head_leak"), "--format", "json")
	var d struct {
		Passed       bool     `json:"passed"`
		NewLeak      []string `json:"new_leak"`
		WithinBudget bool     `json:"within_budget"`
	}
	if err := json.Unmarshal([]byte(onlyInput(t, out)), &d); err != nil || code != exitFindings || d.Passed || len(d.NewLeak) != 1 || !d.WithinBudget {
		t.Errorf("json: exit %d %v %+v", code, err, d)
	}
	out, _, _ = torchmem(t, "diff", gpuDiff("base"), gpuDiff("head_leak"))
	// The headline, wrapped at the width: its first paragraph.
	headline := strings.Join(strings.Fields(strings.SplitN(out, "\n\n", 2)[0]), " ")
	if !strings.Contains(headline, ": LEAK (new in HEAD): HEAD leaks 4.00 MB per step") {
		t.Errorf("text headline: %s", headline)
	}
	refused(t, "--leak-threshold", "diff", gpuDiff("base"), gpuDiff("head"), "--leak-threshold", "lots")
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// recorded is the one trace of a snippet-v2 recording in testdata/gpu.
func recorded(t *testing.T, name string) string {
	t.Helper()
	m, _ := filepath.Glob(memtest.Testdata("gpu", name, "*.pt.trace.json.gz"))
	if len(m) != 1 {
		t.Fatalf("%s: %d traces", name, len(m))
	}
	return m[0]
}
