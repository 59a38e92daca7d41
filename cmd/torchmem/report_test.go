package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/memtimeline/memtest"
)

// hostileTrace has an operator, a Python frame and a thread named like
// markup: the report must show them as text.
const hostileTrace = `{"traceEvents": [
 {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
 {"ph": "X", "cat": "cpu_op", "name": "<img src=x onerror=alert(1)>", "pid": 1, "tid": 1, "ts": 10, "dur": 20},
 {"ph": "X", "cat": "python_function", "name": "</script><script>alert(2)</script>.py(1): f", "pid": 1, "tid": 1, "ts": 5, "dur": 50, "args": {"Python id": 1, "Python parent id": null}},
 {"ph": "i", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": 15, "args": {"Total Reserved": 2097152, "Total Allocated": 1048576, "Bytes": 1048576, "Device Id": 0, "Device Type": 1, "Addr": 4096}},
 {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "<b>thread</b>"}}
], "deviceProperties": [{"id": 0, "name": "<svg onload=alert(3)>", "totalGlobalMem": 1000000000}]}`

func TestReportEscapesUntrustedNames(t *testing.T) {
	dir := t.TempDir()
	trace := filepath.Join(dir, "hostile.json")
	os.WriteFile(trace, []byte(hostileTrace), 0o644)
	out := filepath.Join(dir, "r.html")
	if _, errOut, code := torchmem(t, "report", trace, "-o", out); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	page, _ := os.ReadFile(out)
	for _, raw := range []string{"<img src=x onerror=alert(1)>", "<script>alert(2)", "<svg onload=alert(3)>"} {
		if strings.Contains(string(page), raw) {
			t.Errorf("page contains raw %q", raw)
		}
	}
	if !strings.Contains(string(page), "&lt;img src=x onerror=alert(1)&gt;") {
		t.Error("the hostile operator name is not shown as escaped text")
	}
}

// The report must work offline: nothing in it may point at the network.
func TestReportLoadsNothingFromTheNetwork(t *testing.T) {
	out := filepath.Join(t.TempDir(), "r.html")
	if _, errOut, code := torchmem(t, "report", realTrace("leak_module_cache"), memtest.Testdata("snapshots", "leak_module_cache.pickle.gz"), "-o", out); code != exitFindings { // the leak fails the report like check
		t.Fatalf("exit %d: %s", code, errOut)
	}
	page, _ := os.ReadFile(out)
	s := string(page)
	if !strings.Contains(s, "Content-Security-Policy") || !strings.Contains(s, "default-src 'none'") {
		t.Error("no CSP forbidding network loads")
	}
	remote := regexp.MustCompile(`(?i)(src|href)\s*=\s*["']?(https?:)?//|url\(\s*["']?(https?:)?//|@import`)
	if m := remote.FindString(s); m != "" {
		t.Errorf("page refers to the network: %q", m)
	}
	for _, want := range []string{"Memory over time", "Leak verdict: leak", "gen_traces.py(143): forward", "torchmem-chart", "ProfilerStep#2 kept 4.00 MB (4.00 MB so far)"} {
		if !strings.Contains(s, want) {
			t.Errorf("page lacks %q", want)
		}
	}
}

func TestReportSizeOnLargestTrace(t *testing.T) {
	t.Parallel() // see torchmem: which tests may run side by side
	out := filepath.Join(t.TempDir(), "r.html")
	if _, errOut, code := torchmem(t, "report", realTrace("big_transformer"), "-o", out); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	st, _ := os.Stat(out)
	if st.Size() > 5<<20 {
		t.Errorf("report is %d bytes, over 5 MiB", st.Size())
	}
}

func TestReportNeedsOutput(t *testing.T) {
	refused(t, "-o", "report", realTrace("leak_module_cache"))
}

func TestAnalyzeWritesReportAndDiffWritesPage(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "a.html")
	torchmem(t, "analyze", realTrace("resnet_train_clean"), "-o", out)
	if st, err := os.Stat(out); err != nil || st.Size() < 100000 {
		t.Errorf("analyze -o: %v", err)
	}
	out = filepath.Join(dir, "d.html")
	torchmem(t, "diff", realTrace("compiled_model"), realTrace("leak_module_cache"), "-o", out)
	page, err := os.ReadFile(out)
	if err != nil || !strings.Contains(string(page), "aligned at the first profiled step") {
		t.Errorf("diff -o: %v", err)
	}
}

// report exits like check: 1 under a FAIL verdict (an error finding), 0
// under PASS, and says which on stdout.
func TestReportExitsLikeCheck(t *testing.T) {
	for _, c := range []struct {
		trace string
		code  int
		word  string
	}{{realTrace("leak_module_cache"), exitFindings, "FAIL"}, {realTrace("resnet_train_clean"), exitOK, "PASS"}} {
		out := filepath.Join(t.TempDir(), "r.html")
		stdout, errOut, code := torchmem(t, "report", c.trace, "-o", out)
		_, _, checkCode := torchmem(t, "check", c.trace)
		if code != c.code || code != checkCode || !strings.Contains(stdout, c.word) {
			t.Errorf("%s: exit %d (check %d), want %d\n%s%s", c.trace, code, checkCode, c.code, stdout, errOut)
		}
		if _, err := os.Stat(out); err != nil {
			t.Errorf("%s: report not written: %v", c.trace, err)
		}
	}
}
