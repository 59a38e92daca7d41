// Package splice adds events to a Chrome/Kineto trace without touching the
// ones it has: the trace's JSON is copied byte for byte, in one streaming
// pass and constant memory, and the new events are written into its event
// array after the last original event. Trace viewers (Perfetto,
// chrome://tracing) then show the added counter tracks and markers beside
// the original kernels and operators.
package splice

import (
	"bufio"
	"errors"
	"fmt"
	"io"
)

// Stats says what Events did.
type Stats struct {
	// Bytes is the length of the original JSON copied.
	Bytes int64
	// Added is the number of events written into the array.
	Added int
}

// ErrNoEvents means the JSON has no event array: neither a top-level
// array nor a top-level object with a "traceEvents" array.
var ErrNoEvents = errors.New("no trace event array (neither a top-level \"traceEvents\" array nor a bare array of events)")

// ErrTruncated means the JSON ended before its event array closed.
var ErrTruncated = errors.New("the trace ends before its event array closes (truncated?)")

// maxDepth bounds nesting: a trace's events are a few levels deep.
const maxDepth = 1000

// Events copies the trace JSON from r to w unchanged and writes each of
// events (complete JSON values, normally objects) into its event array:
// the top-level object's "traceEvents" array, or the top-level array of a
// bare trace. It fails, with what was copied so far written, on input that
// is not such a trace; it checks the nesting and strings of the input, not
// every JSON rule (the trace reader does).
func Events(w io.Writer, r io.Reader, events [][]byte) (Stats, error) {
	br := bufio.NewReaderSize(r, 256<<10)
	bw := bufio.NewWriterSize(w, 256<<10)
	var st Stats
	s := scanner{}
	for {
		chunk, err := br.Peek(br.Buffered())
		if len(chunk) == 0 {
			if _, err = br.Peek(1); err != nil {
				if err == io.EOF {
					break
				}
				return st, err
			}
			continue
		}
		n, found, serr := s.scan(chunk)
		if _, err := bw.Write(chunk[:n]); err != nil {
			return st, err
		}
		st.Bytes += int64(n)
		br.Discard(n) //nolint:errcheck // n bytes are buffered
		if serr != nil {
			bw.Flush() //nolint:errcheck // the scan error is the one to report
			return st, fmt.Errorf("at byte %d: %w", st.Bytes, serr)
		}
		if found {
			// chunk[n] is the array's closing ']': the new events go
			// before it.
			for i, e := range events {
				if i > 0 || s.arrayHasItems {
					bw.WriteByte(',')
				}
				if _, err := bw.Write(e); err != nil {
					return st, err
				}
			}
			st.Added = len(events)
			if _, err := io.Copy(bw, br); err != nil {
				return st, err
			}
			// The rest is copied as it is; a viewer reads it as before.
			return st, bw.Flush()
		}
	}
	if err := bw.Flush(); err != nil {
		return st, err
	}
	if s.depth == 0 && s.sawValue && !s.inArray {
		return st, ErrNoEvents
	}
	return st, ErrTruncated
}

// scanner follows the JSON's nesting to find the end of the event array.
type scanner struct {
	depth    int
	inString bool
	escaped  bool
	sawValue bool
	// topObject: the document is an object. keyOK: the string being read
	// at depth 1 matches traceEvents so far (keyLen bytes of it).
	topObject bool
	keyLen    int
	keyOK     bool
	afterKey  bool // a depth-1 key named traceEvents and its ':' were read
	// inArray: inside the event array (at arrayDepth); arrayHasItems once
	// anything but white space was seen in it.
	inArray       bool
	arrayDepth    int
	arrayHasItems bool
}

const eventsKey = "traceEvents"

// scan reads b and returns how many bytes precede the event array's
// closing bracket (found) or len(b) when it is not in b.
func (s *scanner) scan(b []byte) (n int, found bool, err error) {
	for i := 0; i < len(b); i++ {
		c := b[i]
		if s.inString {
			switch {
			case s.escaped:
				s.escaped = false
				s.keyOK = false // an escaped key is not the plain name
			case c == '\\':
				s.escaped = true
			case c == '"':
				s.inString = false
			default:
				if s.depth == 1 && s.topObject && s.keyOK {
					if s.keyLen < len(eventsKey) && eventsKey[s.keyLen] == c {
						s.keyLen++
					} else {
						s.keyOK = false
					}
				}
			}
			continue
		}
		if s.inArray && s.depth == s.arrayDepth && c != ']' && !isSpace(c) {
			s.arrayHasItems = true
		}
		switch c {
		case '"':
			s.inString = true
			if s.depth == 1 && s.topObject {
				s.keyOK, s.keyLen = true, 0
			}
		case ':':
			if s.depth == 1 && s.topObject {
				s.afterKey = s.keyOK && s.keyLen == len(eventsKey)
				s.keyOK = false
			}
		case '{', '[':
			if s.depth == 0 {
				if s.sawValue {
					return i, false, errors.New("more than one JSON value")
				}
				s.sawValue = true
				s.topObject = c == '{'
				if c == '[' {
					s.inArray, s.arrayDepth = true, 1
				}
			} else if c == '[' && s.depth == 1 && s.topObject && s.afterKey && !s.inArray && s.arrayDepth == 0 {
				s.inArray, s.arrayDepth = true, 2
			}
			if s.depth == 1 && s.topObject {
				s.afterKey = false
			}
			s.depth++
			if s.depth > maxDepth {
				return i, false, fmt.Errorf("nesting deeper than %d", maxDepth)
			}
		case '}', ']':
			if s.depth == 0 {
				return i, false, fmt.Errorf("unbalanced %q", c)
			}
			if s.inArray && s.depth == s.arrayDepth {
				if c != ']' {
					return i, false, fmt.Errorf("unbalanced %q", c)
				}
				return i, true, nil
			}
			s.depth--
		case ',':
			if s.depth == 1 && s.topObject {
				s.afterKey = false
			}
		default:
			if s.depth == 0 && !isSpace(c) {
				return i, false, fmt.Errorf("unexpected %q outside the trace's JSON value", c)
			}
		}
	}
	return len(b), false, nil
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
