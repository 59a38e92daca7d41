package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/memtimeline/memtest"
)

// smi concludes what check concludes on the same nvidia-smi logs: the same
// exit code and the same leak verdict (leak, unknown when memory.used was
// still rising at the end, clean), on every recorded log alone and on each
// run's folder (GPU log and per-process log together).
func TestSMIExitIsTheEvaluations(t *testing.T) {
	var cases [][]string // each: the smi logs given to both commands
	add := func(files ...string) { cases = append(cases, files) }
	logs, _ := filepath.Glob(memtest.Testdata("smi", "*.csv*"))
	dirs := []string{memtest.Testdata("gpu", "nvidia_smi")}
	for _, p := range mustGlob(t, memtest.Testdata("smi", "per_process", "*")) {
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			dirs = append(dirs, p)
		} else if strings.Contains(p, ".csv") {
			logs = append(logs, p)
		}
	}
	for _, d := range dirs {
		in, _ := filepath.Glob(filepath.Join(d, "*.csv*"))
		logs = append(logs, in...)
		add(in...)
	}
	for _, l := range logs {
		add(l)
	}
	if len(cases) < 12 {
		t.Fatalf("%d cases: the smi logs moved", len(cases))
	}
	verdicts := map[string]int{}
	for _, files := range cases {
		name := strings.Join(files, " ")
		smiOut, _, code := torchmem(t, append([]string{"smi", "--format", "json"}, files...)...)
		checkOut, _, want := torchmem(t, append([]string{"check", "--format", "json"}, files...)...)
		if code != want {
			t.Errorf("%s: smi exits %d, check %d", name, code, want)
		}
		if _, _, table := torchmem(t, append([]string{"smi"}, files...)...); table != code {
			t.Errorf("%s: smi exits %d in a table, %d in JSON", name, table, code)
		}
		got, want2 := smiLeakVerdict(t, smiOut), checkLeakVerdict(t, checkOut)
		if got == "" {
			continue // a per-process log alone: smi judges no memory.used
		}
		verdicts[got]++
		if got != want2 {
			t.Errorf("%s: smi's leak verdict %q, check's %q", name, got, want2)
		}
	}
	for _, v := range []string{"leak", "unknown", "clean"} {
		if verdicts[v] == 0 {
			t.Errorf("no log judged %q (%v): the test compares less than it says", v, verdicts)
		}
	}
}

// The options are the Evaluation's too: growth that --min-growth-duration
// shortens into a leak fails smi as its finding does.
func TestSMIFlagsAreTheEvaluationsOptions(t *testing.T) {
	log := memtest.Testdata("smi", "per_process", "leak", "nvidia_smi.csv")
	out, _, code := torchmem(t, "smi", log)
	if code != exitOK || strings.Contains(out, "LEAK: ") {
		t.Fatalf("10s: exit %d, want 0 (still rising, too short)\n%s", code, out)
	}
	out, _, code = torchmem(t, "smi", "--min-growth-duration", "3s", log)
	if code != exitFindings || !strings.Contains(out, "LEAK: ") {
		t.Errorf("3s: exit %d, want 1 with the leak\n%s", code, out)
	}
}

// smiLeakVerdict is what smi's JSON says of memory.used's growth over
// every GPU log: "" when it holds none.
func smiLeakVerdict(t *testing.T, out string) string {
	t.Helper()
	var doc struct {
		Inputs []struct {
			GPUs []struct {
				Leaks        []json.RawMessage `json:"leaks"`
				StillGrowing json.RawMessage   `json:"still_growing"`
			} `json:"gpus"`
		} `json:"inputs"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("smi JSON: %v\n%s", err, out)
	}
	var seen []string
	for _, in := range doc.Inputs {
		for _, g := range in.GPUs {
			switch {
			case len(g.Leaks) > 0:
				seen = append(seen, "leak")
			case g.StillGrowing != nil:
				seen = append(seen, "unknown")
			default:
				seen = append(seen, "clean")
			}
		}
	}
	return worstLeakVerdict(seen)
}

// checkLeakVerdict is check's leak verdict over its runs.
func checkLeakVerdict(t *testing.T, out string) string {
	t.Helper()
	var doc struct {
		Verdicts []struct {
			Leak struct {
				Verdict string `json:"verdict"`
			} `json:"leak"`
		} `json:"verdicts"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("check JSON: %v\n%s", err, out)
	}
	var seen []string
	for _, v := range doc.Verdicts {
		seen = append(seen, v.Leak.Verdict)
	}
	return worstLeakVerdict(seen)
}

func worstLeakVerdict(vs []string) string {
	for _, v := range []string{"leak", "unknown", "clean"} {
		if slices.Contains(vs, v) {
			return v
		}
	}
	return ""
}

// A rules file's smi.leak threshold is the one the verdict, the finding
// and the exit code use, and it sets severity, not the verdict (as
// memory.leak's does): the recorded 64 MiB-per-step leak under a 100 GiB
// threshold is still LEAK in the verdict, its finding a warning, exit 0;
// a 1 MiB threshold finds no leak in the healthy recordings.
func TestSMILeakThresholdReachesTheVerdict(t *testing.T) {
	dir := t.TempDir()
	rulesFile := func(name, threshold string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("rules:\n  smi.leak:\n    threshold: "+threshold+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	leaky := memtest.Testdata("smi", "nvidia_smi_leak.csv")
	smiLeak := func(out string) (verdict string, severities []string) {
		var doc struct {
			Findings []struct {
				Rule     string `json:"rule"`
				Severity string `json:"severity"`
			} `json:"findings"`
		}
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatalf("check JSON: %v\n%s", err, out)
		}
		for _, f := range doc.Findings {
			if f.Rule == "smi.leak" {
				severities = append(severities, f.Severity)
			}
		}
		return checkLeakVerdict(t, out), severities
	}
	out, _, code := torchmem(t, "check", "--format", "json", leaky)
	if v, sev := smiLeak(out); code != exitFindings || v != "leak" || !slices.Equal(sev, []string{"error"}) {
		t.Fatalf("default threshold: exit %d, verdict %q, smi.leak findings %v; want 1, leak, [error]", code, v, sev)
	}
	out, _, code = torchmem(t, "check", "--format", "json", "--rules", rulesFile("high.yaml", "100GiB"), leaky)
	if v, sev := smiLeak(out); code != exitOK || v != "leak" || !slices.Equal(sev, []string{"warning"}) {
		t.Errorf("100 GiB threshold: exit %d, verdict %q, smi.leak findings %v; want 0, leak, [warning]", code, v, sev)
	}
	low := rulesFile("low.yaml", "1MiB")
	for _, healthy := range []string{memtest.Testdata("smi", "per_process", "healthy", "nvidia_smi.csv"), memtest.Testdata("gpu", "nvidia_smi", "nvidia_smi.csv")} {
		out, _, code := torchmem(t, "check", "--format", "json", "--rules", low, healthy)
		if v, sev := smiLeak(out); code != exitOK || v == "leak" || len(sev) > 0 {
			t.Errorf("%s at 1 MiB: exit %d, verdict %q, smi.leak findings %v; want no leak", healthy, code, v, sev)
		}
	}
}
