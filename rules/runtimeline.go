package rules

import (
	"cmp"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/torchmem/torchmem/chrometrace"
	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/memtimeline/snapshot"
	"github.com/torchmem/torchmem/memtimeline/steplog"
)

// runCharts are, per verdict of a run with more than one input, the run
// on one clock (nil for a verdict of one input): the HTML page draws it
// under the verdict when it has two sources or more, and says what it
// could not place (MemoryChart.Notes).
func runCharts(verdicts []Verdict) []*MemoryChart {
	out := make([]*MemoryChart, len(verdicts))
	for i, v := range verdicts {
		if len(v.Inputs) < 2 {
			continue
		}
		var f runFiles
		for _, in := range v.Inputs {
			switch {
			case in.Has(SourceTrace):
				f.Traces, f.TraceName = append(f.Traces, in.Trace), append(f.TraceName, in.Source)
			case in.Has(SourceSnapshot):
				f.Snapshots, f.SnapName = append(f.Snapshots, in.Snapshot), append(f.SnapName, in.Source)
			case in.StepLog != nil: // a steps log, or memory_summary() tables as steps
				f.StepLogs, f.StepName = append(f.StepLogs, in.StepLog), append(f.StepName, in.Source)
			}
		}
		c, notes, _ := runTimeline(f, "the whole run on one clock (Unix time of each file)")
		c.Notes = notes
		out[i] = &c
	}
	return out
}

// One run seen through several files shares one clock: a trace's times
// plus its baseTimeNanoseconds, a snapshot's time_us and a step log's
// time.time() are all Unix time. runTimeline draws them on one axis: the
// step log over the whole run, each profiled window marked on it with the
// trace's own allocated line, and the snapshot's recorded history. A file
// whose clock cannot be placed (a trace without baseTimeNanoseconds, a
// step log without times) is left out and named in the returned notes.

// runFiles are the files of one run and rank, with their names.
type runFiles struct {
	Traces    []*chrometrace.Trace
	TraceName []string
	Snapshots []*snapshot.Snapshot
	SnapName  []string
	StepLogs  []*steplog.Log
	StepName  []string
}

// runTimeline returns the combined chart of one run and rank, and notes
// on what could not be placed; ok is false when fewer than two sources
// share the clock (the per-file charts say it all then).
func runTimeline(f runFiles, title string) (spec MemoryChart, notes []string, ok bool) {
	spec = MemoryChart{Title: title}
	placed := 0
	for i, lg := range f.StepLogs {
		for _, s := range lg.Series {
			var ser memtimeline.Series
			ser.Name = "allocated per step (" + filepath.Base(f.StepName[i]) + ")"
			for _, r := range s.Records {
				if !r.HasTime || r.AllocatedBytes < 0 {
					continue
				}
				ser.T = append(ser.T, int64(r.Time*1e9))
				ser.V = append(ser.V, r.AllocatedBytes)
			}
			if ser.Len() == 0 {
				notes = append(notes, filepath.Base(f.StepName[i])+": no times in the step log")
				continue
			}
			if s.Device != "" && len(lg.Series) > 1 {
				ser.Name += " device " + s.Device
			}
			spec.Lines = append(spec.Lines, ser)
			spec.PointLines = append(spec.PointLines, true)
			placed++
		}
	}
	for i, t := range f.Traces {
		name := filepath.Base(f.TraceName[i])
		if t.Meta.BaseTimeNanoseconds <= 0 {
			notes = append(notes, name+": the trace has no baseTimeNanoseconds, so its window cannot be placed")
			continue
		}
		base := t.Meta.BaseTimeNanoseconds
		tls := memtimeline.TraceTimelines(t)
		if len(tls) == 0 {
			continue
		}
		a := tls[0].Allocated
		ser := memtimeline.Series{Name: "allocated, profiled (" + name + ")", T: make([]int64, a.Len()), V: a.V}
		for k, ts := range a.T {
			ser.T[k] = ts + base
		}
		spec.Lines = append(spec.Lines, ser)
		spec.PointLines = append(spec.PointLines, false)
		steps := slices.Clone(t.Steps)
		slices.SortFunc(steps, func(a, b chrometrace.Step) int { return cmp.Compare(a.Start, b.Start) })
		if len(steps) > 0 {
			spec.Steps = append(spec.Steps, StepSpan{
				Name:    fmt.Sprintf("profiled: ProfilerStep#%d..#%d", steps[0].Number, steps[len(steps)-1].Number),
				StartNs: steps[0].Start + base, EndNs: steps[len(steps)-1].End() + base,
			})
		}
		for _, o := range t.OOMs {
			spec.Markers = append(spec.Markers, ChartMarker{Name: "OOM: " + memtimeline.FormatBytes(o.Bytes) + " requested", TNs: o.TS + base, Bytes: o.TotalAllocated})
		}
		placed++
	}
	for i, s := range f.Snapshots {
		name := filepath.Base(f.SnapName[i])
		atDump := map[int]int64{}
		for _, seg := range s.Segments {
			atDump[seg.Device] += seg.AllocatedSize
		}
		for dev, entries := range s.DeviceTraces {
			var ser memtimeline.Series
			ser.Name = fmt.Sprintf("allocated, recorded history (%s, cuda:%d)", name, dev)
			var cur int64
			var ooms []ChartMarker
			for _, e := range entries.All() {
				switch e.Action {
				case snapshot.ActionAlloc:
					cur += memtimeline.BlockSize(e.Size)
				case snapshot.ActionFreeCompleted:
					cur -= memtimeline.BlockSize(e.Size)
				case snapshot.ActionOOM:
					if e.TimeUS > 0 {
						ooms = append(ooms, ChartMarker{Name: "OOM: " + memtimeline.FormatBytes(e.Size) + " requested", TNs: e.TimeUS * 1000, Bytes: cur})
					}
					continue
				default:
					continue
				}
				if e.TimeUS <= 0 {
					continue
				}
				ser.T = append(ser.T, e.TimeUS*1000)
				ser.V = append(ser.V, cur)
			}
			if ser.Len() == 0 {
				continue
			}
			// The history starts when recording began: blocks allocated
			// before it and still alive at the dump are added back, so
			// the line reads as allocated memory, like the others.
			if before := atDump[dev] - cur; before > 0 {
				for k := range ser.V {
					ser.V[k] += before
				}
				for k := range ooms {
					ooms[k].Bytes += before
				}
			}
			spec.Markers = append(spec.Markers, ooms...)
			spec.Lines = append(spec.Lines, ser)
			spec.PointLines = append(spec.PointLines, false)
			placed++
		}
	}
	if placed < 2 {
		return spec, notes, false
	}
	spec.StartNs = -1
	for _, l := range spec.Lines {
		if l.Len() > 0 && (spec.StartNs < 0 || l.T[0] < spec.StartNs) {
			spec.StartNs = l.T[0]
		}
	}
	slices.SortFunc(spec.Steps, func(a, b StepSpan) int { return cmp.Compare(a.StartNs, b.StartNs) })
	return spec, notes, true
}
