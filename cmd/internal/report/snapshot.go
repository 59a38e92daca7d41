package report

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/jedib0t/go-pretty/v6/table"
	"github.com/torchmem/torchmem/chrometrace"
	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/memtimeline/snapshot"
)

// SnapshotFile is one allocator snapshot's report (the snapshot view).
type SnapshotFile struct {
	Path   string
	Report *snapshot.Report
}

// writeSnapshots writes each snapshot's report; Markdown fences the text,
// whose meaning is in its alignment (the fill map).
func (r *Report) writeSnapshots(w io.Writer) error {
	return EachInput(w, r.Format, r.Snapshots, func(w io.Writer, f SnapshotFile) error {
		if r.Format == Markdown {
			// The file is named in the escaped heading only: in the block
			// a name is inert, but need not be there at all.
			return MarkdownFenced(w, f.Path, func(w io.Writer) error { return writeSnapshotReport(w, "", f.Report, Text, r.Top, r.Leaks) })
		}
		return writeSnapshotReport(w, f.Path, f.Report, r.Format, r.Top, r.Leaks)
	})
}

// snapshotJSON is the --format json document.
type snapshotJSON struct {
	File string `json:"file"`
	*snapshot.Report
}

// writeSnapshotReport prints an allocator snapshot's report (snapshot,
// and frag on a snapshot): top segments in the fill map, leaks candidate
// groups (0: all).
func writeSnapshotReport(w io.Writer, path string, rep *snapshot.Report, format string, top, leaks int) error {
	if format == JSON {
		// Every segment and leak group: scripts filter for themselves.
		return WriteJSON(w, snapshotJSON{File: path, Report: rep})
	}
	st := rep.Stats
	if path != "" {
		path = " " + path
	}
	fmt.Fprintf(w, "Allocator snapshot%s: %d segments on device(s) %s, %d blocks\n",
		path, st.Segments, joinInts(st.Devices), st.Blocks)
	fmt.Fprintln(w, "Sizes in binary units as torch prints them (1 MB = 1 MiB); Bytes are exact.")
	fmt.Fprintln(w)

	t := NewTable()
	t.AppendHeader(table.Row{"Memory", "Size", "Bytes", "What it is"})
	row := func(name string, n int64, what string) {
		t.AppendRow(table.Row{name, memtimeline.FormatBytes(n), n, what})
	}
	row("Reserved", st.ReservedBytes, "segments cudaMalloc'd by the caching allocator")
	row("Allocated", st.AllocatedBytes, fmt.Sprintf("%d live blocks (rounded sizes)", st.AllocatedBlocks))
	if st.RequestedNotRecorded {
		t.AppendRow(table.Row{"Requested", "not recorded", "-", "this snapshot records no requested_size (older torch)"})
		t.AppendRow(table.Row{"Rounding waste", "not recorded", "-", "allocated - requested"})
	} else {
		row("Requested", st.RequestedBytes, "what the live tensors asked for")
		row("Rounding waste", chrometrace.SubSat(st.AllocatedBytes, st.RequestedBytes), "allocated - requested")
	}
	if st.PendingFreeBlocks > 0 {
		row("Pending free", chrometrace.SubSat(st.ActiveBytes, st.AllocatedBytes), fmt.Sprintf("%d blocks freed but still used by a stream", st.PendingFreeBlocks))
	}
	row("Free in cache", st.FreeBytes, fmt.Sprintf("%d inactive blocks", st.InactiveBlocks))
	row("Inactive split", st.InactiveSplitBytes, fmt.Sprintf("%d free blocks in partly used segments: empty_cache() cannot release them", st.InactiveSplitBlocks))
	row("Largest free block", st.LargestFreeBlock, largestFreeNote(st))
	Table(w, t, Text)
	fmt.Fprintf(w, "Segments: %d small (2 MB, blocks <= 1 MB), %d large, %d expandable\n\n",
		st.SmallSegments, st.LargeSegments, st.ExpandableSegments)

	fmt.Fprintf(w, "Segment fill map (largest first; each cell is 1/%d of a segment: '#' full, '1'-'9' tenths used, '0' under a tenth, '.' free)\n", snapshot.DefaultBarWidth)
	fmt.Fprint(w, snapshot.FormatSegmentMap(rep.SegmentFills, top))
	fmt.Fprintln(w)

	renderLeakCandidates(w, rep, leaks)
	renderFields(w, rep)
	renderSettings(w, rep.Settings)
	renderOOMs(w, rep.OOMs, len(rep.TraceEntries) > 0)
	return nil
}

// renderFields shows the newer snapshot fields where the snapshot has
// them: private pools, the history's labels, record_function ranges, and
// what a snapshot without history cannot tell.
func renderFields(w io.Writer, rep *snapshot.Report) {
	if rep.NoHistory != "" {
		fmt.Fprintf(w, "History: %s\n\n", rep.NoHistory)
	}
	if len(rep.Pools) > 0 {
		fmt.Fprintln(w, "Private pools (memory kept for CUDA graphs and torch.cuda.MemPool: a pool, not a leak; the allocator serves only its owner from it):")
		for _, p := range rep.Pools {
			line := fmt.Sprintf("  pool (%d, %d), %s: %s reserved in %d segments, %s allocated", p.Pool[0], p.Pool[1], p.Kind,
				memtimeline.FormatBytes(p.ReservedBytes), p.Segments, memtimeline.FormatBytes(p.AllocatedBytes))
			if len(p.Sites) > 0 {
				line += "; held by " + strings.Join(p.Sites, ", ")
			}
			fmt.Fprintln(w, line)
		}
		fmt.Fprintln(w)
	}
	if len(rep.Labels) > 0 {
		fmt.Fprintln(w, "Allocations by label (the history's compile_context: the torch.compile region, N/A outside; user_metadata: your own labels, torch.cuda.memory._set_memory_metadata):")
		t := NewTable()
		t.AppendHeader(table.Row{"Field", "Value", "Allocs", "Allocated", "Never freed"})
		for _, l := range rep.Labels {
			t.AppendRow(table.Row{l.Field, l.Value, l.Allocs, memtimeline.FormatBytes(l.AllocBytes), memtimeline.FormatBytes(l.LiveBytes)})
		}
		Table(w, t, Text)
		fmt.Fprintln(w)
	}
	if len(rep.Annotations) > 0 {
		var parts []string
		for _, a := range rep.Annotations {
			parts = append(parts, fmt.Sprintf("%s x%d", a.Name, a.Ranges))
		}
		fmt.Fprintf(w, "Annotations (record_function ranges recorded with the history): %s\n\n", strings.Join(parts, ", "))
	}
}

func largestFreeNote(st snapshot.Stats) string {
	if st.FreeBytes == 0 {
		return "no free blocks"
	}
	return fmt.Sprintf("%.0f%% of free bytes; the rest is scattered", 100*float64(st.LargestFreeBlock)/float64(st.FreeBytes))
}

func renderLeakCandidates(w io.Writer, rep *snapshot.Report, limit int) {
	total := 0
	for _, n := range rep.TraceEntries {
		total += n
	}
	if total == 0 {
		fmt.Fprintln(w, "Leak candidates: no allocation history in this snapshot (record it with torch.cuda.memory._record_memory_history() before the run)")
		fmt.Fprintln(w)
		return
	}
	fmt.Fprintf(w, "Leak candidates: allocations never freed in the recorded history (%d entries over %s), by your innermost Python frame\n",
		total, formatNS(min(chrometrace.SubSat(rep.TraceEndUS, rep.TraceStartUS), math.MaxInt64/1000)*1000))
	if len(rep.Leaks) == 0 {
		fmt.Fprintln(w, "none: everything allocated in the history was freed")
		fmt.Fprintln(w)
		return
	}
	t := NewTable()
	t.AppendHeader(table.Row{"Site", "Live", "Bytes", "Allocs", "Steps", "Still allocated at dump"})
	n := len(rep.Leaks)
	if limit > 0 && limit < n {
		n = limit
	}
	for _, l := range rep.Leaks[:n] {
		steps := "-"
		if l.Steps > 0 {
			steps = strconv.Itoa(l.Steps)
		}
		site := shortSite(l.Site)
		if l.Site.IsPython() {
			site = snapshot.FrameName(l.Site, l.Stack) // named as traces and findings name it
		}
		t.AppendRow(table.Row{site, memtimeline.FormatBytes(l.Bytes), l.Bytes, l.Count, steps, memtimeline.FormatBytes(l.ActiveAtDumpBytes)})
	}
	Table(w, t, Text)
	if n < len(rep.Leaks) {
		fmt.Fprintf(w, "... %d more groups (--leaks 0 shows all)\n", len(rep.Leaks)-n)
	}
	fmt.Fprintln(w, "Steps: ProfilerStep ranges in which the live allocations were made; memory left behind in every step grows without bound.")
	fmt.Fprintln(w)
}

// shortSite keeps a site readable in a table: C++ names lose their
// argument lists, paths their directories.
func shortSite(f snapshot.Frame) string {
	if !f.IsPython() {
		return cppShortName(f.Name) + " [C++]"
	}
	file := f.Filename
	if i := strings.LastIndexByte(file, '/'); i >= 0 {
		file = file[i+1:]
	}
	return fmt.Sprintf("%s:%d %s", file, f.Line, f.Name)
}

// cppShortName drops a demangled C++ name's trailing argument list and the
// "(anonymous namespace)::" noise.
func cppShortName(name string) string {
	if strings.HasSuffix(name, ")") {
		depth := 0
		for i := len(name) - 1; i >= 0; i-- {
			switch name[i] {
			case ')':
				depth++
			case '(':
				depth--
			}
			if depth == 0 {
				if i > 0 {
					name = name[:i]
				}
				break
			}
		}
	}
	return strings.ReplaceAll(name, "(anonymous namespace)::", "")
}

func renderSettings(w io.Writer, s snapshot.AllocatorSettings) {
	if len(s.Recorded) == 0 {
		// Snapshots of older torch hold no allocator_settings: say so
		// rather than print unset values as if they were read.
		fmt.Fprintln(w, "Allocator settings: not recorded in this snapshot (older torch saves no allocator_settings)")
		fmt.Fprintln(w)
		return
	}
	const notRecorded = "not recorded"
	conf := s.AllocConf
	switch {
	case !s.Has("PYTORCH_CUDA_ALLOC_CONF"):
		conf = notRecorded
	case conf == "":
		conf = "(unset)"
	}
	fmt.Fprintf(w, "Allocator settings: PYTORCH_CUDA_ALLOC_CONF=%s\n", conf)
	maxSplit, expandable, gcThreshold := notRecorded, notRecorded, notRecorded
	if s.Has("max_split_size") {
		maxSplit = "unlimited"
		if s.MaxSplitSize >= 0 {
			maxSplit = memtimeline.FormatBytes(s.MaxSplitSize)
		}
	}
	if s.Has("expandable_segments") {
		expandable = strconv.FormatBool(s.ExpandableSegments)
	}
	if s.Has("garbage_collection_threshold") {
		gcThreshold = strconv.FormatFloat(s.GarbageCollectionThreshold, 'g', -1, 64)
	}
	fmt.Fprintf(w, "  max_split_size: %s, expandable_segments: %s, garbage_collection_threshold: %s\n",
		maxSplit, expandable, gcThreshold)
	var div []string
	keys := make([]string, 0, len(s.RoundupPower2Divisions))
	for k := range s.RoundupPower2Divisions {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, _ := strconv.Atoi(keys[i])
		b, _ := strconv.Atoi(keys[j])
		return a < b
	})
	for _, k := range keys {
		if v := s.RoundupPower2Divisions[k]; v != 0 {
			div = append(div, fmt.Sprintf("%sMB:%d", k, v))
		}
	}
	if len(div) == 0 {
		div = []string{"off"}
		if !s.Has("roundup_power2_divisions") {
			div = []string{"not recorded"}
		}
	}
	fmt.Fprintf(w, "  roundup_power2_divisions: %s\n", strings.Join(div, ", "))
	if len(s.Other) > 0 {
		other := make([]string, 0, len(s.Other))
		for k, v := range s.Other {
			other = append(other, k+": "+v)
		}
		sort.Strings(other)
		fmt.Fprintf(w, "  %s\n", strings.Join(other, ", "))
	}
	fmt.Fprintln(w)
}

func renderOOMs(w io.Writer, ooms []snapshot.OOMEvent, history bool) {
	if len(ooms) == 0 && !history {
		// OOMs are entries of the allocation history.
		fmt.Fprintln(w, "Out-of-memory events: not recorded (no allocation history in this snapshot)")
		return
	}
	if len(ooms) == 0 {
		fmt.Fprintln(w, "Out-of-memory events: none recorded")
		return
	}
	fmt.Fprintf(w, "Out-of-memory events: %d\n", len(ooms))
	t := NewTable()
	t.AppendHeader(table.Row{"Device", "Time (µs since epoch)", "Requested", "Free on device", "Site"})
	for _, e := range ooms {
		t.AppendRow(table.Row{e.Device, e.TimeUS, memtimeline.FormatBytes(e.RequestedBytes), memtimeline.FormatBytes(e.DeviceFreeBytes), shortSite(e.Site)})
	}
	Table(w, t, Text)
}

func joinInts(v []int) string {
	if len(v) == 0 {
		return "-"
	}
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}
