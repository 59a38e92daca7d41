package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/memtimeline/memtest"
)

func fragOutput(t *testing.T, name string, args ...string) (string, int) {
	t.Helper()
	out, errOut, code := torchmemShared(t, append([]string{"frag", realTrace(name)}, args...)...)
	if errOut != "" {
		t.Errorf("stderr: %s", errOut)
	}
	return strings.ReplaceAll(out, filepath.ToSlash(realTrace(name)), "TRACE"), code
}

func TestFragGoldenTableAndJSON(t *testing.T) {
	t.Parallel() // see torchmem: which tests may run side by side
	// A flood of 4 KB blocks with no retry and no OOM: the figures and
	// the small-alloc-flood warning, but it cost nothing (exit 0).
	out, code := fragOutput(t, "frag_small_allocs")
	if code != exitOK || !strings.Contains(out, "Verdict: OK") || !strings.Contains(out, "No cost: ") {
		t.Errorf("flood at no cost: exit %d, want 0", code)
	}
	checkGolden(t, "testdata/cmd/frag_frag_small_allocs.txt", out)
	out, code = fragOutput(t, "frag_small_allocs", "--format", "json")
	if code != exitOK {
		t.Errorf("json: exit %d, want 0", code)
	}
	checkGolden(t, "testdata/cmd/frag_frag_small_allocs.json", out)
}

// The JSON keeps the shape scripts rely on, with exact integers.
func TestFragJSONShape(t *testing.T) {
	out, _ := fragOutput(t, "frag_small_allocs", "--format", "json", "--top", "2")
	var doc struct {
		Verdict     string `json:"verdict"`
		SmallAllocs struct {
			MaxBytes int64            `json:"max_bytes"`
			Count    int64            `json:"count"`
			PerStep  float64          `json:"per_step"`
			Fraction float64          `json:"fraction"`
			TopSites []map[string]any `json:"top_sites"`
		} `json:"small_allocs"`
		Histogram []struct {
			Label string `json:"label"`
			Count int64  `json:"count"`
			Bytes int64  `json:"bytes"`
		} `json:"histogram"`
		Steps        []map[string]any `json:"steps"`
		SegmentCalls struct {
			CudaMalloc int64 `json:"cuda_malloc_calls"`
			CudaFree   int64 `json:"cuda_free_calls"`
		} `json:"segment_calls"`
	}
	decodeJSON(t, onlyInput(t, out), &doc)
	sa := doc.SmallAllocs
	if doc.Verdict != "ok" || sa.MaxBytes != 4096 || sa.Count != 13204 || sa.PerStep != 3301 || sa.Fraction < 0.98 || len(sa.TopSites) != 2 {
		t.Errorf("small_allocs %+v", sa)
	}
	if len(doc.Histogram) != 6 || doc.Histogram[1].Label != "<= 4 KiB" || doc.Histogram[1].Count != 12000 || doc.Histogram[1].Bytes != 12000*4096 {
		t.Errorf("histogram %+v", doc.Histogram)
	}
	if len(doc.Steps) != 4 || doc.SegmentCalls.CudaMalloc != 16 || doc.SegmentCalls.CudaFree != 6 {
		t.Errorf("%d steps, segment calls %+v", len(doc.Steps), doc.SegmentCalls)
	}
}

func TestFragExitCodes(t *testing.T) {
	t.Parallel() // see torchmem: which tests may run side by side
	for _, name := range []string{"resnet_train_clean", "big_transformer", "compiled_model", "leak_module_cache", "leak_eval_no_grad"} {
		out, code := fragOutput(t, name)
		if code != exitOK || !strings.Contains(out, "Verdict: OK") {
			t.Errorf("%s: exit %d\n%s", name, code, out)
		}
	}
	out, code := fragOutput(t, "no_memory")
	if code != exitOK || !strings.Contains(out, "UNKNOWN") || !strings.Contains(out, "profile_memory=True") {
		t.Errorf("no memory: exit %d\n%s", code, out)
	}
	out, code = fragOutput(t, "frag_small_allocs", "--format", "markdown")
	if code != exitOK || !strings.Contains(out, "**Verdict: ok**") || !strings.Contains(out, "| &lt;= 4 KiB | small | 12000 |") {
		t.Errorf("markdown: exit %d\n%s", code, out)
	}
	// Retries are a cost: the alloc_retry run's trace (a cap; frag judges
	// each file on its own) saw 8 of its 11 retries in its window.
	out, _, code = torchmem(t, "frag", memtest.GlobOne(t, memtest.Testdata("gpu", "alloc_retry"), "*.pt.trace.json.gz"))
	if code != exitFindings || !strings.Contains(out, "Verdict: FRAGMENTED") || !strings.Contains(out, "Cost: 8 cudaMalloc retries in the profiled window") {
		t.Errorf("retries: exit %d\n%s", code, out)
	}
	// Thresholds are flags: above the planted numbers the verdict is ok.
	if _, code := fragOutput(t, "frag_small_allocs", "--min-small-per-step", "4000", "--min-churn-per-step", "5", "--min-gap-bytes", "1073741824"); code != exitOK {
		t.Errorf("raised thresholds: exit %d", code)
	}
}

func TestFragBadInputAndSnapshots(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte) string { return memtest.WriteFile(t, dir, name, data) }
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"missing", []string{filepath.Join(dir, "nope.json")}, "no such file"},
		{"empty", []string{write("empty.json", nil)}, "empty"},
		{"not a trace", []string{write("x.json", []byte(`{"hello": 1}`))}, "not a Chrome trace"},
		{"pickle that is not a snapshot", []string{write("s.pickle", []byte("\x80\x04K\x01."))}, "not an allocator snapshot"},
		{"bad format", []string{realTrace("no_memory"), "--format", "csv"}, "--format"},
		{"bad size", []string{realTrace("no_memory"), "--small-max-bytes", "0"}, "--small-max-bytes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, errOut, code := torchmem(t, append([]string{"frag"}, c.args...)...)
			if code != exitBadInput || out != "" || !strings.Contains(errOut, c.want) || strings.Contains(errOut, "panic") {
				t.Errorf("exit %d, stdout %q, stderr %q (want %q)", code, out, errOut, c.want)
			}
		})
	}
}

// From a snapshot: the figures for frag_small_allocs, and a verdict
// from the free space split inside used segments.
func TestFragSnapshot(t *testing.T) {
	out, _, code := torchmemShared(t, "frag", filepath.Join(snapshotTestdata, "frag_small_allocs.pickle.gz"), "--format", "json")
	if code != exitOK {
		t.Errorf("exit %d (split memory, no retry and no OOM: no cost)", code)
	}
	var d struct {
		Verdict            string            `json:"verdict"`
		Reserved           int64             `json:"reserved_bytes"`
		Allocated          int64             `json:"allocated_bytes"`
		InactiveSplitBytes int64             `json:"inactive_split_bytes"`
		Largest            int64             `json:"largest_free_block_bytes"`
		Segments           []json.RawMessage `json:"segments"`
	}
	decodeJSON(t, onlyInput(t, out), &d)
	if d.Verdict != "ok" || d.Reserved != 534773760 || d.Allocated != 272588288 || d.InactiveSplitBytes == 0 || d.Largest == 0 || len(d.Segments) != 34 {
		t.Errorf("snapshot frag %+v", d)
	}
	out, _, code = torchmem(t, "frag", filepath.Join(snapshotTestdata, "leak_module_cache.pickle.gz"))
	if code != exitOK || !strings.HasPrefix(out, "Verdict: OK") {
		t.Errorf("leak snapshot: exit %d\n%s", code, out)
	}
}

// A trace cut short (the profiler died mid-export) still gets a verdict
// from what was read, with the truncation warned about.
func TestFragTruncatedTrace(t *testing.T) {
	gz, err := os.ReadFile(realTrace("frag_small_allocs"))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "cut.json.gz")
	if err := os.WriteFile(p, gz[:len(gz)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := torchmem(t, "frag", p)
	if code == exitBadInput || !strings.Contains(errOut, "truncated") || !strings.Contains(out, "Verdict:") {
		t.Errorf("exit %d stderr %q\n%s", code, errOut, out)
	}
}
