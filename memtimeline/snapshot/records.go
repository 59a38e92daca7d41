package snapshot

import (
	"encoding/binary"
	"runtime"
	"sync"

	"github.com/torchmem/torchmem/internal/hugepages"
	"github.com/torchmem/torchmem/memtimeline/snapshot/internal/pickle"
)

// records holds the trace entries of a pickle as the decoder meets them,
// each packed into a few varints (about 25 bytes, against the 100 and more
// that a generic dict of nine values and its bookkeeping took), until the
// mapper unpacks them into each device's []TraceEntry.
type records struct {
	chunks [][]byte
	marks  []uint64 // every recMarkEvery-th record: chunk<<32 | offset
	n      uint32
	// Times and addresses are packed as the difference from the record
	// before (2 bytes instead of 8 for a time), restarting from 0 at each
	// mark; prevTime and prevAddr are the last ones added.
	prevTime int64
	prevAddr uint64
	// The cursor: where record cur starts, and the time and address of
	// the record before it; the mapper reads in order.
	cur, curChunk, curOff int
	curTime               int64
	curAddr               uint64
}

const (
	recMarkEvery = 256
	recMaxBytes  = 10 * 10 // ten varints
)

// recChunk is the bytes of one chunk of records, huge pages inside
// (hugepages.Advise). A var for TestTruncatedPickles, which reads a few
// thousand pickles of a few records each: a chunk apiece was 45% of this
// package's test CPU, zeroing them.
var recChunk = 16 << 20

// rec is one packed trace entry: ids into the mapper's tables (0: none).
type rec struct {
	nkeys                            int
	action, stack, ctx               uint32
	addr                             uint64
	size, stream, timeUS, deviceFree int64
}

func (r *records) add(x *rec) uint32 {
	if r.n%recMarkEvery == 0 {
		r.prevTime, r.prevAddr = 0, 0
	}
	// Straight into the chunk, which has room for the longest record.
	last := len(r.chunks) - 1
	if last < 0 || cap(r.chunks[last])-len(r.chunks[last]) < recMaxBytes {
		c := make([]byte, 0, recChunk)
		hugepages.Advise(c[:recChunk])
		r.chunks = append(r.chunks, c)
		last++
	}
	if r.n%recMarkEvery == 0 {
		r.marks = append(r.marks, uint64(last)<<32|uint64(len(r.chunks[last])))
	}
	b := r.chunks[last]
	b = binary.AppendUvarint(b, uint64(x.nkeys))
	b = binary.AppendUvarint(b, uint64(x.action))
	b = binary.AppendVarint(b, int64(x.addr-r.prevAddr))
	b = binary.AppendVarint(b, x.size)
	b = binary.AppendVarint(b, x.stream)
	b = binary.AppendVarint(b, x.timeUS-r.prevTime)
	r.prevTime, r.prevAddr = x.timeUS, x.addr
	b = binary.AppendVarint(b, x.deviceFree)
	b = binary.AppendUvarint(b, uint64(x.stack))
	b = binary.AppendUvarint(b, uint64(x.ctx))
	r.chunks[last] = b
	r.n++
	return r.n - 1
}

// get unpacks record id; reading ids in order costs no seeking.
func (r *records) get(id uint32, x *rec) {
	if int(id) != r.cur {
		m := r.marks[id/recMarkEvery]
		r.cur, r.curChunk, r.curOff = int(id/recMarkEvery*recMarkEvery), int(m>>32), int(uint32(m))
		r.curTime, r.curAddr = 0, 0
		for r.cur < int(id) {
			r.next(x)
		}
	}
	r.next(x)
}

func (r *records) next(x *rec) {
	b := r.chunks[r.curChunk][r.curOff:]
	if len(b) == 0 {
		r.curChunk++
		r.curOff = 0
		b = r.chunks[r.curChunk]
	}
	n := 0
	u := func() uint64 {
		v, k := binary.Uvarint(b[n:])
		n += k
		return v
	}
	s := func() int64 {
		v, k := binary.Varint(b[n:])
		n += k
		return v
	}
	if r.cur%recMarkEvery == 0 {
		r.curTime, r.curAddr = 0, 0
	}
	x.nkeys = int(u())
	x.action = uint32(u())
	x.addr = r.curAddr + uint64(s())
	x.size, x.stream = s(), s()
	x.timeUS = r.curTime + s()
	x.deviceFree = s()
	r.curTime, r.curAddr = x.timeUS, x.addr
	x.stack = uint32(u())
	x.ctx = uint32(u())
	r.curOff += n
	r.cur++
}

// Record takes a dict that has an "action" str as a trace entry record
// (pickle.Recorder) when every field the mapper reads converts as trace
// would convert it; anything else stays a dict, for trace to read, or to
// refuse with the entry's location.
func (m *snapMapper) Record(a *pickle.Arena, keys, vals []pickle.Value) (uint32, bool) {
	if len(keys) > 16 {
		return 0, false
	}
	m.a = a
	var x rec
	x.nkeys = len(keys)
	var ctx EntryContext
	var seen uint16
	framesAt := -1
	for i, k := range keys {
		if k.Kind() != pickle.KindStr {
			return 0, false
		}
		v := vals[i]
		f := m.entryField(a, k)
		if f < 0 {
			// Not a trace entry's key: a dict that could be read as
			// something else (a frame, a segment) stays a dict.
			return 0, false
		}
		if seen&(1<<f) != 0 {
			return 0, false // a key given twice: trace says what it makes of it
		}
		seen |= 1 << f
		ok := true
		switch f {
		case fAction:
			c := &m.actionCache[uint64(v)*0x9E3779B97F4A7C15>>61]
			if c.v == v+1 {
				x.action = c.id
				break
			}
			var s string
			if s, ok = a.Str(v); ok {
				id, known := m.actionIDs[s]
				if !known {
					m.actions = append(m.actions, s)
					id = uint32(len(m.actions))
					m.actionIDs[s] = id
				}
				x.action = id
				c.v, c.id = v+1, id
			}
		case fAddr:
			x.addr, ok = recUint(a, v)
		case fSize:
			x.size, ok = recInt(a, v)
		case fStream:
			x.stream, ok = recInt(a, v)
		case fTime:
			x.timeUS, ok = recInt(a, v)
		case fDeviceFree:
			x.deviceFree, ok = recInt(a, v)
		case fFrames:
			framesAt = i
		case fCompile:
			ctx.CompileContext, ok = recStr(a, v)
		case fUser:
			ctx.UserMetadata, ok = recStr(a, v)
		}
		if !ok {
			return 0, false
		}
	}
	if seen&(1<<fAction) == 0 {
		return 0, false
	}
	if framesAt >= 0 {
		v := vals[framesAt]
		if v.Kind() != pickle.KindNone {
			id, err := m.stackID(v, nil)
			if err != nil {
				return 0, false
			}
			x.stack = id
			a.Freeze(v)
		}
	}
	if ctx != (EntryContext{}) {
		x.ctx = m.contextID(ctx)
	}
	return m.recs.add(&x), true
}

// Trace entry fields, as bits of a mask.
const (
	fAction = iota
	fAddr
	fSize
	fStream
	fTime
	fDeviceFree
	fFrames
	fCompile
	fUser
)

// entryField is the field a key names (-1: none), cached by handle: a
// pickle's keys are memoized, so millions of entries name a few handles.
func (m *snapMapper) entryField(a *pickle.Arena, k pickle.Value) int {
	c := &m.fieldCache[(uint64(k)*0x9E3779B97F4A7C15)>>(64-fieldCacheBits)]
	if c.k == k+1 {
		return c.f
	}
	f := entryFieldOf(a.Strs.At(k.Index()))
	*c = fieldCacheEntry{k + 1, f}
	return f
}

const fieldCacheBits = 8

type fieldCacheEntry struct {
	k pickle.Value
	f int
}

func entryFieldOf(key string) int {
	switch key {
	case "action":
		return fAction
	case "addr":
		return fAddr
	case "size":
		return fSize
	case "stream":
		return fStream
	case "time_us":
		return fTime
	case "device_free":
		return fDeviceFree
	case "frames":
		return fFrames
	case "compile_context":
		return fCompile
	case "user_metadata":
		return fUser
	}
	return -1
}

// recInt, recUint and recStr convert as snapMapper.int, addr and str do.
func recInt(a *pickle.Arena, v pickle.Value) (int64, bool) {
	if v.Kind() == pickle.KindNone {
		return 0, true
	}
	return a.Int64(v)
}

func recUint(a *pickle.Arena, v pickle.Value) (uint64, bool) {
	if v.Kind() == pickle.KindNone {
		return 0, true
	}
	return a.Uint64(v)
}

func recStr(a *pickle.Arena, v pickle.Value) (string, bool) {
	if v.Kind() == pickle.KindNone {
		return "", true
	}
	return a.Str(v)
}

// contextID shares one *EntryContext per pair (1-based id).
func (m *snapMapper) contextID(ctx EntryContext) uint32 {
	// Most entries carry the context of the one before (strs shared
	// through the memo compare by pointer first).
	if m.lastContext > 0 && ctx == *m.contextList[m.lastContext-1] {
		return m.lastContext
	}
	id, ok := m.contexts[ctx]
	if !ok {
		m.contextList = append(m.contextList, &EntryContext{CompileContext: ctx.CompileContext, UserMetadata: ctx.UserMetadata})
		id = uint32(len(m.contextList))
		m.contexts[ctx] = id
	}
	m.lastContext = id
	return id
}

// unpack unpacks the records from first on into out and returns the work
// they stand for (see entry). A large run is cut in parts unpacked at
// once, one per CPU, each with its own cursor over the records (they are
// only read now): writing the entries, and faulting in their pages, was
// a fifth of the time of reading a large snapshot.
func (m *snapMapper) unpack(first uint32, out []TraceEntry) int {
	parts := min(runtime.GOMAXPROCS(0), len(out)/minUnpackPart)
	if parts <= 1 {
		return m.unpackPart(m.recs, first, out)
	}
	work := make([]int, parts)
	var wg sync.WaitGroup
	for p := range parts {
		lo, hi := len(out)*p/parts, len(out)*(p+1)/parts
		wg.Go(func() { work[p] = m.unpackPart(m.recs, first+uint32(lo), out[lo:hi]) })
	}
	wg.Wait()
	n := 0
	for _, w := range work {
		n += w
	}
	return n
}

// unpackPart is one part of unpack, read through its own copy of the
// records' cursor.
func (m *snapMapper) unpackPart(r records, first uint32, out []TraceEntry) int {
	r.cur = -1 // seek
	n := 0
	for k := range out {
		n += m.entry(&r, first+uint32(k), &out[k])
	}
	return n
}

// minUnpackPart is the fewest entries worth a goroutine of their own.
var minUnpackPart = 1 << 16 // a variable for tests (TestFastPathsOnRealSnapshots)

// entry unpacks record id into e and returns the work it stands for (the
// fields and frames that trace would have visited).
func (m *snapMapper) entry(r *records, id uint32, e *TraceEntry) int {
	var x rec
	r.get(id, &x)
	// Field by field: e is zero, and a struct copy would take the GC's
	// bulk write barrier on every entry.
	e.Addr, e.Size, e.Stream, e.TimeUS, e.DeviceFree = x.addr, x.size, x.stream, x.timeUS, x.deviceFree
	if x.action > 0 {
		e.Action = m.actions[x.action-1]
	}
	if x.stack > 0 {
		e.Frames = m.stackList[x.stack-1]
	}
	if x.ctx > 0 {
		e.Context = m.contextList[x.ctx-1]
	}
	return 1 + x.nkeys + len(e.Frames)
}
