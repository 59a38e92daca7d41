package rules

import (
	"fmt"

	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/memtimeline/steplog"
	"github.com/torchmem/torchmem/rules/leak"
)

// HostAnswer is the pinned-host-memory verdict of a run and rank: its own
// line beside the device's, from the steps log's host.* keys
// (torch.cuda.host_memory_stats()).
type HostAnswer struct {
	// Verdict is "leak", "clean" or "unknown", as the device's.
	Verdict string `json:"verdict"`
	steplog.HostReport
	// Source is the steps log it comes from.
	Source string `json:"source"`
}

// Input.hostMemory is the input's pinned-host-memory report per series
// (nil when it records none).
func (in *Input) hostMemory() []*steplog.HostReport {
	if !in.Has(SourceSteps) || in.StepLog == nil {
		return nil
	}
	return Memo(in, "steps:host", func() []*steplog.HostReport {
		var out []*steplog.HostReport
		for _, s := range in.StepLog.Series {
			if r := steplog.AnalyzeHost(s, steplog.DefaultOptions()); r != nil {
				out = append(out, r)
			}
		}
		return out
	})
}

// judgeHost is the group's pinned-host-memory answer: its first steps log
// that records it (a digest's, as judged where it was made); nil when none
// does.
func judgeHost(ins []*Input) *HostAnswer {
	for _, in := range ins {
		if in.IsDigest() {
			if h := in.Digest.Verdict.Host; h != nil {
				return h
			}
			continue
		}
		for _, r := range in.hostMemory() {
			a := &HostAnswer{HostReport: *r, Source: in.Source, Verdict: leak.VerdictUnknown}
			switch r.Verdict {
			case steplog.VerdictGrowing:
				a.Verdict = LeakVerdictLeak
			case steplog.VerdictFlat:
				a.Verdict = LeakVerdictClean
			}
			return a
		}
	}
	return nil
}

func init() {
	register(&Rule{
		ID:          "steps.pinned-host-growth",
		Description: "Per-step memory log: pinned host memory (torch.cuda.host_memory_stats) grows every step",
		Severity:    Error,
		Threshold:   1 << 20,
		Unit:        "bytes_per_step",
		Reads:       []SourceKind{SourceSteps},
		Check: func(r *Rule, in *Input) []Finding {
			var out []Finding
			for _, h := range in.hostMemory() {
				if h.Verdict != steplog.VerdictGrowing {
					continue
				}
				dev := ""
				if h.Device != "" {
					dev = " (device " + h.Device + ")"
				}
				out = append(out, Finding{
					Title:  fmt.Sprintf("Pinned host memory grows %s per step%s", memtimeline.FormatBytes(h.BytesPerStep), dev),
					Detail: h.Reason + ". No GPU figure shows it: it is page-locked host RAM.",
					Advice: "Find what keeps pinned tensors step after step: a list or cache of .pin_memory() results, " +
						"batches kept from a DataLoader with pin_memory=True, tensors copied to the host with non_blocking=True and kept. " +
						"Keep plain (pageable) copies or bound the cache.",
					Metrics:        map[string]float64{"bytes_per_step": float64(h.BytesPerStep)},
					belowThreshold: float64(h.BytesPerStep) < r.Threshold,
				})
			}
			return out
		},
	})
}
