package chrometrace

import (
	"bytes"
	"strconv"
)

// traceKeys are top-level keys that only Kineto and Chrome traces write.
var traceKeys = map[string]bool{
	"traceEvents": true, "schemaVersion": true, "deviceProperties": true, "displayTimeUnit": true,
	"distributedInfo": true, "baseTimeNanoseconds": true, "traceName": true, "systemTraceEvents": true,
	"stackFrames": true, "cuda_runtime_version": true, "cuda_driver_version": true, "cupti_version": true,
	"with_flops": true, "record_shapes": true, "profile_memory": true, "with_stack": true, "trace_id": true,
}

// eventKeys are keys of one trace event (the legacy bare-array format).
var eventKeys = map[string]bool{"ph": true, "ts": true, "pid": true, "tid": true, "dur": true}

// LooksLikeTrace reports whether head, the first (decompressed) bytes of a
// file, starts a trace Read can read: a JSON object with traceEvents (or
// other keys only traces have, when the head ends before traceEvents), or
// the legacy bare array of events. Other JSON files that often sit next to
// traces (truth.json, a config, key_averages.json, memory_stats.json) and
// export_memory_timeline's [[...]] arrays are not traces.
func LooksLikeTrace(head []byte) bool {
	b := bytes.TrimPrefix(head, []byte("\ufeff"))
	i := skipSpace(b, 0)
	if i == len(b) {
		return false
	}
	switch b[i] {
	case '{':
		found, sawKey, _ := scanKeys(b, i, func(k string) bool { return k == "traceEvents" }, traceKeys)
		return found || sawKey
	case '[':
		j := skipSpace(b, i+1)
		if j == len(b) {
			return false
		}
		switch b[j] {
		case ']':
			return true // an empty legacy trace
		case '{':
			found, sawKey, complete := scanKeys(b, j, func(k string) bool { return k == "ph" }, eventKeys)
			return found || (!complete && sawKey)
		}
	}
	return false
}

// scanKeys walks the keys of the JSON object starting at b[i]. found: a
// key for which want is true; sawKey: a key in known; complete: the whole
// object was inside b.
func scanKeys(b []byte, i int, want func(string) bool, known map[string]bool) (found, sawKey, complete bool) {
	i++ // past '{'
	for {
		i = skipSpace(b, i)
		if i == len(b) {
			return false, sawKey, false
		}
		switch b[i] {
		case '}':
			return false, sawKey, true
		case ',':
			i = skipSpace(b, i+1)
		}
		if i == len(b) {
			return false, sawKey, false
		}
		if b[i] != '"' {
			return false, sawKey, true // not JSON we know: stop here
		}
		end, err := scanString(b, i)
		if err != nil {
			return false, sawKey, false
		}
		key, err := strconv.Unquote(string(b[i:end]))
		if err != nil {
			return false, sawKey, true
		}
		if want(key) {
			return true, true, false
		}
		sawKey = sawKey || known[key]
		i = skipSpace(b, end)
		if i == len(b) {
			return false, sawKey, false
		}
		if b[i] != ':' {
			return false, sawKey, true
		}
		i = skipSpace(b, i+1)
		n, err := scanValue(b[i:], false)
		if err != nil {
			return false, sawKey, err != errIncomplete
		}
		i += n
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}
