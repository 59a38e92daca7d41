package memtimeline

import (
	"github.com/torchmem/torchmem/chrometrace"
)

// BlockState classifies one block of the caching allocator seen in a trace.
type BlockState uint8

const (
	// Freed: allocated and freed inside the profiled window.
	Freed BlockState = iota
	// Unreleased: allocated in the window and still alive at its end.
	Unreleased
	// Preexisting: freed in the window but allocated before it began.
	Preexisting
)

func (s BlockState) String() string {
	return [...]string{"freed", "unreleased", "preexisting"}[s]
}

// Lifetime is one allocator block: its allocation and free events paired
// by (device, address) in time order.
type Lifetime struct {
	Alloc int32 // index into Trace.Memory, -1 for Preexisting
	Free  int32 // index into Trace.Memory, -1 for Unreleased
	Bytes int64
	Addr  uint64
	// Start and End are nanoseconds; Start is -1 for Preexisting blocks,
	// End is -1 for Unreleased ones.
	Start, End int64
	// State and Device last: the two bytes share one word (48 bytes a
	// lifetime, not 56; a 1 GB trace has millions of them).
	State  BlockState
	Device int8
}

// Lifetimes pairs every GPU allocation with its free. device selects one
// GPU index, -1 all. Events without Addr (torch < 1.10) have no lifetime
// (Trace.MemorySchema.WithoutAddr counts them). Lifetimes come out in allocation (or free) time order.
func Lifetimes(t *chrometrace.Trace, device int) []Lifetime {
	// An event without Addr (torch < 1.10) pairs with nothing: it is left
	// out rather than paired at address 0.
	idx := chrometrace.MemoryInTimeOrder(t.Memory, func(e *chrometrace.MemoryEvent) bool {
		return e.DeviceType.IsGPU() && (device < 0 || int(e.DeviceID) == device) && e.Bytes != 0 && e.Fields&chrometrace.MemAddr != 0
	})
	// The open blocks by address, a map per device: runs of one device's
	// events look up uint64 keys (the map's fast path).
	byDevice := map[int8]map[uint64]int{} // -> index in out
	var open map[uint64]int
	openDevice, haveOpen := int8(0), false
	out := make([]Lifetime, 0, len(idx)/2+1)
	for _, i := range idx {
		e := &t.Memory[i]
		if !haveOpen || e.DeviceID != openDevice {
			if open = byDevice[e.DeviceID]; open == nil {
				open = map[uint64]int{}
				byDevice[e.DeviceID] = open
			}
			openDevice, haveOpen = e.DeviceID, true
		}
		if e.Bytes > 0 {
			open[e.Addr] = len(out)
			out = append(out, Lifetime{Alloc: i, Free: -1, State: Unreleased, Bytes: e.Bytes, Addr: e.Addr, Start: e.TS, End: -1, Device: e.DeviceID})
			continue
		}
		if j, ok := open[e.Addr]; ok {
			delete(open, e.Addr)
			out[j].Free, out[j].End, out[j].State = i, e.TS, Freed
			continue
		}
		out = append(out, Lifetime{Alloc: -1, Free: i, State: Preexisting, Bytes: -e.Bytes, Addr: e.Addr, Start: -1, End: e.TS, Device: e.DeviceID})
	}
	return out
}

// PeakAllocated returns the largest "Total Allocated" on a device (-1 for
// the first GPU seen) and when it happened.
func PeakAllocated(t *chrometrace.Trace, device int) (bytes, ts int64) {
	ts = -1
	for i := range t.Memory {
		e := &t.Memory[i]
		if !e.DeviceType.IsGPU() || (device >= 0 && int(e.DeviceID) != device) {
			continue
		}
		if ts < 0 || e.TotalAllocated > bytes {
			bytes, ts = e.TotalAllocated, e.TS
		}
	}
	return bytes, ts
}
