package chart

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/torchmem/torchmem/chrometrace"
	"github.com/torchmem/torchmem/memtimeline"
)

// TraceSpecs builds one chart per GPU of the trace: allocated and
// reserved lines, ProfilerStep bands and out-of-memory markers.
func TraceSpecs(t *chrometrace.Trace, idPrefix string) []Spec {
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
	var specs []Spec
	for i, d := range memtimeline.TraceTimelines(t) {
		if start < 0 && d.Allocated.Len() > 0 {
			start = d.Allocated.T[0]
		}
		spec := Spec{ID: fmt.Sprintf("%s%d", idPrefix, i), Title: d.Label(), StartNs: start, Allocated: d.Allocated, Reserved: d.Reserved, Steps: steps}
		for _, o := range t.OOMs {
			if o.DeviceType == d.DeviceType && int(o.DeviceID) == d.Device {
				spec.Markers = append(spec.Markers, Marker{Name: "OOM: " + memtimeline.FormatBytes(o.Bytes) + " requested", TNs: o.TS, Bytes: o.TotalAllocated})
			}
		}
		specs = append(specs, spec)
	}
	return specs
}
