package chrometrace

import (
	"cmp"
	"fmt"
	"io"
	"slices"
)

// WriteCanonical writes a stable, readable rendering of the parsed model:
// metadata, lanes, counts and sums per kind of event, steps, and the first
// events of each kind in time order. Goldens of it beside the real traces
// (testdata/traces/*/trace.string) make any change in what the reader
// produces show up as a small text diff, as pprof's .string files do.
func WriteCanonical(w io.Writer, t *Trace) {
	m := &t.Meta
	fmt.Fprintf(w, "schema %d legacy %v trace_id %q\n", m.SchemaVersion, m.Legacy, m.TraceID)
	fmt.Fprintf(w, "base_time_ns %d display_unit %q\n", m.BaseTimeNanoseconds, m.DisplayTimeUnit)
	fmt.Fprintf(w, "profile_memory %d with_stack %d record_shapes %d\n", m.ProfileMemory, m.WithStack, m.RecordShapes)
	fmt.Fprintf(w, "cuda_driver %d cuda_runtime %d cupti %d\n", m.CUDADriverVersion, m.CUDARuntimeVersion, m.CUPTIVersion)
	for _, d := range m.Devices {
		fmt.Fprintf(w, "device %d %q mem %d sm %d cc %d.%d\n", d.ID, d.Name, d.TotalGlobalMem, d.NumSMs, d.ComputeMajor, d.ComputeMinor)
	}
	if d := m.Distributed; d != nil {
		fmt.Fprintf(w, "distributed backend %q rank %d world %d\n", d.Backend, d.Rank, d.WorldSize)
	}
	fmt.Fprintf(w, "events %d strings %d\n", t.Events, len(t.Strings))
	if t.Truncated != nil {
		fmt.Fprintf(w, "truncated at %d after %d events: %s\n", t.Truncated.Offset, t.Truncated.Events, t.Truncated.Reason)
	}
	for _, wn := range t.Warnings {
		fmt.Fprintf(w, "warning %s\n", wn)
	}
	fmt.Fprintln(w, "threads:")
	for i, th := range t.Threads {
		fmt.Fprintf(w, "  %d pid %q tid %q name %q\n", i, t.Str(th.Pid), t.Str(th.Tid), t.Str(th.Name))
	}

	cats := map[Category]int{}
	for i := range t.HostOps {
		cats[t.HostOps[i].Cat]++
	}
	for i := range t.DeviceOps {
		cats[t.DeviceOps[i].Cat]++
	}
	cats[CatPythonFunction] += len(t.PyFrames)
	keys := make([]Category, 0, len(cats))
	for c := range cats {
		keys = append(keys, c)
	}
	slices.Sort(keys)
	fmt.Fprintln(w, "duration events:")
	for _, c := range keys {
		fmt.Fprintf(w, "  %s %d\n", c, cats[c])
	}

	var allocs, frees, allocBytes, freeBytes int64
	var maxAddr uint64
	perDevice := map[string]int{}
	for i := range t.Memory {
		e := &t.Memory[i]
		perDevice[fmt.Sprintf("%s:%d", e.DeviceType, e.DeviceID)]++
		if e.Bytes > 0 {
			allocs++
			allocBytes += e.Bytes
		} else {
			frees++
			freeBytes -= e.Bytes
		}
		maxAddr = max(maxAddr, e.Addr)
	}
	fmt.Fprintf(w, "memory events %d: %d allocs (%d bytes), %d frees (%d bytes), max addr %#x\n", len(t.Memory), allocs, allocBytes, frees, freeBytes, maxAddr)
	devs := make([]string, 0, len(perDevice))
	for d := range perDevice {
		devs = append(devs, d)
	}
	slices.Sort(devs)
	for _, d := range devs {
		fmt.Fprintf(w, "  %s %d\n", d, perDevice[d])
	}
	fmt.Fprintf(w, "oom events %d\n", len(t.OOMs))
	for _, o := range t.OOMs {
		fmt.Fprintf(w, "  oom ts %d bytes %d %s:%d allocated %d reserved %d\n", o.TS, o.Bytes, o.DeviceType, o.DeviceID, o.TotalAllocated, o.TotalReserved)
	}
	fmt.Fprintf(w, "flows %d\n", len(t.Flows))
	fmt.Fprintln(w, "steps:")
	for _, s := range t.Steps {
		fmt.Fprintf(w, "  ProfilerStep#%d start %d dur %d thread %s\n", s.Number, s.Start, s.Dur, t.ThreadLabel(s.Thread))
	}

	const sample = 5
	ops := sortedIndex(len(t.HostOps), func(a, b int) int {
		return cmp.Or(cmp.Compare(t.HostOps[a].Start, t.HostOps[b].Start), cmp.Compare(a, b))
	})
	fmt.Fprintln(w, "first host ops:")
	for _, i := range ops[:min(sample, len(ops))] {
		o := &t.HostOps[i]
		fmt.Fprintf(w, "  %d+%d %s %q thread %s ext %d seq %d fwd %d dims %q\n", o.Start, o.Dur, o.Cat, t.Str(o.Name), t.ThreadLabel(o.Thread), o.ExternalID, o.SeqNr, o.FwdThread, t.Str(o.InputDims))
	}
	mem := sortedIndex(len(t.Memory), func(a, b int) int {
		return cmp.Or(cmp.Compare(t.Memory[a].TS, t.Memory[b].TS), cmp.Compare(a, b))
	})
	fmt.Fprintln(w, "first memory events:")
	for _, i := range mem[:min(sample, len(mem))] {
		e := &t.Memory[i]
		fmt.Fprintf(w, "  %d %+d addr %#x %s:%d allocated %d reserved %d thread %s\n", e.TS, e.Bytes, e.Addr, e.DeviceType, e.DeviceID, e.TotalAllocated, e.TotalReserved, t.ThreadLabel(e.Thread))
	}
	py := sortedIndex(len(t.PyFrames), func(a, b int) int {
		return cmp.Or(cmp.Compare(t.PyFrames[a].Start, t.PyFrames[b].Start), cmp.Compare(a, b))
	})
	fmt.Fprintln(w, "first python frames:")
	for _, i := range py[:min(sample, len(py))] {
		f := &t.PyFrames[i]
		fmt.Fprintf(w, "  %d+%d %q id %d parent %d thread %s\n", f.Start, f.Dur, t.Str(f.Name), f.ID, f.ParentID, t.ThreadLabel(f.Thread))
	}
	dev := sortedIndex(len(t.DeviceOps), func(a, b int) int {
		return cmp.Or(cmp.Compare(t.DeviceOps[a].Start, t.DeviceOps[b].Start), cmp.Compare(a, b))
	})
	fmt.Fprintln(w, "first device ops:")
	for _, i := range dev[:min(sample, len(dev))] {
		d := &t.DeviceOps[i]
		fmt.Fprintf(w, "  %d+%d %s %q device %d stream %d ext %d bytes %d\n", d.Start, d.Dur, d.Cat, t.Str(d.Name), d.Device, d.Stream, d.ExternalID, d.Bytes)
	}
}

func sortedIndex(n int, cmpf func(a, b int) int) []int {
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, cmpf)
	return idx
}
