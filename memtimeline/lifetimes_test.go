package memtimeline

import (
	"slices"
	"testing"

	"github.com/torchmem/torchmem/chrometrace"
)

// TestLifetimesPairInTimeOrderPerDevice: an allocation pairs with the next
// free of the same address on the same device in time order, whatever the
// file's order; another device's block at that address stays apart.
func TestLifetimesPairInTimeOrderPerDevice(t *testing.T) {
	const a, b = 0x7f00_0000_1000, 0x7f00_0000_2000
	ev := func(ts, bytes int64, addr uint64, dev int8) chrometrace.MemoryEvent {
		return chrometrace.MemoryEvent{TS: ts, Bytes: bytes, Addr: addr, DeviceType: chrometrace.DeviceCUDA, DeviceID: dev, Fields: chrometrace.MemAddr}
	}
	tr := &chrometrace.Trace{Memory: []chrometrace.MemoryEvent{
		ev(30, -512, a, 0), // 0: frees event 2 (written before it)
		ev(40, -512, a, 1), // 1: frees event 3, not event 2
		ev(10, 512, a, 0),  // 2
		ev(20, 512, a, 1),  // 3
		ev(50, 256, a, 0),  // 4: the address again, never freed
		ev(5, -64, b, 0),   // 5: freed before the window
		ev(45, 128, b, 1),  // 6: never freed
		{TS: 60, Bytes: 8, DeviceType: chrometrace.DeviceCUDA, Fields: 0},                           // 7: no address: no lifetime
		{TS: 70, Bytes: 8, Addr: a, DeviceType: chrometrace.DeviceCPU, Fields: chrometrace.MemAddr}, // 8: CPU
	}}
	got := Lifetimes(tr, -1)
	want := []Lifetime{
		{Alloc: -1, Free: 5, State: Preexisting, Bytes: 64, Addr: b, Start: -1, End: 5, Device: 0},
		{Alloc: 2, Free: 0, State: Freed, Bytes: 512, Addr: a, Start: 10, End: 30, Device: 0},
		{Alloc: 3, Free: 1, State: Freed, Bytes: 512, Addr: a, Start: 20, End: 40, Device: 1},
		{Alloc: 6, Free: -1, State: Unreleased, Bytes: 128, Addr: b, Start: 45, End: -1, Device: 1},
		{Alloc: 4, Free: -1, State: Unreleased, Bytes: 256, Addr: a, Start: 50, End: -1, Device: 0},
	}
	if !slices.Equal(got, want) {
		t.Errorf("Lifetimes:\n got %+v\nwant %+v", got, want)
	}
	if got := Lifetimes(tr, 1); len(got) != 2 || got[0].Alloc != 3 || got[1].Alloc != 6 {
		t.Errorf("Lifetimes(device 1) = %+v, want the blocks of events 3 and 6", got)
	}
}
