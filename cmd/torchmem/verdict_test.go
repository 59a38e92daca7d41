package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/torchmem/torchmem/cmd/internal/report"
	"github.com/torchmem/torchmem/memtimeline/memtest"
)

// Text never drops what the user needs: every line of analyze, check,
// leaks and frag fits $COLUMNS (wrapped with a hanging indent, tables
// narrowed), the verdict block is whole (the fix and the holding line
// are there, nothing is cut with "…"), at narrow and wide widths.
func TestTextFitsTheWidthAndKeepsEverything(t *testing.T) {
	retain := "../../testdata/gpu/leak_retain_graph/"
	for _, cols := range []int{60, 100, 160} {
		t.Run("COLUMNS="+itoa(cols), func(t *testing.T) {
			t.Setenv("COLUMNS", itoa(cols))
			out, _, code := torchmem(t, "analyze", retain+"trace.json.gz", retain+"snapshot.pickle", retain+"stats_steps.jsonl")
			if code != exitFindings {
				t.Fatalf("exit %d", code)
			}
			block := strings.SplitN(out, "\n\n", 2)[0]
			if !strings.HasPrefix(block, "LEAK") || strings.Contains(block, "…") {
				t.Errorf("verdict block cut or not first:\n%s", block)
			}
			flat := strings.Join(strings.Fields(block), " ")
			for _, want := range []string{"6.00 MB per step", "PEAK", "FRAG", "fix: Drop retain_graph=True", "allocated at leak_retain_graph.py:"} {
				if !strings.Contains(flat, want) {
					t.Errorf("block lacks %q:\n%s", want, block)
				}
			}
			for _, args := range [][]string{
				{"analyze", retain + "trace.json.gz", retain + "snapshot.pickle", retain + "stats_steps.jsonl"},
				{"check", retain},
				{"leaks", retain},
				{"frag", retain + "trace.json.gz"},
			} {
				if args[0] == "frag" && cols < 160 {
					continue // its step table has 11 columns: about 120 cells without breaking a word
				}
				out, _, _ := torchmem(t, args...)
				for _, l := range strings.Split(out, "\n") {
					limit := cols
					if report.IsTableLine(l) {
						limit = max(cols, 80) // number columns need their room below 80
					}
					if n := utf8.RuneCountInString(l); n > limit {
						t.Errorf("%s: %d cells > %d: %q", args[0], n, limit, l)
					}
				}
			}
		})
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// check and analyze carry the verdicts in JSON with every source's figure.
func TestVerdictJSON(t *testing.T) {
	retain := "../../testdata/gpu/leak_retain_graph/"
	for _, cmd := range []string{"check", "analyze"} {
		out, _, _ := torchmem(t, cmd, retain+"trace.json.gz", retain+"snapshot.pickle", retain+"stats_steps.jsonl", "--format", "json")
		var doc struct {
			Verdicts []struct {
				Leak struct {
					Verdict      string `json:"verdict"`
					BytesPerStep int64  `json:"bytes_per_step"`
					Evidence     []struct {
						Input        string `json:"input"`
						BytesPerStep int64  `json:"bytes_per_step"`
					} `json:"evidence"`
				} `json:"leak"`
				Peak struct {
					Composition struct {
						ByCategory []json.RawMessage `json:"by_category"`
						Estimated  bool              `json:"estimated"`
					} `json:"composition"`
				} `json:"peak"`
			} `json:"verdicts"`
		}
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
		if len(doc.Verdicts) != 1 || doc.Verdicts[0].Leak.BytesPerStep != 6291456 || len(doc.Verdicts[0].Leak.Evidence) != 3 {
			t.Errorf("%s: verdicts %+v", cmd, doc.Verdicts)
			continue
		}
		if c := doc.Verdicts[0].Peak.Composition; len(c.ByCategory) != 6 || !c.Estimated {
			t.Errorf("%s: composition %+v", cmd, c)
		}
	}
}

// The report leads with the answer: verdict with its memory chart, then
// findings, then tables; stacks are collapsed.
func TestReportLayoutAnswerFirst(t *testing.T) {
	out := filepath.Join(t.TempDir(), "r.html")
	torchmem(t, "report", realTrace("leak_module_cache"), "-o", out)
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	order := []string{`<section class="answer">`, `class="torchmem-chart"`, `class="peakbar"`, `<h2>Findings</h2>`, `<h3>Operators`, `<h3>Allocation sites`}
	last := -1
	for _, s := range order {
		i := strings.Index(page, s)
		if i < 0 || i < last {
			t.Fatalf("%q at %d, after the previous part at %d", s, i, last)
		}
		last = i
	}
	if !strings.Contains(page, "<details><summary>") {
		t.Error("no collapsed stacks")
	}
	if !strings.Contains(page, "torchmemHolders") {
		t.Error("the chart carries no holders for its tooltip")
	}
}

// The snippet's directory: one verdict for the rank, and the report's top
// shows the run on one timeline with the profiled windows marked.
func TestSnippetDirectoryOneVerdict(t *testing.T) {
	dir := memtest.Testdata("gpu", "snippet_proof", "gpu")
	for _, cmd := range []string{"analyze", "check", "leaks"} {
		out, _, code := torchmem(t, cmd, dir)
		if code != exitOK {
			t.Errorf("%s: exit %d", cmd, code)
		}
		if n := strings.Count(out, "CLEAN: rank 0"); n != 1 {
			t.Errorf("%s: %d verdicts for rank 0, want 1:\n%s", cmd, n, out)
		}
	}
	page := filepath.Join(t.TempDir(), "r.html")
	torchmem(t, "report", dir, "-o", page)
	b, _ := os.ReadFile(page)
	for _, want := range []string{"The run on one timeline", "profiled: ProfilerStep#2..#4", "profiled: ProfilerStep#7..#9", "allocated per step (vm_rank0.steps.jsonl)"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if strings.Index(string(b), "The run on one timeline") > strings.Index(string(b), "<h2>Findings</h2>") {
		t.Error("the run's timeline is not at the top")
	}
}

// Where the run exported torch's memory timeline, the peak's categories
// are torch's own beside the estimate, with their agreement; an OOM shows
// what was alive when it failed.
func TestReportPeakAgainstTorchAndOOM(t *testing.T) {
	t.Parallel() // see torchmem: which tests may run side by side
	for _, c := range []struct{ dir, want string }{
		{memtest.Testdata("gpu", "leak_hook_every_step"), "(torch's export_memory_timeline)"},
		{memtest.Testdata("gpu", "oom"), "What was alive when 300.00 GB failed"},
	} {
		page := filepath.Join(t.TempDir(), "r.html")
		torchmem(t, "report", c.dir, "-o", page)
		b, _ := os.ReadFile(page)
		if !strings.Contains(string(b), c.want) {
			t.Errorf("%s: report lacks %q", c.dir, c.want)
		}
	}
	out, _, _ := torchmem(t, "analyze", memtest.Testdata("gpu", "leak_hook_every_step"))
	if !strings.Contains(out, "by category (torch's export_memory_timeline; the estimate agrees") {
		t.Errorf("analyze does not give torch's categories:\n%s", out)
	}
}

// A Hugging Face Trainer run that keeps 32 MiB of logits per step, as a
// new user runs it: one verdict, one leak finding (not three), and the
// report's top shows the run on one timeline.
func TestHFTrainerLeakOneAnswer(t *testing.T) {
	t.Parallel() // see torchmem: which tests may run side by side
	dir := memtest.Testdata("gpu", "hf_trainer_leak")
	out, _, code := torchmemShared(t, "check", dir, "--format", "json")
	if code != exitFindings {
		t.Errorf("exit %d", code)
	}
	var doc struct {
		Verdicts []struct {
			Leak struct {
				BytesPerStep int64 `json:"bytes_per_step"`
			} `json:"leak"`
		} `json:"verdicts"`
		Findings []struct {
			Rule    string             `json:"rule"`
			Metrics map[string]float64 `json:"metrics"`
		} `json:"findings"`
	}
	decodeJSON(t, out, &doc)
	leakFindings := 0
	for _, f := range doc.Findings {
		if f.Rule == "memory.leak" || f.Rule == "snapshot.leak" || f.Rule == "steps.growth" {
			leakFindings++
			if f.Metrics["trace_bytes_per_step"] != 33554432 || f.Metrics["snapshot_bytes_per_step"] != 33554432 || f.Metrics["steps_bytes_per_step"] != 33554432 {
				t.Errorf("per-source figures %v", f.Metrics)
			}
		}
	}
	if len(doc.Verdicts) != 1 || doc.Verdicts[0].Leak.BytesPerStep != 33554432 || leakFindings != 1 {
		t.Errorf("%d verdicts, %d leak findings:\n%s", len(doc.Verdicts), leakFindings, out)
	}
	page := filepath.Join(t.TempDir(), "r.html")
	torchmem(t, "report", dir, "-o", page)
	b, _ := os.ReadFile(page)
	if n := strings.Count(string(b), `<section class="answer">`); n != 1 || !strings.Contains(string(b), "The run on one timeline") {
		t.Errorf("%d verdict sections", n)
	}
}

// A training log's memory_summary() tables carry torch's cudaMalloc retry
// counter: the recorded log with its later tables counting 0, 3, 3, 7, 7
// (edited; the run itself had none) gives a RETRY line of 7 retries in 2 of
// its 6 steps, named as memory_summary()'s.
func TestVerdictRetriesFromMemorySummary(t *testing.T) {
	log := string(memtest.ReadAll(t, memtest.Testdata("gpu", "logged_memory_summary", "train.log")))
	const zero = "cudaMalloc retries: 0 "
	if strings.Count(log, zero) != 6 {
		t.Fatalf("%d tables with 0 retries, want the recording's 6", strings.Count(log, zero))
	}
	parts := strings.Split(log, zero)
	var b strings.Builder
	for i, p := range parts {
		b.WriteString(p)
		if i < len(parts)-1 {
			b.WriteString("cudaMalloc retries: " + []string{"0", "0", "3", "3", "7", "7"}[i] + " ")
		}
	}
	path := memtest.WriteFile(t, t.TempDir(), "train.log", b.String())
	out, errOut, code := torchmem(t, "analyze", "--format", "json", path)
	if code == exitBadInput {
		t.Fatalf("exit 2: %s", errOut)
	}
	var doc struct {
		Verdicts []struct {
			Fragmentation *struct {
				AllocRetries int64  `json:"alloc_retries"`
				Retries      string `json:"retries"`
			} `json:"fragmentation"`
		} `json:"verdicts"`
	}
	decodeJSON(t, out, &doc)
	if len(doc.Verdicts) != 1 || doc.Verdicts[0].Fragmentation == nil {
		t.Fatalf("verdicts %+v", doc.Verdicts)
	}
	f := doc.Verdicts[0].Fragmentation
	if f.AllocRetries != 7 || !strings.Contains(f.Retries, "in 2 of 6 steps (memory_summary())") {
		t.Errorf("retries %d: %q", f.AllocRetries, f.Retries)
	}
	text, _, _ := torchmem(t, "analyze", path)
	if !strings.Contains(text, "RETRY  7 cudaMalloc retries") {
		t.Errorf("no RETRY line:\n%s", text)
	}
}
