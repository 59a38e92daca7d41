package rules

import (
	"fmt"

	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/memtimeline/snapshot"
	"github.com/torchmem/torchmem/rules/frag"
	"github.com/torchmem/torchmem/rules/internal/fmtutil"
	"github.com/torchmem/torchmem/rules/site"
)

// SnapshotReport is the input's allocator snapshot analysis.
func (in *Input) SnapshotReport() *snapshot.Report {
	return Memo(in, "snapshot", func() *snapshot.Report { return snapshot.Analyze(in.Snapshot, 0) })
}

// snapshotStats are an allocator snapshot's figures, from the file or
// from its digest; false for an input of another kind, or a digest that
// kept none.
func (in *Input) snapshotStats() (snapshot.Stats, bool) {
	switch {
	case !in.Is(SourceSnapshot):
		return snapshot.Stats{}, false
	case in.IsDigest():
		if in.Digest.SnapshotStats == nil {
			return snapshot.Stats{}, false
		}
		return *in.Digest.SnapshotStats, true
	}
	return in.SnapshotReport().Stats, true
}

// ruleSnapshotSplit is the snapshot fragmentation rule's id.
const ruleSnapshotSplit = "snapshot.inactive-split"

func init() {
	register(&Rule{
		ID:          "snapshot.leak",
		Description: "Allocator snapshot: the same line keeps memory from each of 3 or more consecutive steps (a leak at any size; under the threshold in bytes per step it is a warning)",
		Severity:    Error,
		Threshold:   1 << 20,
		Unit:        "bytes_per_step",
		Reads:       []SourceKind{SourceSnapshot},
		Check: func(r *Rule, in *Input) []Finding {
			return leakFindings(in.SnapshotLeaks(), r.Threshold, false)
		},
	})
	register(&Rule{
		ID:          "snapshot.oom",
		Description: "Allocator snapshot: the history records an out-of-memory",
		Severity:    Error,
		Threshold:   1,
		Unit:        "events",
		Reads:       []SourceKind{SourceSnapshot},
		Check: func(r *Rule, in *Input) []Finding {
			ooms := in.SnapshotReport().OOMs
			if float64(len(ooms)) < r.Threshold {
				return nil
			}
			o := ooms[0]
			var loc *site.Location
			if o.Site.Filename != "" {
				loc = &site.Location{File: o.Site.Filename, Line: o.Site.Line, Function: o.Site.Name}
			}
			return []Finding{{
				Title:    fmt.Sprintf("Out of memory on device %d: %s requested, %s free on the device", o.Device, memtimeline.FormatBytes(o.RequestedBytes), memtimeline.FormatBytes(o.DeviceFreeBytes)),
				Detail:   fmt.Sprintf("%d OOM entries in the recorded history.", len(ooms)),
				Advice:   "Lower the batch size or activation memory; if reserved is far above allocated, try " + frag.AllocConfExpandable + ".",
				Location: loc,
				Metrics:  map[string]float64{"oom_events": float64(len(ooms)), "request_bytes": float64(o.RequestedBytes)},
			}}
		},
	})
	register(&Rule{
		ID: ruleSnapshotSplit,
		Description: "Allocator snapshot: free blocks trapped inside partly used segments (empty_cache cannot return them), per pool and stream, " +
			"exceed this fraction of reserved and 64 MiB",
		Severity:  Warning,
		Threshold: 0.2,
		Unit:      "fraction",
		Reads:     []SourceKind{SourceSnapshot},
		Check: func(r *Rule, in *Input) []Finding {
			rep := in.SnapshotReport()
			st := rep.Stats
			if st.ReservedBytes == 0 {
				return nil
			}
			j := frag.JudgeSnapshot(rep, r.Threshold)
			if j.Verdict != frag.VerdictFragmented {
				return nil
			}
			return []Finding{{
				Title:   fmt.Sprintf("Fragmentation: %s (%.0f%% of reserved) is free but split inside used segments", memtimeline.FormatBytes(st.InactiveSplitBytes), 100*j.Fraction),
				Detail:  fmtutil.UpperFirst(j.Reason) + fmt.Sprintf(". Reserved %s, allocated %s; the largest free block is %s.", memtimeline.FormatBytes(st.ReservedBytes), memtimeline.FormatBytes(st.AllocatedBytes), memtimeline.FormatBytes(st.LargestFreeBlock)),
				Advice:  frag.AdviceSplitFree,
				Metrics: map[string]float64{"fraction": j.Fraction, "inactive_split_bytes": float64(st.InactiveSplitBytes), "reserved_bytes": float64(st.ReservedBytes)},
			}}
		},
	})
}
