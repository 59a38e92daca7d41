package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/memtimeline/memtest"
)

// One answer: analyze, check, leaks and report render the same evaluation,
// so the same inputs give the same verdicts, checklists and exit code
// through each of them, on real recordings (a leak under the threshold, a
// leak over it, a clean run, a snapshot with history), with and without a
// rules file.
func TestOneAnswerEveryCommand(t *testing.T) {
	t.Parallel() // see torchmem: which tests may run side by side
	dir := t.TempDir()
	cfg := func(name, yaml string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	disabled := cfg("disabled.yaml", "rules:\n  memory.leak:\n    disabled: true\n  snapshot.leak:\n    disabled: true\n  steps.growth:\n    disabled: true\n  memory.op-self-per-step:\n    disabled: true\n")
	strict := cfg("strict.yaml", "rules:\n  memory.leak:\n    threshold: 1048576\n  snapshot.inactive-split:\n    threshold: 0.01\n")
	cases := []struct {
		name   string
		inputs []string
		rules  string
		// exit is the code every command must give.
		exit int
	}{
		{"small leak, default rules", []string{memtest.Testdata("gpu", "small_leak_big_model")}, "", -1},
		{"retain_graph leak", []string{memtest.Testdata("gpu", "leak_retain_graph", "trace.json.gz")}, "", exitFindings},
		{"clean", []string{realTrace("resnet_train_clean")}, "", exitOK},
		{"leak rules disabled", []string{memtest.Testdata("gpu", "leak_retain_graph", "trace.json.gz")}, disabled, exitOK},
		{"snapshot split threshold", []string{memtest.Testdata("gpu", "small_leak_big_model")}, strict, -1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var rulesArgs []string
			if c.rules != "" {
				rulesArgs = []string{"--rules", c.rules}
			}
			type answer struct {
				Verdicts   json.RawMessage `json:"verdicts"`
				Checklists json.RawMessage `json:"checklists"`
			}
			get := func(cmd string) (answer, int) {
				args := append(append([]string{cmd}, c.inputs...), "--format", "json")
				out, stderr, code := torchmem(t, append(args, rulesArgs...)...)
				if code == exitBadInput {
					t.Fatalf("%s: exit 2: %s", cmd, stderr)
				}
				var a answer
				decodeJSON(t, out, &a)
				return a, code
			}
			analyze, analyzeCode := get("analyze")
			check, checkCode := get("check")
			if string(analyze.Verdicts) != string(check.Verdicts) || string(analyze.Checklists) != string(check.Checklists) {
				t.Errorf("analyze and check differ:\n%s\n%s", analyze.Verdicts, check.Verdicts)
			}
			if analyzeCode != checkCode {
				t.Errorf("exit: analyze %d, check %d", analyzeCode, checkCode)
			}
			if c.exit >= 0 && checkCode != c.exit {
				t.Errorf("exit %d, want %d", checkCode, c.exit)
			}
			report := filepath.Join(t.TempDir(), "r.html")
			out, _, reportCode := torchmem(t, append(append(append([]string{"report"}, c.inputs...), "-o", report), rulesArgs...)...)
			if reportCode != checkCode {
				t.Errorf("exit: report %d, check %d", reportCode, checkCode)
			}
			text, _, _ := torchmem(t, append(append([]string{"check"}, c.inputs...), rulesArgs...)...)
			if first := strings.SplitN(text, "\n", 2)[0]; !strings.Contains(out, first) {
				t.Errorf("report says %q, check %q", out, first)
			}
			{
				leaks, leaksCode := get("leaks")
				if string(leaks.Verdicts) != string(check.Verdicts) {
					t.Errorf("leaks and check differ:\n%s\n%s", leaks.Verdicts, check.Verdicts)
				}
				if leaksCode != checkCode {
					t.Errorf("exit: leaks %d, check %d", leaksCode, checkCode)
				}
			}
		})
	}
}

// A disabled rule neither passes nor fails its checklist item, and a
// changed threshold is the one the verdict and the findings use.
func TestConfigIsHonest(t *testing.T) {
	dir := t.TempDir()
	disabled := filepath.Join(dir, "d.yaml")
	os.WriteFile(disabled, []byte("rules:\n  memory.op-self-per-step:\n    disabled: true\n  memory.leak:\n    disabled: true\n"), 0o644)
	out, _, _ := torchmem(t, "check", realTrace("big_transformer"), "--rules", disabled, "--format", "json")
	var doc struct {
		Checklists []struct {
			Items []struct{ ID, Status, Detail string } `json:"items"`
		} `json:"checklists"`
	}
	decodeJSON(t, out, &doc)
	seen := 0
	for _, it := range doc.Checklists[0].Items {
		switch it.ID {
		case "op-self-1gb", "leak", "eval-no-grad", "kept-in-lists":
			seen++
			if it.Status != "not checked" || !strings.Contains(it.Detail, "rule disabled") {
				t.Errorf("%s: %s (%s), want not checked", it.ID, it.Status, it.Detail)
			}
		}
	}
	if seen != 4 {
		t.Errorf("%d items seen", seen)
	}

	// snapshot.inactive-split at 1% of reserved: the finding fires where
	// the default 20% does not; the FRAG verdict says what the split cost
	// (nothing here: no retry, no OOM), whatever the threshold, with the
	// figure the finding measures.
	strict := filepath.Join(dir, "s.yaml")
	os.WriteFile(strict, []byte("rules:\n  snapshot.inactive-split:\n    threshold: 0.01\n"), 0o644)
	snap := memtest.Testdata("gpu", "small_leak_big_model", "vm_507_20261201-080117_rank0.snapshot.pickle.gz")
	for _, c := range []struct {
		args  []string
		fired bool
	}{{nil, false}, {[]string{"--rules", strict}, true}} {
		out, _, _ := torchmem(t, append([]string{"check", snap, "--format", "json"}, c.args...)...)
		var doc struct {
			Verdicts []struct {
				Frag struct{ Verdict, Cost string } `json:"fragmentation"`
			} `json:"verdicts"`
			Findings []struct{ Rule string } `json:"findings"`
		}
		decodeJSON(t, out, &doc)
		fired := false
		for _, f := range doc.Findings {
			fired = fired || f.Rule == "snapshot.inactive-split"
		}
		if f := doc.Verdicts[0].Frag; fired != c.fired || f.Verdict != "ok" || !strings.Contains(f.Cost, "split inside used segments") || !strings.Contains(f.Cost, "it cost nothing") {
			t.Errorf("%v: finding %v (want %v), verdict %s (want ok with the figure and no cost): %q", c.args, fired, c.fired, f.Verdict, f.Cost)
		}
	}
}

// A gate that cannot measure memory says so: a trace recorded without
// profile_memory=True, alone, is bad input for every answering command,
// named with how to record it.
func TestNoMemoryEvidenceIsBadInput(t *testing.T) {
	for _, cmd := range []string{"check", "analyze", "leaks"} {
		refused(t, "no_memory/trace.json.gz has no GPU memory events", cmd, realTrace("no_memory"))
		refused(t, "profile_memory=True", cmd, memtest.Testdata("traces", "no_memory"))
	}
	refused(t, "profile_memory=True", "report", realTrace("no_memory"), "-o", filepath.Join(t.TempDir(), "r.html"))
	// With a memory source beside it, the trace's timeline still counts.
	if _, stderr, code := torchmem(t, "check", realTrace("no_memory"), realTrace("resnet_train_clean")); code == exitBadInput {
		t.Errorf("exit 2 with a memory trace beside it: %s", stderr)
	}
}

// A directory of several recordings (testdata/gpu/snippet_proof: a 2-rank
// DDP run, a one-GPU run, a run without memory events, an OOM) is several
// runs: ranks compare within their run, so the DDP run's two clean ranks
// are alike and no other run's rank 0 is called an outlier; the files
// torchmem does not read are named in one line.
func TestRunsGroupAndRanksCompareWithinTheirRun(t *testing.T) {
	out, stderr, code := torchmem(t, "leaks", memtest.Testdata("gpu", "snippet_proof"), "--format", "json")
	if code == exitBadInput {
		t.Fatalf("exit 2: %s", stderr)
	}
	var doc struct {
		Verdicts  []struct{ Name string }
		CrossRank *struct {
			Rows []struct {
				Rank    int64
				Outlier bool
			} `json:"ranks"`
			Outliers []int64
			Headline string
		} `json:"cross_rank"`
	}
	decodeJSON(t, out, &doc)
	if len(doc.Verdicts) != 5 {
		t.Errorf("%d verdicts, want 5 (ddp rank 0 and 1, gpu, no_gpu, oom_escape)", len(doc.Verdicts))
	}
	if cr := doc.CrossRank; cr == nil || len(cr.Rows) != 2 || len(cr.Outliers) != 0 || !strings.Contains(cr.Headline, "2 ranks alike") {
		t.Errorf("cross-rank view %+v, want the DDP run's two ranks, alike", cr)
	}
	if n := strings.Count(stderr, "does not read:"); n != 1 || strings.Count(stderr, "skipping") != 1 {
		t.Errorf("skipped files in %d lines:\n%s", n, stderr)
	}
}

// One run's files saved by hand with generic names (trace.json.gz,
// memory_timeline.json.gz, memory_timeline.raw.json.gz, stats_steps.jsonl,
// snapshot.pickle) are one run: one verdict, no UNKNOWN beside it.
func TestHandSavedRunIsOneVerdict(t *testing.T) {
	src := memtest.Testdata("gpu", "leak_hook_every_step")
	dir := t.TempDir()
	for name, from := range map[string]string{
		"trace.json.gz": "trace.json.gz", "memory_timeline.raw.json.gz": "memory_timeline.raw.json.gz",
		"memory_timeline.json.gz": "memory_timeline.raw.json.gz", "stats_steps.jsonl": "stats_steps.jsonl", "snapshot.pickle": "snapshot.pickle",
	} {
		data, err := os.ReadFile(filepath.Join(src, from))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, stderr, code := torchmem(t, "check", dir, "--format", "json")
	if code != exitFindings {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var doc struct {
		Verdicts []struct {
			Sources []string
			Leak    struct{ Verdict string }
		}
	}
	decodeJSON(t, out, &doc)
	if len(doc.Verdicts) != 1 || len(doc.Verdicts[0].Sources) != 5 || doc.Verdicts[0].Leak.Verdict != "leak" {
		t.Errorf("verdicts %+v, want one leaking run of 5 files", doc.Verdicts)
	}
}
