package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/memtimeline/memtest"
	"github.com/torchmem/torchmem/memtimeline/snapshot"
)

var snapshotTestdata = memtest.Testdata("snapshots")

// execute runs the torchmem command line and returns stdout and the exit
// code run() would give.
func execute(t *testing.T, args ...string) (string, int, error) {
	t.Helper()
	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.Execute()
	code := exitOK
	if err != nil {
		code = exitBadInput
		var ee *exitError
		if errors.As(err, &ee) {
			code = ee.code
		}
	}
	return out.String(), code, err
}

// oracleFigures reads the CPython-computed figures for a real snapshot.
func oracleFigures(t *testing.T, name string) map[string]any {
	t.Helper()
	var o map[string]map[string]any
	memtest.ReadJSON(t, filepath.Join(snapshotTestdata, "oracle.json"), &o)
	return o[name]
}

func TestSnapshotCommandJSON(t *testing.T) {
	path := filepath.Join(snapshotTestdata, "leak_module_cache.pickle.gz")
	out, code, err := execute(t, "snapshot", path, "--format", "json")
	if code != exitOK {
		t.Fatalf("exit %d: %v\n%s", code, err, out)
	}
	var doc struct {
		File  string `json:"file"`
		Stats struct {
			Reserved  int64 `json:"reserved_bytes"`
			Allocated int64 `json:"allocated_bytes"`
			Split     int64 `json:"inactive_split_bytes"`
			Segments  int   `json:"segments"`
		} `json:"stats"`
		Segments []struct {
			TotalSize int64  `json:"total_size"`
			Bar       string `json:"bar"`
		} `json:"segments"`
		Leaks []struct {
			Site  snapshot.Frame `json:"site"`
			Bytes int64          `json:"bytes"`
			Steps int            `json:"steps"`
		} `json:"leak_candidates"`
		Settings struct {
			MaxSplit int64 `json:"max_split_size"`
		} `json:"allocator_settings"`
	}
	decodeJSON(t, onlyInput(t, out), &doc)
	want := oracleFigures(t, "leak_module_cache")
	if doc.File != path || doc.Stats.Reserved != int64(want["reserved_bytes"].(float64)) ||
		doc.Stats.Allocated != int64(want["allocated_bytes"].(float64)) ||
		doc.Stats.Split != int64(want["inactive_split_bytes"].(float64)) ||
		doc.Stats.Segments != int(want["segments"].(float64)) {
		t.Errorf("stats %+v, oracle %v", doc.Stats, want)
	}
	if len(doc.Segments) != doc.Stats.Segments {
		t.Errorf("JSON lists %d of %d segments", len(doc.Segments), doc.Stats.Segments)
	}
	if len(doc.Leaks) == 0 || doc.Leaks[0].Site.Name != "forward" || doc.Settings.MaxSplit != -1 {
		t.Errorf("leaks %+v settings %+v", doc.Leaks, doc.Settings)
	}
}

func TestSnapshotCommandTable(t *testing.T) {
	path := filepath.Join(snapshotTestdata, "frag_small_allocs.pickle.gz")
	out, code, err := execute(t, "snapshot", path, "--top", "3", "--leaks", "1")
	if code != exitOK {
		t.Fatalf("exit %d: %v\n%s", code, err, out)
	}
	want := oracleFigures(t, "frag_small_allocs")
	reserved := int64(want["reserved_bytes"].(float64))
	for _, s := range []string{
		memtimeline.FormatBytes(reserved), // units as torch prints them
		"Inactive split", "Segment fill map", "... 31 smaller segments not shown",
		"Leak candidates", "gen_traces.py(", "more groups (--leaks 0 shows all)",
		"PYTORCH_CUDA_ALLOC_CONF=(unset)", "Out-of-memory events: none recorded",
	} {
		if !strings.Contains(out, s) {
			t.Errorf("output lacks %q:\n%s", s, out)
		}
	}
	bars := 0
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "[") {
			bars++
		}
	}
	if bars != 3 {
		t.Errorf("--top 3 printed %d segment lines", bars)
	}
}

func TestSnapshotCommandBadInput(t *testing.T) {
	dir := t.TempDir()
	notPickle := filepath.Join(dir, "trace.json")
	empty := filepath.Join(dir, "empty.pickle")
	cut := filepath.Join(dir, "cut.pickle")
	os.WriteFile(notPickle, []byte(`{"traceEvents": []}`), 0o644)
	os.WriteFile(empty, nil, 0o644)
	os.WriteFile(cut, []byte("\x80\x04\x95\x10\x00\x00\x00\x00\x00\x00\x00}\x94(\x8c"), 0o644)
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"snapshot", notPickle}, notPickle + ": this is a Kineto trace; snapshot reads an allocator snapshot"},
		{[]string{"snapshot", empty}, empty + ": file is empty"},
		{[]string{"snapshot", cut}, cut + ": truncated pickle"},
		{[]string{"snapshot", filepath.Join(dir, "missing.pickle")}, "no such file"},
		{[]string{"snapshot", cut, "--format", "csv"}, "unknown --format"},
		{[]string{"snapshot", cut, "--top", "-1"}, "--top -1: want 0 (all rows) or more"},
		{[]string{"snapshot", cut, "--leaks", "-1"}, "--top and --leaks must be >= 0"},
	}
	for _, c := range cases {
		_, code, err := execute(t, c.args...)
		if code != exitBadInput || err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: exit %d, error %v; want exit 2 and %q", c.args, code, err, c.want)
		}
	}
}

// TestSnapshotCommandGolden pins the whole table rendering for one real
// snapshot; run `go test ./cmd/torchmem -run Golden -update` after an
// intended change and review the diff.
func TestSnapshotCommandGolden(t *testing.T) {
	path := filepath.Join(snapshotTestdata, "leak_module_cache.pickle.gz")
	out, code, err := execute(t, "snapshot", path, "--top", "5")
	if code != exitOK {
		t.Fatalf("exit %d: %v", code, err)
	}
	golden := filepath.Join(snapshotTestdata, "leak_module_cache.snapshot.golden.txt")
	if *update {
		if err := os.WriteFile(golden, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if out != string(want) {
		t.Errorf("output differs from %s (run with -update if intended):\n%s", golden, out)
	}
}
