package report

import (
	"github.com/torchmem/torchmem/rules"
)

// kindTimeline is the kind of an export_memory_timeline input.
const kindTimeline = "memory-timeline"

// reportChartGroup is a set of charts shown one at a time behind a device
// selector; Group names the set for the selector's script.
type reportChartGroup struct {
	Group  string
	Charts []reportChart
}

// liftMemoryCharts moves each verdict's memory chart up into its answer,
// right below the verdict lines, so that the memory over time is on the
// first screen (it was 2,000 px down, after the findings and the tables).
// The charts move rather than repeat: a chart carries up to 4,000 points
// per series, and the page stays one copy of each. The input whose charts
// move is the verdict's first trace, else its first input with a chart.
func liftMemoryCharts(page *reportPage, verdicts []rules.Verdict, inputs []*rules.Input) {
	index := make(map[*rules.Input]int, len(inputs))
	for i, in := range inputs {
		index[in] = i
	}
	for ai := range page.Answers {
		if ai >= len(verdicts) {
			break
		}
		best := -1
		for _, in := range verdicts[ai].Inputs {
			j, ok := index[in]
			if !ok || j >= len(page.Inputs) || len(page.Inputs[j].Charts) == 0 || page.Inputs[j].ChartsAbove != "" {
				continue
			}
			if best < 0 || in.Has(rules.SourceTrace) && !inputs[best].Has(rules.SourceTrace) {
				best = j
			}
		}
		if best < 0 {
			continue
		}
		ri := &page.Inputs[best]
		page.Answers[ai].Memory = ri.Charts
		page.Answers[ai].MemoryOf = ri.Source
		ri.Charts = nil
		ri.ChartsAbove = verdicts[ai].Name
	}
}
