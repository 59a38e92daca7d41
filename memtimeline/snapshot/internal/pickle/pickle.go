package pickle

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"maps"
	"math"
	"slices"
	"sort"
	"unsafe"

	"github.com/torchmem/torchmem/chrometrace"
	"github.com/torchmem/torchmem/internal/hugepages"
)

// ErrNotPlainData marks a pickle that builds objects (GLOBAL, REDUCE, BUILD,
// ...) instead of holding plain data: not an allocator snapshot, and not
// something torchmem will execute.
var ErrNotPlainData = errors.New("not a plain-data snapshot")

// IsPickle reports whether head starts like a pickle of protocol 2 or later
// (PROTO opcode 0x80 followed by the protocol number), which is what
// torch.cuda.memory._dump_snapshot writes.
func IsPickle(head []byte) bool {
	return len(head) >= 2 && head[0] == opPROTO && head[1] >= 2 && head[1] <= 5
}

// Pickle opcodes (CPython Lib/pickle.py).
const (
	opMARK            = '('
	opSTOP            = '.'
	opPOP             = '0'
	opPOPMARK         = '1'
	opDUP             = '2'
	opBININT          = 'J'
	opBININT1         = 'K'
	opBININT2         = 'M'
	opNONE            = 'N'
	opBINUNICODE      = 'X'
	opAPPEND          = 'a'
	opBUILD           = 'b'
	opGLOBAL          = 'c'
	opDICT            = 'd'
	opEMPTYDICT       = '}'
	opAPPENDS         = 'e'
	opBINGET          = 'h'
	opINST            = 'i'
	opLONGBINGET      = 'j'
	opLIST            = 'l'
	opEMPTYLIST       = ']'
	opOBJ             = 'o'
	opBINPUT          = 'q'
	opLONGBINPUT      = 'r'
	opSETITEM         = 's'
	opTUPLE           = 't'
	opEMPTYTUPLE      = ')'
	opSETITEMS        = 'u'
	opBINFLOAT        = 'G'
	opREDUCE          = 'R'
	opPERSID          = 'P'
	opBINPERSID       = 'Q'
	opBINBYTES        = 'B'
	opSHORTBINBYTES   = 'C'
	opPROTO           = 0x80
	opNEWOBJ          = 0x81
	opEXT1            = 0x82
	opEXT2            = 0x83
	opEXT4            = 0x84
	opTUPLE1          = 0x85
	opTUPLE2          = 0x86
	opTUPLE3          = 0x87
	opNEWTRUE         = 0x88
	opNEWFALSE        = 0x89
	opLONG1           = 0x8a
	opLONG4           = 0x8b
	opSHORTBINUNICODE = 0x8c
	opBINUNICODE8     = 0x8d
	opBINBYTES8       = 0x8e
	opEMPTYSET        = 0x8f
	opADDITEMS        = 0x90
	opFROZENSET       = 0x91
	opNEWOBJEX        = 0x92
	opSTACKGLOBAL     = 0x93
	opMEMOIZE         = 0x94
	opFRAME           = 0x95
	opBYTEARRAY8      = 0x96
	opNEXTBUFFER      = 0x97
	opREADONLYBUFFER  = 0x98
)

// opNames names the opcodes that a plain-data decoder refuses, for errors.
var opNames = map[byte]string{
	opGLOBAL: "GLOBAL", opSTACKGLOBAL: "STACK_GLOBAL", opREDUCE: "REDUCE",
	opBUILD: "BUILD", opINST: "INST", opOBJ: "OBJ", opNEWOBJ: "NEWOBJ",
	opNEWOBJEX: "NEWOBJ_EX", opPERSID: "PERSID", opBINPERSID: "BINPERSID",
	opEXT1: "EXT1", opEXT2: "EXT2", opEXT4: "EXT4", opNEXTBUFFER: "NEXT_BUFFER",
	opREADONLYBUFFER: "READONLY_BUFFER",
	// Protocol 0/1 text opcodes: never in a protocol >= 2 snapshot.
	'I': "INT", 'L': "LONG", 'S': "STRING", 'T': "BINSTRING", 'U': "SHORT_BINSTRING",
	'V': "UNICODE", 'F': "FLOAT", 'p': "PUT", 'g': "GET",
}

// Kind is the type of a decoded pickle value.
type Kind uint8

const (
	KindNone Kind = iota
	KindFalse
	KindTrue
	KindInt      // payload: 60-bit two's complement integer, inline
	KindWideInt  // payload: index into Arena.Wide, value int64(wide[i])
	KindWideUint // payload: index into Arena.Wide, value wide[i] > MaxInt64
	KindFloat    // payload: index into Arena.Floats
	KindStr      // payload: index into Arena.Strs
	KindBytes    // payload: index into Arena.Strs
	KindList     // payload: index into Arena.listRef
	KindTuple    // payload: index into Arena.listRef (immutable)
	KindSet      // payload: index into Arena.listRef
	KindDict     // payload: index into Arena.dictRef
)

var kindNames = [...]string{"None", "bool", "bool", "int", "int", "int", "float", "str", "bytes", "list", "tuple", "set", "dict"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "?"
}

// Value is a handle to a decoded value: kind in the top 4 bits, payload below.
type Value uint64

const (
	payloadBits = 60
	payloadMask = 1<<payloadBits - 1
	inlineMin   = -(1 << (payloadBits - 1))
	inlineMax   = 1<<(payloadBits-1) - 1
)

func mkval(k Kind, payload uint64) Value { return Value(uint64(k)<<payloadBits | payload&payloadMask) }
func (v Value) Kind() Kind               { return Kind(v >> payloadBits) }
func (v Value) Index() int               { return int(v & payloadMask) }

// inlineInt sign-extends the 60-bit payload.
func (v Value) inlineInt() int64 { return int64(uint64(v)<<(64-payloadBits)) >> (64 - payloadBits) }

// Arena owns every decoded value. Containers are slices of handles.
type Arena struct {
	Wide   []uint64
	Floats []float64
	Strs   paged[string]
	// A list handle is 4 bytes (listRef) naming its items' slot in lists
	// (slot 0: no items). Equal lists share one slot (sharedList): the
	// millions of "frames" lists of a trace, one per entry, cost their
	// handle and no items. A slot that a handle grew by appending is its
	// own (refOwned); a frozen list (refFrozen) was taken by a record and
	// may not change.
	listRef paged[uint32]
	lists   paged[[]Value]
	// A dict handle is 4 bytes (dictRef): 0 while it is empty, refRecord
	// plus the record's id once a Recorder took it, else its slot in
	// dictVals and dictShape: its values and the list of its keys, shared
	// by every dict with the same keys in the same order (shapes). Keys
	// and values pair by position, duplicates and order as in the file.
	dictRef   paged[uint32]
	dictVals  paged[[]Value]
	dictShape paged[uint32]
	shapes    [][]Value // shapes[0] is the empty key list
	// InputBytes is the length of the pickle, which bounds how much work
	// its contents may legitimately cause (see snapMapper.spend).
	InputBytes int64
	// Built is what decoding built, in bytes (see BuiltBudget).
	Built     int64
	wideBuilt int64 // Wide values appended (pickleDecoder.built)
	// grown holds the dicts that got items after their first batch
	// (CPython writes a dict of more than 1000 items in batches; a hostile
	// file SETITEMs one dict a key at a time): their keys and values grow
	// in place, amortized, and take their shared key list at STOP, instead
	// of storing a new key list and copying the values at every batch
	// (quadratic: a 100 KB pickle took 12.9 GB). By dict slot.
	grown map[int]*grownDict
	// runs holds, by list handle, the lists whose items are so far the
	// dicts of consecutive records (a device's trace: millions of
	// entries) as the run of their ids, without the items: storing them
	// and doubling the slice as it grew was a tenth of reading a large
	// snapshot. recDict maps a record id to its dict handle, for a run
	// read as items after all (materialize); noRuns: a Recorder gave
	// ids out of order, and no list is kept as a run.
	runs    map[int]recRun
	recDict recDicts
	noRuns  bool
}

// recDicts maps record ids, given in order, to their dict handles, as
// the runs in which both count up by one: between two trace entries a
// pickle makes no other dict but the frames it has not made before, so a
// 1 GB snapshot's 7.2M records are a few thousand runs, not 29 MB.
type recDicts struct {
	runs []recDictRun
	n    uint32 // records added
}

// recDictRun: record id+k has dict handle+k, up to the next run.
type recDictRun struct{ id, handle uint32 }

// add gives record n (the next) dict handle h.
func (r *recDicts) add(h uint32) {
	if k := len(r.runs) - 1; k < 0 || r.runs[k].handle+(r.n-r.runs[k].id) != h {
		r.runs = append(r.runs, recDictRun{r.n, h})
	}
	r.n++
}

// at is record id's dict handle (id < n).
func (r *recDicts) at(id uint32) uint32 {
	k := sort.Search(len(r.runs), func(k int) bool { return r.runs[k].id > id }) - 1
	return r.runs[k].handle + (id - r.runs[k].id)
}

// recRun is a list's items as consecutive record ids: first to first+n-1.
type recRun struct {
	first uint32
	n     int
}

func (a *Arena) intVal(n int64) Value {
	if n >= inlineMin && n <= inlineMax {
		return mkval(KindInt, uint64(n))
	}
	a.wideBuilt += 8
	a.Wide = append(a.Wide, uint64(n))
	return mkval(KindWideInt, uint64(len(a.Wide)-1))
}

func (a *Arena) uintVal(n uint64) Value {
	if n <= math.MaxInt64 {
		return a.intVal(int64(n))
	}
	a.wideBuilt += 8
	a.Wide = append(a.Wide, n)
	return mkval(KindWideUint, uint64(len(a.Wide)-1))
}

func (a *Arena) Str(v Value) (string, bool) {
	if v.Kind() != KindStr {
		return "", false
	}
	return a.Strs.At(v.Index()), true
}

// Int64 converts an int (or bool, a Python int subclass) handle.
func (a *Arena) Int64(v Value) (int64, bool) {
	switch v.Kind() {
	case KindInt:
		return v.inlineInt(), true
	case KindWideInt:
		return int64(a.Wide[v.Index()]), true
	case KindFalse:
		return 0, true
	case KindTrue:
		return 1, true
	}
	return 0, false
}

// Uint64 converts a non-negative int handle (addresses).
func (a *Arena) Uint64(v Value) (uint64, bool) {
	if v.Kind() == KindWideUint {
		return a.Wide[v.Index()], true
	}
	n, ok := a.Int64(v)
	if !ok || n < 0 {
		return 0, false
	}
	return uint64(n), true
}

// DictGet finds key in a dict handle; snapshot dicts have a dozen keys at
// most, so a linear scan beats hashing.
func (a *Arena) DictGet(d Value, key string) (Value, bool) {
	keys, vals := a.Dict(d)
	for i, k := range keys {
		if s, ok := a.Str(k); ok && s == key {
			return vals[i], true
		}
	}
	return 0, false
}

// Dict returns a Dict handle's keys and values, paired by index; a dict
// that a Recorder took (Record) reads as empty.
func (a *Arena) Dict(d Value) (keys, vals []Value) {
	ref := a.dictRef.At(d.Index())
	if ref == 0 || ref&refRecord != 0 {
		return nil, nil
	}
	slot := int(ref &^ refFrozen)
	if g, ok := a.grown[slot]; ok { // before STOP (settle)
		return g.keys, g.vals
	}
	return a.shapes[a.dictShape.At(slot)], a.dictVals.At(slot)
}

// Record returns the id a Recorder gave dict handle d.
func (a *Arena) Record(d Value) (uint32, bool) {
	if d.Kind() != KindDict {
		return 0, false
	}
	ref := a.dictRef.At(d.Index())
	return ref &^ refRecord, ref&refRecord != 0
}

// List returns the items of a list, tuple or set handle.
func (a *Arena) List(v Value) []Value {
	a.materialize(v.Index())
	return a.lists.At(int(a.listRef.At(v.Index()) & refSlot))
}

// ListID names the stored items of a list, tuple or set handle: equal
// lists built by appending to an empty one share it (sharedList).
func (a *Arena) ListID(v Value) uint32 {
	a.materialize(v.Index())
	return a.listRef.At(v.Index()) & refSlot
}

// RecordRun returns the record ids of a list handle whose items are the
// dicts of consecutive records, first to first+n-1, without reading them
// as items; ok is false for any other value.
func (a *Arena) RecordRun(v Value) (first uint32, n int, ok bool) {
	if v.Kind() != KindList {
		return 0, 0, false
	}
	r, ok := a.runs[v.Index()]
	return r.first, r.n, ok
}

// listLen is how many items list handle i holds.
func (a *Arena) listLen(i int) int {
	if r, ok := a.runs[i]; ok {
		return r.n
	}
	return len(a.lists.At(int(a.listRef.At(i) & refSlot)))
}

// materialize stores the items of list handle i if it is a run (see
// runs), as a slot of its own.
func (a *Arena) materialize(i int) {
	if a.listRef.At(i)&refSlot != 0 {
		return // has stored items: no run
	}
	r, ok := a.runs[i]
	if !ok {
		return
	}
	delete(a.runs, i)
	items := make([]Value, r.n)
	for k := range items {
		items[k] = mkval(KindDict, uint64(a.recDict.at(r.first+uint32(k))))
	}
	a.lists.Add(items)
	ref := a.listRef.At(i)
	a.listRef.Set(i, uint32(a.lists.Len()-1)|refOwned|ref&refFrozen)
}

// extendRun adds items to list handle i as a run when it is empty or a
// run and items are the dicts of the records that continue it.
func (a *Arena) extendRun(i int, items []Value) bool {
	if a.noRuns || len(items) == 0 {
		return false
	}
	if _, isRec := a.Record(items[0]); !isRec {
		return false // a frames list: spare it the lookup
	}
	r, ok := a.runs[i]
	if !ok && a.listRef.At(i)&refSlot != 0 {
		return false // has items
	}
	for k, it := range items {
		id, isRec := a.Record(it)
		if !isRec || (ok || k > 0) && id != r.first+uint32(r.n+k) {
			return false
		}
		if !ok && k == 0 {
			r.first = id
		}
	}
	r.n += len(items)
	if a.runs == nil {
		a.runs = map[int]recRun{}
	}
	a.runs[i] = r
	return true
}

// Freeze makes a later change to container v an error: a Recorder that
// took v's contents into a record calls it, so that no record disagrees
// with the pickle's data.
func (a *Arena) Freeze(v Value) {
	switch v.Kind() {
	case KindList, KindTuple, KindSet:
		a.listRef.Set(v.Index(), a.listRef.At(v.Index())|refFrozen)
	case KindDict:
		if ref := a.dictRef.At(v.Index()); ref&refRecord == 0 {
			a.dictRef.Set(v.Index(), ref|refFrozen)
		}
	}
}

// Reference bits of listRef and dictRef.
const (
	refRecord = 1 << 31 // dictRef: the rest is a record id
	refFrozen = 1 << 30 // the container may not change
	refOwned  = 1 << 29 // listRef: the slot is this handle's alone
	refSlot   = refOwned - 1
)

// A Recorder may take each dict as a compact record of its own when the
// dict gets its items (one SETITEMS, as Python writes a dict of fewer
// than 1000 items), so that millions of trace entries never exist as
// generic dicts. keys and vals pair by position and alias decoder memory:
// read them during the call only. The dict then reads as empty (Dict)
// and Record returns id; a later change to it is an error. An id must be
// below 1<<31. A non-nil err stops decoding with it (wrapped: errors.As
// finds it), e.g. the Recorder's cap on records.
type Recorder interface {
	Record(a *Arena, keys, vals []Value) (id uint32, ok bool, err error)
}

var errChanged = errors.New("a container changed after a trace entry took it (Python's pickle never writes this): not an allocator snapshot")

// pickleDecoder is the unpickling machine: a value stack, a mark stack and
// the memo, fed from its own buffer (slices of it are handed out without
// copying; io.ReadFull per opcode through an interface cost a third of the
// time).
type pickleDecoder struct {
	src      io.Reader
	buf      []byte
	pos, end int
	base     int64 // input offset of buf[0], for error messages
	srcErr   error // sticky error from src (io.EOF at the end)

	a     Arena
	stack []Value
	marks []int
	// memo holds the memo's slots set in order, 4 bytes each (memoSlot);
	// wide holds the values of its slots that do not fit 4 bytes;
	// sparse the slots set out of order (never by CPython).
	memo   paged[uint32]
	wide   map[int]Value
	sparse map[uint64]Value
	proto  int
	// listIndex finds a stored list slot with the same contents, so that
	// the thousands of identical "frames" lists of a trace share one slot.
	listIndex map[uint64][]uint32
	listCache [1 << listCacheBits]uint32 // a slot (0: empty; slot 0 holds no items)
	rec       Recorder
	// strIndex shares one handle among equal short strs (frame file and
	// function names that a writer did not memoize, the "N/A" that
	// CPython writes anew in every trace entry): a str is immutable, so
	// the handle of an equal one is as good, and costs no new slot.
	strIndex map[string]Value
	slab     []Value
	// shapeIndex finds a stored key list (Arena.shapes) by its hash;
	// canonKey maps a key string to the first handle seen for it, so that
	// key lists of writers that do not memoize keys still share.
	shapeIndex map[uint64][]uint32
	canonKey   map[string]Value
	kscratch   []Value
	vscratch   []Value
	// limit is Decode's maxValueBytes.
	limit int
	// one and two hold APPEND's and SETITEM's items without allocating.
	one [1]Value
	two [2]Value
	// canonCache: handle+1 -> canon(handle) (see canon).
	canonCache [1 << canonCacheBits][2]Value
	// built counts what the decoder has built (containers, their items,
	// strs, floats and wide ints): the memory the input costs, which
	// Decode bounds by the input's length (see budget).
	built int64
}

type grownDict struct{ keys, vals []Value }

const pickleBufSize = 256 << 10

// Decode reads one pickle from r and returns its arena and root value;
// no str, bytes or container may be over maxValueBytes (ValueLimitError).
// It may read past the STOP opcode.
func Decode(r io.Reader, maxValueBytes int) (*Arena, Value, error) {
	return DecodeRecords(r, maxValueBytes, nil)
}

// DecodeRecords is Decode with a Recorder (nil: none).
func DecodeRecords(r io.Reader, maxValueBytes int, rec Recorder) (*Arena, Value, error) {
	d := &pickleDecoder{src: r, buf: make([]byte, 4<<10), listIndex: map[uint64][]uint32{}, limit: max(maxValueBytes, 1),
		shapeIndex: map[uint64][]uint32{}, canonKey: map[string]Value{}, strIndex: map[string]Value{}, rec: rec}
	d.a.shapes = [][]Value{nil}
	d.a.lists.Add(nil)    // slot 0: no items
	d.a.dictVals.Add(nil) // slot 0: unused (dictRef 0 is an empty dict)
	d.a.dictShape.Add(0)
	head, err := d.peekUpTo(2)
	if len(head) == 0 && err != nil {
		if err == io.EOF {
			return nil, 0, errors.New("empty input (no snapshot)")
		}
		return nil, 0, err
	}
	if !IsPickle(head) {
		return nil, 0, fmt.Errorf("not a pickle of protocol 2 to 5 (starts with % x; an allocator snapshot starts with 80 04 or 80 05)", head)
	}
	root, err := d.run()
	if err != nil {
		return nil, 0, err
	}
	d.a.InputBytes = d.offset()
	d.a.Built = d.built + d.a.wideBuilt
	return &d.a, root, nil
}

func (d *pickleDecoder) offset() int64 { return d.base + int64(d.pos) }

// fill makes at least n bytes (n <= len(buf)) available, or fails.
func (d *pickleDecoder) fill(n int) error {
	if d.end-d.pos >= n {
		return nil
	}
	if d.pos > 0 || d.end == len(d.buf) {
		buf := d.buf
		// Start small (a tiny or broken input costs little) and double up
		// to pickleBufSize while the input keeps coming.
		if len(buf) < pickleBufSize {
			buf = make([]byte, min(2*len(buf), pickleBufSize))
		}
		copy(buf, d.buf[d.pos:d.end])
		d.buf = buf
		d.base += int64(d.pos)
		d.end -= d.pos
		d.pos = 0
	}
	for empty := 0; d.end < n; {
		if d.srcErr != nil {
			return d.srcErr
		}
		m, err := d.src.Read(d.buf[d.end:])
		d.end += m
		if err != nil {
			d.srcErr = err
		}
		if m == 0 && err == nil {
			if empty++; empty > 100 {
				d.srcErr = io.ErrNoProgress
			}
		}
	}
	return nil
}

func (d *pickleDecoder) peekUpTo(n int) ([]byte, error) {
	err := d.fill(n)
	return d.buf[d.pos:min(d.end, d.pos+n)], err
}

// next returns the next n bytes (n <= len(buf)), valid until the next read.
func (d *pickleDecoder) next(n int) ([]byte, error) {
	if d.end-d.pos >= n { // inlined: most reads are in the buffer
		b := d.buf[d.pos : d.pos+n]
		d.pos += n
		return b, nil
	}
	return d.nextFill(n)
}

func (d *pickleDecoder) nextFill(n int) ([]byte, error) {
	if err := d.fill(n); err != nil {
		return nil, truncated(err)
	}
	b := d.buf[d.pos : d.pos+n]
	d.pos += n
	return b, nil
}

// memoIndex reads a memo index: one byte (BINPUT, BINGET) or four,
// little-endian (LONGBINPUT, LONGBINGET).
func (d *pickleDecoder) memoIndex(long bool) (uint64, error) {
	switch {
	case !long && d.pos < d.end:
		d.pos++
		return uint64(d.buf[d.pos-1]), nil
	case long && d.end-d.pos >= 4:
		d.pos += 4
		return uint64(binary.LittleEndian.Uint32(d.buf[d.pos-4:])), nil
	}
	n := 1
	if long {
		n = 4
	}
	b, err := d.next(n)
	if err != nil {
		return 0, err
	}
	if long {
		return uint64(binary.LittleEndian.Uint32(b)), nil
	}
	return uint64(b[0]), nil
}

func (d *pickleDecoder) errorf(opOff int64, op byte, format string, args ...any) error {
	return fmt.Errorf("pickle byte %d (opcode 0x%02x): %s", opOff, op, fmt.Sprintf(format, args...))
}

func truncated(err error) error {
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return errTruncated
	}
	return err
}

var errTruncated = errors.New("truncated pickle (input ends before STOP)")

// A pickle may build what its length pays for: the decoder counts the
// bytes of memory each value costs it (a list's header and items, a dict,
// a str's header and text, a float, a memo slot) and refuses a pickle
// that has built more than BuiltSlack plus BuiltPerByte times the bytes
// read so far. The allocator snapshots of testdata build 1.1 to 3.9 bytes
// per byte of pickle; bombs of small objects 12 (100 MB of "]0" built
// 1.2 GB of empty lists) to 32 (nested 1-tuples), and are refused after
// a few MB. Bombs as dense as a snapshot (a list appended to, small strs)
// cost what a snapshot of their size costs, and a list or dict stops at
// the one-value limit (--max-value-bytes).
const (
	BuiltSlack   = 16 << 20
	BuiltPerByte = 8
)

// BuiltBudget is the bytes a pickle may have built after offset bytes.
func BuiltBudget(offset int64) int64 { return BuiltSlack + BuiltPerByte*offset }

// DensityError is a pickle that builds more values than its length allows
// (BuiltBudget): small objects made to cost memory, not a snapshot.
type DensityError struct {
	Offset int64
	Built  int64
}

func (e *DensityError) Error() string {
	return fmt.Sprintf("pickle byte %d: %d bytes of values built from %d bytes of pickle, more than %d times its length: small objects made to cost memory, not an allocator snapshot (at most 4 times)", e.Offset, e.Built, e.Offset, BuiltPerByte)
}

// ValueLimitError is a pickle value over the decoder's limit (the
// snapshot reader passes chrometrace.Limits.ValueBytes).
type ValueLimitError struct {
	Offset int64  // pickle byte offset of the opcode
	What   string // "a str of 10737418240 bytes", ...
	Limit  int
}

func (e *ValueLimitError) Error() string {
	return fmt.Sprintf("pickle byte %d: %s is over the limit of %s on one value (--max-value-bytes raises it)", e.Offset, e.What, chrometrace.FormatLimit(e.Limit))
}

// readBytes reads a length-prefixed payload. Lengths come from the file and
// may be hostile: a length over the limit is refused before reading, and
// below it memory grows only as bytes actually arrive, so a claimed length
// costs at most what the input really holds. fresh says the result is a new
// allocation (not a view of the read buffer) that the caller may keep.
func (d *pickleDecoder) readBytes(n uint64) (b []byte, fresh bool, err error) {
	if n <= uint64(len(d.buf)) {
		b, err := d.next(int(n))
		return b, false, err
	}
	const chunk = 1 << 20
	var out []byte
	for uint64(len(out)) < n {
		if d.pos == d.end {
			if err := d.fill(1); err != nil {
				return nil, false, truncated(err)
			}
		}
		take := min(uint64(d.end-d.pos), n-uint64(len(out)), chunk)
		out = append(out, d.buf[d.pos:d.pos+int(take)]...)
		d.pos += int(take)
	}
	return out, true, nil
}

// paged is a growable array kept in fixed pages of pageSize items (the
// first page grows from small): appending never copies what is stored,
// so a large pickle leaves no outgrown arrays behind as garbage (they were
// a fifth of the peak memory on a 600 MB snapshot).
type paged[T any] struct {
	pages [][]T
	n     int
	spare []T // pages allocated, not yet used (newPage)
}

const (
	pageBits = 16
	pageSize = 1 << pageBits
	pageMask = pageSize - 1
)

func (p *paged[T]) Len() int       { return p.n }
func (p *paged[T]) At(i int) T     { return p.pages[i>>pageBits][i&pageMask] }
func (p *paged[T]) Set(i int, v T) { p.pages[i>>pageBits][i&pageMask] = v }
func (p *paged[T]) Add(v T) {
	// Inlined: most adds go to a page with room.
	if last := len(p.pages) - 1; last >= 0 {
		if pg := p.pages[last]; len(pg) < cap(pg) {
			p.pages[last] = append(pg, v)
			p.n++
			return
		}
	}
	p.addPage(v)
}

func (p *paged[T]) addPage(v T) {
	last := len(p.pages) - 1
	switch {
	case last < 0:
		p.pages = append(p.pages, make([]T, 0, 64))
		last = 0
	case len(p.pages[last]) == pageSize:
		p.pages = append(p.pages, p.newPage())
		last++
	default:
		// The first page, full below pageSize: doubled, never past
		// pageSize (Add's fast path takes a page's room as its cap).
		pg := p.pages[last]
		grown := make([]T, len(pg), min(2*cap(pg), pageSize))
		copy(grown, pg)
		p.pages[last] = grown
	}
	p.pages[last] = append(p.pages[last], v)
	p.n++
}

// newPage returns an empty full-size page. Pages past the first come
// from slabs of about slabBytes, backed by huge pages where Linux allows
// (hugepages.Advise): the memo of a 1 GB snapshot alone is 170 MB, a page
// fault per 4 KiB otherwise. A slab's pages not yet used are never
// touched, so they cost no memory.
func (p *paged[T]) newPage() []T {
	if len(p.spare) < pageSize {
		var zero T
		n := max(1, slabBytes/(pageSize*int(unsafe.Sizeof(zero))))
		p.spare = make([]T, n*pageSize)
		hugepages.Advise(p.spare)
	}
	pg := p.spare[:0:pageSize]
	p.spare = p.spare[pageSize:]
	// The page after this one, faulted in on the other CPU while this
	// one is filled.
	hugepages.PopulateAhead(p.spare, 0, pageSize)
	return pg
}

const slabBytes = 16 << 20

func (d *pickleDecoder) push(v Value) { d.stack = append(d.stack, v) }

func (d *pickleDecoder) pop() (Value, bool) {
	lo := 0
	if len(d.marks) > 0 {
		lo = d.marks[len(d.marks)-1]
	}
	if len(d.stack) <= lo {
		return 0, false
	}
	v := d.stack[len(d.stack)-1]
	d.stack = d.stack[:len(d.stack)-1]
	return v, true
}

// popMark returns the items pushed since the last MARK and removes them.
func (d *pickleDecoder) popMark() ([]Value, bool) {
	if len(d.marks) == 0 {
		return nil, false
	}
	m := d.marks[len(d.marks)-1]
	d.marks = d.marks[:len(d.marks)-1]
	items := d.stack[m:]
	d.stack = d.stack[:m]
	return items, true
}

// A memo slot is 4 bytes: a value whose payload fits memoPayloadBits (a
// snapshot memoizes strs, lists and dicts, whose handles count from 0)
// is its kind and payload; any other (a negative int a hostile writer
// memoized) is memoWide, its value in wide. The memo of a 1 GB snapshot
// is 15M slots: 60 MB fewer than as Values, in memory that is dear to
// fault in.
const (
	memoPayloadBits = 28
	memoWide        = math.MaxUint32
)

// memoSlot packs v, ok false when it does not fit.
func memoSlot(v Value) (uint32, bool) {
	p := uint64(v) & payloadMask
	if p >= 1<<memoPayloadBits || v.Kind() >= 15 {
		return 0, false
	}
	return uint32(v.Kind())<<memoPayloadBits | uint32(p), true
}

// memoValue unpacks a slot other than memoWide.
func memoValue(c uint32) Value {
	return mkval(Kind(c>>memoPayloadBits), uint64(c&(1<<memoPayloadBits-1)))
}

func (d *pickleDecoder) memoPut(idx uint64, v Value) {
	d.built += 8
	c, fits := memoSlot(v)
	if !fits {
		c = memoWide
	}
	switch {
	case idx < uint64(d.memo.Len()):
		if d.memo.At(int(idx)) == memoWide {
			delete(d.wide, int(idx))
		}
		d.memo.Set(int(idx), c)
	case idx == uint64(d.memo.Len()) && d.sparse == nil:
		d.memo.Add(c)
	default:
		// Out-of-order slots: a map, so that an index of 2^32 from a hostile
		// file costs one entry, not a 32 GB slice.
		if d.sparse == nil {
			d.sparse = make(map[uint64]Value)
		}
		d.sparse[idx] = v
		return
	}
	if !fits {
		if d.wide == nil {
			d.wide = map[int]Value{}
		}
		d.wide[int(idx)] = v
	}
}

func (d *pickleDecoder) memoGet(idx uint64) (Value, bool) {
	if idx < uint64(d.memo.Len()) {
		if c := d.memo.At(int(idx)); c != memoWide {
			return memoValue(c), true
		}
		return d.wide[int(idx)], true
	}
	v, ok := d.sparse[idx]
	return v, ok
}

// store copies items (which alias the value stack) into arena memory with
// cap == len, so that a later append through the memo reallocates rather
// than overwriting a neighbour. Small containers are carved from slabs: one
// allocation per 256 KB instead of one per dict.
func (d *pickleDecoder) store(items []Value) []Value {
	n := len(items)
	if n == 0 {
		return nil
	}
	var out []Value
	if n > slabSize/8 {
		out = make([]Value, n)
	} else {
		if len(d.slab)+n > cap(d.slab) {
			d.slab = make([]Value, 0, slabSize)
		}
		k := len(d.slab)
		d.slab = d.slab[:k+n]
		out = d.slab[k : k+n : k+n]
	}
	copy(out, items)
	return out
}

const slabSize = 32 << 10 // pvals

// sharedList returns the slot of stored items for a fresh list, reusing an
// equal list stored before. CPython shares the frame dicts of a traceback
// through the memo but builds a new list per trace entry; sharing equal
// lists here keeps the arena (and the []Frame slices built from it)
// proportional to the distinct stacks rather than to the trace length.
func (d *pickleDecoder) sharedList(items []Value) uint32 {
	if len(items) < 2 {
		return d.addListSlot(d.store(items))
	}
	// A trace repeats a few hundred stacks: a direct-mapped cache keyed
	// by the length and three of the items finds most of them at the
	// cost of one comparison, without hashing them all.
	n := uint64(len(items))
	q := (n*0x9E3779B97F4A7C15 ^ uint64(items[0]) ^ uint64(items[n/2])*0xC2B2AE3D27D4EB4F ^ uint64(items[n-1])*0x165667B19E3779F9) * 0x9E3779B97F4A7C15
	c := &d.listCache[q>>(64-listCacheBits)]
	if *c != 0 {
		if other := d.a.lists.At(int(*c)); len(other) == len(items) && equalVals(other, items) {
			return *c
		}
	}
	// maphash hashes the items' bytes many at a time (FNV's multiply per
	// item, each waiting on the one before, was a twentieth of decoding).
	h := maphash.Bytes(listSeed, unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(items))), len(items)*8))
	for _, slot := range d.listIndex[h] {
		if other := d.a.lists.At(int(slot)); len(other) == len(items) && equalVals(other, items) {
			*c = slot
			return slot
		}
	}
	slot := d.addListSlot(d.store(items))
	d.listIndex[h] = append(d.listIndex[h], slot)
	*c = slot
	return slot
}

const listCacheBits = 10

// listSeed seeds sharedList's hash.
var listSeed = maphash.MakeSeed()

func (d *pickleDecoder) addListSlot(items []Value) uint32 {
	d.a.lists.Add(items)
	return uint32(d.a.lists.Len() - 1)
}

// newList stores a list, tuple or set of items (which the caller stored:
// the slot is the handle's own).
func (d *pickleDecoder) newList(k Kind, items []Value) Value {
	d.built += 24 + 8*int64(len(items))
	var ref uint32
	if len(items) > 0 {
		ref = d.addListSlot(items) | refOwned
	}
	d.a.listRef.Add(ref)
	return mkval(k, uint64(d.a.listRef.Len()-1))
}

// appendItems adds items to list handle i.
func (d *pickleDecoder) appendItems(i int, items []Value) error {
	ref := d.a.listRef.At(i)
	if ref&refFrozen != 0 {
		return errChanged
	}
	if d.a.extendRun(i, items) {
		return nil
	}
	d.a.materialize(i)
	ref = d.a.listRef.At(i)
	slot := int(ref & refSlot)
	cur := d.a.lists.At(slot)
	switch {
	case len(items) == 0:
	case len(cur) == 0:
		d.a.listRef.Set(i, d.sharedList(items))
	case ref&refOwned != 0:
		if n := len(cur) + len(items); n > cap(cur) {
			// Double (append grows a large slice by a quarter, copying
			// a device's trace list of millions of entries ten times).
			grown := make([]Value, len(cur), max(2*cap(cur), n))
			copy(grown, cur)
			cur = grown
		}
		d.a.lists.Set(slot, append(cur, items...))
	default:
		// Shared: a copy of its own (cur's cap is its length).
		d.a.listRef.Set(i, d.addListSlot(append(cur, items...))|refOwned)
	}
	return nil
}

// newDict makes a dict with the interleaved key/value items.
func (d *pickleDecoder) newDict(items []Value) (Value, error) {
	d.built += 28
	d.a.dictRef.Add(0)
	i := d.a.dictRef.Len() - 1
	if len(items) > 0 {
		if err := d.setItems(i, items, true); err != nil {
			return 0, err
		}
	}
	return mkval(KindDict, uint64(i)), nil
}

// setItems adds interleaved key/value items to dict handle i; batch says
// they came in one SETITEMS or DICT (a Recorder may take them).
func (d *pickleDecoder) setItems(i int, items []Value, batch bool) error {
	d.built += 8 * int64(len(items))
	ref := d.a.dictRef.At(i)
	if ref&(refRecord|refFrozen) != 0 {
		return errChanged
	}
	if len(items) == 0 {
		return nil
	}
	if ref == 0 {
		keys, vals := d.kscratch[:0], d.vscratch[:0]
		for j := 0; j+1 < len(items); j += 2 {
			keys = append(keys, d.canon(items[j]))
			vals = append(vals, items[j+1])
		}
		d.kscratch, d.vscratch = keys[:0], vals[:0]
		if batch && d.rec != nil {
			id, ok, err := d.rec.Record(&d.a, keys, vals)
			if err != nil {
				return err
			}
			if ok && id < refRecord {
				d.a.dictRef.Set(i, refRecord|id)
				if id == d.a.recDict.n {
					d.a.recDict.add(uint32(i))
				} else {
					d.a.noRuns = true
				}
				return nil
			}
		}
		d.a.dictShape.Add(d.shape(keys))
		d.a.dictVals.Add(d.store(vals))
		d.a.dictRef.Set(i, uint32(d.a.dictVals.Len()-1))
		return nil
	}
	slot := int(ref)
	g, ok := d.a.grown[slot]
	if !ok {
		g = &grownDict{keys: slices.Clone(d.a.shapes[d.a.dictShape.At(slot)]), vals: slices.Clone(d.a.dictVals.At(slot))}
		if d.a.grown == nil {
			d.a.grown = map[int]*grownDict{}
		}
		d.a.grown[slot] = g
	}
	for j := 0; j+1 < len(items); j += 2 {
		g.keys = append(g.keys, d.canon(items[j]))
		g.vals = append(g.vals, items[j+1])
	}
	return nil
}

// dictLen is how many items dict handle i holds so far.
func (d *pickleDecoder) dictLen(i int) int {
	ref := d.a.dictRef.At(i)
	if ref == 0 || ref&refRecord != 0 {
		return 0
	}
	slot := int(ref &^ refFrozen)
	if g, ok := d.a.grown[slot]; ok {
		return len(g.vals)
	}
	return len(d.a.dictVals.At(slot))
}

// canon maps a str key to the first handle seen for its text.
func (d *pickleDecoder) canon(k Value) Value {
	if k.Kind() == KindStr {
		// Memoized keys repeat their handle: a direct-mapped cache of
		// handles spares hashing the text of each.
		c := &d.canonCache[(uint64(k)*0x9E3779B97F4A7C15)>>(64-canonCacheBits)]
		if c[0] == k+1 {
			return c[1]
		}
		v := d.canonStr(k)
		*c = [2]Value{k + 1, v}
		return v
	}
	return k
}

const canonCacheBits = 10

func (d *pickleDecoder) canonStr(k Value) Value {
	s := d.a.Strs.At(k.Index())
	if c, ok := d.canonKey[s]; ok {
		return c
	} else if len(d.canonKey) < 1<<16 {
		d.canonKey[s] = k
	}
	return k
}

// settle gives the grown dicts their shared key lists (see grown).
func (d *pickleDecoder) settle() {
	for _, i := range slices.Sorted(maps.Keys(d.a.grown)) {
		g := d.a.grown[i]
		d.a.dictShape.Set(i, d.shape(g.keys))
		d.a.dictVals.Set(i, g.vals)
	}
	d.a.grown = nil
}

// shape returns the id of the stored key list equal to keys, storing a
// copy the first time.
func (d *pickleDecoder) shape(keys []Value) uint32 {
	if len(keys) == 0 {
		return 0
	}
	h := uint64(14695981039346656037)
	for _, k := range keys {
		h ^= uint64(k)
		h *= 1099511628211
	}
	for _, id := range d.shapeIndex[h] {
		if other := d.a.shapes[id]; len(other) == len(keys) && equalVals(other, keys) {
			return id
		}
	}
	id := uint32(len(d.a.shapes))
	d.a.shapes = append(d.a.shapes, d.store(keys))
	d.shapeIndex[h] = append(d.shapeIndex[h], id)
	return id
}

func equalVals(a, b []Value) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func (d *pickleDecoder) run() (Value, error) {
	// Real pickles keep a few thousand values on the stack (CPython
	// appends in batches of 1000); a stack or mark stack past the one-value
	// limit is a file that only pushes.
	maxStack := max(d.limit/8, 1<<10)
	for {
		d.hotOps(maxStack)
		opOff := d.offset()
		if built := d.built + d.a.wideBuilt; built > BuiltBudget(opOff) {
			return 0, &DensityError{Offset: opOff, Built: built}
		}
		if len(d.stack) > maxStack || len(d.marks) > maxStack {
			return 0, &ValueLimitError{Offset: opOff, What: fmt.Sprintf("a value of %d stack items (%d marks)", len(d.stack), len(d.marks)), Limit: d.limit}
		}
		if d.pos == d.end {
			if err := d.fill(1); err != nil {
				return 0, truncated(err)
			}
		}
		op := d.buf[d.pos]
		d.pos++
		var err error
		switch op {
		case opSTOP:
			v, ok := d.pop()
			if !ok || len(d.stack) != 0 || len(d.marks) != 0 {
				return 0, d.errorf(opOff, op, "malformed pickle: STOP with %d values and %d marks on the stack", len(d.stack)+btoi(ok), len(d.marks))
			}
			d.settle()
			return v, nil
		case opPROTO, opFRAME, opMARK, opPOP, opPOPMARK, opDUP:
			err = d.stackOp(op, opOff)
		case opNONE, opNEWTRUE, opNEWFALSE, opBININT1, opBININT2, opBININT, opLONG1, opLONG4, opBINFLOAT:
			err = d.scalarOp(op, opOff)
		case opSHORTBINUNICODE, opBINUNICODE, opBINUNICODE8,
			opSHORTBINBYTES, opBINBYTES, opBINBYTES8, opBYTEARRAY8:
			err = d.stringOp(op, opOff)
		case opEMPTYDICT, opEMPTYLIST, opEMPTYTUPLE, opEMPTYSET, opTUPLE1, opTUPLE2, opTUPLE3,
			opTUPLE, opLIST, opFROZENSET, opDICT:
			err = d.buildOp(op, opOff)
		case opAPPEND, opAPPENDS, opADDITEMS:
			err = d.appendOp(op, opOff)
		case opSETITEM, opSETITEMS:
			err = d.setItemOp(op, opOff)
		case opMEMOIZE, opBINPUT, opLONGBINPUT, opBINGET, opLONGBINGET:
			err = d.memoOp(op, opOff)
		default:
			if name, ok := opNames[op]; ok {
				return 0, fmt.Errorf("pickle byte %d: unsupported pickle opcode %s (0x%02x): %w", opOff, name, op, ErrNotPlainData)
			}
			return 0, d.errorf(opOff, op, "invalid pickle opcode (corrupt file or not a pickle)")
		}
		if err != nil {
			return 0, err
		}
	}
}

// hotOps runs the opcodes that are most of a snapshot's (memo gets and
// puts, small ints, marks, 64-bit ints: five in six of a trace entry's) in
// one tight loop, exactly as run would run them one at a time, checks
// included, while the buffer holds the longest of them. It stops, pos at
// the opcode, at any other opcode and wherever run must decide (a check
// that fails, a memo slot not in the dense memo); run takes it from there.
// One call per opcode through run's switch cost a third of the time of
// reading a large snapshot.
//
// run checks the density budget before every opcode; here it is checked
// once: none of these opcodes builds more than BuiltPerByte times its own
// length (MEMOIZE builds a memo slot of 8 bytes for its 1 byte, LONG1 at
// most a wide int of 8 for its 2 or more, the rest nothing), so the budget
// left never shrinks inside the loop.
func (d *pickleDecoder) hotOps(maxStack int) {
	pos := d.pos
	if d.built+d.a.wideBuilt > BuiltBudget(d.base+int64(pos)) {
		return
	}
	buf := d.buf[:d.end]
	stack, marks := d.stack, d.marks
loop:
	for pos+hotMaxLen <= len(buf) && len(stack) <= maxStack && len(marks) <= maxStack {
		switch hotClass[buf[pos]] {
		case hotGet:
			idx := int(buf[pos+1])
			if idx >= d.memo.n || d.memo.At(idx) == memoWide {
				break loop
			}
			stack = append(stack, memoValue(d.memo.At(idx)))
			pos += 2
		case hotLongGet:
			idx := int(binary.LittleEndian.Uint32(buf[pos+1:]))
			if idx >= d.memo.n || d.memo.At(idx) == memoWide {
				break loop
			}
			stack = append(stack, memoValue(d.memo.At(idx)))
			pos += 5
		case hotMemoize:
			if len(stack) == 0 {
				break loop
			}
			d.memoPut(uint64(d.memo.n+len(d.sparse)), stack[len(stack)-1])
			pos++
		case hotInt1:
			stack = append(stack, mkval(KindInt, uint64(buf[pos+1])))
			pos += 2
		case hotInt2:
			stack = append(stack, mkval(KindInt, uint64(binary.LittleEndian.Uint16(buf[pos+1:]))))
			pos += 3
		case hotInt4:
			// An int32 always fits the inline payload (intVal's).
			stack = append(stack, mkval(KindInt, uint64(int64(int32(binary.LittleEndian.Uint32(buf[pos+1:]))))))
			pos += 5
		case hotLong1:
			// Up to 8 bytes (9 may overflow: run says so).
			n := int(buf[pos+1])
			if n > 8 {
				break loop
			}
			v, err := d.long(buf[pos+2 : pos+2+n])
			if err != nil {
				break loop // never for 8 bytes or fewer
			}
			stack = append(stack, v)
			pos += 2 + n
		case hotMark:
			marks = append(marks, len(stack))
			pos++
		case hotNone:
			stack = append(stack, mkval(KindNone, 0))
			pos++
		default:
			break loop
		}
	}
	d.stack, d.marks, d.pos = stack, marks, pos
}

// hotMaxLen is the longest opcode hotOps runs (LONG1 of 8 bytes).
const hotMaxLen = 10

// hotOps's opcode classes (0: not a hot opcode).
const (
	hotGet = iota + 1
	hotLongGet
	hotMemoize
	hotInt1
	hotInt2
	hotInt4
	hotLong1
	hotMark
	hotNone
)

var hotClass = [256]uint8{
	opBINGET: hotGet, opLONGBINGET: hotLongGet, opMEMOIZE: hotMemoize,
	opBININT1: hotInt1, opBININT2: hotInt2, opBININT: hotInt4, opLONG1: hotLong1,
	opMARK: hotMark, opNONE: hotNone,
}

// hotOps checks the budget once per call (see there): it needs every
// pickle byte to pay for at least 8 bytes built.
const _ = uint(BuiltPerByte - 8)

// stackOp runs the opcodes that only move what is on the stack (and the
// framing hints).
func (d *pickleDecoder) stackOp(op byte, opOff int64) error {
	switch op {
	case opPROTO:
		b, err := d.next(1)
		if err != nil {
			return err
		}
		if b[0] < 2 || b[0] > 5 {
			return d.errorf(opOff, op, "unsupported pickle protocol %d (want 2 to 5)", b[0])
		}
		d.proto = int(b[0])
	case opFRAME:
		// Framing is a hint for buffered readers; the opcodes inside
		// are decoded as a plain stream.
		if _, err := d.next(8); err != nil {
			return err
		}
	case opMARK:
		d.marks = append(d.marks, len(d.stack))
	case opPOP:
		if _, ok := d.pop(); !ok {
			if len(d.marks) == 0 {
				return d.errorf(opOff, op, "malformed pickle: POP on an empty stack")
			}
			d.popMark() // POP of a bare MARK drops the mark (CPython does too)
		}
	case opPOPMARK:
		if _, ok := d.popMark(); !ok {
			return d.errorf(opOff, op, "malformed pickle: POP_MARK without MARK")
		}
	case opDUP:
		v, ok := d.pop()
		if !ok {
			return d.errorf(opOff, op, "malformed pickle: DUP on an empty stack")
		}
		d.push(v)
		d.push(v)
	}
	return nil
}

// scalarOp pushes None, a bool, an int or a float.
func (d *pickleDecoder) scalarOp(op byte, opOff int64) error {
	switch op {
	case opNONE:
		d.push(mkval(KindNone, 0))
	case opNEWTRUE:
		d.push(mkval(KindTrue, 0))
	case opNEWFALSE:
		d.push(mkval(KindFalse, 0))
	case opBININT1:
		b, err := d.next(1)
		if err != nil {
			return err
		}
		d.push(mkval(KindInt, uint64(b[0])))
	case opBININT2:
		b, err := d.next(2)
		if err != nil {
			return err
		}
		d.push(mkval(KindInt, uint64(binary.LittleEndian.Uint16(b))))
	case opBININT:
		b, err := d.next(4)
		if err != nil {
			return err
		}
		d.push(d.a.intVal(int64(int32(binary.LittleEndian.Uint32(b)))))
	case opLONG1, opLONG4:
		var n uint64
		if op == opLONG1 {
			b, err := d.next(1)
			if err != nil {
				return err
			}
			n = uint64(b[0])
		} else {
			b, err := d.next(4)
			if err != nil {
				return err
			}
			ln := int32(binary.LittleEndian.Uint32(b))
			if ln < 0 {
				return d.errorf(opOff, op, "malformed pickle: LONG4 with negative length %d", ln)
			}
			n = uint64(ln)
		}
		// CPython writes the minimal two's complement, so anything
		// over 9 bytes cannot fit 64 bits.
		if n > 9 {
			return d.errorf(opOff, op, "integer of %d bytes overflows 64 bits", n)
		}
		b, _, err := d.readBytes(n)
		if err != nil {
			return err
		}
		v, err := d.long(b)
		if err != nil {
			return d.errorf(opOff, op, "%v", err)
		}
		d.push(v)
	case opBINFLOAT:
		b, err := d.next(8)
		if err != nil {
			return err
		}
		d.built += 8
		d.a.Floats = append(d.a.Floats, math.Float64frombits(binary.BigEndian.Uint64(b)))
		d.push(mkval(KindFloat, uint64(len(d.a.Floats)-1)))
	}
	return nil
}

// stringOp pushes a str or bytes payload.
func (d *pickleDecoder) stringOp(op byte, opOff int64) error {
	var n uint64
	switch op {
	case opSHORTBINUNICODE, opSHORTBINBYTES:
		b, err := d.next(1)
		if err != nil {
			return err
		}
		n = uint64(b[0])
	case opBINUNICODE, opBINBYTES:
		b, err := d.next(4)
		if err != nil {
			return err
		}
		n = uint64(binary.LittleEndian.Uint32(b))
	default:
		b, err := d.next(8)
		if err != nil {
			return err
		}
		n = binary.LittleEndian.Uint64(b)
	}
	k := KindBytes
	if op == opSHORTBINUNICODE || op == opBINUNICODE || op == opBINUNICODE8 {
		k = KindStr
	}
	if n > uint64(d.limit) {
		return &ValueLimitError{Offset: opOff, What: fmt.Sprintf("a %v of %d bytes", k, n), Limit: d.limit}
	}
	b, fresh, err := d.readBytes(n)
	if err != nil {
		return err
	}
	d.built += 16 + int64(len(b))
	var str string
	switch {
	case fresh:
		str = unsafe.String(unsafe.SliceData(b), len(b))
	case k == KindStr && len(b) <= maxShared:
		// Equal short strs share their text: a lookup by the bytes
		// allocates nothing.
		if v, ok := d.strIndex[string(b)]; ok {
			d.push(v)
			return nil
		}
		str = string(b)
	default:
		str = string(b)
	}
	if k == KindStr {
		str = chrometrace.OneLine(str) // a name may not start a line of output
	}
	d.a.Strs.Add(str)
	v := mkval(k, uint64(d.a.Strs.Len()-1))
	if k == KindStr && !fresh && len(b) <= maxShared && len(d.strIndex) < 1<<16 {
		d.strIndex[string(b)] = v
	}
	d.push(v)
	return nil
}

// maxShared is the longest str whose text decoding shares (strIndex).
const maxShared = 256

// buildOp makes a container from nothing or from the items on the stack.
func (d *pickleDecoder) buildOp(op byte, opOff int64) error {
	switch op {
	case opEMPTYDICT:
		v, _ := d.newDict(nil) // no items: no error
		d.push(v)
	case opEMPTYLIST:
		d.push(d.newList(KindList, nil))
	case opEMPTYTUPLE:
		d.push(d.newList(KindTuple, nil))
	case opEMPTYSET:
		d.push(d.newList(KindSet, nil))
	case opTUPLE1, opTUPLE2, opTUPLE3:
		n := int(op-opTUPLE1) + 1
		lo := 0
		if len(d.marks) > 0 {
			lo = d.marks[len(d.marks)-1]
		}
		if len(d.stack)-lo < n {
			return d.errorf(opOff, op, "malformed pickle: TUPLE%d with %d values on the stack", n, len(d.stack)-lo)
		}
		items := d.store(d.stack[len(d.stack)-n:])
		d.stack = d.stack[:len(d.stack)-n]
		d.push(d.newList(KindTuple, items))
	default: // opTUPLE, opLIST, opFROZENSET, opDICT
		items, ok := d.popMark()
		if !ok {
			return d.errorf(opOff, op, "malformed pickle: opcode without MARK")
		}
		switch op {
		case opTUPLE:
			d.push(d.newList(KindTuple, d.store(items)))
		case opLIST:
			d.push(d.newList(KindList, d.store(items)))
		case opFROZENSET:
			d.push(d.newList(KindSet, d.store(items)))
		default:
			if len(items)%2 != 0 {
				return d.errorf(opOff, op, "malformed pickle: DICT with an odd number of items")
			}
			v, err := d.newDict(items)
			if err != nil {
				return fmt.Errorf("pickle byte %d (opcode 0x%02x): %w", opOff, op, err)
			}
			d.push(v)
		}
	}
	return nil
}

// appendOp appends to the list (or adds to the set) under the items.
func (d *pickleDecoder) appendOp(op byte, opOff int64) error {
	var items []Value
	if op == opAPPEND {
		v, ok := d.pop()
		if !ok {
			return d.errorf(opOff, op, "malformed pickle: APPEND on an empty stack")
		}
		d.one[0] = v
		items = d.one[:]
	} else {
		var ok bool
		if items, ok = d.popMark(); !ok {
			return d.errorf(opOff, op, "malformed pickle: opcode without MARK")
		}
	}
	if len(d.stack) == 0 {
		return d.errorf(opOff, op, "malformed pickle: nothing to append to")
	}
	target := d.stack[len(d.stack)-1]
	want := KindList
	if op == opADDITEMS {
		want = KindSet
	}
	if target.Kind() != want {
		return d.errorf(opOff, op, "malformed pickle: appending to a %v", target.Kind())
	}
	d.built += 8 * int64(len(items))
	if n := d.a.listLen(target.Index()) + len(items); n > d.limit/8 {
		return &ValueLimitError{Offset: opOff, What: fmt.Sprintf("a %v of %d items", target.Kind(), n), Limit: d.limit}
	}
	if err := d.appendItems(target.Index(), items); err != nil {
		return d.errorf(opOff, op, "%v", err)
	}
	return nil
}

// setItemOp sets items of the dict under them.
func (d *pickleDecoder) setItemOp(op byte, opOff int64) error {
	var items []Value
	if op == opSETITEM {
		v, ok1 := d.pop()
		k, ok2 := d.pop()
		if !ok1 || !ok2 {
			return d.errorf(opOff, op, "malformed pickle: SETITEM needs a key and a value")
		}
		d.two = [2]Value{k, v}
		items = d.two[:]
	} else {
		var ok bool
		if items, ok = d.popMark(); !ok {
			return d.errorf(opOff, op, "malformed pickle: SETITEMS without MARK")
		}
		if len(items)%2 != 0 {
			return d.errorf(opOff, op, "malformed pickle: SETITEMS with an odd number of items")
		}
	}
	if len(d.stack) == 0 || d.stack[len(d.stack)-1].Kind() != KindDict {
		return d.errorf(opOff, op, "malformed pickle: setting items on a non-dict")
	}
	di := d.stack[len(d.stack)-1].Index()
	if n := d.dictLen(di) + len(items)/2; n > d.limit/16 {
		return &ValueLimitError{Offset: opOff, What: fmt.Sprintf("a dict of %d items", n), Limit: d.limit}
	}
	if err := d.setItems(di, items, op == opSETITEMS); err != nil {
		return fmt.Errorf("pickle byte %d (opcode 0x%02x): %w", opOff, op, err)
	}
	return nil
}

// memoOp stores the top of the stack in the memo or pushes a memo slot.
func (d *pickleDecoder) memoOp(op byte, opOff int64) error {
	switch op {
	case opMEMOIZE:
		if len(d.stack) == 0 {
			return d.errorf(opOff, op, "malformed pickle: MEMOIZE on an empty stack")
		}
		d.memoPut(uint64(d.memo.Len()+len(d.sparse)), d.stack[len(d.stack)-1])
	case opBINPUT, opLONGBINPUT:
		idx, err := d.memoIndex(op == opLONGBINPUT)
		if err != nil {
			return err
		}
		if len(d.stack) == 0 {
			return d.errorf(opOff, op, "malformed pickle: PUT on an empty stack")
		}
		d.memoPut(idx, d.stack[len(d.stack)-1])
	default: // opBINGET, opLONGBINGET
		idx, err := d.memoIndex(op == opLONGBINGET)
		if err != nil {
			return err
		}
		v, ok := d.memoGet(idx)
		if !ok {
			return d.errorf(opOff, op, "malformed pickle: memo slot %d was never set", idx)
		}
		d.push(v)
	}
	return nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// long decodes a little-endian two's complement integer of up to 9 bytes.
func (d *pickleDecoder) long(b []byte) (Value, error) {
	if len(b) == 0 {
		return mkval(KindInt, 0), nil
	}
	neg := b[len(b)-1]&0x80 != 0
	if len(b) == 9 {
		// Only a non-negative value in [2^63, 2^64) needs a 9th byte.
		if neg || b[8] != 0 {
			return 0, fmt.Errorf("integer of %d bytes overflows 64 bits", len(b))
		}
		return d.a.uintVal(binary.LittleEndian.Uint64(b[:8])), nil
	}
	var u uint64
	for i := len(b) - 1; i >= 0; i-- {
		u = u<<8 | uint64(b[i])
	}
	if neg && len(b) < 8 {
		u |= ^uint64(0) << (8 * len(b)) // sign-extend
	}
	if !neg && len(b) == 8 {
		return d.a.uintVal(u), nil
	}
	return d.a.intVal(int64(u)), nil
}
