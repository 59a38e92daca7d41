package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The defects of issue #39, each on the testdata it was seen on: what
// one command says in one place it says everywhere.

// leaks --device filters the verdict as it filters the table: one
// document never says LEAK and CLEAN of the same trace, and a device the
// trace never used is bad input, not a clean bill.
func TestLeaksDeviceFiltersTheVerdict(t *testing.T) {
	t.Chdir(filepath.Join("..", ".."))
	trace := "testdata/gpu/leak_retain_graph/trace.json.gz"
	out, _, code := torchmem(t, "leaks", "--device", "0", "--format", "json", trace)
	var doc struct {
		Verdicts []struct {
			Leak struct{ Verdict string } `json:"leak"`
		} `json:"verdicts"`
		Ranks []struct{ Verdict string } `json:"ranks"`
	}
	decodeJSON(t, out, &doc)
	if len(doc.Verdicts) != 1 || len(doc.Ranks) != 1 || doc.Verdicts[0].Leak.Verdict != "leak" || doc.Ranks[0].Verdict != "leak" || code != exitFindings {
		t.Errorf("--device 0: verdicts %+v, ranks %+v, exit %d; want leak in both, exit 1", doc.Verdicts, doc.Ranks, code)
	}
	refused(t, "no memory event on GPU 3", "leaks", "--device", "3", trace)
}

// A rules file's memory.leak threshold judges the run's leak whichever
// file measured it: the trace alone and the folder holding it (with its
// snapshot and step log) exit alike, and no checklist item says FAIL
// under a gate that passed.
func TestLeakThresholdIsTheRunsThreshold(t *testing.T) {
	t.Chdir(filepath.Join("..", ".."))
	cfg := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(cfg, []byte("rules:\n  memory.leak:\n    threshold: 2MiB\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := "testdata/gpu/evidence/hook_every_step" // 1 MiB per step, under 2 MiB
	for _, in := range []string{dir + "/run_rank0_step8.pt.trace.json.gz", dir, dir + "/run_rank0.steps.jsonl"} {
		out, errOut, code := torchmem(t, "check", "--rules", cfg, in)
		if code != exitOK {
			t.Errorf("check %s: exit %d, want 0 (a leak under the threshold is a warning)\n%s%s", in, code, out, errOut)
		}
		if !strings.Contains(out, "[WARNING]") || strings.Contains(out, "[ERROR]") {
			t.Errorf("check %s: want the leak as a warning:\n%s", in, out)
		}
		if strings.Contains(out, "PASS") && strings.Contains(out, "[FAIL]") {
			t.Errorf("check %s: a checklist item says FAIL under a gate that passed:\n%s", in, out)
		}
	}
}

// smi.leak is regular growth at any size: 40 MiB over 40 s in 1 MiB
// rises is a leak (a warning under the 64 MiB threshold), not nothing.
func TestSMILeakIsRegularityNotSize(t *testing.T) {
	var b strings.Builder
	b.WriteString("index, timestamp, memory.used [MiB], memory.total [MiB], utilization.gpu [%], utilization.memory [%]\n")
	for i := range 81 {
		fmt.Fprintf(&b, "0, 2026/11/29 17:%02d:%02d.%03d, %d MiB, 143771 MiB, 90 %%, 10 %%\n", i/2/60, i/2%60, i%2*500, 2000+i/2)
	}
	// A little while flat at the end would make it a plateau; the last
	// sample is still at the high.
	path := filepath.Join(t.TempDir(), "nvidia_smi.csv")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := torchmem(t, "check", path)
	if code != exitOK || !strings.Contains(out, "[WARNING] smi.leak") {
		t.Errorf("40 MiB of steady growth: exit %d, want 0 with an smi.leak warning:\n%s%s", code, out, errOut)
	}
}

// A multi-rank run answers first: which rank leaks and how much, before
// each rank's block, in text, Markdown and the report's first screen.
func TestMultiRankAnswersFirst(t *testing.T) {
	t.Chdir(filepath.Join("..", ".."))
	for _, args := range [][]string{
		{"leaks", "testdata/gpu/multirank/ddp4_leak"},
		{"leaks", "--format", "markdown", "testdata/gpu/multirank/ddp4_leak"},
		{"analyze", "testdata/gpu/multirank/ddp4_leak"},
		{"leaks", "testdata/gpu/multirank"},
	} {
		out, errOut, code := torchmem(t, args...)
		if code != exitFindings {
			t.Fatalf("%v: exit %d: %s", args, code, errOut)
		}
		// The first paragraph (the headline, wrapped), before any table.
		first := strings.SplitN(strings.TrimSpace(out), "\n\n", 2)[0]
		first = strings.Join(strings.Fields(strings.SplitN(first, "┌", 2)[0]), " ")
		if !strings.Contains(first, "rank 2") || !strings.Contains(first, "1.00 MB per step") {
			t.Errorf("%v: the first paragraph does not name the leaking rank and its figure: %q", args, first)
		}
	}
	html := filepath.Join(t.TempDir(), "r.html")
	if _, errOut, _ := torchmem(t, "report", "-o", html, "testdata/gpu/multirank/ddp4_leak"); errOut != "" && !strings.Contains(errOut, "warning") && !strings.Contains(errOut, "note") {
		t.Fatal(errOut)
	}
	page, err := os.ReadFile(html)
	if err != nil {
		t.Fatal(err)
	}
	across, answer := strings.Index(string(page), "Across ranks"), strings.Index(string(page), `<section class="answer">`)
	if across < 0 || answer < 0 || across > answer {
		t.Errorf("the report shows the ranks' answers (at %d) before the run's (at %d)", answer, across)
	}
}

// The report's chart markers and annotate's markers give one figure per
// leak and step, computed once: 4.00 MB per step on the examples' trace,
// 24 MB in all, not what the step left alive (36 MB, one-offs included).
func TestLeakMarkersOneFigure(t *testing.T) {
	t.Chdir(filepath.Join("..", ".."))
	trace := "examples/traces/leak_module_cache.trace.json.gz"
	dir := t.TempDir()
	html, annotated := filepath.Join(dir, "r.html"), filepath.Join(dir, "a.json")
	torchmem(t, "report", "-o", html, trace)
	torchmem(t, "annotate", "-o", annotated, trace)
	marks := regexp.MustCompile(`leak \d+: ProfilerStep#\d+ kept [0-9.]+ [KMG]?B \([0-9.]+ [KMG]?B so far\)`)
	page, err := os.ReadFile(html)
	if err != nil {
		t.Fatal(err)
	}
	events, err := os.ReadFile(annotated)
	if err != nil {
		t.Fatal(err)
	}
	inReport, inAnnotate := uniq(marks.FindAllString(string(page), -1)), uniq(marks.FindAllString(string(events), -1))
	if len(inReport) == 0 || !slices.Equal(inReport, inAnnotate) {
		t.Errorf("report markers %q\nannotate markers %q", inReport, inAnnotate)
	}
	for _, m := range inReport {
		if !strings.Contains(m, "kept 4.00 MB") {
			t.Errorf("marker %q: want 4.00 MB per step", m)
		}
	}
	if last := inReport[len(inReport)-1]; !strings.Contains(last, "(24.00 MB so far)") {
		t.Errorf("last marker %q: want 24.00 MB so far", last)
	}
}

func uniq(s []string) []string {
	slices.Sort(s)
	return slices.Compact(s)
}

// steps's peak allocated is torch's allocated_bytes.all.peak, and
// analyze says the same peak for the run (the folder: trace, snapshot
// and step log).
func TestPeakIsTorchsPeak(t *testing.T) {
	t.Chdir(filepath.Join("..", ".."))
	dir := "testdata/gpu/hf_trainer_leak"
	log := dir + "/vm_816_20261201-080229_rank0.steps.jsonl"
	want := int64(0)
	data, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatal(err)
		}
		if p, ok := rec["allocated_bytes.all.peak"].(float64); ok {
			want = max(want, int64(p))
		}
	}
	out, _, _ := torchmemShared(t, "steps", "--format", "json", log)
	if !strings.Contains(out, fmt.Sprintf(`"peak_allocated_bytes": %d`, want)) {
		t.Errorf("steps --format json: no peak_allocated_bytes %d (torch's allocated_bytes.all.peak):\n%.1500s", want, out)
	}
	for _, in := range []string{log, dir} {
		out, _, _ := torchmemShared(t, "analyze", "--format", "json", in)
		var doc struct {
			Verdicts []struct {
				Peak struct {
					AllocatedBytes int64 `json:"allocated_bytes"`
				} `json:"peak"`
			} `json:"verdicts"`
		}
		decodeJSON(t, out, &doc)
		if len(doc.Verdicts) != 1 || doc.Verdicts[0].Peak.AllocatedBytes != want {
			t.Errorf("analyze %s: peak %+v, want %d", in, doc.Verdicts, want)
		}
	}
}

// The checklist's top-five-operators item and memory.top-ops-share's
// finding measure one thing: the same operators, the same share.
func TestTopOpsOneMetric(t *testing.T) {
	t.Chdir(filepath.Join("..", ".."))
	out, _, _ := torchmem(t, "check", "--format", "json", "testdata/gpu/leak_retain_graph/trace.json.gz")
	var doc struct {
		Checklists []struct {
			Items []struct{ ID, Detail string } `json:"items"`
		} `json:"checklists"`
		Findings []struct{ Rule, Title, Detail string } `json:"findings"`
	}
	decodeJSON(t, out, &doc)
	var item, finding string
	for _, it := range doc.Checklists[0].Items {
		if it.ID == "top-five-ops" {
			item = it.Detail
		}
	}
	for _, f := range doc.Findings {
		if f.Rule == "memory.top-ops-share" {
			finding = f.Title + ": " + f.Detail
		}
	}
	if finding == "" || item != strings.TrimSuffix(finding, ".") {
		t.Errorf("checklist says %q\nthe finding says %q", item, finding)
	}
}

// One trace and the folder holding it give the verdict one shape: the
// same fields in verdicts[].leak and its location.
func TestVerdictShapeByInputCount(t *testing.T) {
	t.Chdir(filepath.Join("..", ".."))
	shape := func(in string) (leakKeys, locKeys []string) {
		out, _, _ := torchmemShared(t, "analyze", "--format", "json", in)
		var doc struct {
			Verdicts []struct {
				Leak map[string]json.RawMessage `json:"leak"`
			} `json:"verdicts"`
		}
		decodeJSON(t, out, &doc)
		if len(doc.Verdicts) != 1 {
			t.Fatalf("%s: %d verdicts", in, len(doc.Verdicts))
		}
		var loc map[string]json.RawMessage
		if err := json.Unmarshal(doc.Verdicts[0].Leak["location"], &loc); err != nil {
			t.Fatalf("%s: location: %v", in, err)
		}
		return slices.Sorted(maps.Keys(doc.Verdicts[0].Leak)), slices.Sorted(maps.Keys(loc))
	}
	dir := "testdata/gpu/leak_retain_graph"
	l1, c1 := shape(dir + "/trace.json.gz")
	l2, c2 := shape(dir)
	if !slices.Equal(l1, l2) || !slices.Equal(c1, c2) {
		t.Errorf("one trace: leak %v, location %v\nits folder: leak %v, location %v", l1, c1, l2, c2)
	}
}

// One vocabulary: steps, smi and snapshot... answer first in the words
// every command uses (LEAK, CLEAN), counts agree with their nouns, and
// no checklist says FAIL under a PASS.
func TestOneVocabulary(t *testing.T) {
	t.Chdir(filepath.Join("..", ".."))
	for _, c := range []struct {
		args []string
		word string
	}{
		{[]string{"steps", "testdata/gpu/hf_trainer_leak/vm_816_20261201-080229_rank0.steps.jsonl"}, "LEAK: "},
		{[]string{"smi", "testdata/smi/nvidia_smi_leak.csv"}, "LEAK: "},
		{[]string{"smi", "testdata/smi/per_process/healthy/nvidia_smi.csv"}, "CLEAN: "},
		{[]string{"diff", "testdata/gpu/diff_pair/base/trace.json.gz", "testdata/gpu/diff_pair/head_leak/trace.json.gz"}, ": LEAK (new in HEAD): "},
	} {
		out, _, _ := torchmem(t, c.args...)
		if first := strings.Join(strings.Fields(strings.SplitN(out, "\n\n", 2)[0]), " "); !strings.Contains(first, c.word) {
			t.Errorf("%v: the answer does not come first in the common words (%q):\n%.300s", c.args, c.word, out)
		}
		if bad := regexp.MustCompile(`\b1 (errors|warnings|notes|inputs|processes|records|stretches|periods)\b|\(s\)|\(es\)|growing|Leak: `).FindString(out); bad != "" {
			t.Errorf("%v: %q in\n%.500s", c.args, bad, out)
		}
	}
	out, _, _ := torchmem(t, "check", "testdata/gpu/leak_retain_graph/trace.json.gz")
	if !strings.HasPrefix(out, "torchmem: FAIL: 1 error, 0 warnings, 2 notes in 1 input\n") {
		t.Errorf("check's verdict line: %.100q", out)
	}
}

// analyze says the fix, the why and the chain once: the verdict's LEAK
// entry; the finding and the checklist point to it.
func TestAnalyzeSaysItOnce(t *testing.T) {
	t.Chdir(filepath.Join("..", ".."))
	for _, in := range []string{"testdata/gpu/leak_retain_graph/trace.json.gz", "testdata/gpu/leak_retain_graph"} {
		out, _, _ := torchmem(t, "analyze", in)
		flat := strings.Join(strings.Fields(out), " ")
		if n := strings.Count(flat, "Drop retain_graph=True"); n != 1 {
			t.Errorf("%s: the fix appears %d times:\n%s", in, n, out)
		}
		if n := strings.Count(flat, "the graph is kept alive after backward"); n != 1 {
			t.Errorf("%s: the why appears %d times", in, n)
		}
		if strings.Contains(flat, "): main > ") {
			t.Errorf("%s: a chain with another separator than the verdict's", in)
		}
	}
}
