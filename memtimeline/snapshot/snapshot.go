package snapshot

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/torchmem/torchmem/internal/readahead"

	"github.com/torchmem/torchmem/chrometrace"
	"github.com/torchmem/torchmem/memtimeline/snapshot/internal/pickle"
)

// Snapshot is a CUDA caching-allocator snapshot as written by
// torch.cuda.memory._dump_snapshot: the segments and blocks alive when it
// was taken, and the recorded history of allocator events per device.
type Snapshot struct {
	Segments            []Segment
	DeviceTraces        []Trace // index = CUDA device
	AllocatorSettings   AllocatorSettings
	ExternalAnnotations []Annotation
}

// Segment is one cudaMalloc'd (or, with expandable segments, mapped) range
// that the caching allocator carves into blocks.
type Segment struct {
	Device        int
	Address       uint64
	TotalSize     int64
	AllocatedSize int64 // bytes in active_allocated blocks
	ActiveSize    int64 // allocated plus active_pending_free
	RequestedSize int64 // what callers asked for, before rounding
	Stream        int64
	SegmentType   string // "small" (<= 1 MiB blocks, 2 MiB segments) or "large"
	PoolID        [2]int64
	IsExpandable  bool
	Frames        []Frame // where the segment was allocated, when recorded
	Blocks        []Block
}

// Block states as torch names them.
const (
	BlockActiveAllocated   = "active_allocated"
	BlockActivePendingFree = "active_pending_free"
	BlockInactive          = "inactive"
)

// Block is a piece of a segment: a live tensor's storage or a free gap.
type Block struct {
	Address       uint64
	Size          int64
	RequestedSize int64
	// NoRequested: the snapshot records no requested_size for the block
	// (older torch); RequestedSize is then Size, not a measurement.
	NoRequested bool
	State       string // BlockActiveAllocated, BlockActivePendingFree or BlockInactive
	Frames      []Frame
}

// Trace actions as torch names them.
const (
	ActionAlloc         = "alloc"
	ActionFreeRequested = "free_requested"
	ActionFreeCompleted = "free_completed"
	ActionSegmentAlloc  = "segment_alloc"
	ActionSegmentFree   = "segment_free"
	ActionSegmentMap    = "segment_map"
	ActionSegmentUnmap  = "segment_unmap"
	ActionSnapshot      = "snapshot"
	ActionOOM           = "oom"
)

// TraceEntry is one recorded allocator event.
type TraceEntry struct {
	Action string
	Addr   uint64
	// DeviceFree is set on "oom" entries only: the bytes cudaMemGetInfo
	// reported free (torch stores it in place of addr).
	DeviceFree int64
	Size       int64
	Stream     int64
	TimeUS     int64 // epoch microseconds
	Frames     []Frame
	// Context is the entry's compile_context and user_metadata, shared by
	// every entry with the same pair; nil when both are empty. (Two
	// strings in every entry took a tenth of a large snapshot's memory.)
	Context *EntryContext
}

// EntryContext is what torch records around an allocator event besides its
// stack: the torch.compile context ("N/A" outside compiled code) and the
// user's metadata (torch.cuda.memory._set_memory_metadata).
type EntryContext struct {
	CompileContext string
	UserMetadata   string
}

// Frame is one stack frame of a snapshot, innermost first; C++ frames are
// included. It is chrometrace.Frame: one frame type for traces and
// snapshots. Frames and whole stacks are shared between entries: treat as
// read-only.
type Frame = chrometrace.Frame

// AllocatorSettings is the allocator configuration in force at the dump.
type AllocatorSettings struct {
	AllocConf                  string  `json:"PYTORCH_CUDA_ALLOC_CONF"`
	MaxSplitSize               int64   `json:"max_split_size"` // -1: unset
	ExpandableSegments         bool    `json:"expandable_segments"`
	GarbageCollectionThreshold float64 `json:"garbage_collection_threshold"`
	// RoundupPower2Divisions maps a size bucket in MiB ("1", "2", ...) to
	// its number of divisions (0: off).
	RoundupPower2Divisions map[string]int64 `json:"roundup_power2_divisions,omitempty"`
	// Other holds every remaining scalar setting, printed as Python would.
	Other map[string]string `json:"other,omitempty"`
	// Recorded lists the settings the snapshot holds, sorted: older torch
	// wrote no allocator_settings at all, and a setting it does not
	// record is unknown, not its zero value.
	Recorded []string `json:"recorded"`
}

// Has reports whether the snapshot recorded the setting key.
func (s *AllocatorSettings) Has(key string) bool {
	_, ok := slices.BinarySearch(s.Recorded, key)
	return ok
}

// Annotation is a record_function range boundary (e.g. ProfilerStep#3).
type Annotation struct {
	Stage  string // START or END
	Name   string
	Device int
	TimeUS int64
}

// LooksLike is the loader's content test: head starts like a
// pickle of protocol 2 or later, which is what
// torch.cuda.memory._dump_snapshot writes, or like a JSON snapshot
// (LooksLikeJSON).
func LooksLike(head []byte) bool { return pickle.IsPickle(head) || LooksLikeJSON(head) }

// Read decodes an allocator snapshot pickle from r (uncompressed;
// chrometrace.Open handles gzip). It never executes or resolves classes,
// and it may read past the pickle's STOP opcode (it buffers). Errors say
// what is wrong and where (pickle byte offset or field path); wrap them
// with the file name.
func Read(r io.Reader) (*Snapshot, error) { return ReadLimited(r, chrometrace.Limits{}) }

// ReadLimited is Read within lim. lim.ValueBytes caps one value in a
// pickle: a str or bytes payload, and the items of one container gathered
// on the stack (8 bytes each). The default, 64 MiB, is thousands of times
// what a snapshot holds in one string (file names, function names,
// settings); it keeps a hostile length (a 10 GB string behind a few bytes
// of gzip) from costing memory. The CLI's --max-value-bytes sets it.
func ReadLimited(r io.Reader, lim chrometrace.Limits) (*Snapshot, error) {
	br := bufio.NewReader(r)
	if head, _ := br.Peek(64); !pickle.IsPickle(head) && LooksLikeJSON(head) {
		return ReadJSON(br)
	}
	m := newMapper()
	ra := readahead.New(br, aheadAfter)
	defer ra.Close()
	a, root, err := pickle.DecodeRecords(ra, lim.WithDefaults().ValueBytes, m)
	if err != nil {
		return nil, err
	}
	m.a = a
	m.budget = 8*a.InputBytes + 1<<20
	return m.snapshot(root)
}

// aheadAfter: past this many bytes the pickle is read ahead on a goroutine
// (the read system calls of a large plain pickle are a twentieth of
// decoding 1 GB); a variable for TestFastPathsOnRealSnapshots.
var aheadAfter int64 = 16 << 20

func newMapper() *snapMapper {
	return &snapMapper{frames: map[int]Frame{}, stacks: map[uint32]uint32{}, strs: map[string]string{},
		contexts: map[EntryContext]uint32{}, actionIDs: map[string]uint32{}, metaIDs: map[metaKey]uint32{},
		h: &history{}, budget: math.MaxInt64}
}

// snapMapper converts the generic arena into the typed model, sharing
// frames and stacks by their pickle identity. Each dict is walked once with
// a switch on its keys; error locations are only built on failure.
type snapMapper struct {
	a      *pickle.Arena
	frames map[int]Frame // frame dict index -> frame
	// stacks maps a frames list (its pickle.ListID: equal lists share
	// one) to its stack, h.stacks[id-1].
	stacks map[uint32]uint32
	// stackCache: ListID+1 -> stack id, in front of stacks.
	stackCache [1 << stackCacheBits]struct{ lid, id uint32 }
	strs       map[string]string
	// contexts shares TraceEntry.Context between entries (contextList[id-1]).
	contexts    map[EntryContext]uint32
	contextList []*EntryContext
	lastContext uint32 // the id contextID gave last
	// h holds the trace entries: first those the decoder handed over as
	// records (Record; the record id is the entry's index), then those
	// of the traces read from dicts. actions[id-1] are their actions;
	// metaIDs and metaCache find their entryMetas (metaID).
	h         *history
	actions   []string
	actionIDs map[string]uint32
	metaIDs   map[metaKey]uint32
	metaCache [1 << metaCacheBits]metaCacheEntry
	// actionCache: action str handle+1 -> its id (actions alternate, so
	// the last one alone missed every other entry); entryField's cache.
	actionCache [8]struct {
		v  pickle.Value
		id uint32
	}
	fieldCache [1 << fieldCacheBits]fieldCacheEntry
	// budget caps the fields and items the mapping may visit. The memo lets
	// a few bytes reference a huge dict or list again and again (a 4 MB
	// file could name a million-key dict a million times); a real snapshot
	// visits far fewer fields than it has bytes, so work beyond a small
	// multiple of the input size means a hostile file, not a big one.
	budget int64
}

var errTooRepetitive = errors.New("not an allocator snapshot: it refers to the same objects far more often than a real snapshot does (refusing to expand it)")

// spend charges n units of work against the budget.
func (m *snapMapper) spend(n int) error {
	m.budget -= int64(n)
	if m.budget < 0 {
		return errTooRepetitive
	}
	return nil
}

// loc names a place in the snapshot for error messages, e.g.
// segments[3].blocks[2]; it is formatted only when something is wrong.
type loc struct {
	parent *loc
	name   string
	idx    int // -1: no index
}

func (l *loc) String() string {
	if l == nil {
		return ""
	}
	s := l.parent.String()
	if l.name != "" {
		if s != "" {
			s += "."
		}
		s += l.name
	}
	if l.idx >= 0 {
		s += fmt.Sprintf("[%d]", l.idx)
	}
	return s
}

type fieldError struct {
	path string
	msg  string
}

func (e *fieldError) Error() string { return "not an allocator snapshot: " + e.path + ": " + e.msg }

func (m *snapMapper) fail(l *loc, key, format string, args ...any) error {
	p := l.String()
	if key != "" {
		if p != "" {
			p += "."
		}
		p += key
	}
	return &fieldError{path: p, msg: fmt.Sprintf(format, args...)}
}

var (
	locTop      = &loc{name: "top level", idx: -1}
	locSegments = &loc{name: "segments", idx: -1}
	locTraces   = &loc{name: "device_traces", idx: -1}
)

func (m *snapMapper) snapshot(root pickle.Value) (*Snapshot, error) {
	s := &Snapshot{}
	switch root.Kind() {
	case pickle.KindList:
		// torch < 2.0 memory_snapshot(): a bare list of segments.
		segs, err := m.segments(root)
		if err != nil {
			return nil, err
		}
		s.Segments = segs
		return s, nil
	case pickle.KindDict:
	default:
		return nil, m.fail(locTop, "", "a %v, want a dict", root.Kind())
	}
	_, hasSeg := m.a.DictGet(root, "segments")
	_, hasTr := m.a.DictGet(root, "device_traces")
	if !hasSeg && !hasTr {
		return nil, m.fail(locTop, "", "a dict without segments or device_traces (keys: %s)", m.keys(root))
	}
	var err error
	var spans []recordSpan
	if v, ok := m.a.DictGet(root, "segments"); ok {
		if s.Segments, err = m.segments(v); err != nil {
			return nil, err
		}
	}
	if v, ok := m.a.DictGet(root, "device_traces"); ok && v.Kind() != pickle.KindNone {
		devs, err := m.list(v, nil, "device_traces")
		if err != nil {
			return nil, err
		}
		spans = make([]recordSpan, len(devs))
		s.DeviceTraces = make([]Trace, len(devs))
		for i, dv := range devs {
			if spans[i], err = m.recordSpan(dv); err != nil {
				return nil, err
			}
			if spans[i].n >= 0 {
				// The entries are in place: the records.
				s.DeviceTraces[i] = Trace{h: m.h, first: int(spans[i].first), n: spans[i].n}
				continue
			}
			if s.DeviceTraces[i], err = m.trace(dv, &loc{parent: locTraces, idx: i}); err != nil {
				return nil, err
			}
		}
	}
	if v, ok := m.a.DictGet(root, "allocator_settings"); ok && v.Kind() == pickle.KindDict {
		if s.AllocatorSettings, err = m.settings(v); err != nil {
			return nil, err
		}
	}
	if v, ok := m.a.DictGet(root, "external_annotations"); ok && v.Kind() != pickle.KindNone {
		if s.ExternalAnnotations, err = m.annotations(v); err != nil {
			return nil, err
		}
	}
	m.a = nil
	for _, sp := range spans {
		if sp.n >= 0 {
			if err := m.spend(int(min(m.h.work(int(sp.first), sp.n), math.MaxInt))); err != nil {
				return nil, err
			}
		}
	}
	return s, nil
}

// recordSpan is a device trace that is a run of records, first to
// first+n-1 (the trace of a pickle that Python wrote); n is -1 for
// anything else.
type recordSpan struct {
	first uint32
	n     int
}

func (m *snapMapper) recordSpan(v pickle.Value) (recordSpan, error) {
	if first, n, ok := m.a.RecordRun(v); ok {
		return recordSpan{first: first, n: n}, m.spend(n)
	}
	if v.Kind() != pickle.KindList && v.Kind() != pickle.KindTuple {
		return recordSpan{n: -1}, nil
	}
	items := m.a.List(v)
	if len(items) == 0 {
		return recordSpan{n: -1}, nil
	}
	first, ok := m.a.Record(items[0])
	if !ok {
		return recordSpan{n: -1}, nil
	}
	for k, it := range items {
		if id, ok := m.a.Record(it); !ok || id != first+uint32(k) {
			return recordSpan{n: -1}, nil
		}
	}
	// What m.list charges.
	return recordSpan{first: first, n: len(items)}, m.spend(len(items))
}

func (m *snapMapper) keys(d pickle.Value) string {
	var ks []string
	keys, _ := m.a.Dict(d)
	for i := 0; i < len(keys) && len(ks) < 8; i++ {
		if s, ok := m.a.Str(keys[i]); ok {
			ks = append(ks, s)
		}
	}
	return strings.Join(ks, ", ")
}

func (m *snapMapper) list(v pickle.Value, l *loc, key string) ([]pickle.Value, error) {
	switch v.Kind() {
	case pickle.KindList, pickle.KindTuple:
		items := m.a.List(v)
		return items, m.spend(len(items))
	}
	return nil, m.fail(l, key, "a %v, want a list", v.Kind())
}

// fields calls fn for every str-keyed item of dict v; a missing key thus
// leaves the zero value (older torch versions lack some), while a present
// key of the wrong type makes fn fail.
func (m *snapMapper) fields(v pickle.Value, l *loc, fn func(key string, v pickle.Value) error) error {
	if v.Kind() != pickle.KindDict {
		return m.fail(l, "", "a %v, want a dict", v.Kind())
	}
	keys, vals := m.a.Dict(v)
	if err := m.spend(1 + len(keys)); err != nil {
		return err
	}
	for i, k := range keys {
		if k.Kind() != pickle.KindStr {
			continue
		}
		if err := fn(m.a.Strs.At(k.Index()), vals[i]); err != nil {
			return err
		}
	}
	return nil
}

func (m *snapMapper) int(v pickle.Value, l *loc, key string) (int64, error) {
	if v.Kind() == pickle.KindNone {
		return 0, nil
	}
	n, ok := m.a.Int64(v)
	if !ok {
		return 0, m.fail(l, key, "a %v, want an int that fits 64 bits", v.Kind())
	}
	return n, nil
}

// line reads a frame's line number. torch writes an unknown line as
// (size_t)-1, 18446744073709551615 (frames of torch.compile's fake
// tensors, testdata/gpu/round4/snapshot_fields): 0, like no line.
func (m *snapMapper) line(v pickle.Value, l *loc, key string) (int, error) {
	if n, ok := m.a.Int64(v); ok {
		if n < 0 || n > math.MaxInt32 {
			return 0, nil
		}
		return int(n), nil
	}
	if _, ok := m.a.Uint64(v); ok {
		return 0, nil
	}
	_, err := m.int(v, l, key)
	return 0, err
}

func (m *snapMapper) addr(v pickle.Value, l *loc, key string) (uint64, error) {
	if v.Kind() == pickle.KindNone {
		return 0, nil
	}
	n, ok := m.a.Uint64(v)
	if !ok {
		return 0, m.fail(l, key, "a %v, want a non-negative int that fits 64 bits", v.Kind())
	}
	return n, nil
}

func (m *snapMapper) str(v pickle.Value, l *loc, key string) (string, error) {
	if v.Kind() == pickle.KindNone {
		return "", nil
	}
	s, ok := m.a.Str(v)
	if !ok {
		return "", m.fail(l, key, "a %v, want a str", v.Kind())
	}
	// No interning here: CPython memoizes every str, so repeated actions
	// and states already share one Go string through the memo.
	return s, nil
}

// intern shares equal frame strings that the pickle did not share through
// its memo (CPython does; other writers may not), so that frames from
// different writers still compare and group cheaply.
func (m *snapMapper) intern(s string) string {
	if t, ok := m.strs[s]; ok {
		return t
	}
	m.strs[s] = s
	return s
}

func (m *snapMapper) segments(v pickle.Value) ([]Segment, error) {
	items, err := m.list(v, nil, "segments")
	if err != nil {
		return nil, err
	}
	out := make([]Segment, len(items))
	for i, sv := range items {
		l := &loc{parent: locSegments, idx: i}
		seg := &out[i]
		var blocks pickle.Value
		hasBlocks := false
		err := m.fields(sv, l, func(key string, v pickle.Value) error {
			var err error
			var n int64
			switch key {
			case "device":
				n, err = m.int(v, l, key)
				seg.Device = int(n)
			case "address":
				seg.Address, err = m.addr(v, l, key)
			case "total_size":
				seg.TotalSize, err = m.int(v, l, key)
			case "allocated_size":
				seg.AllocatedSize, err = m.int(v, l, key)
			case "active_size":
				seg.ActiveSize, err = m.int(v, l, key)
			case "requested_size":
				seg.RequestedSize, err = m.int(v, l, key)
			case "stream":
				seg.Stream, err = m.int(v, l, key)
			case "segment_type":
				seg.SegmentType, err = m.str(v, l, key)
			case "is_expandable":
				n, err = m.int(v, l, key)
				seg.IsExpandable = n != 0
			case "segment_pool_id":
				if v.Kind() == pickle.KindNone {
					break
				}
				var ids []pickle.Value
				if ids, err = m.list(v, l, key); err != nil {
					break
				}
				for j := 0; j < len(ids) && j < 2 && err == nil; j++ {
					seg.PoolID[j], err = m.int(ids[j], l, key)
				}
			case "frames":
				seg.Frames, err = m.stack(v, l)
			case "blocks":
				blocks, hasBlocks = v, true
			}
			return err
		})
		if err != nil {
			return nil, err
		}
		if hasBlocks {
			if seg.Blocks, err = m.blocks(blocks, seg.Address, l); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

func (m *snapMapper) blocks(v pickle.Value, segAddr uint64, segLoc *loc) ([]Block, error) {
	items, err := m.list(v, segLoc, "blocks")
	if err != nil {
		return nil, err
	}
	out := make([]Block, len(items))
	next := segAddr // blocks are contiguous; old snapshots omit their address
	for i, bv := range items {
		l := &loc{parent: segLoc, name: "blocks", idx: i}
		b := &out[i]
		hasAddr, hasReq := false, false
		err := m.fields(bv, l, func(key string, v pickle.Value) error {
			var err error
			switch key {
			case "address":
				b.Address, err = m.addr(v, l, key)
				hasAddr = v.Kind() != pickle.KindNone
			case "size":
				b.Size, err = m.int(v, l, key)
				if err == nil && b.Size < 0 {
					err = m.fail(l, key, "negative (%d)", b.Size)
				}
			case "requested_size":
				b.RequestedSize, err = m.int(v, l, key)
				hasReq = true
			case "state":
				b.State, err = m.str(v, l, key)
			case "frames":
				b.Frames, err = m.stack(v, l)
			}
			return err
		})
		if err != nil {
			return nil, err
		}
		if !hasAddr {
			b.Address = next
		}
		if !hasReq {
			b.RequestedSize, b.NoRequested = b.Size, true
		}
		next = b.Address + uint64(b.Size)
	}
	return out, nil
}

// trace reads a device trace that is not a run of records: its entries
// are stored after the records, in order (a record among them copied).
func (m *snapMapper) trace(v pickle.Value, devLoc *loc) (Trace, error) {
	items, err := m.list(v, devLoc, "")
	if err != nil {
		return Trace{}, err
	}
	first := m.h.n
	if len(items) > maxHistoryEntries-first {
		return Trace{}, historyTooLong(devLoc.idx, len(items), first)
	}
	// One loc reused for every entry: it escapes only into error messages.
	l := &loc{parent: devLoc, idx: 0}
	for i, ev := range items {
		if id, ok := m.a.Record(ev); ok {
			if err := m.spend(int(m.h.work(int(id), 1))); err != nil {
				return Trace{}, err
			}
			m.h.add(*m.h.at(int(id)))
			continue
		}
		l.idx = i
		var x rec
		var ctx EntryContext
		var action string
		err := m.fields(ev, l, func(key string, v pickle.Value) error {
			var err error
			switch key {
			case "action":
				action, err = m.str(v, l, key)
			case "addr":
				x.addr, err = m.addr(v, l, key)
			case "size":
				x.size, err = m.int(v, l, key)
			case "stream":
				x.stream, err = m.int(v, l, key)
			case "time_us":
				x.timeUS, err = m.int(v, l, key)
			case "device_free":
				x.deviceFree, err = m.int(v, l, key)
			case "frames":
				x.stack, err = m.stackID(v, l)
			case "compile_context":
				ctx.CompileContext, err = m.str(v, l, key)
			case "user_metadata":
				ctx.UserMetadata, err = m.str(v, l, key)
			}
			return err
		})
		if err != nil {
			return Trace{}, err
		}
		x.action = m.actionID(action)
		if ctx != (EntryContext{}) {
			x.ctx = m.contextID(ctx)
		}
		m.h.add(entry{addr: x.addr, size: x.size, timeUS: x.timeUS, stack: x.stack, meta: m.metaID(&x)})
	}
	return Trace{h: m.h, first: first, n: m.h.n - first}, nil
}

// actionID is the id of action s (actions[id-1]; 0 for "").
func (m *snapMapper) actionID(s string) uint32 {
	if s == "" {
		return 0
	}
	id, known := m.actionIDs[s]
	if !known {
		m.actions = append(m.actions, s)
		id = uint32(len(m.actions))
		m.actionIDs[s] = id
	}
	return id
}

// stack converts a "frames" list, sharing the result with every other
// holder of the same pickle list (the decoder already merged equal lists).
func (m *snapMapper) stack(v pickle.Value, owner *loc) ([]Frame, error) {
	id, err := m.stackID(v, owner)
	if id == 0 || err != nil {
		return nil, err
	}
	return m.h.stacks[id-1], nil
}

// stackID is stack's stack as an id (h.stacks[id-1]; 0: none). The
// frame dicts it reads are frozen: a record may already hold them.
func (m *snapMapper) stackID(v pickle.Value, owner *loc) (uint32, error) {
	if v.Kind() == pickle.KindNone {
		return 0, nil
	}
	items, err := m.list(v, owner, "frames")
	if err != nil {
		return 0, err
	}
	if len(items) == 0 {
		return 0, nil
	}
	// The decoder stores equal lists once (one ListID). Entries repeat a
	// few hundred stacks: a direct-mapped cache finds most without the map.
	lid := m.a.ListID(v)
	c := &m.stackCache[(uint64(lid)*0x9E3779B97F4A7C15)>>(64-stackCacheBits)]
	if c.lid == lid+1 {
		return c.id, nil
	}
	if id, ok := m.stacks[lid]; ok {
		c.lid, c.id = lid+1, id
		return id, nil
	}
	st := make([]Frame, len(items))
	for i, fv := range items {
		if fv.Kind() == pickle.KindDict {
			if f, ok := m.frames[fv.Index()]; ok {
				st[i] = f
				continue
			}
		}
		l := &loc{parent: owner, name: "frames", idx: i}
		f := &st[i]
		err := m.fields(fv, l, func(key string, v pickle.Value) error {
			var err error
			switch key {
			case "filename":
				f.Filename, err = m.str(v, l, key)
				f.Filename = m.intern(f.Filename)
			case "name":
				f.Name, err = m.str(v, l, key)
				f.Name = m.intern(f.Name)
			case "line":
				f.Line, err = m.line(v, l, key)
			}
			return err
		})
		if err != nil {
			return 0, err
		}
		m.frames[fv.Index()] = *f
		m.a.Freeze(fv)
	}
	m.h.stacks = append(m.h.stacks, st)
	id := uint32(len(m.h.stacks))
	m.stacks[lid] = id
	return id, nil
}

func (m *snapMapper) settings(d pickle.Value) (AllocatorSettings, error) {
	l := &loc{name: "allocator_settings", idx: -1}
	var s AllocatorSettings
	err := m.fields(d, l, func(key string, v pickle.Value) error {
		var err error
		s.Recorded = append(s.Recorded, key)
		switch key {
		case "PYTORCH_CUDA_ALLOC_CONF":
			s.AllocConf, err = m.str(v, l, key)
		case "max_split_size":
			s.MaxSplitSize, err = m.int(v, l, key)
		case "expandable_segments":
			var n int64
			n, err = m.int(v, l, key)
			s.ExpandableSegments = n != 0
		case "garbage_collection_threshold":
			if v.Kind() == pickle.KindFloat {
				s.GarbageCollectionThreshold = m.a.Floats[v.Index()]
				break
			}
			var n int64
			n, err = m.int(v, l, key)
			s.GarbageCollectionThreshold = float64(n)
		case "roundup_power2_divisions":
			if v.Kind() != pickle.KindDict {
				break
			}
			s.RoundupPower2Divisions = map[string]int64{}
			rkeys, rvals := m.a.Dict(v)
			for j := 0; j < len(rkeys) && err == nil; j++ {
				var n int64
				n, err = m.int(rvals[j], l, key)
				s.RoundupPower2Divisions[m.pyRepr(rkeys[j])] = n
			}
		default:
			if s.Other == nil {
				s.Other = map[string]string{}
			}
			s.Other[key] = m.pyRepr(v)
		}
		return err
	})
	slices.Sort(s.Recorded)
	s.Recorded = slices.Compact(s.Recorded)
	return s, err
}

// pyRepr prints a scalar the way Python's str() would, for display.
func (m *snapMapper) pyRepr(v pickle.Value) string {
	switch v.Kind() {
	case pickle.KindNone:
		return "None"
	case pickle.KindTrue:
		return "True"
	case pickle.KindFalse:
		return "False"
	case pickle.KindInt, pickle.KindWideInt:
		n, _ := m.a.Int64(v)
		return fmt.Sprint(n)
	case pickle.KindWideUint:
		return fmt.Sprint(m.a.Wide[v.Index()])
	case pickle.KindFloat:
		return fmt.Sprint(m.a.Floats[v.Index()])
	case pickle.KindStr, pickle.KindBytes:
		return m.a.Strs.At(v.Index())
	}
	return "<" + v.Kind().String() + ">"
}

func (m *snapMapper) annotations(v pickle.Value) ([]Annotation, error) {
	items, err := m.list(v, nil, "external_annotations")
	if err != nil {
		return nil, err
	}
	out := make([]Annotation, 0, len(items))
	for i, av := range items {
		if av.Kind() != pickle.KindDict {
			continue // free-form user data: skip what is not a dict
		}
		l := &loc{name: "external_annotations", idx: i}
		var a Annotation
		err := m.fields(av, l, func(key string, v pickle.Value) error {
			var err error
			switch key {
			case "stage":
				a.Stage, err = m.str(v, l, key)
			case "name":
				a.Name, err = m.str(v, l, key)
			case "device":
				var n int64
				n, err = m.int(v, l, key)
				a.Device = int(n)
			case "time_us":
				a.TimeUS, err = m.int(v, l, key)
			}
			return err
		})
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}
