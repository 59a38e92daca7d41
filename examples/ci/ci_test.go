// Package ci holds the GitHub Actions examples: a workflow that gates on
// the rules (github-actions-torchmem.yml), a composite action that diffs a
// pull request's GPU memory against its base branch (action/), and a
// workflow that uses it. This test runs the action's script the way the
// runner does, with a fake GITHUB_STEP_SUMMARY and GITHUB_OUTPUT, on real
// recordings, and checks the YAML.
package ci

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"

	"github.com/torchmem/torchmem/internal/gobin"
)

func testdata(elem ...string) string {
	return filepath.Join(append([]string{"..", "..", "testdata", "gpu"}, elem...)...)
}

// The action's script on the recorded diff pair: a pull request that adds
// a leak, one that does not, one whose traces are missing. The script
// itself always exits 0; the status it records is what the gate step
// fails on; the summary is appended to, with the Mermaid chart.
func TestActionScript(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	bin := gobin.Torchmem(t) // the binary the scripts call
	for _, tc := range []struct {
		name, base, head, failIf string
		status                   string
		want                     []string
	}{
		{"new leak", testdata("diff_pair", "base"), testdata("diff_pair", "head_leak"), "", "1",
			[]string{"❌ **torchmem diff: LEAK (new in HEAD)", "```mermaid", "xychart-beta", "diff\\_train.py(35)"}},
		{"no leak, within budget", testdata("diff_pair", "base"), testdata("diff_pair", "head"), "peak_allocated>+50%\n\n", "0",
			[]string{"✅ **torchmem diff:", "```mermaid", "within budget"}},
		{"over budget", testdata("diff_pair", "base"), testdata("diff_pair", "head"), "  peak_reserved>+0%  ", "1",
			[]string{"❌ **torchmem diff: OVER BUDGET: peak\\_reserved"}},
		{"base missing", filepath.Join(t.TempDir(), "nothing"), testdata("diff_pair", "head"), "", "2",
			[]string{"could not compare the runs (exit 2)", "    torchmem: the base traces are not there"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			summary, output, report := filepath.Join(dir, "summary.md"), filepath.Join(dir, "output"), filepath.Join(dir, "r.html")
			os.WriteFile(summary, []byte("earlier step's summary\n"), 0o644)
			cmd := exec.Command("bash", filepath.Join("action", "torchmem-diff.sh"))
			cmd.Env = append(os.Environ(), "TORCHMEM="+bin, "TORCHMEM_BASE="+tc.base, "TORCHMEM_HEAD="+tc.head,
				"TORCHMEM_FAIL_IF="+tc.failIf, "TORCHMEM_REPORT="+report, "GITHUB_STEP_SUMMARY="+summary, "GITHUB_OUTPUT="+output)
			var log bytes.Buffer
			cmd.Stdout, cmd.Stderr = &log, &log
			if err := cmd.Run(); err != nil {
				t.Fatalf("the script failed (%v): the gate step should fail, not this one\n%s", err, log.String())
			}
			md, _ := os.ReadFile(summary)
			outs, _ := os.ReadFile(output)
			if !strings.HasPrefix(string(md), "earlier step's summary\n## torchmem: GPU memory, base vs head") {
				t.Errorf("the summary was not appended to:\n%s", md)
			}
			status := ""
			for _, l := range strings.Split(string(outs), "\n") {
				if v, ok := strings.CutPrefix(l, "status="); ok {
					status = v
				}
			}
			if status != tc.status {
				t.Errorf("status %q, want %s\n%s", status, tc.status, log.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(string(md), w) {
					t.Errorf("the summary lacks %q:\n%s", w, md)
				}
			}
			html, err := os.ReadFile(report)
			if wantReport := tc.status != "2"; wantReport != (err == nil && bytes.Contains(html, []byte("<html"))) || wantReport != strings.Contains(string(outs), "report="+report) {
				t.Errorf("report written %v (%v), output %q", err == nil, err, outs)
			}
		})
	}
}

type step struct {
	Name  string            `yaml:"name"`
	ID    string            `yaml:"id"`
	If    string            `yaml:"if"`
	Uses  string            `yaml:"uses"`
	Shell string            `yaml:"shell"`
	Run   string            `yaml:"run"`
	Env   map[string]string `yaml:"env"`
	With  map[string]string `yaml:"with"`
}

// The action is a composite action whose run steps all name their shell
// (GitHub requires it), whose inputs reach the scripts through env only,
// that runs the script tested above, uploads the report whatever happened,
// and whose one step that can fail on the gate is its last.
func TestActionYAML(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("action", "action.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var a struct {
		Name   string                       `yaml:"name"`
		Inputs map[string]map[string]any    `yaml:"inputs"`
		Output map[string]map[string]string `yaml:"outputs"`
		Runs   struct {
			Using string `yaml:"using"`
			Steps []step `yaml:"steps"`
		} `yaml:"runs"`
	}
	if err := yaml.Unmarshal(b, &a); err != nil {
		t.Fatal(err)
	}
	if a.Runs.Using != "composite" || len(a.Runs.Steps) < 3 {
		t.Fatalf("not a composite action: %+v", a.Runs)
	}
	for _, in := range []string{"base", "head", "base-artifact", "rules", "fail-if"} {
		if a.Inputs[in] == nil {
			t.Errorf("no input %q", in)
		}
	}
	var diffStep, upload *step
	for i := range a.Runs.Steps {
		s := &a.Runs.Steps[i]
		if s.Run != "" && s.Shell != "bash" {
			t.Errorf("step %q: a composite run step needs shell: bash", s.Name)
		}
		if strings.Contains(s.Run, "${{") {
			t.Errorf("step %q splices an expression into its script; pass it through env", s.Name)
		}
		if strings.Contains(s.Run, "torchmem-diff.sh") {
			diffStep = s
		}
		if strings.HasPrefix(s.Uses, "actions/upload-artifact@") {
			upload = s
		}
	}
	if diffStep == nil || diffStep.ID != "diff" || !strings.Contains(diffStep.Run, "$GITHUB_ACTION_PATH/torchmem-diff.sh") {
		t.Errorf("no step runs the script from the action's directory: %+v", diffStep)
	}
	for _, s := range a.Runs.Steps {
		if strings.HasPrefix(s.Uses, "actions/download-artifact@") && !strings.Contains(s.With["github-token"], "inputs.base-run-id != ''") {
			t.Errorf("download-artifact gets a token without a run id (it then looks for run NaN): %v", s.With)
		}
	}
	if upload == nil || !strings.HasPrefix(upload.If, "always()") || !strings.Contains(upload.With["path"], "steps.diff.outputs.report") {
		t.Errorf("the report is not uploaded whatever happened: %+v", upload)
	}
	gate := a.Runs.Steps[len(a.Runs.Steps)-1]
	if gate.Env["STATUS"] != "${{ steps.diff.outputs.status }}" || !strings.Contains(gate.Run, "exit 1") || gate.If != "" {
		t.Errorf("the last step is not the gate on the recorded status: %+v", gate)
	}
}

// With no torchmem on PATH the action builds one from its own checkout
// (torchmem is not published: no pip install of a name PyPI does not
// have): its build step, run as the runner runs it, leaves a working
// torchmem in a directory it adds to GITHUB_PATH.
func TestActionBuildsFromSource(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	b, err := os.ReadFile(filepath.Join("action", "action.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var a struct {
		Inputs map[string]map[string]any `yaml:"inputs"`
		Runs   struct {
			Steps []step `yaml:"steps"`
		} `yaml:"runs"`
	}
	if err := yaml.Unmarshal(b, &a); err != nil {
		t.Fatal(err)
	}
	if d := a.Inputs["version"]["default"]; d != "source" {
		t.Errorf("input version defaults to %v, want source (build from the action's checkout)", d)
	}
	var build *step
	for i, s := range a.Runs.Steps {
		if strings.Contains(s.Run, "pip install") {
			t.Errorf("step %q pip installs torchmem, which is not on PyPI yet", s.Name)
		}
		if strings.Contains(s.Run, "go build") {
			build = &a.Runs.Steps[i]
		}
	}
	if build == nil {
		t.Fatal("no step builds torchmem")
	}
	actionPath, err := filepath.Abs("action")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ghPath := filepath.Join(dir, "github_path")
	cmd := exec.Command("bash", "-e", "-c", build.Run)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PATH="+filepath.Join(runtime.GOROOT(), "bin")+string(os.PathListSeparator)+os.Getenv("PATH"),
		"VERSION="+a.Inputs["version"]["default"].(string), "GITHUB_ACTION_PATH="+actionPath, "RUNNER_TEMP="+dir, "GITHUB_PATH="+ghPath)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the build step failed: %v\n%s", err, out)
	}
	p, _ := os.ReadFile(ghPath)
	binDir := strings.TrimSpace(string(p))
	v, err := exec.Command(filepath.Join(binDir, "torchmem"), "--version").CombinedOutput()
	if err != nil || !strings.Contains(string(v), "torchmem") {
		t.Errorf("the built torchmem in %q (GITHUB_PATH) does not run: %v %s", binDir, err, v)
	}
}

// The workflows pass directories (the snippet's output) to torchmem, never
// globs of *.json: a glob names every JSON file there (memory_stats.json,
// key_averages.json), each one then a named input that must be good.
func TestWorkflowsPassDirectories(t *testing.T) {
	for _, path := range []string{"github-actions-torchmem.yml", "github-actions-pr-diff.yml"} {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var wf struct {
			Jobs map[string]struct {
				Steps []step `yaml:"steps"`
			} `yaml:"jobs"`
		}
		if err := yaml.Unmarshal(b, &wf); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		for _, j := range wf.Jobs {
			for _, s := range j.Steps {
				if strings.Contains(s.Run, "torchmem") && (strings.Contains(s.Run, "*.json") || strings.Contains(s.Run, "*.pt.trace")) {
					t.Errorf("%s: step %q globs files: %s", path, s.Name, s.Run)
				}
				if strings.HasSuffix(s.Uses, "examples/ci/action@main") && (s.With["base"] == "" || s.With["head"] == "" || strings.Contains(s.With["base"]+s.With["head"], "*")) {
					t.Errorf("%s: the action is not given two directories: %v", path, s.With)
				}
			}
		}
	}
}
