package snapshot

import "github.com/torchmem/torchmem/memtimeline/snapshot/internal/pickle"

// rec is one trace entry as Record reads it: ids into the mapper's tables
// (0: none).
type rec struct {
	nkeys                            int
	action, stack, ctx               uint32
	addr                             uint64
	size, stream, timeUS, deviceFree int64
}

// Record takes a dict that has an "action" str as a trace entry record
// (pickle.Recorder) when every field the mapper reads converts as trace
// would convert it; anything else stays a dict, for trace to read, or to
// refuse with the entry's location.
func (m *snapMapper) Record(a *pickle.Arena, keys, vals []pickle.Value) (uint32, bool, error) {
	if len(keys) > 16 {
		return 0, false, nil
	}
	m.a = a
	var x rec
	x.nkeys = len(keys)
	var ctx EntryContext
	var seen uint16
	framesAt := -1
	for i, k := range keys {
		if k.Kind() != pickle.KindStr {
			return 0, false, nil
		}
		v := vals[i]
		f := m.entryField(a, k)
		if f < 0 {
			// Not a trace entry's key: a dict that could be read as
			// something else (a frame, a segment) stays a dict.
			return 0, false, nil
		}
		if seen&(1<<f) != 0 {
			return 0, false, nil // a key given twice: trace says what it makes of it
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
				x.action = m.actionID(s)
				c.v, c.id = v+1, x.action
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
			return 0, false, nil
		}
	}
	if seen&(1<<fAction) == 0 {
		return 0, false, nil
	}
	if framesAt >= 0 {
		v := vals[framesAt]
		if v.Kind() != pickle.KindNone {
			id, err := m.stackID(v, nil)
			if err != nil {
				return 0, false, nil
			}
			x.stack = id
			a.Freeze(v)
		}
	}
	if ctx != (EntryContext{}) {
		x.ctx = m.contextID(ctx)
	}
	if m.h.n >= maxHistoryEntries {
		return 0, false, historyTooLong(-1, -1, 0)
	}
	return uint32(m.h.add(entry{addr: x.addr, size: x.size, timeUS: x.timeUS, stack: x.stack, meta: m.metaID(&x)})), true, nil
}

// metaKey is what an entryMeta is made of, as the mapper's ids.
type metaKey struct {
	action, ctx        uint32
	nkeys              int
	stream, deviceFree int64
}

// metaID is the id of x's entryMeta in the history, stored the first
// time. Entries alternate between a few (an alloc, a free, on one or two
// streams): a direct-mapped cache finds them without hashing a map key.
func (m *snapMapper) metaID(x *rec) uint32 {
	k := metaKey{action: x.action, ctx: x.ctx, nkeys: x.nkeys, stream: x.stream, deviceFree: x.deviceFree}
	hash := (uint64(k.action) ^ uint64(k.ctx)<<24 ^ uint64(k.nkeys)<<48 ^ uint64(k.stream)*0xC2B2AE3D27D4EB4F ^ uint64(k.deviceFree)*0x165667B19E3779F9) * 0x9E3779B97F4A7C15
	c := &m.metaCache[hash>>(64-metaCacheBits)]
	if c.id > 0 && c.k == k {
		return c.id - 1
	}
	id, ok := m.metaIDs[k]
	if !ok {
		meta := entryMeta{stream: k.stream, deviceFree: k.deviceFree, nkeys: k.nkeys}
		if k.action > 0 {
			meta.action = m.actions[k.action-1]
		}
		if k.ctx > 0 {
			meta.context = m.contextList[k.ctx-1]
		}
		id = uint32(len(m.h.metas))
		m.h.metas = append(m.h.metas, meta)
		m.metaIDs[k] = id
	}
	c.k, c.id = k, id+1
	return id
}

const (
	metaCacheBits  = 8
	stackCacheBits = 10
)

type metaCacheEntry struct {
	k  metaKey
	id uint32 // id+1; 0: empty
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
