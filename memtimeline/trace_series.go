package memtimeline

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/torchmem/torchmem/chrometrace"
)

// DeviceTimeline is one GPU's allocator totals over time, from the
// "Total Allocated" / "Total Reserved" of its [memory] events.
type DeviceTimeline struct {
	DeviceType chrometrace.DeviceType
	Device     int
	Allocated  Series
	Reserved   Series
}

// AllocatedFromWindowStart names the allocated series of a trace that
// records no Total Allocated: the sum of its events' Bytes from the
// profiled window's start, which leaves out what was allocated before.
const AllocatedFromWindowStart = "allocated since the window's start"

// Label is "cuda:0".
func (d *DeviceTimeline) Label() string { return fmt.Sprintf("%s:%d", d.DeviceType, d.Device) }

// TraceTimelines returns one timeline per GPU in the trace, in device
// order. Events are put in time order first: the file order is not.
// What the trace does not record is not drawn as a figure: where no event
// carries Total Reserved (torch before 1.10) Reserved has no points, not a
// line at 0 B; where none carries Total Allocated, Allocated is the running
// sum from the window's start and its name says so.
func TraceTimelines(t *chrometrace.Trace) []DeviceTimeline {
	type key struct {
		dt  chrometrace.DeviceType
		dev int8
	}
	byDev := map[key][]int32{}
	for i := range t.Memory {
		e := &t.Memory[i]
		if e.DeviceType.IsGPU() {
			k := key{e.DeviceType, e.DeviceID}
			byDev[k] = append(byDev[k], int32(i))
		}
	}
	keys := make([]key, 0, len(byDev))
	for k := range byDev {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b key) int { return cmp.Or(cmp.Compare(a.dt, b.dt), cmp.Compare(a.dev, b.dev)) })
	var out []DeviceTimeline
	for _, k := range keys {
		idx := byDev[k]
		slices.SortStableFunc(idx, func(a, b int32) int { return cmp.Compare(t.Memory[a].TS, t.Memory[b].TS) })
		d := DeviceTimeline{DeviceType: k.dt, Device: int(k.dev)}
		d.Allocated = Series{Name: "allocated", T: make([]int64, len(idx)), V: make([]int64, len(idx))}
		d.Reserved = Series{Name: "reserved", T: make([]int64, len(idx)), V: make([]int64, len(idx))}
		for j, i := range idx {
			e := &t.Memory[i]
			d.Allocated.T[j], d.Allocated.V[j] = e.TS, e.TotalAllocated
			d.Reserved.T[j], d.Reserved.V[j] = e.TS, e.TotalReserved
		}
		if t.MemorySchema.NoReserved {
			d.Reserved = Series{Name: d.Reserved.Name}
		}
		if t.MemorySchema.DerivedAllocated {
			d.Allocated.Name = AllocatedFromWindowStart
		}
		out = append(out, d)
	}
	return out
}
