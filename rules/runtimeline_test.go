package rules

import (
	"path/filepath"
	"testing"

	"github.com/torchmem/torchmem/chrometrace"

	"github.com/torchmem/torchmem/memtimeline/memtest"
	"github.com/torchmem/torchmem/memtimeline/snapshot"
	"github.com/torchmem/torchmem/memtimeline/steplog"
)

// The snippet's files of one rank share Unix time: the profiled windows
// fall inside the step log's span, between the steps they profiled, and
// the snapshot's history ends after the last step.
func TestRunTimelineAlignsTheSnippetsFiles(t *testing.T) {
	dir := memtest.Testdata("gpu", "snippet_proof", "gpu")
	tr := memtest.Trace(t, filepath.Join(dir, "vm_rank0_step5.pt.trace.json.gz"))
	f := runFiles{
		Traces: []*chrometrace.Trace{tr}, TraceName: []string{"vm_rank0_step5.pt.trace.json.gz"},
		Snapshots: []*snapshot.Snapshot{memtest.Decode(t, filepath.Join(dir, "vm_rank0.snapshot.pickle"), snapshot.Read)}, SnapName: []string{"vm_rank0.snapshot.pickle"},
		StepLogs: []*steplog.Log{memtest.Decode(t, filepath.Join(dir, "vm_rank0.steps.jsonl"), steplog.Read)}, StepName: []string{"vm_rank0.steps.jsonl"},
	}
	spec, notes, ok := runTimeline(f, "run")
	if !ok || len(notes) > 0 {
		t.Fatalf("ok %v, notes %v", ok, notes)
	}
	if len(spec.Lines) != 3 || len(spec.Steps) != 1 {
		t.Fatalf("%d lines, %d windows", len(spec.Lines), len(spec.Steps))
	}
	// ProfilerStep#2..#4: the step log's lines are written at the end of
	// each step, so the window starts after step 1's line and ends before
	// step 5's.
	recs := f.StepLogs[0].Series[0].Records
	at := func(step int64) int64 {
		for _, r := range recs {
			if r.Step == step {
				return int64(r.Time * 1e9)
			}
		}
		t.Fatalf("no step %d", step)
		return 0
	}
	w := spec.Steps[0]
	if !(at(1) < w.StartNs && w.EndNs < at(5)) {
		t.Errorf("window %d..%d not between step 1 (%d) and step 5 (%d)", w.StartNs, w.EndNs, at(1), at(5))
	}
	snap := spec.Lines[2]
	if last := snap.T[snap.Len()-1]; last < at(13)-int64(1e9) {
		t.Errorf("snapshot history ends at %d, long before the last step %d", last, at(13))
	}
	// With the blocks from before recording added back, the history ends
	// where the step log does (the dump follows the last step).
	logEnd := recs[len(recs)-1].AllocatedBytes
	if d := snap.V[snap.Len()-1] - logEnd; d < -(1<<20) || d > 1<<20 {
		t.Errorf("snapshot history ends at %d, the step log at %d", snap.V[snap.Len()-1], logEnd)
	}
	if len(spec.PointLines) != len(spec.Lines) || !spec.PointLines[0] || spec.PointLines[1] || spec.PointLines[2] {
		t.Errorf("points shown %v: want the step log's only", spec.PointLines)
	}
	// Without a base time the trace cannot be placed, and says so.
	tr2 := *tr
	tr2.Meta.BaseTimeNanoseconds = 0
	f.Traces = []*chrometrace.Trace{&tr2}
	if spec, notes, _ := runTimeline(f, "run"); len(notes) != 1 || len(spec.Steps) != 0 {
		t.Errorf("notes %v, windows %d", notes, len(spec.Steps))
	}
}
