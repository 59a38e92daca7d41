package report

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"

	"github.com/torchmem/torchmem/chrometrace"
	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/rules"
	"github.com/torchmem/torchmem/rules/leak"
)

// The events annotate adds to a trace, in the Trace Event Format that
// Perfetto and chrome://tracing read: counter events ("ph": "C") make a
// track per name and process, drawn as a step line; instant events
// ("ph": "i") with global scope ("s": "g") are drawn across the timeline.
// Every name comes from the trace or the analysis and is written through
// encoding/json, so a hostile operator or file name stays a string.

// traceEvent is one added event. Pid is the process the track sits in:
// the GPU's own process (the lane of its kernels) where the trace has one.
type traceEvent struct {
	Name  string         `json:"name"`
	Cat   string         `json:"cat"`
	Ph    string         `json:"ph"`
	TS    json.Number    `json:"ts"`
	Pid   any            `json:"pid"`
	Tid   any            `json:"tid"`
	Scope string         `json:"s,omitempty"`
	Args  map[string]any `json:"args"`
}

// annotateCat is the category of every added event, so that a viewer can
// filter them (and a reader can tell them from the profiler's).
const annotateCat = "torchmem"

// Tracks are the events torchmem annotate adds to a trace, counted by
// kind for its summary line.
type Tracks struct {
	Events                  [][]byte
	Counters, Markers, Leak int
}

// microsTS writes nanoseconds as the trace's microseconds with three
// decimals: the exact inverse of how the reader parsed them.
func microsTS(ns int64) json.Number {
	sign := ""
	if ns < 0 {
		sign, ns = "-", -ns
	}
	return json.Number(fmt.Sprintf("%s%d.%03d", sign, ns/1000, ns%1000))
}

// lane is a pid or tid as the trace wrote it: a number, or a string.
func lane(t *chrometrace.Trace, id chrometrace.StrID, num int64) any {
	if num >= 0 {
		return num
	}
	return t.Str(id)
}

// NewTracks builds the events to add to one trace, the answer as
// Perfetto draws it: allocated and reserved per GPU, the bytes each leak
// kept so far, and markers for the out-of-memory errors, the leak's steps,
// the allocator's cache releases and the idle gaps the rules found.
func NewTracks(t *rules.Table, findings []rules.Finding) (Tracks, error) {
	b := newTrackBuilder(t.Input.Trace)
	b.counters(t.Timelines)
	// The steps in time order, by ProfilerStep number: where a leak's kept
	// bytes are counted and a finding's gap is placed.
	steps := t.StepsInOrder
	if l := t.Leak; l != nil && l.Verdict == rules.LeakVerdictLeak && len(steps) > 0 {
		b.leaks(*l, steps, t.LeakKept)
	}
	b.ooms()
	if t.Frag != nil {
		b.drops(t.Frag)
	}
	b.gaps(findings, steps)
	return b.a, b.err
}

// trackBuilder collects the events NewTracks adds, the first error kept.
type trackBuilder struct {
	t   *chrometrace.Trace
	a   Tracks
	err error
	// devPid is the process of each GPU's kernels, else of its memory
	// events; firstPid the lowest GPU's.
	devPid   map[int]any
	firstPid any
}

func newTrackBuilder(t *chrometrace.Trace) *trackBuilder {
	b := &trackBuilder{t: t, devPid: map[int]any{}, firstPid: any(0)}
	for i := range t.DeviceOps {
		d := &t.DeviceOps[i]
		if _, ok := b.devPid[int(d.Device)]; !ok {
			th := t.Threads[d.Thread]
			b.devPid[int(d.Device)] = lane(t, th.Pid, th.PidNum)
		}
	}
	for i := range t.Memory {
		e := &t.Memory[i]
		if _, ok := b.devPid[int(e.DeviceID)]; !ok && e.DeviceType.IsGPU() {
			th := t.Threads[e.Thread]
			b.devPid[int(e.DeviceID)] = lane(t, th.Pid, th.PidNum)
		}
	}
	if len(b.devPid) > 0 {
		devs := make([]int, 0, len(b.devPid))
		for d := range b.devPid {
			devs = append(devs, d)
		}
		b.firstPid = b.devPid[slices.Min(devs)]
	}
	return b
}

// add appends one event (none after an error).
func (b *trackBuilder) add(e traceEvent) {
	if b.err != nil {
		return
	}
	data, err := json.Marshal(e)
	if err != nil {
		b.err = err
		return
	}
	b.a.Events = append(b.a.Events, data)
}

func (b *trackBuilder) pidOf(dev int) any {
	if p, ok := b.devPid[dev]; ok {
		return p
	}
	return 0
}

// counters: allocated and reserved, one counter track each per GPU, named
// as the timeline names them (a trace without Total Allocated has the sum
// from the window's start; one without Total Reserved has no reserved
// track, not one at 0 B); a value is written when it changes.
func (b *trackBuilder) counters(timelines []memtimeline.DeviceTimeline) {
	for _, d := range timelines {
		for _, s := range []struct {
			what string
			ser  memtimeline.Series
		}{{d.Allocated.Name, d.Allocated}, {d.Reserved.Name, d.Reserved}} {
			name := fmt.Sprintf("%s %s (torchmem)", d.Label(), s.what)
			for i, ts := range s.ser.T {
				if i > 0 && s.ser.V[i] == s.ser.V[i-1] {
					continue
				}
				b.add(traceEvent{Name: name, Cat: annotateCat, Ph: "C", TS: microsTS(ts), Pid: b.pidOf(d.Device), Tid: 0,
					Args: map[string]any{"bytes": s.ser.V[i]}})
				b.a.Counters++
			}
		}
	}
}

// leaks: what each leak kept so far, at the end of each step, from 0 at
// the first step's start; a marker at each step that kept memory.
func (b *trackBuilder) leaks(l rules.LeakReport, steps []chrometrace.Step, keptByStep [][]int64) {
	for li, lk := range l.Leaks {
		where := ""
		if len(lk.Sites) > 0 {
			where = lk.Sites[0].Site
			if lk.Sites[0].HoldingLine != "" {
				where = lk.Sites[0].HoldingLine
			}
		}
		name := fmt.Sprintf("leak %d kept (%s, torchmem)", li+1, lk.Kind)
		b.add(traceEvent{Name: name, Cat: annotateCat, Ph: "C", TS: microsTS(steps[0].Start), Pid: b.firstPid, Tid: 0,
			Args: map[string]any{"bytes": 0}})
		var kept int64
		for k, s := range steps {
			n := keptByStep[li][k]
			if n == 0 {
				continue
			}
			kept += n
			b.add(traceEvent{Name: name, Cat: annotateCat, Ph: "C", TS: microsTS(s.End()), Pid: b.firstPid, Tid: 0,
				Args: map[string]any{"bytes": kept}})
			b.a.Leak++
			b.add(traceEvent{Name: leak.MarkerName(li, s.Number, n, kept), Cat: annotateCat, Ph: "i", Scope: "g",
				TS: microsTS(s.End()), Pid: b.firstPid, Tid: 0, Args: map[string]any{"bytes": n, "kept_so_far_bytes": kept, "kind": lk.Kind, "site": where, "fix": lk.Fix}})
			b.a.Markers++
		}
	}
}

// ooms: a marker at each out-of-memory error.
func (b *trackBuilder) ooms() {
	for _, o := range b.t.OOMs {
		b.add(traceEvent{Name: fmt.Sprintf("OOM: %s requested on %s:%d", memtimeline.FormatBytes(o.Bytes), o.DeviceType, o.DeviceID), Cat: annotateCat, Ph: "i", Scope: "g",
			TS: microsTS(o.TS), Pid: b.pidOf(int(o.DeviceID)), Tid: 0,
			Args: map[string]any{"requested_bytes": o.Bytes, "allocated_bytes": o.TotalAllocated, "reserved_bytes": o.TotalReserved}})
		b.a.Markers++
	}
}

// drops: reserved memory that fell, the allocator giving cached segments
// back to retry a cudaMalloc that failed or under empty_cache().
func (b *trackBuilder) drops(rep *rules.FragReport) {
	for _, d := range rep.ReservedDrops {
		b.add(traceEvent{Name: fmt.Sprintf("reserved -%s: %s", memtimeline.FormatBytes(d.Bytes), d.Cause()), Cat: annotateCat, Ph: "i", Scope: "g",
			TS: microsTS(d.TS), Pid: b.firstPid, Tid: 0,
			Args: map[string]any{"released_bytes": d.Bytes, "reserved_after_bytes": d.ReservedAfter, "cuda_free_calls": d.CudaFreeCalls}})
		b.a.Markers++
	}
}

// gaps: findings that say where in time they are (the largest idle gap
// of a step), a marker at that moment with the finding's words.
func (b *trackBuilder) gaps(findings []rules.Finding, steps []chrometrace.Step) {
	stepStart := map[int64]int64{}
	for _, s := range steps {
		stepStart[s.Number] = s.Start
	}
	for _, f := range findings {
		step, ok1 := f.Metrics["largest_gap_step"]
		off, ok2 := f.Metrics["largest_gap_offset_us"]
		start, ok3 := stepStart[int64(step)]
		if !ok1 || !ok2 || !ok3 {
			continue
		}
		pid := b.firstPid
		if dev, ok := f.Metrics["device"]; ok {
			pid = b.pidOf(int(dev))
		}
		args := map[string]any{"rule": f.Rule, "severity": f.Severity.String(), "detail": f.Detail, "advice": f.Advice}
		if g, ok := f.Metrics["largest_gap_us"]; ok {
			args["gap_us"] = g
		}
		b.add(traceEvent{Name: f.Title, Cat: annotateCat, Ph: "i", Scope: "g",
			TS: microsTS(start + int64(off*1e3)), Pid: pid, Tid: 0, Args: args})
		b.a.Markers++
	}
}

// Annotated is what annotate wrote: the tracks added to Trace, whose
// Bytes were copied unchanged, and the Added events spliced in.
type Annotated struct {
	Tracks
	Trace string
	Bytes int64
	Added int
}

// writeAnnotated says what annotate wrote.
func (r *Report) writeAnnotated(w io.Writer) error {
	a := r.Annotated
	_, err := fmt.Fprintf(w, "wrote %s: the %d events of %s (%d bytes, unchanged) and %d added: %d counter values of allocated and reserved memory, %d of leaks, %d markers\n",
		r.Output, r.Eval.Inputs[0].Trace.Events, a.Trace, a.Bytes, a.Added, a.Counters, a.Leak, a.Markers)
	return err
}
