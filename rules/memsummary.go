package rules

import (
	"fmt"
	"github.com/torchmem/torchmem/rules/frag"

	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/memtimeline/memsummary"
)

// Rules on torch.cuda.memory_summary() logs. Their growth over steps is
// judged by steps.growth (the tables are read as a per-step log); these
// read what only memory_summary() prints: cudaMalloc retries and
// non-releasable memory.

func memSummaryName(d memsummary.Frag) string {
	if d.Rank >= 0 {
		return fmt.Sprintf("rank %d, device %d", d.Rank, d.Device)
	}
	return fmt.Sprintf("device %d", d.Device)
}

func init() {
	register(&Rule{
		ID:          "summary.alloc-retries",
		Description: "cudaMalloc retried during a memory_summary() log: the allocator had to free its cache to satisfy a request (memory pressure or fragmentation)",
		Severity:    Warning,
		Threshold:   1,
		Unit:        "count",
		Reads:       []SourceKind{SourceMemSummary},
		Check: func(r *Rule, in *Input) []Finding {
			var out []Finding
			for _, d := range in.MemSummary.Frag() {
				if float64(d.RetriesDuringLog) < r.Threshold {
					continue
				}
				out = append(out, Finding{
					Title:   fmt.Sprintf("cudaMalloc retried %d times on %s between the first and last memory summary", d.RetriesDuringLog, memSummaryName(d)),
					Detail:  fmt.Sprintf("%d tables; at the last, %s reserved, %s non-releasable, %d retries in all, %d OOMs. Each retry frees every cached block and synchronizes: slow, and a step away from OOM.", d.Samples, memtimeline.FormatBytes(d.ReservedBytes), memtimeline.FormatBytes(d.NonReleasableBytes), d.Retries, d.OOMs),
					Advice:  "Lower the peak (batch size, activation checkpointing) or reduce fragmentation: " + frag.AllocConfExpandable + "; torchmem frag on a trace or snapshot shows which allocations split the cache.",
					Metrics: map[string]float64{"retries": float64(d.RetriesDuringLog), "reserved_bytes": float64(d.ReservedBytes), "non_releasable_bytes": float64(d.NonReleasableBytes)},
				})
			}
			return out
		},
	})
	register(&Rule{
		ID:          "summary.non-releasable",
		Description: "Non-releasable memory in a memory_summary() log is a large share of reserved: free space split inside blocks in use, which empty_cache() cannot return",
		Severity:    Warning,
		Threshold:   0.2,
		Unit:        "fraction",
		Reads:       []SourceKind{SourceMemSummary},
		Check: func(r *Rule, in *Input) []Finding {
			var out []Finding
			for _, d := range in.MemSummary.Frag() {
				if d.NonReleasableFraction <= r.Threshold {
					continue
				}
				out = append(out, Finding{
					Title:   fmt.Sprintf("Non-releasable memory reached %.0f%% of reserved on %s", 100*d.NonReleasableFraction, memSummaryName(d)),
					Detail:  fmt.Sprintf("At the table on line %d; at the last table %s of %s reserved is non-releasable (peak %s).", d.MaxNonReleasableLine, memtimeline.FormatBytes(d.NonReleasableBytes), memtimeline.FormatBytes(d.ReservedBytes), memtimeline.FormatBytes(d.NonReleasablePeakBytes)),
					Advice:  frag.AllocConfExpandable + " lets segments grow instead of splitting; max_split_size_mb keeps large blocks whole. An allocator snapshot (torchmem snapshot) shows which segments hold the split blocks.",
					Metrics: map[string]float64{"fraction": d.NonReleasableFraction, "non_releasable_bytes": float64(d.NonReleasableBytes), "reserved_bytes": float64(d.ReservedBytes)},
				})
			}
			return out
		},
	})
}
