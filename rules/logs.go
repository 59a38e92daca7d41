package rules

import (
	"fmt"
	"time"

	"github.com/torchmem/torchmem/memtimeline"
)

// Rules over logs users have without a profiler: nvidia-smi CSV and the
// snippet's per-step memory_stats lines.

func init() {
	register(&Rule{
		ID:          ruleSMILeak,
		Description: "nvidia-smi: memory.used grows steadily and never falls back (a leak seen from outside the process, at any size; growth under the threshold in bytes is a warning)",
		Severity:    Error,
		Threshold:   64 << 20,
		Unit:        "bytes",
		Reads:       []SourceKind{SourceSMI},
		Check: func(r *Rule, in *Input) []Finding {
			// The input's analysis (Evaluate set its options from the rules
			// in force): the verdict reads the same growth. Growth under the
			// threshold is still a leak, at warning severity.
			a := in.SMIAnalysis()
			var out []Finding
			for _, g := range a.GPUs {
				for _, l := range g.Leaks {
					out = append(out, Finding{
						belowThreshold: float64(l.GrowthBytes) < r.Threshold,
						Title:          fmt.Sprintf("GPU %s: memory grew %s at %.1f MiB/s for %s", g.Key, memtimeline.FormatBytes(l.GrowthBytes), l.SlopeBytesPerSec/(1<<20), l.Duration.Round(100*time.Millisecond)),
						Detail: fmt.Sprintf("From %s to %s memory.used rose from %s to %s in %d steady rises (R² %.3f). %s",
							l.Start.Format("15:04:05.000"), l.End.Format("15:04:05.000"), memtimeline.FormatBytes(l.StartBytes), memtimeline.FormatBytes(l.EndBytes), l.Rises, l.R2, l.Reason),
						Advice:  "Profile a few steps of that process with profile_memory=True and run torchmem leaks on the trace to find the line.",
						Metrics: map[string]float64{"growth_bytes": float64(l.GrowthBytes), "bytes_per_second": l.SlopeBytesPerSec, "r2": l.R2, "seconds": l.Duration.Seconds()},
					})
				}
			}
			return out
		},
	})
	register(&Rule{
		ID:          ruleSMIMemoryHigh,
		Description: "nvidia-smi: memory.used above this fraction of memory.total",
		Severity:    Warning,
		Threshold:   0.9,
		Unit:        "fraction",
		Reads:       []SourceKind{SourceSMI},
		Check: func(r *Rule, in *Input) []Finding {
			opts := in.smiOptions()
			opts.Threshold = r.Threshold
			var out []Finding
			for _, g := range in.smiAnalysisWith(opts).GPUs {
				if g.AboveThreshold.Samples == 0 {
					continue
				}
				out = append(out, Finding{
					Title:   fmt.Sprintf("GPU %s: memory above %.0f%% of total for %s", g.Key, 100*r.Threshold, g.AboveThreshold.Duration.Round(100*time.Millisecond)),
					Detail:  fmt.Sprintf("%d samples above %s.", g.AboveThreshold.Samples, memtimeline.FormatBytes(g.AboveThreshold.ThresholdBytes)),
					Advice:  "Little headroom before OOM: reduce batch size or activation memory, or check for a leak.",
					Metrics: map[string]float64{"seconds": g.AboveThreshold.Duration.Seconds(), "samples": float64(g.AboveThreshold.Samples)},
				})
			}
			return out
		},
	})
	register(&Rule{
		ID:          ruleSMIStarvation,
		Description: "nvidia-smi: memory held but GPU utilization low for a long time (the GPU waits for input)",
		Severity:    Warning,
		Threshold:   10,
		Unit:        "percent_utilization",
		Reads:       []SourceKind{SourceSMI},
		Check: func(r *Rule, in *Input) []Finding {
			opts := in.smiOptions()
			opts.StarveUtilPct = r.Threshold
			var out []Finding
			for _, g := range in.smiAnalysisWith(opts).GPUs {
				for _, p := range g.Starvation {
					out = append(out, Finding{
						Title:   fmt.Sprintf("GPU %s: %s held at %.0f%% utilization for %s", g.Key, memtimeline.FormatBytes(p.MeanUsedBytes), p.MeanUtilGPUPct, memtimeline.FormatDuration(p.Duration)),
						Detail:  fmt.Sprintf("From %s to %s.", p.Start.Format("15:04:05"), p.End.Format("15:04:05")),
						Advice:  "If this is training, the input pipeline is starving the GPU: more DataLoader workers, pin_memory=True, prefetching.",
						Metrics: map[string]float64{"seconds": p.Duration.Seconds(), "utilization_pct": p.MeanUtilGPUPct},
					})
				}
			}
			return out
		},
	})
	register(&Rule{
		ID:          "steps.growth",
		Description: "Per-step memory log: allocated memory grows every step",
		Severity:    Error,
		Threshold:   1 << 20,
		Unit:        "bytes_per_step",
		Reads:       []SourceKind{SourceSteps, SourceMemSummary},
		Check: func(r *Rule, in *Input) []Finding {
			var out []Finding
			for _, s := range in.StepAnalysis().Series {
				if s.Verdict != "growing" {
					continue
				}
				out = append(out, Finding{
					Title:   fmt.Sprintf("Allocated memory grows %s per step (device %s)", memtimeline.FormatBytes(s.BytesPerStep), s.Device),
					Detail:  s.Reason,
					Advice:  AdviceFindTheLine,
					Metrics: map[string]float64{"bytes_per_step": float64(s.BytesPerStep)},
					// Growth every step is a leak at any size; the
					// threshold sets error or warning, as for memory.leak.
					belowThreshold: float64(s.BytesPerStep) < r.Threshold,
				})
			}
			return out
		},
	})
}
