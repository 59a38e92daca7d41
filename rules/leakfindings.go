package rules

import (
	"fmt"
	"strings"

	"github.com/torchmem/torchmem/internal/more"
	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/rules/internal/fmtutil"
	"github.com/torchmem/torchmem/rules/leak"
	"github.com/torchmem/torchmem/rules/site"
)

// leakFindings makes one finding per leak: its bytes per step in all,
// its kind with the evidence, its sites listed inside and the fix. A leak
// under the threshold is still reported, as a warning. fromTrace: the
// report is a trace's, whose frames name def lines (site.FromTrace).
func leakFindings(rep leak.Report, threshold float64, fromTrace bool) []Finding {
	if rep.Verdict != leak.VerdictLeak {
		return nil
	}
	var out []Finding
	for _, l := range rep.Leaks {
		top := l.Sites[0]
		title := fmt.Sprintf("Leak (%s): %s per step kept by %s", l.Kind, memtimeline.FormatBytes(l.BytesPerStep), top.Site)
		if top.HoldingLine != "" && (l.Kind == leak.KindAutogradGraph || l.Kind == leak.KindRetainGraph) {
			title = fmt.Sprintf("Leak (%s): %s per step held by %s", l.Kind, memtimeline.FormatBytes(l.BytesPerStep), top.HoldingLine)
		}
		if l.Accelerating {
			title += ", accelerating"
		}
		var d strings.Builder
		fmt.Fprintf(&d, "%s.", fmtutil.UpperFirst(l.Evidence))
		if l.Accelerating {
			fmt.Fprintf(&d, " It accelerates: each step keeps %s more than the step before.", memtimeline.FormatBytes(l.AccelerationBytes))
		}
		if len(top.Stack) > 0 {
			fmt.Fprintf(&d, " Held through: %s;", strings.Join(top.Stack, " → "))
		}
		if len(l.Sites) > 1 {
			sites := make([]string, len(l.Sites))
			for i, s := range l.Sites {
				sites[i] = fmt.Sprintf("%s per step at %s", memtimeline.FormatBytes(s.BytesPerStep), s.Site)
			}
			fmt.Fprintf(&d, " %d sites: %s;", len(l.Sites), more.Join(sites, 8, "; "))
		}
		f := Finding{
			Title:    title,
			Detail:   strings.TrimSuffix(strings.TrimSuffix(d.String(), ";"), ".") + ".",
			Advice:   l.Fix + ".",
			Operator: site.FirstOp(top.Operator),
			Location: top.Location(),
			Metrics: map[string]float64{"bytes_per_step": float64(l.BytesPerStep), "sites": float64(len(l.Sites)),
				"steps": float64(top.StepsWithSurvivors), "growth_bytes_per_step": float64(rep.GrowthBytesPerStep)},
			belowThreshold: float64(l.BytesPerStep) < threshold,
		}
		if top.Operator == "" {
			f.Operator = ""
		}
		if fromTrace {
			f.Location = f.Location.FromTrace(top.LineNotRecorded)
		}
		out = append(out, f)
	}
	return out
}
