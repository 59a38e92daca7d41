package chrometrace

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"unsafe"

	"github.com/torchmem/torchmem/internal/hugepages"
)

// builder turns decoded events into the compact model, interning strings.
type builder struct {
	t *Trace
	// The big record kinds collect in chunks until finish: see chunked.
	hostOps   chunked[HostOp]
	memory    chunked[MemoryEvent]
	pyFrames  chunked[PyFrame]
	deviceOps chunked[DeviceOp]
	flows     chunked[Flow]

	strs    map[string]StrID
	threads map[threadKey]ThreadID
	warned  map[string]bool
	dimsBuf []byte
	// dimsOf caches canonicalDims by the raw text (a local builder's
	// keys point into its batch, like its strings).
	dimsOf   map[string]StrID
	badTimes int64
	// Consecutive events mostly share a lane; remembering the last one
	// skips a map lookup per event.
	lastPid, lastTid []byte
	lastThread       ThreadID
	haveLast         bool

	// A local builder converts one batch on a worker: its strings point
	// into the batch (not copied) and its ids are renumbered by merge.
	local bool
	// skip drops python_function events (counting them in
	// t.skippedPyFrames) or flows, as ReadOptions says.
	skip skipSet
	// limits are the caps overCount checks (ReadOptions.Limits).
	limits Limits
	// Scratch for merge: local string and thread ids to global ones.
	globalStr    []StrID
	globalThread []ThreadID
	// unread counts X events of categories not read, by interned name.
	unread map[StrID]int64
	// copySizes are the "size" of runtime copy calls (ROCm) by External
	// id, for the copies on the GPU that record no "bytes".
	copySizes map[int64]int64
	// sizeHint is the input's likely size in bytes (0: unknown) and
	// reserved whether the record lists were sized from it (see reserve);
	// consumed is the input merged so far, in bytes.
	sizeHint, consumed int64
	reserved           bool
}

type threadKey struct{ pid, tid string }

func newBuilder() *builder {
	b := &builder{
		t:       &Trace{Strings: []string{""}},
		strs:    map[string]StrID{"": NoStr},
		threads: map[threadKey]ThreadID{},
		warned:  map[string]bool{},
	}
	b.t.Meta.ProfileMemory, b.t.Meta.WithStack, b.t.Meta.RecordShapes = -1, -1, -1
	return b
}

func newLocalBuilder(skip skipSet) *builder {
	b := newBuilder()
	b.local = true
	b.skip = skip
	return b
}

// reset empties a local builder for the next batch, keeping its memory.
func (b *builder) reset() {
	t := b.t
	clear(t.Strings)
	t.Strings = append(t.Strings[:0], "")
	clear(b.strs)
	b.strs[""] = NoStr
	clear(b.threads)
	clear(b.dimsOf)
	t.Threads = t.Threads[:0]
	t.Steps = t.Steps[:0]
	t.OOMs = t.OOMs[:0]
	t.Events = 0
	t.skippedPyFrames = 0
	clear(b.unread)
	clear(b.copySizes)
	b.badTimes = 0
	b.haveLast = false
	b.hostOps.reset()
	b.memory.reset()
	b.pyFrames.reset()
	b.deviceOps.reset()
	b.flows.reset()
}

// merge appends a local builder's batch, in order: its strings and
// threads are interned here in the order the batch first used them, which
// is the order reading the events here one by one would have, so every id
// comes out the same.
func (b *builder) merge(l *builder) {
	lt := l.t
	gs := b.globalStr[:0]
	for _, s := range lt.Strings {
		gs = append(gs, b.intern(s))
	}
	gt := b.globalThread[:0]
	for i := range lt.Threads {
		th := &lt.Threads[i]
		key := threadKey{lt.Strings[th.Pid], lt.Strings[th.Tid]}
		id, ok := b.threads[key]
		if !ok {
			id = ThreadID(len(b.t.Threads))
			b.t.Threads = append(b.t.Threads, Thread{Pid: gs[th.Pid], Tid: gs[th.Tid], PidNum: th.PidNum, TidNum: th.TidNum})
			b.threads[threadKey{b.t.Strings[gs[th.Pid]], b.t.Strings[gs[th.Tid]]}] = id
		}
		gt = append(gt, id)
	}
	// A batch's last thread_name for a lane wins, as it would event by
	// event (names are never set empty).
	for i := range lt.Threads {
		if n := lt.Threads[i].Name; n != NoStr {
			b.t.Threads[gt[i]].Name = gs[n]
		}
	}
	b.globalStr, b.globalThread = gs, gt

	l.hostOps.each(func(ops []HostOp) {
		for _, op := range ops {
			op.Name, op.Thread = gs[op.Name], gt[op.Thread]
			op.InputDims, op.CallStack = gs[op.InputDims], gs[op.CallStack]
			b.hostOps.add(op)
		}
	})
	l.pyFrames.each(func(fs []PyFrame) {
		for _, f := range fs {
			f.Name, f.Thread = gs[f.Name], gt[f.Thread]
			b.pyFrames.add(f)
		}
	})
	l.deviceOps.each(func(ds []DeviceOp) {
		for _, d := range ds {
			d.Name, d.Thread = gs[d.Name], gt[d.Thread]
			b.deviceOps.add(d)
		}
	})
	l.memory.each(func(ms []MemoryEvent) {
		for _, m := range ms {
			m.Thread = gt[m.Thread]
			b.memory.add(m)
		}
	})
	l.flows.each(func(fs []Flow) {
		for _, f := range fs {
			f.Thread, f.Cat = gt[f.Thread], gs[f.Cat]
			b.flows.add(f)
		}
	})
	for _, o := range lt.OOMs {
		o.Thread = gt[o.Thread]
		b.t.OOMs = append(b.t.OOMs, o)
	}
	for _, st := range lt.Steps {
		st.Thread = gt[st.Thread]
		b.t.Steps = append(b.t.Steps, st)
	}
	for id, n := range l.copySizes {
		if b.copySizes == nil {
			b.copySizes = map[int64]int64{}
		}
		b.copySizes[id] = n
	}
	for cat, n := range l.unread {
		if b.unread == nil {
			b.unread = map[StrID]int64{}
		}
		b.unread[gs[cat]] += n
	}
	b.t.Events += lt.Events
	b.t.skippedPyFrames += lt.skippedPyFrames
	b.badTimes += l.badTimes
}

// intern returns the id of s, copying s only the first time it is seen (s
// may point into a reused buffer). A local builder does not copy: its
// strings live as long as the batch.
func (b *builder) intern(s string) StrID {
	if id, ok := b.strs[s]; ok {
		return id
	}
	key := s
	if !b.local {
		s = strings.Clone(s)
		key = s
	}
	id := StrID(len(b.t.Strings))
	b.t.Strings = append(b.t.Strings, OneLine(s))
	b.strs[key] = id
	return id
}

func (b *builder) internBytes(p []byte) StrID {
	if id, ok := b.strs[string(p)]; ok { // no allocation for the lookup
		return id
	}
	return b.intern(string(p))
}

// idText is the JSON text of a pid/tid without quotes.
func idText(raw []byte) []byte {
	raw = bytes.TrimSpace(raw)
	if len(raw) >= 2 && raw[0] == '"' {
		return raw[1 : len(raw)-1]
	}
	return raw
}

func (b *builder) thread(pidRaw, tidRaw []byte) ThreadID {
	if b.haveLast && bytes.Equal(pidRaw, b.lastPid) && bytes.Equal(tidRaw, b.lastTid) {
		return b.lastThread
	}
	id := b.lookupThread(pidRaw, tidRaw)
	b.lastPid = append(b.lastPid[:0], pidRaw...)
	b.lastTid = append(b.lastTid[:0], tidRaw...)
	b.lastThread, b.haveLast = id, true
	return id
}

func (b *builder) lookupThread(pidRaw, tidRaw []byte) ThreadID {
	pid, tid := idText(pidRaw), idText(tidRaw)
	if id, ok := b.threads[threadKey{string(pid), string(tid)}]; ok {
		return id
	}
	th := Thread{Pid: b.internBytes(pid), Tid: b.internBytes(tid), PidNum: -1, TidNum: -1}
	if len(pidRaw) > 0 && pidRaw[0] != '"' {
		if v, err := strconv.ParseInt(string(pid), 10, 64); err == nil {
			th.PidNum = v
		}
	}
	if len(tidRaw) > 0 && tidRaw[0] != '"' {
		if v, err := strconv.ParseInt(string(tid), 10, 64); err == nil {
			th.TidNum = v
		}
	}
	id := ThreadID(len(b.t.Threads))
	b.t.Threads = append(b.t.Threads, th)
	b.threads[threadKey{b.t.Strings[th.Pid], b.t.Strings[th.Tid]}] = id
	return id
}

// canonicalDims rewrites "Input Dims" JSON into the key torch's
// group_by_input_shape uses: ", " after each comma, no other spaces, and a
// list-of-tensors input (a nested list) shown as [] as torch does.
func (b *builder) canonicalDims(raw []byte) StrID {
	if len(raw) == 0 || string(raw) == "null" {
		return NoStr
	}
	// Ops repeat their shapes: most lookups find the text seen before.
	if id, ok := b.dimsOf[string(raw)]; ok {
		return id
	}
	id := b.canonicalDimsText(raw)
	if b.local {
		if b.dimsOf == nil {
			b.dimsOf = map[string]StrID{}
		}
		b.dimsOf[unsafeString(raw)] = id
	}
	return id
}

// canonicalDimsText is canonicalDims without the cache.
func (b *builder) canonicalDimsText(raw []byte) StrID {
	out := b.dimsBuf[:0]
	depth := 0
	inputStart := 0 // where the current input's text begins in out
	nested := false // the current input is a list of tensors
	for _, c := range raw {
		if c == ' ' || c == '\n' || c == '\r' || c == '\t' {
			continue
		}
		switch c {
		case '[':
			depth++
			if depth == 2 {
				inputStart = len(out)
				nested = false
			} else if depth == 3 && !nested {
				nested = true
				out = out[:inputStart+1]
			}
		case ']':
			depth--
			if depth == 1 && nested {
				nested = false
			} else if depth >= 2 && nested {
				continue
			}
		case ',':
			if nested {
				continue
			}
			out = append(out, ',', ' ')
			continue
		}
		if nested && depth >= 3 {
			continue
		}
		out = append(out, c)
	}
	b.dimsBuf = out
	return b.internBytes(out)
}

func (b *builder) warnOnce(msg string) {
	if !b.warned[msg] {
		b.warned[msg] = true
		b.t.Warnings = append(b.t.Warnings, msg)
	}
}

func (b *builder) times(ev *rawEvent) (start, dur int64, ok bool) {
	start, err := nanos(ev.Ts, ev.tsNs, ev.tsFast)
	if err == nil && ev.Dur != "" {
		dur, err = nanos(ev.Dur, ev.durNs, ev.durFast)
	}
	if err != nil || dur < 0 {
		b.badTimes++
		return 0, 0, false
	}
	return start, dur, true
}

// nanos is a ts or dur in nanoseconds: as fastDecode read it on the way
// (fast), else parsed from its text.
func nanos(text json.Number, ns int64, fast bool) (int64, error) {
	if fast {
		return ns, nil
	}
	return parseMicros(string(text))
}

const profilerStepPrefix = "ProfilerStep#"

// legacyCategory places an event without "cat": the legacy (pre-Kineto)
// profiler's export_chrome_trace, which torch builds without Kineto still
// write (Debian's torch 1.13), puts host ops in pid "CPU functions" and
// kernels in "CUDA functions", with no category.
func legacyCategory(pid rawJSON) Category {
	switch string(pid) {
	case `"CPU functions"`:
		return CatCPUOp
	case `"CUDA functions"`:
		return CatKernel
	}
	return CatOther
}

// add converts one decoded event into the model.
func (b *builder) add(ev *rawEvent) error {
	t := b.t
	t.Events++
	switch ev.Ph {
	case "X":
		b.addComplete(ev)
	case "i", "I":
		b.addInstant(ev)
	case "s", "f":
		b.addFlow(ev)
	case "M":
		if ev.Name == "thread_name" && ev.Args.MetaName != "" {
			id := b.thread(ev.Pid, ev.Tid)
			t.Threads[id].Name = b.intern(ev.Args.MetaName)
		}
	}
	return nil
}

// addComplete adds a complete event ("X"): a host op, a Python frame, a
// device op, or a category counted as not read.
func (b *builder) addComplete(ev *rawEvent) {
	t := b.t
	start, dur, ok := b.times(ev)
	if !ok {
		return
	}
	cat := parseCategory(ev.Cat)
	if ev.Cat == "" {
		cat = legacyCategory(ev.Pid)
	}
	switch {
	case cat.IsHostOperator():
		b.addHostOp(ev, cat, start, dur)
	case cat == CatPythonFunction:
		if b.skip.py {
			// The lane is still registered, so that thread ids
			// come out as when the frames are kept.
			b.thread(ev.Pid, ev.Tid)
			t.skippedPyFrames++
			return
		}
		b.pyFrames.add(PyFrame{
			Start:    start,
			Dur:      dur,
			Name:     b.intern(ev.Name),
			Thread:   b.thread(ev.Pid, ev.Tid),
			ID:       int32(numberOr(ev.Args.PythonID, -1)),
			ParentID: int32(numberOr(ev.Args.PythonParentID, -1)),
		})
	case cat.IsDevice():
		d := DeviceOp{
			Start:      start,
			Dur:        dur,
			Name:       b.intern(ev.Name),
			Thread:     b.thread(ev.Pid, ev.Tid),
			Cat:        cat,
			Device:     int16(ev.Args.Device),
			ExternalID: cmp.Or(ev.Args.ExternalID, ev.Args.ExternalIDOld),
			Bytes:      ev.Args.MemBytes,
		}
		if stream, ok := rawInt(ev.Args.Stream); ok {
			d.Stream = int32(stream)
		}
		b.deviceOps.add(d)
	case cat == CatOther && ev.Cat != "":
		if b.unread == nil {
			b.unread = map[StrID]int64{}
		}
		b.unread[b.intern(ev.Cat)]++
	}
}

// addHostOp adds a host operator (an op, a runtime call, an annotation),
// with a runtime copy's size and a ProfilerStep.
func (b *builder) addHostOp(ev *rawEvent, cat Category, start, dur int64) {
	t := b.t
	op := HostOp{
		Start:      start,
		Dur:        dur,
		Name:       b.intern(ev.Name),
		Thread:     b.thread(ev.Pid, ev.Tid),
		Cat:        cat,
		ExternalID: ev.Args.ExternalID,
		SeqNr:      numberOr(ev.Args.SeqNr, -1),
		FwdThread:  int32Or(numberOr(ev.Args.FwdThread, -1), -1),
		InputDims:  b.canonicalDims(ev.Args.InputDims),
	}
	if ev.Args.CallStack != "" {
		op.CallStack = b.intern(ev.Args.CallStack)
	}
	b.hostOps.add(op)
	if cat == CatCUDARuntime && len(ev.Args.CopySize) > 0 && op.ExternalID != 0 {
		if n, ok := rawInt(ev.Args.CopySize); ok && n > 0 {
			if b.copySizes == nil {
				b.copySizes = map[int64]int64{}
			}
			b.copySizes[op.ExternalID] = n
		}
	}
	// torch 1.8/1.9 wrote ProfilerStep#N as an Operator (cpu_op).
	if (cat == CatUserAnnotation || cat == CatCPUOp) && strings.HasPrefix(ev.Name, profilerStepPrefix) {
		if n, err := strconv.ParseInt(ev.Name[len(profilerStepPrefix):], 10, 64); err == nil {
			t.Steps = append(t.Steps, Step{Number: n, Start: start, Dur: dur, Thread: op.Thread})
		}
	}
}

// addInstant adds an instant event ("i", "I"): a [memory] event or an
// [OutOfMemory].
func (b *builder) addInstant(ev *rawEvent) {
	t := b.t
	switch ev.Name {
	case "[memory]":
		ts, _, ok := b.times(ev)
		if !ok {
			return
		}
		m := MemoryEvent{
			TS:         ts,
			Bytes:      ev.Args.Bytes,
			Thread:     b.thread(ev.Pid, ev.Tid),
			DeviceType: DeviceType(ev.Args.DeviceType),
			DeviceID:   int8(ev.Args.DeviceID),
		}
		if ev.Args.DeviceType == 0 {
			// another build's spelling: device_option Type / Id
			if dt, ok := rawInt(ev.Args.OptDeviceType); ok {
				m.DeviceType = DeviceType(dt)
				if id, ok := rawInt(ev.Args.OptDeviceID); ok {
					m.DeviceID = int8(id)
				}
			}
		}
		var ok1, ok2, ok3 bool
		if m.Addr, ok1 = rawUint(ev.Args.Addr); ok1 {
			m.Fields |= MemAddr
		}
		if m.TotalAllocated, ok2 = rawInt(ev.Args.TotalAllocated); ok2 {
			m.Fields |= MemTotalAllocated
		}
		if m.TotalReserved, ok3 = rawInt(ev.Args.TotalReserved); ok3 {
			m.Fields |= MemTotalReserved
		}
		b.memory.add(m)
	case "[OutOfMemory]":
		ts, _, ok := b.times(ev)
		if !ok {
			return
		}
		allocated, _ := rawInt(ev.Args.TotalAllocated)
		reserved, _ := rawInt(ev.Args.TotalReserved)
		t.OOMs = append(t.OOMs, OOMEvent{
			TS:             ts,
			Bytes:          ev.Args.Bytes,
			TotalAllocated: allocated,
			TotalReserved:  reserved,
			Thread:         b.thread(ev.Pid, ev.Tid),
			DeviceType:     DeviceType(ev.Args.DeviceType),
			DeviceID:       int8(ev.Args.DeviceID),
		})
	}
}

// addFlow adds a flow event ("s", "f").
func (b *builder) addFlow(ev *rawEvent) {
	// Only fwdbwd flows are kept: they tie backward ops to the forward
	// ops that created them. Launch links are implied by External id.
	if ev.Cat != "fwdbwd" {
		return
	}
	ts, _, ok := b.times(ev)
	if !ok {
		return
	}
	id, err := strconv.ParseInt(string(idText(ev.ID)), 10, 64)
	if err != nil {
		return
	}
	th := b.thread(ev.Pid, ev.Tid) // registered even when skipped: same thread ids
	if b.skip.flows {
		return
	}
	b.flows.add(Flow{TS: ts, ID: id, Thread: th, Cat: b.intern(ev.Cat), Start: ev.Ph == "s"})
}

func (b *builder) truncated(offset int64, missing string) {
	b.t.Truncated = &Truncation{Offset: offset, Events: b.t.Events, Reason: "missing " + missing}
	b.t.Warnings = append(b.t.Warnings, fmt.Sprintf("trace is truncated at byte %d after %d events (missing %s): results cover only what was read", offset, b.t.Events, missing))
}

func (b *builder) cutBeforeEvents(sp *splitter) error {
	return fmt.Errorf("truncated at byte %d before any trace event", sp.offset())
}

func (b *builder) finish() {
	// One copy of the records, with the chunks returned to the OS along
	// the way (see releaseBytes).
	unreleased := 0
	b.t.regrownLists = b.flows.regrown + b.deviceOps.regrown + b.memory.regrown + b.pyFrames.regrown + b.hostOps.regrown
	b.t.Flows = flatten(&b.flows, &unreleased, &b.t.copiedLists)
	b.t.DeviceOps = flatten(&b.deviceOps, &unreleased, &b.t.copiedLists)
	b.t.Memory = flatten(&b.memory, &unreleased, &b.t.copiedLists)
	b.t.PyFrames = flatten(&b.pyFrames, &unreleased, &b.t.copiedLists)
	b.t.HostOps = flatten(&b.hostOps, &unreleased, &b.t.copiedLists)
	if unreleased >= releaseBytes/4 {
		debug.FreeOSMemory()
	}
	if b.badTimes > 0 {
		b.t.Warnings = append(b.t.Warnings, fmt.Sprintf("%d events with a missing or malformed ts/dur were skipped", b.badTimes))
	}
	b.memorySchema()
	if len(b.copySizes) > 0 {
		// ROCm: a gpu_memcpy without "bytes" takes its size from the HIP
		// call that issued it (same External id).
		for i := range b.t.DeviceOps {
			d := &b.t.DeviceOps[i]
			if d.Cat == CatGPUMemcpy && d.Bytes == 0 {
				d.Bytes = b.copySizes[d.ExternalID]
			}
		}
	}
	if b.t.Meta.Legacy && len(b.t.Memory) == 0 && len(b.t.HostOps) > 0 {
		b.t.Warnings = append(b.t.Warnings, "a legacy profiler export (a bare JSON array: torch built without Kineto, or use_kineto=False): it holds no [memory] events even when memory was profiled, so no memory figure can be read from it; torch's own prof.key_averages() of that run has them")
	}
	for cat, n := range b.unread {
		if b.t.Unread == nil {
			b.t.Unread = map[string]int64{}
		}
		b.t.Unread[b.t.Strings[cat]] = n
	}
	if len(b.t.Unread) > 0 {
		cats := slices.Sorted(maps.Keys(b.t.Unread))
		parts := make([]string, len(cats))
		for i, c := range cats {
			parts[i] = fmt.Sprintf("%d %q", b.t.Unread[c], c)
		}
		b.t.Warnings = append(b.t.Warnings, fmt.Sprintf("events of categories torchmem does not read were left out: %s (their time and memory are in no figure)", strings.Join(parts, ", ")))
	}
	b.t.InputBytes = 0
}

// memorySchema records which optional fields the device [memory] events
// carried and, where none carried Total Allocated (torch < 1.10), derives
// it as the running sum of Bytes per device in time order: the curve
// relative to the window's start that the TensorBoard plugin drew for
// those traces. Each figure that cannot be derived is named in a warning.
func (b *builder) memorySchema() {
	t := b.t
	var device, withAlloc, withReserved, reservedZero, maxAlloc int64
	for i := range t.Memory {
		e := &t.Memory[i]
		if !e.DeviceType.IsGPU() {
			continue
		}
		device++
		if e.Fields&MemAddr == 0 {
			t.MemorySchema.WithoutAddr++
		}
		if e.Fields&MemTotalAllocated != 0 {
			withAlloc++
		}
		if e.Fields&MemTotalReserved != 0 {
			withReserved++
			if e.TotalReserved == 0 {
				reservedZero++
			}
		}
		if e.Fields&MemTotalAllocated != 0 {
			maxAlloc = max(maxAlloc, e.TotalAllocated)
		}
	}
	if device == 0 {
		return
	}
	if withAlloc == 0 {
		t.MemorySchema.DerivedAllocated = true
		type key struct {
			dt  DeviceType
			dev int8
		}
		idx := make([]int32, 0, device)
		for i := range t.Memory {
			if t.Memory[i].DeviceType.IsGPU() {
				idx = append(idx, int32(i))
			}
		}
		slices.SortStableFunc(idx, func(a, c int32) int { return cmp.Compare(t.Memory[a].TS, t.Memory[c].TS) })
		sum := map[key]int64{}
		for _, i := range idx {
			e := &t.Memory[i]
			k := key{e.DeviceType, e.DeviceID}
			sum[k] = AddSat(sum[k], e.Bytes)
			e.TotalAllocated = sum[k]
		}
		t.Warnings = append(t.Warnings, "[memory] events record no Total Allocated (torch before 1.10): allocated memory is the running sum of their Bytes from the start of the profiled window, relative to what was allocated before it")
	}
	if withReserved > 0 && reservedZero == withReserved && maxAlloc > 0 {
		// A build that writes the key but never fills it in (Total
		// Reserved: 0 while memory is allocated): not a measurement.
		for i := range t.Memory {
			t.Memory[i].Fields &^= MemTotalReserved
			t.Memory[i].TotalReserved = 0
		}
		withReserved = 0
		t.Warnings = append(t.Warnings, fmt.Sprintf("every device [memory] event records Total Reserved 0 while Total Allocated reaches %s: this build does not fill it in", fmt.Sprintf("%.2f MB", float64(maxAlloc)/(1<<20))))
	}
	if withReserved == 0 {
		t.MemorySchema.NoReserved = true
		t.Warnings = append(t.Warnings, "[memory] events record no Total Reserved: reserved memory is not recorded in this trace")
	}
	if n := t.MemorySchema.WithoutAddr; n > 0 {
		t.Warnings = append(t.Warnings, fmt.Sprintf("%d of %d device [memory] events record no Addr (torch before 1.10): allocations cannot be paired with their frees, so block lifetimes, the stacks of live blocks and leak sites from blocks are not recorded", n, device))
	}
}

// setMeta decodes the top-level fields kept aside while streaming.
func (b *builder) setMeta(meta map[string][]byte) error {
	m := &b.t.Meta
	num := func(key string) int64 {
		raw, ok := meta[key]
		if !ok {
			return -1
		}
		s := strings.Trim(strings.TrimSpace(string(raw)), `"`)
		switch s {
		case "true":
			return 1
		case "false":
			return 0
		}
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return -1
		}
		return v
	}
	str := func(key string) string {
		var s string
		if raw, ok := meta[key]; ok {
			if json.Unmarshal(raw, &s) != nil {
				s = string(raw)
			}
		}
		return s
	}
	m.SchemaVersion = num("schemaVersion")
	m.TraceID = str("trace_id")
	m.TraceName = str("traceName")
	m.DisplayTimeUnit = str("displayTimeUnit")
	m.BaseTimeNanoseconds = max(num("baseTimeNanoseconds"), 0)
	m.ProfileMemory = num("profile_memory")
	m.WithStack = num("with_stack")
	m.RecordShapes = num("record_shapes")
	m.CUDADriverVersion = num("cuda_driver_version")
	m.CUDARuntimeVersion = num("cuda_runtime_version")
	m.CUPTIVersion = num("cupti_version")
	if raw, ok := meta["deviceProperties"]; ok {
		if err := json.Unmarshal(raw, &m.Devices); err != nil {
			b.warnOnce("deviceProperties could not be read: " + err.Error())
		}
		for i := range m.Devices {
			m.Devices[i].Name = OneLine(m.Devices[i].Name)
		}
	}
	if raw, ok := meta["distributedInfo"]; ok {
		var d DistributedInfo
		if err := json.Unmarshal(raw, &d); err != nil {
			b.warnOnce("distributedInfo could not be read: " + err.Error())
		} else {
			m.Distributed = &d
		}
	}
	return nil
}

// reserveAfter is the share of the input (1/reserveAfter) read before the
// record lists are sized, large enough to hold what a trace repeats (its
// steps); reserveMin the smallest input worth it. A list never reserves
// more than reserveShare of the input's size in bytes (a gzip trailer may
// claim 4 GiB).
const (
	reserveAfter = 8
	reserveShare = 8
)

var reserveMin int64 = 16 << 20 // a variable for tests

// reserve sizes the record lists for the whole input once a share of it
// (consumed bytes, the input merged so far) is read, from the records
// that share made: each list then fills one slice, which finish returns
// as it is, instead of chunks copied into it at the end (a second copy of
// every record, and as many pages to fault in: 16% of the CPU of analyze
// on a 1 GB trace). The estimate has a margin; pages of a slice's
// capacity never written are never resident. A list denser later than
// in the first share (the 1 GB trace's device ops: 102k reserved, 158k
// in all) fills its slice early: it is reserved again from the density
// seen by then (regrow), as is a list with no record yet when its first
// chunk fills; only past the input's hint or a cap does a list continue
// in chunks (finish copies them then).
func (b *builder) reserve(consumed int64) {
	b.consumed = consumed
	if b.reserved || b.sizeHint < reserveMin || consumed < b.sizeHint/reserveAfter {
		return
	}
	b.reserved, b.t.reservedLists = true, true
	b.hostOps.reserve(b.estimate(b.hostOps.n, int(unsafe.Sizeof(HostOp{})), b.limits.Events), b.regrow(b.limits.Events))
	b.deviceOps.reserve(b.estimate(b.deviceOps.n, int(unsafe.Sizeof(DeviceOp{})), b.limits.Events), b.regrow(b.limits.Events))
	b.memory.reserve(b.estimate(b.memory.n, int(unsafe.Sizeof(MemoryEvent{})), int64(b.limits.MemoryEvents)), b.regrow(int64(b.limits.MemoryEvents)))
	b.pyFrames.reserve(b.estimate(b.pyFrames.n, int(unsafe.Sizeof(PyFrame{})), b.limits.Events), b.regrow(b.limits.Events))
	b.flows.reserve(b.estimate(b.flows.n, int(unsafe.Sizeof(Flow{})), b.limits.Events), b.regrow(b.limits.Events))
	// The chunks just copied are garbage that the next collection, with
	// the reserved slices counted live, would only find at the end.
	debug.FreeOSMemory()
}

// reserveMargin is the share reserve and regrow add to their estimates (a
// variable for tests, which lower it to make lists fill their slices).
var reserveMargin = 1.125

// estimate is the records of size bytes the whole input will make, at n
// in what was merged so far, with a margin, at most limit (the cap on
// them) and reserveShare of the input's size in bytes.
func (b *builder) estimate(n, size int, limit int64) int {
	est := int64(float64(n)*float64(b.sizeHint)/float64(b.consumed)*reserveMargin) + 1024
	return int(min(est, limit, b.sizeHint/reserveShare/int64(size)))
}

// regrow gives a reserved list that filled up the capacity of its next
// slice (chunked.grow): estimate at the density seen so far, at least
// twice what it holds, as append grows (so that the copies add up to the
// records at most, for a list that starts late in the input and is
// underestimated again and again too; capacity never written costs no
// memory), within estimate's caps; 0 once the input is past its hint
// (an estimate from it means nothing) or a cap is reached: the list
// continues in chunks.
func (b *builder) regrow(limit int64) func(n, size int) int {
	return func(n, size int) int {
		if b.consumed >= b.sizeHint {
			return 0
		}
		next := max(b.estimate(n, size, limit), min(2*n, int(min(limit, b.sizeHint/reserveShare/int64(size)))))
		if next <= n {
			return 0
		}
		return next
	}
}

// chunked collects records in chunks that never move. Appending to one
// slice copied every record about four times over as it grew (half of the
// merger's time on a 1 GB trace) and left the outgrown arrays as garbage,
// which set the peak memory. flatten copies the chunks once into an
// exactly sized slice.
type chunked[T any] struct {
	chunks [][]T
	cur    []T
	n      int
	// reserved: cur is a slice reserve or regrow sized, advised huge
	// pages. regrow (reserve's) gives the capacity of the slice that
	// follows cur when it fills up holding every record (0: chunks
	// follow).
	reserved bool
	regrow   func(n, size int) int
	// regrown counts the slices regrow sized.
	regrown int
}

// maxChunkBytes bounds a chunk; chunks start small for small traces.
const maxChunkBytes = 1 << 20

func (c *chunked[T]) add(v T) {
	if len(c.cur) == cap(c.cur) {
		c.grow()
	}
	c.cur = append(c.cur, v)
	c.n++
}

// reset empties c, keeping its largest chunk for reuse.
func (c *chunked[T]) reset() {
	clear(c.chunks)
	c.chunks = c.chunks[:0]
	c.cur = c.cur[:0]
	c.n = 0
}

// each calls fn with the records in order, a chunk at a time.
func (c *chunked[T]) each(fn func([]T)) {
	for _, ch := range c.chunks {
		fn(ch)
	}
	if len(c.cur) > 0 {
		fn(c.cur)
	}
}

// reserve moves c's records into one slice with room for n, which the
// records added next fill first; regrow sizes the next slice when one
// that holds every record is full (a list empty so far: its first).
func (c *chunked[T]) reserve(n int, regrow func(n, size int) int) {
	c.regrow = regrow
	if c.n == 0 || n <= c.n {
		return
	}
	all := make([]T, 0, n)
	hugepages.Advise(all)
	c.each(func(vs []T) { all = append(all, vs...) })
	clear(c.chunks)
	c.chunks, c.cur, c.reserved = c.chunks[:0], all, true
}

func (c *chunked[T]) grow() {
	var zero T
	if c.regrow != nil && len(c.chunks) == 0 {
		// cur, full, holds every record: they move once into a larger
		// slice, as append would move them, sized by the estimate.
		if n := c.regrow(c.n, int(unsafe.Sizeof(zero))); n > len(c.cur) {
			all := make([]T, 0, n)
			hugepages.Advise(all)
			c.cur, c.reserved = append(all, c.cur...), true
			c.regrown++
			return
		}
		c.regrow = nil
	}
	limit := max(maxChunkBytes/int(unsafe.Sizeof(zero)), 1)
	size := min(max(2*cap(c.cur), 64), limit)
	if c.cur != nil {
		c.chunks = append(c.chunks, c.cur)
	}
	c.cur, c.reserved = make([]T, 0, size), false
}

// releaseBytes: as the chunks are copied, they are returned to the OS
// every releaseBytes (a GC each time) rather than whenever the runtime gets
// to them. The copies' pages become resident only as they are written, so
// the peak is the records plus one step, not twice the largest list (for
// a trace of mostly host ops, another 13% of the JSON). Traces with less
// than releaseBytes of records never pay for a GC here.
const releaseBytes = 16 << 20

// flatten returns the records in order in one slice (nil if none) and
// empties c. unreleased counts the bytes of chunks copied and dropped but
// not yet returned to the OS, across lists.
func flatten[T any](c *chunked[T], unreleased, copied *int) []T {
	if c.n == 0 {
		return nil
	}
	var zero T
	size := int(unsafe.Sizeof(zero))
	if len(c.chunks) == 0 {
		// One slice (see reserve): no copy.
		out := slices.Clip(c.cur)
		if c.reserved {
			hugepages.ReleaseTail(c.cur)
		}
		*c = chunked[T]{}
		return out
	}
	*copied++
	out := make([]T, 0, c.n)
	for i := range c.chunks {
		out = append(out, c.chunks[i]...)
		*unreleased += len(c.chunks[i]) * size
		c.chunks[i] = nil
		if *unreleased >= releaseBytes {
			debug.FreeOSMemory()
			*unreleased = 0
		}
	}
	out = append(out, c.cur...)
	*unreleased += len(c.cur) * size
	*c = chunked[T]{}
	return out
}
