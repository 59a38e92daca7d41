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
	prev    uint8          // entry of the previous key + 1; 0 at the object's start
	next    [maxKeys]uint8 // by prev: the entry that followed it last time + 1
	gaps    [maxKeys]gap   // by prev: the text that followed its value last time
	opening gap            // the text from the object's '{' to its first value last time
}

// gap is the text between a member's value and the next member's value
// (", " or a newline and indentation, the key, ": ") or the object's end
// (white space and '}'), as it was last time after the same key. A writer
// puts the same bytes there every time, so one compare of up to four words
// replaces the white space, separator and key scans. Only text the full
// scan has read as valid is learned, so an exact match is valid too.
type gap struct {
	w, m [4]uint64 // the text in little-endian words, zero past its end, and their masks
	n    uint8     // its length; 0: none learned
	next uint8     // the next key's entry + 1 (keyPred.prev after it); 0 at the end
	id   keyID     // the next key's id
}

// maxGap is the longest gap learned: Kineto's longest is 31 bytes
// (`, "est. achieved occupancy %": `).
const maxGap = 32

// set makes b[from:to], which the full scan has read, the gap's text.
func (g *gap) set(b []byte, from, to int, next uint8, id keyID) {
	n := to - from
	if n <= 0 || n > maxGap {
		return
	}
	var buf [maxGap]byte
	copy(buf[:], b[from:to])
	for w := range g.w {
		g.w[w] = binary.LittleEndian.Uint64(buf[8*w:])
		g.m[w] = byteMask(min(max(n-8*w, 0), 8))
	}
	g.n, g.next, g.id = uint8(n), next, id
}

// open reads an object's start at b[i] ('{') and its first key: the key's
// id and the index of its value, or (end) the index just past an empty
// object.
func (t *keyTable) open(b []byte, i int, p *keyPred) (id keyID, j int, end, ok bool) {
	if g := &p.opening; i+maxGap < len(b) && g.n != 0 &&
		load64(b, i)&g.m[0] == g.w[0] && load64(b, i+8)&g.m[1] == g.w[1] &&
		(g.n <= 16 || load64(b, i+16)&g.m[2] == g.w[2] && load64(b, i+24)&g.m[3] == g.w[3]) {
		p.prev, j = g.next, i+int(g.n)
		if b[j] <= ' ' {
			j = skipWSRun(b, j) // more white space than last time
		}
		return g.id, j, false, true
	}
	p.prev = 0
	j = skipWS(b, i+1)
	if j < len(b) && b[j] == '}' {
		return 0, j + 1, true, true
	}
	if id, j, ok = t.scan(b, j, p); ok && p.prev != 0 {
		p.opening.set(b, i, j, p.prev, id)
	}
	return id, j, false, ok
}

// next reads what follows a member's value at b[i] as nextMember and scan
// do, when it is not the gap learned after the same key (the member loops
// of scanEvent and scanArgs match that inline), and learns it: the next
// key's id and the index of its value, or (end) the index just past the
// object.
func (t *keyTable) next(b []byte, i int, p *keyPred) (id keyID, j int, end, ok bool) {
	prev := p.prev
	if i+2 < len(b) && b[i] == ',' && b[i+1] == ' ' && b[i+2] > ' ' {
		j = i + 2 // nextMember's common case, inline
	} else if j, ok = nextMember(b, i); !ok {
		return 0, 0, false, false
	} else if j < 0 {
		if prev != 0 {
			p.gaps[prev%maxKeys].set(b, i, -j, 0, 0)
		}
		return 0, -j, true, true
	}
	if id, j, ok = t.scan(b, j, p); ok && prev != 0 && p.prev != 0 {
		p.gaps[prev%maxKeys].set(b, i, j, p.prev, id)
	}
	return id, j, false, ok
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
