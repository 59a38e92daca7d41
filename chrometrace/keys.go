package chrometrace

import (
	"encoding/binary"
	"unsafe"
)

// keyID names a key fastDecode reads; keySkip is any other key (its value
// is checked and skipped).
type keyID uint8

const keySkip keyID = 0

// The keys of an event.
const (
	evPh keyID = iota + 1
	evCat
	evName
	evPid
	evTid
	evTs
	evDur
	evID
	evArgs
)

// The keys of an event's args.
const (
	argBytes keyID = iota + 1
	argAddr
	argTotalAllocated
	argTotalReserved
	argDeviceType
	argDeviceID
	argOptDeviceType
	argOptDeviceID
	argExternalID
	argExternalIDOld
	argSeqNr
	argFwdThread
	argInputDims
	argCallStack
	argPythonID
	argPythonParentID
	argCopySize
	argMemBytes
	argDevice
	argStream
	argName
)

// eventKeyTable and argKeyTable list the keys rawEvent and rawArgs have (their
// json tags), then keys Kineto writes that are skipped: matching those
// as a whole is cheaper than scanning them byte by byte. Within a first
// letter, the more frequent keys come first.
var (
	eventKeyTable = newKeyTable([]keyName{
		{"ph", evPh}, {"pid", evPid}, {"cat", evCat}, {"name", evName},
		{"tid", evTid}, {"ts", evTs}, {"dur", evDur}, {"id", evID},
		{"args", evArgs}, {"s", keySkip}, {"bp", keySkip},
	})
	argKeyTable = newKeyTable([]keyName{
		{"Bytes", argBytes}, {"Addr", argAddr},
		{"Total Reserved", argTotalReserved}, {"Total Allocated", argTotalAllocated},
		{"Device Id", argDeviceID}, {"Device Type", argDeviceType},
		{"device_option Type", argOptDeviceType}, {"device_option Id", argOptDeviceID},
		{"Ev Idx", keySkip}, {"External id", argExternalID}, {"external id", argExternalIDOld},
		{"Sequence number", argSeqNr}, {"Fwd thread id", argFwdThread},
		{"Input Dims", argInputDims}, {"Input type", keySkip}, {"Input Strides", keySkip},
		{"Call stack", argCallStack}, {"Concrete Inputs", keySkip},
		{"Python parent id", argPythonParentID}, {"Python id", argPythonID}, {"Python module id", keySkip},
		{"stream", argStream}, {"size", argCopySize}, {"shared memory", keySkip},
		{"bytes", argMemBytes}, {"blocks per SM", keySkip}, {"block", keySkip},
		{"device", argDevice}, {"name", argName},
		{"Record function id", keySkip}, {"finished", keySkip},
		{"correlation", keySkip}, {"context", keySkip}, {"cbid", keySkip},
		{"queued", keySkip}, {"registers per thread", keySkip}, {"warps per SM", keySkip},
		{"grid", keySkip}, {"est. achieved occupancy %", keySkip}, {"memory bandwidth (GB/s)", keySkip},
	})
)

type keyName struct {
	name string
	id   keyID
}

// keyEntry is a key as its member starts in the text: `"name":`, in two
// little-endian words (zero past its end) and their masks, and the rest
// past 16 bytes.
type keyEntry struct {
	w0, w1, m0, m1 uint64
	n              int
	id             keyID
	tail           string
	name           string
}

// keyTable finds a member's key among known ones with a word compare or
// two instead of scanning it: a key equal to a known one is a valid
// JSON string without escapes.
type keyTable struct {
	first   [256][2]uint8 // entries of keys starting with a byte: [from, to)
	entries [maxKeys]keyEntry
	len     int
}

// maxKeys bounds a keyTable (and keyPred's table).
const maxKeys = 64

func newKeyTable(keys []keyName) *keyTable {
	if len(keys) >= maxKeys {
		panic("too many keys for a keyTable")
	}
	t := &keyTable{}
	for c := 0; c < 256; c++ {
		t.first[c][0] = uint8(t.len)
		for _, k := range keys {
			if k.name[0] != byte(c) {
				continue
			}
			pat := `"` + k.name + `":`
			var buf [16]byte
			copy(buf[:], pat)
			e := keyEntry{n: len(pat), name: k.name, id: k.id}
			e.w0 = binary.LittleEndian.Uint64(buf[:8])
			e.w1 = binary.LittleEndian.Uint64(buf[8:])
			e.m0, e.m1 = byteMask(min(len(pat), 8)), byteMask(max(min(len(pat)-8, 8), 0))
			if len(pat) > 16 {
				e.tail = pat[16:]
			}
			t.entries[t.len] = e
			t.len++
		}
		t.first[c][1] = uint8(t.len)
	}
	return t
}

// load64 reads the little-endian word at b[i:i+8]; the caller has checked
// that i+8 <= len(b) (the bounds checks of b[i:] cost more than the load).
func load64(b []byte, i int) uint64 {
	return binary.LittleEndian.Uint64(unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(b)), i)), 8))
}

// byteMask has the low n bytes set.
func byteMask(n int) uint64 {
	if n >= 8 {
		return ^uint64(0)
	}
	return 1<<(8*n) - 1
}

// keyPred guesses each key of an object from the key before it: writers
// put an object's keys in the same order every time, so one compare with
// the key that followed last time mostly settles it. One per decoding
// goroutine and object kind.
type keyPred struct {
	prev uint8          // entry of the previous key + 1; 0 at the object's start
	next [maxKeys]uint8 // by prev: the entry that followed it last time + 1
}

// scan reads the key at b[i] and the ':' after it, returning the key's id
// and the index of the value; like scanKey, it fails on a key with
// escapes or non-ASCII bytes.
func (t *keyTable) scan(b []byte, i int, p *keyPred) (keyID, int, bool) {
	if i+16 <= len(b) {
		// The patterns start with the quote: a match is a key.
		w0, w1 := load64(b, i), load64(b, i+8)
		if k := p.next[p.prev%maxKeys]; k != 0 {
			e := &t.entries[(k-1)%maxKeys]
			if w0&e.m0 == e.w0 && w1&e.m1 == e.w1 {
				// Predicted entries have no tail (see below).
				p.prev = k
				j := i + e.n
				if j+1 < len(b) && b[j] == ' ' && b[j+1] > ' ' {
					return e.id, j + 1, true // ": ", as pretty printers write it
				}
				return e.id, skipWS(b, j), true
			}
		}
		r := t.first[byte(w0>>8)]
		for k := r[0]; k < r[1]; k++ {
			e := &t.entries[k%maxKeys]
			if w0&e.m0 == e.w0 && w1&e.m1 == e.w1 && (e.tail == "" || i+e.n <= len(b) && string(b[i+16:i+e.n]) == e.tail) {
				if e.tail == "" {
					p.next[p.prev%maxKeys] = k + 1
				}
				p.prev = k + 1
				return e.id, skipWS(b, i+e.n), true
			}
		}
	}
	key, j, ok := scanKey(b, i)
	p.prev = 0
	if !ok || len(key) == 0 {
		return keySkip, j, ok
	}
	r := t.first[key[0]]
	for k := r[0]; k < r[1]; k++ {
		if t.entries[k%maxKeys].name == key {
			p.prev = k + 1
			return t.entries[k%maxKeys].id, j, true
		}
	}
	return keySkip, j, true
}
