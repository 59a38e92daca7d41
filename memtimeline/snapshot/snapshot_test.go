package snapshot

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/memtimeline/memtest"
)

// snapshotOracle mirrors oracle.json, written by make_oracle.py with
// CPython's pickle module from the same files.
type snapshotOracle struct {
	Segments                int            `json:"segments"`
	SmallSegments           int            `json:"small_segments"`
	LargeSegments           int            `json:"large_segments"`
	ExpandableSegments      int            `json:"expandable_segments"`
	ReservedBytes           int64          `json:"reserved_bytes"`
	SegmentAllocatedSizeSum int64          `json:"segment_allocated_size_sum"`
	SegmentActiveSizeSum    int64          `json:"segment_active_size_sum"`
	AllocatedBytes          int64          `json:"allocated_bytes"`
	RequestedBytes          int64          `json:"requested_bytes"`
	BlockStates             map[string]int `json:"block_states"`
	InactiveSplitBytes      int64          `json:"inactive_split_bytes"`
	LargestFreeBlock        int64          `json:"largest_free_block"`
	Settings                map[string]any `json:"settings"`
	Annotations             int            `json:"annotations"`
	TorchReservedAtExit     int64          `json:"torch_reserved_bytes_at_exit"`
	TorchSegmentsAtExit     int            `json:"torch_segments_at_exit"`
	DeviceTraces            []struct {
		Entries        int            `json:"entries"`
		Actions        map[string]int `json:"actions"`
		SizeSum        int64          `json:"size_sum"`
		AddrXor        uint64         `json:"addr_xor"`
		TimeSum        uint64         `json:"time_sum"` // mod 2^64
		FramesTotal    int            `json:"frames_total"`
		DistinctFrames int            `json:"distinct_frames"`
		DistinctStacks int            `json:"distinct_stacks"`
		Leaks          []struct {
			Site  string `json:"site"`
			Bytes int64  `json:"bytes"`
			Count int    `json:"count"`
		} `json:"leaks"`
	} `json:"device_traces"`
}

var realSnapshots = []string{"frag_small_allocs", "leak_module_cache", "leak_eval_no_grad"}

func loadOracle(t *testing.T) map[string]snapshotOracle {
	t.Helper()
	var o map[string]snapshotOracle
	memtest.ReadJSON(t, memtest.Testdata("snapshots", "oracle.json"), &o)
	return o
}

// TestSnapshotMatchesCPython decodes the real snapshots and compares every
// figure with what CPython's pickle module gives for the same bytes.
func TestSnapshotMatchesCPython(t *testing.T) {
	oracle := loadOracle(t)
	for _, name := range realSnapshots {
		t.Run(name, func(t *testing.T) {
			want, ok := oracle[name]
			if !ok {
				t.Fatalf("oracle.json lacks %s", name)
			}
			s := memtest.Decode(t, memtest.NamedSnapshot(name), Read)
			st := s.Stats()
			check := func(what string, got, want any) {
				t.Helper()
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("%s = %v, CPython says %v", what, got, want)
				}
			}
			check("segments", st.Segments, want.Segments)
			check("small segments", st.SmallSegments, want.SmallSegments)
			check("large segments", st.LargeSegments, want.LargeSegments)
			check("expandable segments", st.ExpandableSegments, want.ExpandableSegments)
			check("reserved", st.ReservedBytes, want.ReservedBytes)
			check("allocated", st.AllocatedBytes, want.AllocatedBytes)
			check("requested", st.RequestedBytes, want.RequestedBytes)
			check("inactive split", st.InactiveSplitBytes, want.InactiveSplitBytes)
			check("largest free block", st.LargestFreeBlock, want.LargestFreeBlock)
			check("allocated blocks", st.AllocatedBlocks, want.BlockStates[BlockActiveAllocated])
			check("pending free blocks", st.PendingFreeBlocks, want.BlockStates[BlockActivePendingFree])
			check("inactive blocks", st.InactiveBlocks, want.BlockStates[BlockInactive])
			var allocSum, activeSum int64
			for _, seg := range s.Segments {
				allocSum += seg.AllocatedSize
				activeSum += seg.ActiveSize
			}
			check("sum of segment allocated_size", allocSum, want.SegmentAllocatedSizeSum)
			check("sum of segment active_size", activeSum, want.SegmentActiveSizeSum)
			// torch.cuda.memory_stats() at process exit: the cache was not
			// emptied after the dump, so reserved bytes and segments match.
			check("reserved vs torch memory_stats", st.ReservedBytes, want.TorchReservedAtExit)
			check("segments vs torch memory_stats", st.Segments, want.TorchSegmentsAtExit)

			set := s.AllocatorSettings
			check("PYTORCH_CUDA_ALLOC_CONF", set.AllocConf, want.Settings["PYTORCH_CUDA_ALLOC_CONF"])
			check("max_split_size", set.MaxSplitSize, want.Settings["max_split_size"])
			check("expandable_segments", set.ExpandableSegments, want.Settings["expandable_segments"])
			check("garbage_collection_threshold", set.GarbageCollectionThreshold, want.Settings["garbage_collection_threshold"])
			check("roundup_power2_divisions", len(set.RoundupPower2Divisions), 16)
			check("annotations", len(s.ExternalAnnotations), want.Annotations)

			if len(s.DeviceTraces) != len(want.DeviceTraces) {
				t.Fatalf("%d device traces, CPython says %d", len(s.DeviceTraces), len(want.DeviceTraces))
			}
			leaks := s.LeakCandidates()
			for d, tr := range s.DeviceTraces {
				wt := want.DeviceTraces[d]
				check("entries", tr.Len(), wt.Entries)
				actions := map[string]int{}
				var sizeSum int64
				var addrXor, timeSum uint64
				framesTotal := 0
				frames := map[Frame]bool{}
				stacks := map[string]bool{}
				seen := map[*Frame]bool{} // stacks are shared slices: key each once
				for _, e := range tr.All() {
					actions[e.Action]++
					sizeSum += e.Size
					timeSum += uint64(e.TimeUS)
					addrXor ^= e.Addr
					framesTotal += len(e.Frames)
					if len(e.Frames) > 0 {
						if seen[&e.Frames[0]] {
							continue
						}
						seen[&e.Frames[0]] = true
					}
					var key strings.Builder
					for _, f := range e.Frames {
						frames[f] = true
						fmt.Fprintf(&key, "%s\x00%d\x00%s\x01", f.Filename, f.Line, f.Name)
					}
					stacks[key.String()] = true
				}
				check("actions", actions, wt.Actions)
				check("sum of sizes", sizeSum, wt.SizeSum)
				check("sum of time_us", timeSum, wt.TimeSum)
				check("xor of addrs", addrXor, wt.AddrXor)
				check("frames", framesTotal, wt.FramesTotal)
				check("distinct frames", len(frames), wt.DistinctFrames)
				check("distinct stacks", len(stacks), wt.DistinctStacks)

				var got, exp []string
				for _, l := range leaks {
					if l.Device == d {
						got = append(got, fmt.Sprintf("%s:%d %s bytes=%d count=%d", l.Site.Filename, l.Site.Line, l.Site.Name, l.Bytes, l.Count))
					}
				}
				for _, l := range wt.Leaks {
					exp = append(exp, fmt.Sprintf("%s bytes=%d count=%d", l.Site, l.Bytes, l.Count))
				}
				sort.Strings(got)
				sort.Strings(exp)
				check("leak groups", strings.Join(got, "\n"), strings.Join(exp, "\n"))
			}
		})
	}
}

// TestFragSnapshotIssueFigures pins the figures the fragmentation issue
// states for frag_small_allocs: reserved is the sum of segment total_size,
// allocated the sum of active_allocated block sizes.
func TestFragSnapshotIssueFigures(t *testing.T) {
	st := memtest.Decode(t, memtest.NamedSnapshot("frag_small_allocs"), Read).Stats()
	if st.ReservedBytes != 534773760 || st.AllocatedBytes != 272588288 {
		t.Errorf("reserved %d allocated %d, issue says 534773760 and 272588288", st.ReservedBytes, st.AllocatedBytes)
	}
	// Half the reservation is free, and half of that sits in segments that
	// also hold live blocks: the fragmentation the scenario planted.
	if st.InactiveSplitBytes == 0 || st.InactiveSplitBytes > st.FreeBytes {
		t.Errorf("inactive split %d of free %d", st.InactiveSplitBytes, st.FreeBytes)
	}
	if st.FreeBytes != st.ReservedBytes-st.ActiveBytes {
		t.Errorf("free %d != reserved %d - active %d", st.FreeBytes, st.ReservedBytes, st.ActiveBytes)
	}
}

// truthJSON is the scenario description recorded beside each trace.
type truthJSON struct {
	LeakBytesPerStep int64  `json:"leak_bytes_per_step"`
	LeakSite         string `json:"leak_site"`
	Window           struct {
		Active int `json:"active"`
	} `json:"window"`
}

// TestLeakCandidatesFindPlantedLeaks checks the leak grouping against what
// the scenarios planted (truth.json): a module caching a 4 MiB activation per
// forward, and an eval loop keeping its outputs.
func TestLeakCandidatesFindPlantedLeaks(t *testing.T) {
	t.Run("leak_module_cache", func(t *testing.T) {
		truth := readSnapshotTruth(t, "leak_module_cache")
		leaks := memtest.Decode(t, memtest.NamedSnapshot("leak_module_cache"), Read).LeakCandidates()
		top := leaks[0]
		// Cached.forward: self.cache.append(h.detach().clone())
		if top.Site.Name != "forward" || !top.Site.IsPython() || IsLibraryFrame(top.Site) {
			t.Fatalf("top leak candidate %v, want the user's forward (%s)", top.Site, truth.LeakSite)
		}
		if top.Bytes != int64(top.Count)*truth.LeakBytesPerStep {
			t.Errorf("top group %d bytes in %d allocs, want %d per alloc", top.Bytes, top.Count, truth.LeakBytesPerStep)
		}
		if top.Steps < truth.Window.Active {
			t.Errorf("top group left memory in %d steps, want at least the %d active steps", top.Steps, truth.Window.Active)
		}
		for _, l := range leaks[1:] {
			if l.Steps >= top.Steps {
				t.Errorf("%v also spans %d steps", l.Site, l.Steps)
			}
		}
	})
	t.Run("leak_eval_no_grad", func(t *testing.T) {
		truth := readSnapshotTruth(t, "leak_eval_no_grad")
		leaks := memtest.Decode(t, memtest.NamedSnapshot("leak_eval_no_grad"), Read).LeakCandidates()
		top := leaks[0]
		// "preds.append(out) / out = m(x)": the model call in the user's step.
		if IsLibraryFrame(top.Site) || !top.Site.IsPython() {
			t.Fatalf("top leak candidate %v is not user code", top.Site)
		}
		if top.Steps < truth.Window.Active {
			t.Errorf("top group left memory in %d steps, want at least %d", top.Steps, truth.Window.Active)
		}
		if top.ActiveAtDumpBytes != top.Bytes {
			t.Errorf("kept outputs should still be allocated at the dump: %d of %d", top.ActiveAtDumpBytes, top.Bytes)
		}
	})
}

func readSnapshotTruth(t *testing.T, name string) truthJSON {
	t.Helper()
	var tr truthJSON
	memtest.ReadJSON(t, memtest.Testdata("snapshots", name+".truth.json"), &tr)
	return tr
}

// TestSegmentFillsAgreeWithBlocks checks every real segment's fill line
// against its blocks: used + free = total, the bar has the right width, and
// a full or empty segment draws a full or empty bar.
func TestSegmentFillsAgreeWithBlocks(t *testing.T) {
	for _, name := range realSnapshots {
		s := memtest.Decode(t, memtest.NamedSnapshot(name), Read)
		fills := s.SegmentFills(DefaultBarWidth)
		if len(fills) != len(s.Segments) {
			t.Fatalf("%s: %d fills for %d segments", name, len(fills), len(s.Segments))
		}
		for i, f := range fills {
			if i > 0 && fills[i-1].TotalSize < f.TotalSize {
				t.Errorf("%s: fills not sorted by size at %d", name, i)
			}
			if f.ActiveBytes+f.FreeBytes != f.TotalSize {
				t.Errorf("%s %#x: active %d + free %d != total %d", name, f.Address, f.ActiveBytes, f.FreeBytes, f.TotalSize)
			}
			if len(f.Bar) != DefaultBarWidth {
				t.Errorf("%s %#x: bar %q", name, f.Address, f.Bar)
			}
			switch {
			case f.FreeBytes == 0 && f.Bar != strings.Repeat("#", DefaultBarWidth):
				t.Errorf("%s %#x: full segment drawn %q", name, f.Address, f.Bar)
			case f.ActiveBytes == 0 && f.Bar != strings.Repeat(".", DefaultBarWidth):
				t.Errorf("%s %#x: empty segment drawn %q", name, f.Address, f.Bar)
			}
		}
		text := FormatSegmentMap(fills, 3)
		if n := strings.Count(text, "\n"); n != 4 {
			t.Errorf("%s: top 3 printed %d lines:\n%s", name, n, text)
		}
	}
}

// TestFillBar draws a hand-made segment: 8 KiB in 4 cells, blocks
// [active 3 KiB][free 1 KiB][pending 1 KiB][free 3 KiB].
func TestFillBar(t *testing.T) {
	s := &Snapshot{Segments: []Segment{{
		Address: 0x1000, TotalSize: 8192, SegmentType: "small",
		Blocks: []Block{
			{Address: 0x1000, Size: 3072, State: BlockActiveAllocated},
			{Address: 0x1c00, Size: 1024, State: BlockInactive},
			{Address: 0x2000, Size: 1024, State: BlockActivePendingFree},
			{Address: 0x2400, Size: 3072, State: BlockInactive},
		},
	}}}
	f := s.SegmentFills(4)[0]
	// Cells of 2 KiB: [2048 used][1024 used][1024 used][0 used].
	if f.Bar != "#55." {
		t.Errorf("bar %q, want \"#55.\"", f.Bar)
	}
	if f.AllocatedBytes != 3072 || f.ActiveBytes != 4096 || f.FreeBytes != 4096 || f.LargestFreeBlock != 3072 {
		t.Errorf("fill %+v", f)
	}
	st := s.Stats()
	if st.InactiveSplitBytes != 4096 || st.InactiveSplitBlocks != 2 || st.PendingFreeBlocks != 1 {
		t.Errorf("stats %+v", st)
	}
}

func TestUserFrame(t *testing.T) {
	torchMod := Frame{Filename: "/venv/lib/python3.12/site-packages/torch/nn/modules/module.py", Line: 1779, Name: "_wrapped_call_impl"}
	checkout := Frame{Filename: "/src/pytorch/torch/nn/functional.py", Line: 10, Name: "linear"}
	user := Frame{Filename: "/opt/torch/myproject/train.py", Line: 42, Name: "step"}
	cpp := Frame{Filename: "??", Name: "torch::unwind::unwind()"}
	cases := []struct {
		stack []Frame
		want  Frame
	}{
		{[]Frame{cpp, torchMod, checkout, user}, user},
		{[]Frame{cpp, checkout, torchMod}, checkout}, // no user frame: innermost Python
		{[]Frame{cpp, {Filename: "??", Name: "at::cuda::setWorkspaceForHandle()"}}, Frame{Filename: "??", Name: "at::cuda::setWorkspaceForHandle()"}},
		{[]Frame{cpp}, cpp},
		{nil, Frame{Name: "<no stack recorded>"}},
	}
	for i, c := range cases {
		if got := UserFrame(c.stack); got != c.want {
			t.Errorf("case %d: %v, want %v", i, got, c.want)
		}
	}
}

func TestOOMEntries(t *testing.T) {
	s := &Snapshot{DeviceTraces: []Trace{{}, NewTrace([]TraceEntry{
		{Action: ActionAlloc, Addr: 1, Size: 512},
		{Action: ActionOOM, Size: 1 << 30, DeviceFree: 1 << 20, TimeUS: 7,
			Frames: []Frame{{Filename: "/x/train.py", Line: 3, Name: "main"}}},
	})}}
	ooms := s.OOMs()
	if len(ooms) != 1 || ooms[0].Device != 1 || ooms[0].RequestedBytes != 1<<30 ||
		ooms[0].DeviceFreeBytes != 1<<20 || ooms[0].Site.Line != 3 {
		t.Errorf("ooms %+v", ooms)
	}
	leaks := s.LeakCandidates()
	if len(leaks) != 1 || leaks[0].Bytes != 512 || leaks[0].Steps != 0 {
		t.Errorf("leaks %+v", leaks)
	}
}
