package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/cmd/internal/report"
	"github.com/torchmem/torchmem/memtimeline/memtest"
)

func TestCheckGate(t *testing.T) {
	out, _, code := torchmem(t, "check", realTrace("leak_module_cache"))
	// A trace names the frame by its def line: said as one, never file:N
	// (which is a running line, as a snapshot gives it).
	if code != exitFindings || !strings.Contains(out, "FAIL") || !strings.Contains(out, "gen_traces.py, def line 143") || strings.Contains(out, "gen_traces.py:143") {
		t.Errorf("leaking run: exit %d\n%s", code, out)
	}
	out, _, code = torchmem(t, "check", realTrace("resnet_train_clean"))
	if code != exitOK || !strings.Contains(out, "PASS") {
		t.Errorf("clean run: exit %d\n%s", code, out)
	}
}

func TestCheckRulesFile(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "torchmem.yaml")
	// Demoting the leak rule to a warning lets the leaking run pass.
	os.WriteFile(cfg, []byte("rules:\n  memory.leak:\n    severity: warning\n"), 0o644)
	out, _, code := torchmem(t, "check", realTrace("leak_module_cache"), "--rules", cfg)
	if code != exitOK || !strings.Contains(out, "[WARNING] memory.leak") {
		t.Errorf("exit %d\n%s", code, out)
	}
	os.WriteFile(cfg, []byte("rules:\n  memory.leek:\n    disabled: true\n"), 0o644)
	refused(t, "unknown rule", "check", realTrace("leak_module_cache"), "--rules", cfg)
}

func TestCheckSARIFPutsTheLeakOnItsLine(t *testing.T) {
	out, _, code := torchmem(t, "check", realTrace("leak_module_cache"), "--format", "sarif")
	if code != exitFindings {
		t.Errorf("exit %d", code)
	}
	var log struct {
		Version string `json:"version"`
		Runs    []struct {
			Tool struct {
				Driver struct {
					Rules []struct {
						ID string `json:"id"`
					} `json:"rules"`
				} `json:"driver"`
			} `json:"tool"`
			Results []struct {
				RuleID    string `json:"ruleId"`
				Level     string `json:"level"`
				Locations []struct {
					PhysicalLocation struct {
						ArtifactLocation struct {
							URI string `json:"uri"`
						} `json:"artifactLocation"`
						Region struct {
							StartLine int `json:"startLine"`
						} `json:"region"`
					} `json:"physicalLocation"`
				} `json:"locations"`
			} `json:"results"`
		} `json:"runs"`
	}
	decodeJSON(t, out, &log)
	if log.Version != "2.1.0" || len(log.Runs) != 1 || len(log.Runs[0].Tool.Driver.Rules) == 0 {
		t.Fatalf("not SARIF 2.1.0: %s", out[:200])
	}
	found := false
	for _, r := range log.Runs[0].Results {
		if r.RuleID == "memory.leak" && r.Level == "error" {
			loc := r.Locations[0].PhysicalLocation
			found = loc.ArtifactLocation.URI == "gen_traces.py" && loc.Region.StartLine == 143
		}
	}
	if !found {
		t.Errorf("no error result at gen_traces.py:143\n%s", out)
	}
}

func TestCheckMarkdownAndJSON(t *testing.T) {
	out, _, _ := torchmem(t, "check", realTrace("leak_module_cache"), "--format", "markdown")
	lines := strings.Split(out, "\n")
	if !strings.Contains(lines[0], "FAIL") || !strings.Contains(out, "| Severity |") {
		t.Errorf("markdown:\n%s", out)
	}
	out, _, _ = torchmemShared(t, "check", realTrace("resnet_train_clean"), "--format", "json")
	var doc struct {
		Passed   bool              `json:"passed"`
		Findings []json.RawMessage `json:"findings"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || !doc.Passed {
		t.Errorf("json: %v %s", err, out)
	}
}

func TestCheckReadsLogsByContent(t *testing.T) {
	out, _, code := torchmem(t, "check", memtest.Testdata("smi", "nvidia_smi_leak.csv"))
	if code != exitFindings || !strings.Contains(out, "smi.leak") {
		t.Errorf("nvidia-smi log: exit %d\n%s", code, out)
	}
	out, _, code = torchmem(t, "check", memtest.Testdata("traces", "leak_module_cache", "stats_steps.jsonl"))
	if code != exitFindings || !strings.Contains(out, "steps.growth") {
		t.Errorf("step log: exit %d\n%s", code, out)
	}
}

func TestRulesList(t *testing.T) {
	out, _, code := torchmem(t, "rules", "--format", "json")
	var doc struct {
		SchemaVersion int `json:"schema_version"`
		Rules         []struct {
			ID        string  `json:"id"`
			Threshold float64 `json:"threshold"`
		} `json:"rules"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &doc) != nil || len(doc.Rules) < 8 || doc.SchemaVersion != 1 {
		t.Fatalf("exit %d: %s", code, out)
	}
}

// SARIF URIs are relative to --source-root (default: the git work tree of
// the current directory); a file outside it is named in the message and
// left out of locations.
func TestCheckSARIFSourceRoot(t *testing.T) {
	type result struct {
		RuleID    string                `json:"ruleId"`
		Message   struct{ Text string } `json:"message"`
		Locations []struct {
			PhysicalLocation struct {
				ArtifactLocation struct {
					URI       string `json:"uri"`
					URIBaseID string `json:"uriBaseId"`
				} `json:"artifactLocation"`
			} `json:"physicalLocation"`
		} `json:"locations"`
	}
	run := func(args ...string) (map[string]result, string) {
		out, errOut, code := torchmem(t, append([]string{"check", realTrace("leak_module_cache"), "--format", "sarif"}, args...)...)
		if code != exitFindings {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		var log struct {
			Runs []struct {
				Base    map[string]struct{ URI string } `json:"originalUriBaseIds"`
				Results []result                        `json:"results"`
			} `json:"runs"`
		}
		decodeJSON(t, out, &log)
		byRule := map[string]result{}
		for _, r := range log.Runs[0].Results {
			byRule[r.RuleID] = r
		}
		return byRule, log.Runs[0].Base["SRCROOT"].URI
	}
	// The repository root: the trace file (where a finding without a code
	// line points) is relative to it.
	rs, base := run("--source-root", filepath.Join("..", ".."))
	top := rs["memory.top-ops-share"]
	if len(top.Locations) != 1 || top.Locations[0].PhysicalLocation.ArtifactLocation.URI != "testdata/traces/leak_module_cache/trace.json.gz" ||
		top.Locations[0].PhysicalLocation.ArtifactLocation.URIBaseID != "SRCROOT" || !strings.HasPrefix(base, "file:///") {
		t.Errorf("default root %s: %+v", base, top)
	}
	// By default the root is the git work tree holding the current
	// directory (when the tests run in one).
	if _, err := os.Stat(filepath.Join("..", "..", ".git")); err == nil {
		want, _ := filepath.Abs(filepath.Join("..", ".."))
		if got := report.DefaultSourceRoot(); got != want {
			t.Errorf("default source root %s, want %s", got, want)
		}
	}
	// Outside --source-root: no location, the path in the message.
	other := t.TempDir()
	rs, _ = run("--source-root", other)
	top = rs["memory.top-ops-share"]
	if len(top.Locations) != 0 || !strings.Contains(top.Message.Text, "leak_module_cache/trace.json.gz") {
		t.Errorf("outside the root: %+v", top)
	}
	// The recorded frame is relative (gen_traces.py): kept as it is.
	if l := rs["memory.leak"].Locations; len(l) != 1 || l[0].PhysicalLocation.ArtifactLocation.URI != "gen_traces.py" {
		t.Errorf("leak location %+v", l)
	}
	refused(t, "--source-root", "check", realTrace("leak_module_cache"), "--format", "sarif", "--source-root", filepath.Join(other, "nope"))
}

// A recorded snapshot names its frames by absolute path on the recording
// machine: outside the source root, so the SARIF result keeps the path in
// its message and has no location code scanning could not match. (The root
// is an empty folder: the recording machine's path, /work/main/..., is
// inside a clone that happens to sit at /work/main.)
func TestCheckSARIFAbsolutePathOutsideRoot(t *testing.T) {
	snap := memtest.Testdata("gpu", "leak_hook_every_step", "snapshot.pickle")
	out, _, code := torchmem(t, "check", snap, "--format", "sarif", "--source-root", t.TempDir())
	if code != exitFindings {
		t.Fatalf("exit %d", code)
	}
	var log struct {
		Runs []struct {
			Results []struct {
				RuleID    string                `json:"ruleId"`
				Message   struct{ Text string } `json:"message"`
				Locations []json.RawMessage     `json:"locations"`
			} `json:"results"`
		} `json:"runs"`
	}
	decodeJSON(t, out, &log)
	found := false
	for _, r := range log.Runs[0].Results {
		if r.RuleID == "snapshot.leak" {
			found = true
			if len(r.Locations) != 0 || !strings.Contains(r.Message.Text, "/examples/record/leak_hook_every_step.py:35, outside the source root") {
				t.Errorf("%+v", r)
			}
		}
	}
	if !found {
		t.Errorf("no snapshot.leak result:\n%s", out)
	}
}

// The checklist follows the verdict in check's text and Markdown, in
// analyze and in the report: the recording without zero_grad fails that
// item and shows what else was verified.
func TestChecklistRendered(t *testing.T) {
	dir := memtest.Testdata("gpu", "no_zero_grad")
	out, _, _ := torchmem(t, "check", dir)
	if !strings.Contains(out, "== Checklist ==") || !strings.Contains(out, "[warn] Gradients reset between optimizer steps (zero_grad)") ||
		!strings.Contains(out, "[pass] No memory kept step over step (leak)") {
		t.Errorf("check text:\n%s", out)
	}
	md, _, _ := torchmem(t, "check", dir, "--format", "markdown")
	if !strings.Contains(md, "**Checklist**") || !strings.Contains(md, "| Gradients reset between optimizer steps (zero\\_grad) | ⚠️ warn |") {
		t.Errorf("check markdown:\n%s", md)
	}
	an, _, _ := torchmem(t, "analyze", dir)
	if i, j := strings.Index(an, "== Checklist =="), strings.Index(an, "== Findings =="); i < 0 || j < i {
		t.Errorf("analyze: checklist at %d, findings at %d", i, j)
	}
	page := filepath.Join(t.TempDir(), "r.html")
	torchmem(t, "report", dir, "-o", page)
	html, _ := os.ReadFile(page)
	if !strings.Contains(string(html), `<section class="checklist">`) || !strings.Contains(string(html), `<td class="check-warn">warn</td>`) {
		t.Error("report without the checklist section")
	}
}
