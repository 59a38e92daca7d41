package examples

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestPythonSnippet runs the snippet's Python tests (examples/tests:
// LeakWatch on every steps log in testdata, TorchMemProfile on the CPU, the
// alarms, TORCHMEM_NOTIFY, the lazy framework imports) with a Python that
// has torch: $PYTHON, else Debian's /usr/bin/python3 (apt-get install
// python3-torch: torch 1.13 for the CPU), else python3 on PATH. Without
// one it skips on a developer's machine and fails under CI=true, where
// .ci/run installs python3-torch.
func TestPythonSnippet(t *testing.T) {
	py := pythonWithTorch(t)
	trackPythonInputs(t)
	cmd := exec.CommandContext(t.Context(), py, "-m", "unittest", "discover", "-s", "tests", "-v")
	// The tests set the TORCHMEM_* switches they test; the caller's must not leak in.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TORCHMEM") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	figures := filepath.Join(t.TempDir(), "figures.jsonl")
	cmd.Env = append(cmd.Env, "PYTHONDONTWRITEBYTECODE=1", "LEAKWATCH_FIGURES="+figures)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil {
		t.Fatalf("%s -m unittest discover -s examples/tests: %v\n%s", py, err, out.String())
	}
	// unittest exits 0 on "Ran 0 tests" too: a test run that tested nothing fails here.
	if !strings.Contains(out.String(), "\nOK") || strings.Contains(out.String(), "Ran 0 tests") {
		t.Fatalf("the Python tests did not run:\n%s", out.String())
	}
	if testing.Verbose() {
		t.Log(out.String())
	}
	b, err := os.ReadFile(figures)
	if err != nil {
		t.Fatalf("the Python tests wrote no figures for the Go model: %v", err)
	}
	t.Run("LeakWatchMatchesGoModel", func(t *testing.T) { leakWatchMatchesGoModel(t, b) })
}

func pythonWithTorch(t *testing.T) string {
	t.Helper()
	var tried []string
	for _, py := range []string{os.Getenv("PYTHON"), "/usr/bin/python3", "python3"} {
		if py == "" {
			continue
		}
		tried = append(tried, py)
		if b, err := exec.Command(py, "-c", "import torch").CombinedOutput(); err == nil {
			return py
		} else if testing.Verbose() {
			t.Logf("%s: %v %s", py, err, bytes.TrimSpace(b))
		}
	}
	msg := "no Python with torch (tried " + strings.Join(tried, ", ") + "): apt-get install python3-torch"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg + " (.ci/run does; under CI this test fails rather than skip)")
	}
	t.Skip(msg)
	return ""
}

// trackPythonInputs opens what the Python tests read, so that go test's
// result cache (which sees only this process's opens) reruns the test
// when the snippet, its tests or a steps log in testdata changes.
func trackPythonInputs(t *testing.T) {
	t.Helper()
	walk := func(root string, keep func(string) bool) {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if p != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "__pycache__") {
					return filepath.SkipDir
				}
				return nil
			}
			if !keep(d.Name()) {
				return nil
			}
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			return f.Close()
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	walk(".", func(name string) bool { return strings.HasSuffix(name, ".py") })
	walk(filepath.Join("..", "testdata"), func(name string) bool {
		return strings.HasSuffix(name, ".jsonl") || strings.HasSuffix(name, "truth.json")
	})
}
