package snapshot

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/torchmem/torchmem/memtimeline"
)

// cppName shortens a C++ frame to its qualified name, without the
// parameter list.
func cppName(name string) string {
	name = strings.ReplaceAll(name, "(anonymous namespace)", "{anon}")
	if i := strings.IndexByte(name, '('); i > 0 {
		name = name[:i]
	}
	return name
}

// PeakComposition is what the allocator snapshot's recorded history
// held at its highest point on the device with the highest one: bytes alive
// by line (the user's innermost frame of each allocation). The history
// starts when recording began; blocks from before it that were still alive
// at the dump are counted as BeforeProfiling. A snapshot has no operators
// and no phases, so there is no category split. nil without history.
func PeakComposition(s *Snapshot) *memtimeline.Composition {
	var best *memtimeline.Composition
	var allocatedAtDump = map[int]int64{}
	for _, seg := range s.Segments {
		allocatedAtDump[seg.Device] += seg.AllocatedSize
	}
	for dev, entries := range s.DeviceTraces {
		// First pass: the index where active memory peaks, and what the
		// history ends with (to place the blocks from before it).
		var cur, peak int64
		peakAt := -1
		for i, e := range entries.All() {
			switch e.Action {
			case ActionAlloc:
				cur += memtimeline.BlockSize(e.Size)
			case ActionFreeCompleted:
				cur -= memtimeline.BlockSize(e.Size)
			default:
				continue
			}
			if peakAt < 0 || cur > peak {
				peak, peakAt = cur, i
			}
		}
		if peakAt < 0 {
			continue
		}
		before := max(0, allocatedAtDump[dev]-cur)
		if best != nil && peak+before <= best.AllocatedBytes {
			continue
		}
		// Second pass: the blocks alive at the peak, by line. A block
		// keeps its stack; lines are made for the blocks still alive,
		// once per stack (entries share their stacks).
		var alive AddrMap // addr -> index of its alloc
		for i, e := range entries.All() {
			if i > peakAt {
				break
			}
			switch e.Action {
			case ActionAlloc:
				alive.Set(e.Addr, i)
			case ActionFreeCompleted:
				alive.Delete(e.Addr)
			}
		}
		lineOf := map[stackKey]string{}
		lines := map[string]*memtimeline.Share{}
		var seen int64
		alive.All(func(_ uint64, i int) {
			e := entries.At(i)
			k := keyOf(e.Frames)
			line, ok := lineOf[k]
			if !ok {
				f := UserFrame(e.Frames)
				line = "C++: " + cppName(f.Name)
				if f.IsPython() {
					line = fmt.Sprintf("%s(%d): %s", filepath.Base(f.Filename), f.Line, f.Name)
				}
				lineOf[k] = line
			}
			sh := lines[line]
			if sh == nil {
				sh = &memtimeline.Share{Name: line}
				lines[line] = sh
			}
			size := memtimeline.BlockSize(e.Size)
			sh.Bytes += size
			sh.Blocks++
			seen += size
		})
		if before > 0 {
			lines[memtimeline.BeforeProfiling] = &memtimeline.Share{Name: memtimeline.BeforeProfiling, Bytes: before}
		}
		best = &memtimeline.Composition{
			TNs: entries.At(peakAt).TimeUS * 1000, Device: dev, AllocatedBytes: seen + before, SeenBytes: seen,
			ByLine: memtimeline.SortedShares(lines), ByOperator: []memtimeline.Share{}, ByCategory: []memtimeline.Share{},
			Note: "from the allocator snapshot's recorded history (no operators or step phases, so no category split); " +
				"blocks allocated before recording began and alive at the dump are counted as allocated before profiling",
		}
	}
	return best
}

// stackKey identifies a stack slice: its first frame and its length
// (entries with the same stack share one slice).
type stackKey struct {
	first *Frame
	n     int
}

func keyOf(st []Frame) stackKey {
	if len(st) == 0 {
		return stackKey{}
	}
	return stackKey{&st[0], len(st)}
}
