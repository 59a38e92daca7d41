package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/memtimeline/memtest"
)

// Older inputs print what they record and say "not recorded" for the rest:
// never an unset setting or a zero as if it had been read.
func TestOlderInputsSayWhatIsNotRecorded(t *testing.T) {
	for _, c := range []struct {
		args       []string
		code       int
		want, none []string
	}{
		{[]string{"snapshot", filepath.Join(snapshotTestdata, "older_schema.pickle.gz")}, exitOK,
			[]string{"Allocator settings: not recorded", "Requested", "not recorded", "Out-of-memory events: not recorded"},
			[]string{"PYTORCH_CUDA_ALLOC_CONF=(unset)", "expandable_segments: false", "max_split_size: 0 B", "Rounding waste     │ 0 B"}},
		{[]string{"ops", memtest.Testdata("public", "kineto_tb_plugin", "worker0.1623143089861.pt.trace.json.gz"), "--top", "5"}, exitOK,
			[]string{"peak reserved not recorded", "above the window's start", "Steps:    6 profiled (ProfilerStep#5..#10)", "aten::empty"},
			[]string{"peak reserved 0 B", "none annotated"}},
		{[]string{"leaks", memtest.Testdata("public", "kineto_tb_plugin", "worker0.1623143089861.pt.trace.json.gz")}, exitOK,
			[]string{"Verdict: CLEAN", "stays flat over steps 5..10", "record no Addr"},
			[]string{"LEAK:", "retain_graph"}},
		// The same schema (derived from a torch 2.11 leak): the step
		// series grows, the line is said not to be recorded.
		{[]string{"leaks", memtest.Testdata("gpu", "torch18_schema", "late_start_leak")}, exitFindings,
			[]string{"Verdict: LEAK, 4.00 MB per step", "grows 4.00 MB per step from step 6", "which line keeps them, is not recorded"},
			[]string{"Verdict: CLEAN", "retain_graph"}},
	} {
		t.Run(c.args[0], func(t *testing.T) {
			out, code, err := execute(t, c.args...)
			if code != c.code {
				t.Fatalf("exit %d, want %d: %v\n%s", code, c.code, err, out)
			}
			for _, s := range c.want {
				if !strings.Contains(out, s) {
					t.Errorf("output lacks %q:\n%s", s, out)
				}
			}
			for _, s := range c.none {
				if strings.Contains(out, s) {
					t.Errorf("output has %q:\n%s", s, out)
				}
			}
		})
	}
}
