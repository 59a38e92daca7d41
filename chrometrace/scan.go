package chrometrace

import (
	"encoding/binary"
	"encoding/json"
	"math/bits"
	"unicode/utf8"
)

// fastDecode decodes a batch ("[" events "]") the way sonic decodes it
// into []rawEvent, several times faster, handing each event to each as it
// is read (ev is scratch space, reused): it reads only the fields rawEvent
// has and checks the rest as JSON without decoding it. It handles plain,
// valid JSON of the shapes profilers write and gives up (false) on anything
// else: a syntax error, a field of another type than rawEvent's, a number
// that is not a plain integer where one is wanted, a string with a control
// character, an unusual escape or invalid UTF-8, nesting deeper than
// maxScanDepth; or when each returns false. The caller then decodes the
// batch with sonic, so errors, warnings and odd inputs give exactly what
// they gave before. What fastDecode accepts is strictly valid JSON, which
// is what lets a speculative batch that it accepts confirm its cut (see
// readEventsSpeculative).
//
// Strings point into data (no copy) unless they had escapes.
func fastDecode(data []byte, ev *rawEvent, each func(*rawEvent) bool) bool {
	i := skipWS(data, 0)
	if i >= len(data) || data[i] != '[' {
		return false
	}
	i = skipWS(data, i+1)
	if i < len(data) && data[i] == ']' {
		return skipWS(data, i+1) == len(data)
	}
	var preds scanPreds
	var sep gap // the text between two events, up to the '{', last time
	for {
		if i >= len(data) || data[i] != '{' {
			return false
		}
		*ev = rawEvent{}
		var ok bool
		if i, ok = scanEvent(data, i, ev, &preds); !ok || !each(ev) {
			return false
		}
		if i+maxGap < len(data) && sep.n != 0 &&
			load64(data, i)&sep.m[0] == sep.w[0] && load64(data, i+8)&sep.m[1] == sep.w[1] &&
			(sep.n <= 16 || load64(data, i+16)&sep.m[2] == sep.w[2] && load64(data, i+24)&sep.m[3] == sep.w[3]) {
			if i += int(sep.n); data[i] <= ' ' {
				i = skipWSRun(data, i) // more white space than last time
			}
			continue
		}
		from := i
		i = skipWS(data, i)
		if i >= len(data) {
			return false
		}
		switch data[i] {
		case ',':
			i = skipWS(data, i+1)
			if i < len(data) && data[i] == '{' {
				sep.set(data, from, i, 0, 0)
			}
		case ']':
			return skipWS(data, i+1) == len(data)
		default:
			return false
		}
	}
}

// fastDecodeEvents is fastDecode collecting the events, for tests.
func fastDecodeEvents(data []byte) ([]rawEvent, bool) {
	var evs []rawEvent
	var ev rawEvent
	ok := fastDecode(data, &ev, func(e *rawEvent) bool {
		evs = append(evs, *e)
		return true
	})
	return evs, ok
}

// maxScanDepth bounds the nesting fastDecode follows; deeper values (no
// profiler writes them) are left to sonic.
const maxScanDepth = 32

var isWS = [256]bool{' ': true, '\n': true, '\r': true, '\t': true}

func skipWS(b []byte, i int) int {
	// Most calls find no white space: one compare settles it inline.
	if i < len(b) && b[i] > ' ' {
		return i
	}
	return skipWSRun(b, i)
}

// skipWSRun skips a run of white space, a newline and its indentation
// eight bytes at a time: the first byte that is neither ' ' nor '\n' ends
// a word's run (a '\t' or '\r' is then stepped over byte by byte).
func skipWSRun(b []byte, i int) int {
	if i+1 < len(b) && b[i] == ' ' && b[i+1] > ' ' {
		return i + 1 // one space, after a ':' or a ',' of a pretty-printed trace
	}
	for ; i+8 <= len(b); i += 8 {
		x := load64(b, i)
		if m := nonZeroLanes(x^lanes20) & nonZeroLanes(x^lanes0A); m != 0 {
			i += bits.TrailingZeros64(m) >> 3
			break
		}
	}
	for i < len(b) && isWS[b[i]] {
		i++
	}
	return i
}

// nonZeroLanes sets the top bit of each byte of x that is not zero, and
// no other bit: adding 0x7f to the low seven bits cannot carry out of a
// byte, so every lane is exact.
func nonZeroLanes(x uint64) uint64 {
	return ((x & lanes7F) + lanes7F | x) & lanes80
}

// scanEvent reads the object at b[i] ('{') into ev and returns the index
// just past it.
func scanEvent(b []byte, i int, ev *rawEvent, preds *scanPreds) (int, bool) {
	pe := &preds.ev[0]
	key, i, end, ok := eventKeyTable.open(b, i, pe)
	if end {
		return i, true
	}
	for {
		if !ok {
			return 0, false
		}
		switch key {
		case evPh:
			if i, ok = strField(b, i, &ev.Ph); ok && len(ev.Ph) > 0 {
				// Each phase has its own keys and layout.
				q := &preds.ev[ev.Ph[0]%predKinds]
				q.prev, pe = pe.prev, q
			}
		case evCat:
			i, ok = strField(b, i, &ev.Cat)
		case evName:
			i, ok = strField(b, i, &ev.Name)
		case evPid:
			ev.Pid, i, ok = scanRaw(b, i)
		case evTid:
			ev.Tid, i, ok = scanRaw(b, i)
		case evTs:
			i, ok = microsField(b, i, &ev.Ts, &ev.tsNs, &ev.tsFast)
		case evDur:
			i, ok = microsField(b, i, &ev.Dur, &ev.durNs, &ev.durFast)
		case evID:
			ev.ID, i, ok = scanRaw(b, i)
		case evArgs:
			if j, null := nullAt(b, i); null {
				i = j // sonic leaves the field as it is
			} else {
				i, ok = scanArgs(b, i, &ev.Args, &preds.args[argsKind(ev.Cat)])
			}
		default:
			i, ok = skipValue(b, i, 1)
		}
		if !ok {
			return 0, false
		}
		// The gap learned after this key (see keyPred), matched inline:
		// it runs once per member, and as a method Go does not inline it
		// (over the budget) and the call cost most of the gain.
		if g := &pe.gaps[pe.prev%maxKeys]; i+maxGap < len(b) && g.n != 0 &&
			load64(b, i)&g.m[0] == g.w[0] && load64(b, i+8)&g.m[1] == g.w[1] &&
			(g.n <= 16 || load64(b, i+16)&g.m[2] == g.w[2] && load64(b, i+24)&g.m[3] == g.w[3]) {
			i += int(g.n)
			if pe.prev = g.next; g.next == 0 {
				return i, true
			}
			if key = g.id; b[i] <= ' ' {
				i = skipWSRun(b, i)
			}
			continue
		}
		var end bool
		if key, i, end, ok = eventKeyTable.next(b, i, pe); end {
			return i, true
		}
	}
}

// nextMember reads what follows an object member: after ',' it returns
// the index of the next key; after '}' it returns minus the index just past
// the object.
func nextMember(b []byte, i int) (int, bool) {
	if i+2 < len(b) && binary.LittleEndian.Uint16(b[i:]) == ','|' '<<8 && b[i+2] > ' ' {
		return i + 2, true // ", " before the next key on the line (Kineto)
	}
	return nextMemberRun(b, i)
}

func nextMemberRun(b []byte, i int) (int, bool) {
	i = skipWS(b, i)
	if i >= len(b) {
		return 0, false
	}
	switch b[i] {
	case ',':
		return skipWS(b, i+1), true
	case '}':
		return -(i + 1), true
	}
	return 0, false
}

// scanKey reads a key without escapes and the ':' after it, returning the
// index of the value.
func scanKey(b []byte, i int) (string, int, bool) {
	if i >= len(b) || b[i] != '"' {
		return "", 0, false
	}
	j := strEnd(b, i+1)
	if j >= len(b) || b[j] != '"' {
		return "", 0, false // escapes or non-ASCII in a key: sonic's call
	}
	key := unsafeString(b[i+1 : j])
	j = skipWS(b, j+1)
	if j >= len(b) || b[j] != ':' {
		return "", 0, false
	}
	return key, skipWS(b, j+1), true
}

// scanPreds are the key guesses of one fastDecode (see keyPred): an
// event's by its phase, its args' by its category, as each kind of event
// has its own keys and layout (a few kinds may share one).
type scanPreds struct{ ev, args [predKinds]keyPred }

const predKinds = 8

// argsKind picks the args' guesses for an event's category: Kineto's ten
// categories with args fall in seven kinds (python_function and
// gpu_memset, the most and the least frequent, share one).
func argsKind(cat string) int {
	if len(cat) < 2 {
		return 0
	}
	return (len(cat)*3 + int(cat[1])) % predKinds
}

func scanArgs(b []byte, i int, a *rawArgs, pred *keyPred) (int, bool) {
	if i >= len(b) || b[i] != '{' {
		return 0, false
	}
	key, i, end, ok := argKeyTable.open(b, i, pred)
	if end {
		return i, true
	}
	for {
		if !ok {
			return 0, false
		}
		switch key {
		case argBytes:
			i, ok = intField(b, i, &a.Bytes)
		case argAddr:
			a.Addr, i, ok = scanRaw(b, i)
		case argTotalAllocated:
			a.TotalAllocated, i, ok = scanRaw(b, i)
		case argTotalReserved:
			a.TotalReserved, i, ok = scanRaw(b, i)
		case argDeviceType:
			i, ok = intField(b, i, &a.DeviceType)
		case argDeviceID:
			i, ok = intField(b, i, &a.DeviceID)
		case argOptDeviceType:
			a.OptDeviceType, i, ok = scanRaw(b, i)
		case argOptDeviceID:
			a.OptDeviceID, i, ok = scanRaw(b, i)
		case argExternalID:
			i, ok = intField(b, i, &a.ExternalID)
		case argExternalIDOld:
			i, ok = intField(b, i, &a.ExternalIDOld)
		case argSeqNr:
			i, ok = numField(b, i, &a.SeqNr)
		case argFwdThread:
			i, ok = numField(b, i, &a.FwdThread)
		case argInputDims:
			a.InputDims, i, ok = scanRaw(b, i)
		case argCallStack:
			i, ok = strField(b, i, &a.CallStack)
		case argPythonID:
			i, ok = numField(b, i, &a.PythonID)
		case argPythonParentID:
			i, ok = numField(b, i, &a.PythonParentID)
		case argCopySize:
			a.CopySize, i, ok = scanRaw(b, i)
		case argMemBytes:
			i, ok = intField(b, i, &a.MemBytes)
		case argDevice:
			i, ok = intField(b, i, &a.Device)
		case argStream:
			a.Stream, i, ok = scanRaw(b, i)
		case argName:
			i, ok = strField(b, i, &a.MetaName)
		default:
			i, ok = skipValue(b, i, 2)
		}
		if !ok {
			return 0, false
		}
		// The learned gap, inline as in scanEvent.
		if g := &pred.gaps[pred.prev%maxKeys]; i+maxGap < len(b) && g.n != 0 &&
			load64(b, i)&g.m[0] == g.w[0] && load64(b, i+8)&g.m[1] == g.w[1] &&
			(g.n <= 16 || load64(b, i+16)&g.m[2] == g.w[2] && load64(b, i+24)&g.m[3] == g.w[3]) {
			i += int(g.n)
			if pred.prev = g.next; g.next == 0 {
				return i, true
			}
			if key = g.id; b[i] <= ' ' {
				i = skipWSRun(b, i)
			}
			continue
		}
		var end bool
		if key, i, end, ok = argKeyTable.next(b, i, pred); end {
			return i, true
		}
	}
}

// strStop marks the bytes a string scan must stop at: the closing quote,
// escapes, control characters (sonic's call) and non-ASCII (checked as
// UTF-8).
var strStop = func() (t [256]bool) {
	for c := 0; c < 256; c++ {
		t[c] = c == '"' || c == '\\' || c < 0x20 || c >= 0x80
	}
	return t
}()

// SWAR constants: the same byte in every lane.
const (
	lanes01 = 0x0101010101010101
	lanes80 = 0x8080808080808080
	lanes20 = 0x2020202020202020
	lanesQ  = 0x2222222222222222 // '"'
	lanesBS = 0x5c5c5c5c5c5c5c5c // '\\'
	lanes0A = 0x0a0a0a0a0a0a0a0a // '\n'
	lanes7F = 0x7f7f7f7f7f7f7f7f
)

// strEnd returns the index of the first byte at or after j that strStop
// marks (len(b) if none), eight bytes at a time: each lane is tested for
// '"', '\\', < 0x20 and >= 0x80 with word arithmetic, and the lowest hit is
// exact (borrows only spill into higher lanes).
func strEnd(b []byte, j int) int {
	for ; j+8 <= len(b); j += 8 {
		x := load64(b, j)
		q := x ^ lanesQ
		bs := x ^ lanesBS
		m := ((q - lanes01) &^ q) | ((bs - lanes01) &^ bs) | ((x - lanes20) &^ x) | x
		if m &= lanes80; m != 0 {
			return j + bits.TrailingZeros64(m)>>3
		}
	}
	for j < len(b) && !strStop[b[j]] {
		j++
	}
	return j
}

// nullAt reports whether b[i] starts null, and the index past it. Like
// encoding/json, sonic leaves a string, number or struct field as it is
// for null (a rawJSON field gets the text "null").
func nullAt(b []byte, i int) (int, bool) {
	if i+4 <= len(b) && b[i] == 'n' && string(b[i:i+4]) == "null" {
		return i + 4, true
	}
	return i, false
}

func strField(b []byte, i int, dst *string) (int, bool) {
	if j, null := nullAt(b, i); null {
		return j, true
	}
	v, j, ok := scanStrVal(b, i)
	*dst = v
	return j, ok
}

func numField(b []byte, i int, dst *json.Number) (int, bool) {
	if j, null := nullAt(b, i); null {
		return j, true
	}
	v, j, ok := scanNumVal(b, i)
	*dst = v
	return j, ok
}

func intField(b []byte, i int, dst *int64) (int, bool) {
	if j, null := nullAt(b, i); null {
		return j, true
	}
	v, j, ok := scanInt(b, i)
	*dst = v
	return j, ok
}

// scanStrVal reads a string value.
func scanStrVal(b []byte, i int) (string, int, bool) {
	if i >= len(b) || b[i] != '"' {
		return "", 0, false
	}
	j := strEnd(b, i+1)
	if j < len(b) && b[j] == '"' {
		return unsafeString(b[i+1 : j]), j + 1, true
	}
	end, escaped, ok := scanStringSlow(b, i, j)
	if !ok {
		return "", 0, false
	}
	if !escaped {
		return unsafeString(b[i+1 : end-1]), end, true
	}
	s, ok := unescape(b[i+1 : end-1])
	return s, end, ok
}

// scanStringSlow finishes a string from j, where the fast loop stopped on
// an escape or a non-ASCII byte; it returns the index past the closing
// quote and whether there were escapes.
func scanStringSlow(b []byte, i, j int) (end int, escaped, ok bool) {
	nonASCII := false
	for j < len(b) {
		c := b[j]
		switch {
		case c == '"':
			if nonASCII && !utf8.Valid(b[i+1:j]) {
				return 0, false, false
			}
			return j + 1, escaped, true
		case c == '\\':
			if j+1 >= len(b) {
				return 0, false, false
			}
			escaped = true
			switch b[j+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				j += 2
			case 'u':
				if j+6 > len(b) {
					return 0, false, false
				}
				r, ok := hex4(b[j+2 : j+6])
				if !ok || r >= 0xd800 && r < 0xe000 {
					return 0, false, false // surrogates: sonic's call
				}
				j += 6
			default:
				return 0, false, false
			}
		case c < 0x20:
			return 0, false, false
		default:
			if c >= 0x80 {
				nonASCII = true
			}
			j++
		}
	}
	return 0, false, false
}

func hex4(h []byte) (rune, bool) {
	var r rune
	for _, c := range h {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return 0, false
		}
	}
	return r, true
}

// unescape decodes the escapes scanStringSlow accepted.
func unescape(s []byte) (string, bool) {
	out := make([]byte, 0, len(s))
	for k := 0; k < len(s); k++ {
		c := s[k]
		if c != '\\' {
			out = append(out, c)
			continue
		}
		k++
		switch s[k] {
		case '"', '\\', '/':
			out = append(out, s[k])
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, _ := hex4(s[k+1 : k+5])
			out = utf8.AppendRune(out, r)
			k += 4
		default:
			return "", false
		}
	}
	return unsafeString(out), true
}

// scanNumber checks the JSON number at b[i] and returns the index past it
// and whether it is a plain integer (no fraction or exponent).
func scanNumber(b []byte, i int) (end int, integer, ok bool) {
	if i < len(b) && b[i] == '-' {
		i++
	}
	if i >= len(b) {
		return 0, false, false
	}
	switch c := b[i]; {
	case c == '0':
		i++
	case c >= '1' && c <= '9':
		i++
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	default:
		return 0, false, false
	}
	integer = true
	if i < len(b) && b[i] == '.' {
		integer = false
		i++
		start := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == start {
			return 0, false, false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		integer = false
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		start := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == start {
			return 0, false, false
		}
	}
	return i, integer, true
}

// microsField is numField for a timestamp or duration in microseconds,
// also giving its value in nanoseconds when it is a plain decimal that
// parseMicros reads exactly (fast); otherwise the text is left to it.
func microsField(b []byte, i int, dst *json.Number, ns *int64, fast *bool) (int, bool) {
	*fast = false
	if j, null := nullAt(b, i); null {
		return j, true
	}
	start := i
	neg := i < len(b) && b[i] == '-'
	if neg {
		i++
	}
	var whole int64
	digits := 0
	for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		whole = whole*10 + int64(b[i]-'0')
		digits++
	}
	var frac int64
	fracDigits := 0
	if i < len(b) && b[i] == '.' {
		for i++; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
			frac = frac*10 + int64(b[i]-'0')
			fracDigits++
		}
	}
	// At most 15 digits before the point cannot overflow in
	// nanoseconds; a leading zero must stand alone (JSON); more than 3
	// digits after the point round, which parseMicros does.
	if digits == 0 || digits > 15 || digits > 1 && b[start+boolInt(neg)] == '0' ||
		i < len(b) && (b[i] == 'e' || b[i] == 'E' || b[i] == '.') || fracDigits > 3 ||
		fracDigits == 0 && i > start && b[i-1] == '.' {
		v, j, ok := scanNumVal(b, start)
		*dst = v
		return j, ok
	}
	for d := fracDigits; d < 3; d++ {
		frac *= 10
	}
	v := whole*1000 + frac
	if neg {
		v = -v
	}
	*dst, *ns, *fast = json.Number(unsafeString(b[start:i])), v, true
	return i, true
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// scanNumVal reads a number as its text (json.Number); a quoted number,
// which sonic also accepts, is left to sonic.
func scanNumVal(b []byte, i int) (json.Number, int, bool) {
	end, _, ok := scanNumber(b, i)
	if !ok {
		return "", 0, false
	}
	return json.Number(unsafeString(b[i:end])), end, true
}

// scanInt reads an integer that fits int64.
func scanInt(b []byte, i int) (int64, int, bool) {
	// One pass reads and checks a plain integer.
	j := i
	neg := j < len(b) && b[j] == '-'
	if neg {
		j++
	}
	var v int64
	start := j
	for ; j < len(b) && b[j] >= '0' && b[j] <= '9'; j++ {
		v = v*10 + int64(b[j]-'0')
	}
	n := j - start
	if n == 0 || n > 18 || n > 1 && b[start] == '0' ||
		j < len(b) && (b[j] == '.' || b[j] == 'e' || b[j] == 'E') {
		// Not a number, not an integer, a leading zero (invalid), or
		// one that might overflow: sonic's call.
		return 0, 0, false
	}
	if neg {
		v = -v
	}
	return v, j, true
}

// scanRaw returns the text of any value (rawJSON).
func scanRaw(b []byte, i int) (rawJSON, int, bool) {
	end, ok := skipValue(b, i, 1)
	if !ok {
		return nil, 0, false
	}
	return rawJSON(b[i:end]), end, true
}

// skipValue checks the value at b[i] and returns the index past it.
func skipValue(b []byte, i, depth int) (int, bool) {
	if i >= len(b) {
		return 0, false
	}
	switch c := b[i]; c {
	case '"':
		j := strEnd(b, i+1)
		if j < len(b) && b[j] == '"' {
			return j + 1, true
		}
		end, _, ok := scanStringSlow(b, i, j)
		return end, ok
	case '{':
		if depth >= maxScanDepth {
			return 0, false
		}
		i = skipWS(b, i+1)
		if i < len(b) && b[i] == '}' {
			return i + 1, true
		}
		for {
			var ok bool
			if _, i, ok = scanKeyAny(b, i); !ok {
				return 0, false
			}
			if i, ok = skipValue(b, i, depth+1); !ok {
				return 0, false
			}
			if i, ok = nextMember(b, i); !ok || i < 0 {
				return -i, ok
			}
		}
	case '[':
		return skipArray(b, i, depth)
	case 't':
		return literal(b, i, "true")
	case 'f':
		return literal(b, i, "false")
	case 'n':
		return literal(b, i, "null")
	default:
		end, _, ok := scanNumber(b, i)
		return end, ok
	}
}

// skipArray checks the array at b[i] ('[') and returns the index past it;
// string and number elements (shapes, strides, type names) are read here
// rather than through a call of skipValue each.
func skipArray(b []byte, i, depth int) (int, bool) {
	if depth >= maxScanDepth {
		return 0, false
	}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == ']' {
		return i + 1, true
	}
	for i < len(b) {
		var ok bool
		switch c := b[i]; {
		case c == '"':
			if j := strEnd(b, i+1); j < len(b) && b[j] == '"' {
				i = j + 1
			} else if i, ok = skipValue(b, i, depth+1); !ok {
				return 0, false
			}
		case c >= '0' && c <= '9' || c == '-':
			if i, _, ok = scanNumber(b, i); !ok {
				return 0, false
			}
		case c == '[':
			if i, ok = skipArray(b, i, depth+1); !ok {
				return 0, false
			}
		default:
			if i, ok = skipValue(b, i, depth+1); !ok {
				return 0, false
			}
		}
		i = skipWS(b, i)
		if i >= len(b) {
			return 0, false
		}
		switch b[i] {
		case ',':
			if i+2 < len(b) && b[i+1] == ' ' && b[i+2] > ' ' {
				i += 2 // ", " between elements, inline
			} else {
				i = skipWS(b, i+1)
			}
		case ']':
			return i + 1, true
		default:
			return 0, false
		}
	}
	return 0, false
}

// scanKeyAny checks a key of an object being skipped (escapes allowed) and
// the ':' after it.
func scanKeyAny(b []byte, i int) (struct{}, int, bool) {
	if i >= len(b) || b[i] != '"' {
		return struct{}{}, 0, false
	}
	end, ok := skipValue(b, i, 0)
	if !ok {
		return struct{}{}, 0, false
	}
	end = skipWS(b, end)
	if end >= len(b) || b[end] != ':' {
		return struct{}{}, 0, false
	}
	return struct{}{}, skipWS(b, end+1), true
}

func literal(b []byte, i int, lit string) (int, bool) {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return 0, false
	}
	return i + len(lit), true
}
