package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/memtimeline/memtest"
)

// summaryLog writes a training log with a logger prefix on every line, a
// step line before each of the real memory_summary() tables of the
// nvidia_smi_leak run (64 MiB leaked per step, a table every 10 steps).
func summaryLog(t *testing.T, edit func(string) string) string {
	t.Helper()
	var b strings.Builder
	for i := 0; i <= 7; i++ {
		tab, err := os.ReadFile(memtest.Testdata("summary", fmt.Sprintf("nvidia_smi_leak_memory_summary_%03d.txt", i*10)))
		if err != nil {
			t.Fatal(err)
		}
		ts := fmt.Sprintf("2026-11-30 12:00:%02d", 10+i)
		fmt.Fprintf(&b, "%s INFO rank0: epoch 0 step %d loss 2.31\n", ts, i*10)
		text := string(tab)
		if edit != nil && i == 7 {
			text = edit(text)
		}
		for _, l := range strings.SplitAfter(text, "\n") {
			if l != "" {
				b.WriteString(ts + ",123 INFO rank0: " + l)
			}
		}
	}
	p := filepath.Join(t.TempDir(), "train.log")
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// A memory_summary() log feeds the step-growth detection (bytes per step
// from the log's own step numbers), the rules, analyze, the report and
// frag's allocator figures.
func TestMemorySummaryInput(t *testing.T) {
	log := summaryLog(t, nil)
	out, errOut, code := torchmem(t, "steps", log, "--format", "json")
	if code != exitFindings {
		t.Fatalf("steps: exit %d %s", code, errOut)
	}
	var steps struct {
		Series []struct {
			Verdict      string `json:"verdict"`
			BytesPerStep int64  `json:"bytes_per_step"`
		} `json:"series"`
	}
	if err := json.Unmarshal([]byte(onlyInput(t, out)), &steps); err != nil || len(steps.Series) != 1 || steps.Series[0].Verdict != "growing" || steps.Series[0].BytesPerStep != 64<<20 {
		t.Errorf("steps: %v %s", err, out)
	}
	out, _, code = torchmem(t, "check", log)
	if code != exitFindings || !strings.Contains(out, "steps.growth") || !strings.Contains(out, "64.00 MB per step") {
		t.Errorf("check: exit %d\n%s", code, out)
	}
	out, _, code = torchmem(t, "analyze", log)
	if code != exitFindings || !strings.Contains(out, "memory_summary() log: 8 tables") {
		t.Errorf("analyze: exit %d\n%s", code, out)
	}
	if _, errOut, code := torchmem(t, "report", log, "-o", filepath.Join(t.TempDir(), "r.html")); code == exitBadInput {
		t.Errorf("report: %s", errOut)
	}
	out, _, code = torchmem(t, "frag", log)
	if code != exitOK || !strings.Contains(out, "Verdict: OK") {
		t.Errorf("frag, clean tables: exit %d\n%s", code, out)
	}
	// The same run with retries and non-releasable memory at the end.
	bad := summaryLog(t, func(s string) string {
		s = strings.Replace(s, "cudaMalloc retries: 0 ", "cudaMalloc retries: 3 ", 1)
		return strings.Replace(s, "| Non-releasable memory |      0 B   |", "| Non-releasable memory |   1536 MiB |", 1)
	})
	out, _, code = torchmem(t, "frag", bad)
	if code != exitFindings || !strings.Contains(out, "cost: 3 cudaMalloc retries") || !strings.Contains(out, "non-releasable memory reached 34%") {
		t.Errorf("frag, retries: exit %d\n%s", code, out)
	}
	out, _, _ = torchmem(t, "check", bad)
	for _, rule := range []string{"summary.alloc-retries", "summary.non-releasable"} {
		if !strings.Contains(out, rule) {
			t.Errorf("check lacks %s:\n%s", rule, out)
		}
	}
}

// The recorder's directory: a trace, a snapshot, a steps log and two
// training logs with memory_summary() tables. Every source reads the
// planted 8 MiB per step, the two logs included.
func TestMemorySummaryRecordedRun(t *testing.T) {
	dir := memtest.Testdata("gpu", "logged_memory_summary")
	out, errOut, code := torchmem(t, "analyze", dir, "--format", "json")
	if code != exitFindings {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var doc struct {
		Verdicts []struct {
			Leak struct {
				Verdict      string `json:"verdict"`
				BytesPerStep int64  `json:"bytes_per_step"`
				Evidence     []struct {
					Source       string `json:"source"`
					BytesPerStep int64  `json:"bytes_per_step"`
				} `json:"evidence"`
			} `json:"leak"`
		} `json:"verdicts"`
		Inputs []struct {
			Kind string `json:"kind"`
		} `json:"inputs"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || len(doc.Verdicts) != 1 {
		t.Fatalf("%v: %.300s", err, out)
	}
	l := doc.Verdicts[0].Leak
	if l.Verdict != "leak" || l.BytesPerStep != 8<<20 {
		t.Errorf("verdict %s %d", l.Verdict, l.BytesPerStep)
	}
	logs := 0
	for _, e := range l.Evidence {
		if strings.HasSuffix(e.Source, ".log") {
			logs++
			if e.BytesPerStep != 8<<20 {
				t.Errorf("%s: %d bytes per step", e.Source, e.BytesPerStep)
			}
		}
	}
	kinds := 0
	for _, in := range doc.Inputs {
		if in.Kind == string(kindSummary) {
			kinds++
		}
	}
	if logs != 2 || kinds != 2 {
		t.Errorf("%d logs in the evidence, %d memory-summary inputs; want 2", logs, kinds)
	}
}
