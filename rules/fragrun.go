package rules

import (
	"fmt"
	"strings"

	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/rules/frag"
	"github.com/torchmem/torchmem/rules/internal/fmtutil"
)

// fragMinSplitBytes is the least inactive split worth calling
// fragmentation (as frag.JudgeSnapshot's 64 MiB).
const fragMinSplitBytes = 64 << 20

// fragOverRun weighs fragmentation over the whole run: a snapshot shows
// the cache at its dump only, a trace its window; a step log with torch's
// inactive_split_bytes (the snippet's steps.jsonl, memory_summary()'s
// Non-releasable memory) shows it after every step. When the split free
// space passed the snapshot rule's fraction of reserved (and 64 MiB) at
// some step, the run was fragmented then, whatever the end shows: the
// answer says at which steps, its peak, and what is left at the end.
func fragOverRun(ans *FragAnswer, ins []*Input, fraction float64) *FragAnswer {
	if ans != nil && ans.Verdict == frag.VerdictFragmented {
		return ans
	}
	for _, in := range ins {
		if in.StepLog == nil {
			continue
		}
		for _, s := range in.StepLog.Series {
			var peak, peakReserved, peakStep, first, last, end int64 = -1, 0, 0, -1, -1, -1
			over := 0
			for _, r := range s.Records {
				if r.InactiveSplitBytes < 0 || r.ReservedBytes <= 0 {
					continue
				}
				end = r.InactiveSplitBytes
				if float64(r.InactiveSplitBytes) > fraction*float64(r.ReservedBytes) && r.InactiveSplitBytes >= fragMinSplitBytes {
					over++
					if first < 0 {
						first = r.Step
					}
					last = r.Step
				}
				if r.InactiveSplitBytes > peak {
					peak, peakReserved, peakStep = r.InactiveSplitBytes, r.ReservedBytes, r.Step
				}
			}
			if over == 0 {
				continue
			}
			dev := ""
			if s.Device != "" {
				dev = " (device " + s.Device + ")"
			}
			a := &FragAnswer{Source: in.Source, Verdict: frag.VerdictFragmented, WastedBytes: peak,
				Wasted: "free but split inside used segments at the worst step (step log)",
				Reason: fmt.Sprintf("the cache wasted memory mid-run%s: inactive split (free but split inside segments that also hold live blocks) passed %.0f%% of reserved in %d %s between steps %d and %d, peaking at %s (%.0f%% of %s reserved) at step %d; %s at the end of the log",
					dev, 100*fraction, over, fmtutil.Plural(float64(over), "step", "steps"), first, last, memtimeline.FormatBytes(peak), 100*float64(peak)/float64(peakReserved), memtimeline.FormatBytes(peakReserved), peakStep, memtimeline.FormatBytes(end))}
			if ans != nil {
				a.Reason += fmt.Sprintf("; the %s alone says %s (%s): it sees one moment", sourceWord(ans.Wasted), ans.Verdict, ans.Reason)
				a.AllocRetries, a.Retries = ans.AllocRetries, ans.Retries
			}
			return a
		}
	}
	return ans
}

func sourceWord(wasted string) string {
	if strings.HasSuffix(wasted, "(snapshot)") {
		return "final snapshot"
	}
	return "trace's window"
}
