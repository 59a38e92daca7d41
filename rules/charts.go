package rules

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/torchmem/torchmem/chrometrace"
	"github.com/torchmem/torchmem/memtimeline"
)

// MemoryChart is one GPU's memory over time as data: the series a chart
// draws (allocated and reserved), its ProfilerStep bands, its markers
// (out-of-memory errors) and what held the most at sampled moments. The
// report turns it into a chart; rules keeps series, not chart specs.
// (Its JSON field names are those the summary format has always had.)
type MemoryChart struct {
	Title string
	// StartNs is the x origin (the trace's start).
	StartNs             int64
	Allocated, Reserved memtimeline.Series
	Steps               []StepSpan
	Markers             []ChartMarker
	Holders             []memtimeline.HolderSample
	// The HTML page's, not the summary format's: Device is the device of
	// a snapshot's chart (or the GPU's index in an nvidia-smi log),
	// Explorer the allocations its explorer lists, Categories the stacked
	// series of an export_memory_timeline file.
	Device     int                   `json:"-"`
	Explorer   *memtimeline.Explorer `json:"-"`
	Categories []memtimeline.Series  `json:"-"`
	// Lines are more lines of one run drawn on its one clock (the run's
	// chart: step logs, profiled windows, snapshot histories), PointLines[i]
	// showing line i's points; Notes say what could not be placed.
	Lines      []memtimeline.Series `json:"-"`
	PointLines []bool               `json:"-"`
	Notes      []string             `json:"-"`
}

// StepSpan is a named interval on the time axis (ProfilerStep#N).
type StepSpan struct {
	Name           string
	StartNs, EndNs int64
}

// ChartMarker is a named instant at a level of memory (an OOM).
type ChartMarker struct {
	Name  string
	TNs   int64
	Bytes int64
}

// TraceCharts are one chart per GPU of the trace, in TraceTimelines'
// order: allocated and reserved lines, ProfilerStep bands and
// out-of-memory markers.
func TraceCharts(t *chrometrace.Trace) []MemoryChart {
	var start int64 = -1
	for i := range t.HostOps {
		if start < 0 || t.HostOps[i].Start < start {
			start = t.HostOps[i].Start
		}
	}
	var steps []StepSpan
	for _, s := range t.Steps {
		steps = append(steps, StepSpan{Name: fmt.Sprintf("ProfilerStep#%d", s.Number), StartNs: s.Start, EndNs: s.End()})
	}
	slices.SortFunc(steps, func(a, b StepSpan) int { return cmp.Compare(a.StartNs, b.StartNs) })
	var out []MemoryChart
	for _, d := range memtimeline.TraceTimelines(t) {
		if start < 0 && d.Allocated.Len() > 0 {
			start = d.Allocated.T[0]
		}
		c := MemoryChart{Title: d.Label(), StartNs: start, Allocated: d.Allocated, Reserved: d.Reserved, Steps: steps}
		for _, o := range t.OOMs {
			if o.DeviceType == d.DeviceType && int(o.DeviceID) == d.Device {
				c.Markers = append(c.Markers, ChartMarker{Name: "OOM: " + memtimeline.FormatBytes(o.Bytes) + " requested", TNs: o.TS, Bytes: o.TotalAllocated})
			}
		}
		out = append(out, c)
	}
	return out
}
