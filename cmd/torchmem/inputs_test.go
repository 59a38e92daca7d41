package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/cmd/internal/report/chart/browsertest"
	"github.com/torchmem/torchmem/memtimeline/memtest"
)

// Every command accepts the snippet's directory with unrelated JSON in
// it: it picks the kinds it reads, warns once per file it skips, and
// reports each input it read.
func TestEveryCommandReadsTheSnippetDirectory(t *testing.T) {
	t.Setenv("COLUMNS", "400") // content, not layout: wide enough that no line wraps
	dir := memtest.RunDir(t)
	cases := []struct {
		args []string
		// inputs: what the output must mention
		want []string
		code int
	}{
		{[]string{"analyze"}, []string{"vm_rank0_step5.pt.trace.json.gz (trace)", "vm_rank0_step10.pt.trace.json.gz (trace)", "vm_rank0.snapshot.pickle (snapshot)", "vm_rank0.steps.jsonl (steps)"}, -1},
		{[]string{"check"}, []string{"in 4 inputs"}, -1},
		{[]string{"ops"}, []string{"Trace:    " + filepath.Join(dir, "vm_rank0_step10.pt.trace.json.gz"), "Trace:    " + filepath.Join(dir, "vm_rank0_step5.pt.trace.json.gz")}, 0},
		{[]string{"stacks"}, []string{filepath.Join(dir, "vm_rank0_step10.pt.trace.json.gz"), filepath.Join(dir, "vm_rank0_step5.pt.trace.json.gz")}, 0},
		{[]string{"leaks"}, []string{"vm_rank0_step10.pt.trace.json.gz", "vm_rank0_step5.pt.trace.json.gz", "vm_rank0.snapshot.pickle"}, -1},
		{[]string{"snapshot"}, []string{"Allocator snapshot " + filepath.Join(dir, "vm_rank0.snapshot.pickle")}, 0},
		{[]string{"steps"}, []string{"vm_rank0.steps.jsonl"}, -1},
		{[]string{"frag"}, []string{"vm_rank0_step10.pt.trace.json.gz", "vm_rank0_step5.pt.trace.json.gz", "vm_rank0.snapshot.pickle"}, -1},
	}
	for _, c := range cases {
		t.Run(c.args[0], func(t *testing.T) {
			out, errOut, code := torchmem(t, append(c.args, dir)...)
			if code == exitBadInput || (c.code >= 0 && code != c.code) {
				t.Fatalf("exit %d, stderr %q", code, errOut)
			}
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			// The files torchmem does not read, named in one line.
			if n := strings.Count(errOut, "does not read:"); n != 1 || !strings.Contains(errOut, filepath.Join(dir, "config.json")+", "+filepath.Join(dir, "truth.json")) {
				t.Errorf("%d lines for the files skipped: %q", n, errOut)
			}
		})
	}
	// smi: no nvidia-smi log there: bad input, said plainly.
	refused(t, dir+": no nvidia-smi log or nvidia-smi per-process log (--query-compute-apps) in this directory", "smi", dir)
	// diff pairs by kind and rank: traces with traces, snapshots with snapshots.
	out, errOut, code := torchmem(t, "diff", dir, dir, "--format", "json")
	if code != exitOK || strings.Count(out, `"head_leak_verdict"`) != 2 || !strings.Contains(out, `"inputs"`) {
		t.Errorf("diff DIR DIR: exit %d, stderr %q\n%s", code, errOut, out)
	}
}

// `diff DIR DIR` on per-rank directories compares rank with rank: the
// leaking rank is not blurred into the clean one.
func TestDiffPairsRanks(t *testing.T) {
	t.Setenv("COLUMNS", "400") // content, not layout: wide enough that no line wraps
	base := memtest.Testdata("gpu", "ddp_one_rank_leaks")
	out, errOut, code := torchmem(t, "diff", base, base, "--format", "json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, r := range []string{"rank0", "rank1"} {
		if !strings.Contains(out, filepath.Join(base, r, "trace.json.gz")) {
			t.Errorf("no pair for %s:\n%s", r, out)
		}
	}
	// One file against another: paired whatever their ranks; rank 1 leaks
	// where rank 0 does not, so the leak gate fails.
	out, _, code = torchmem(t, "diff", filepath.Join(base, "rank0", "trace.json.gz"), filepath.Join(base, "rank1", "trace.json.gz"))
	if code != exitFindings || !strings.Contains(out, "rank0/trace.json.gz -> ") {
		t.Errorf("exit %d\n%s", code, out)
	}
}

// "-" reads stdin, gzipped or not, for every command that reads a trace.
func TestStdin(t *testing.T) {
	gz, err := os.ReadFile(memtest.Testdata("gpu", "leak_retain_graph", "trace.json.gz"))
	if err != nil {
		t.Fatal(err)
	}
	saved := stdin
	defer func() { stdin = saved }()
	for _, args := range [][]string{{"analyze", "-"}, {"ops", "-"}, {"stacks", "-"}, {"leaks", "-"}, {"frag", "-"}, {"check", "-"}} {
		stdin = bytes.NewReader(gz)
		out, errOut, code := torchmem(t, args...)
		if code == exitBadInput || out == "" {
			t.Errorf("%v: exit %d, stderr %q", args, code, errOut)
		}
	}
	stdin = bytes.NewReader(nil)
	refused(t, "stdin: file is empty", "ops", "-")
}

// TestMain lets a test run the command line as a process of its own (the
// test binary with TORCHMEM_TEST_MAIN set), to feed it a real pipe.
func TestMain(m *testing.M) {
	if args := os.Getenv("TORCHMEM_TEST_MAIN"); args != "" {
		os.Exit(run(strings.Split(args, "\x1f"), os.Stdout, os.Stderr))
	}
	code := m.Run()
	browsertest.Close() // the browser the report's browser tests share
	os.Exit(code)
}

// A real pipe on the process's stdin, named "-" or /dev/stdin: read once,
// gzip recognized, nothing reopened.
func TestStdinPipeProcess(t *testing.T) {
	gz, err := os.ReadFile(memtest.Testdata("gpu", "leak_retain_graph", "trace.json.gz"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("/dev/stdin"); err != nil {
		t.Skip("no /dev/stdin here")
	}
	for _, name := range []string{"-", "/dev/stdin"} {
		for _, cmd := range []string{"analyze", "ops", "leaks"} {
			c := exec.Command(os.Args[0], "-test.run=^$")
			c.Env = append(os.Environ(), "TORCHMEM_TEST_MAIN="+cmd+"\x1f"+name)
			c.Stdin = bytes.NewReader(gz) // os/exec feeds it through a pipe
			var out, errb bytes.Buffer
			c.Stdout, c.Stderr = &out, &errb
			err := c.Run()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code == exitBadInput || !strings.Contains(out.String(), "aten::") && !strings.Contains(out.String(), "6.00 MB per step") {
				t.Errorf("%s %s: exit %d, stderr %q\n%.300s", cmd, name, code, errb.String(), out.String())
			}
		}
	}
}
