package chrometrace

import (
	"bytes"
	"errors"
	"fmt"
	"io"
)

// splitter walks the JSON text of a trace without decoding it: it finds the
// top-level keys and cuts the traceEvents array into whole elements, which
// sonic then decodes in batches. sonic's own decoder buffers a whole
// top-level value, so the streaming has to happen here (GO-LIBS.md).
type splitter struct {
	r    io.Reader
	buf  []byte
	pos  int   // next unread byte in buf
	end  int   // end of valid bytes in buf
	base int64 // input offset of buf[0]
	eof  bool
	rerr error // read error other than EOF
	// limit caps one value and one run of white space (Limits.ValueBytes).
	limit int
}

// errIncomplete means the input ended inside a value.
var errIncomplete = errors.New("unexpected end of input")

// SyntaxError is malformed JSON at a byte offset of the decompressed input.
type SyntaxError struct {
	Offset int64
	Msg    string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("malformed JSON at byte %d: %s", e.Offset, e.Msg)
}

func newSplitter(r io.Reader, limit int) *splitter {
	if limit <= 0 {
		limit = DefaultMaxValueBytes
	}
	return &splitter{r: r, buf: make([]byte, min(256<<10, limit+1)), limit: limit}
}

// LimitError is a value or a run of white space larger than the reader's
// limit: a hostile or broken file, not a trace worth the memory.
type LimitError struct {
	What   string // "one JSON value", "a run of white space"
	Offset int64  // where it starts in the decompressed input
	Limit  int
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("%s at byte %d is over the limit of %s (--max-value-bytes raises it)", e.What, e.Offset, FormatLimit(e.Limit))
}

// FormatLimit prints a byte limit the way it is usually set (64 MiB);
// every reader's limit error uses it.
func FormatLimit(n int) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

func (s *splitter) offset() int64 { return s.base + int64(s.pos) }

func (s *splitter) errorf(format string, args ...any) error {
	return &SyntaxError{Offset: s.offset(), Msg: fmt.Sprintf(format, args...)}
}

// fill reads more input, keeping buf[keep:end]; it returns false at EOF or
// on a read error. keep <= pos marks bytes still needed by the caller.
func (s *splitter) fill(keep int) bool {
	if s.eof || s.rerr != nil {
		return false
	}
	if keep > 0 {
		n := copy(s.buf, s.buf[keep:s.end])
		s.base += int64(keep)
		s.pos -= keep
		s.end = n
	}
	if s.end == len(s.buf) {
		// One value larger than the buffer: grow rather than fail, up to
		// the limit.
		if len(s.buf) > s.limit {
			s.rerr = &LimitError{What: "one JSON value", Offset: s.base, Limit: s.limit}
			return false
		}
		nb := make([]byte, min(2*len(s.buf), s.limit+1))
		copy(nb, s.buf[:s.end])
		s.buf = nb
	}
	for {
		n, err := s.r.Read(s.buf[s.end:])
		s.end += n
		if err == io.EOF {
			s.eof = true
			return n > 0
		}
		if err != nil {
			s.rerr = err
			return n > 0
		}
		if n > 0 {
			return true
		}
	}
}

// peekByte skips white space and returns the next byte without consuming it.
// A run of white space longer than the limit is an error: nothing legitimate
// pads a trace with megabytes of it, and skipping gigabytes takes seconds.
func (s *splitter) peekByte() (byte, error) {
	from := s.offset()
	for {
		for s.pos < s.end {
			c := s.buf[s.pos]
			if c == ' ' || c == '\n' || c == '\r' || c == '\t' {
				s.pos++
				continue
			}
			return c, nil
		}
		if s.offset()-from > int64(s.limit) {
			s.rerr = &LimitError{What: "a run of white space", Offset: from, Limit: s.limit}
			return 0, s.rerr
		}
		if !s.fill(s.pos) {
			if s.rerr != nil {
				return 0, s.rerr
			}
			return 0, errIncomplete
		}
	}
}

// value returns the raw bytes of the next JSON value (strings, numbers,
// literals, arrays, objects). The slice is valid until the next call.
func (s *splitter) value() ([]byte, error) {
	if _, err := s.peekByte(); err != nil {
		return nil, err
	}
	start := s.pos
	for {
		end, err := scanValue(s.buf[start:s.end], s.eof)
		if err == nil {
			s.pos = start + end
			return s.buf[start:s.pos], nil
		}
		if err != errIncomplete {
			s.pos = start
			return nil, s.errorf("%v", err)
		}
		s.pos = start
		if !s.fill(start) {
			if s.rerr != nil {
				return nil, s.rerr
			}
			return nil, errIncomplete
		}
		start = s.pos
	}
}

// scanValue returns the length of the JSON value at the start of b (after
// no leading space). It checks nesting and strings, not every token: sonic
// validates the contents later. atEOF says no more input follows b.
func scanValue(b []byte, atEOF bool) (int, error) {
	if len(b) == 0 {
		return 0, errIncomplete
	}
	switch c := b[0]; c {
	case '{', '[':
		return scanContainer(b)
	case '"':
		return scanString(b, 0)
	default:
		// A number or literal ends at a delimiter.
		for i := 0; i < len(b); i++ {
			switch b[i] {
			case ',', '}', ']', ' ', '\n', '\r', '\t':
				if i == 0 {
					return 0, fmt.Errorf("unexpected %q", b[i])
				}
				return i, nil
			case '{', '[', '"', ':':
				return 0, fmt.Errorf("unexpected %q", b[i])
			}
		}
		if atEOF {
			return len(b), nil
		}
		return 0, errIncomplete
	}
}

// scanString returns the index just past the string starting at b[i].
func scanString(b []byte, i int) (int, error) {
	j := i + 1
	for {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return 0, errIncomplete
		}
		j += k
		// Count the backslashes before the quote: an odd number escapes it.
		bs := 0
		for p := j - 1; p > i && b[p] == '\\'; p-- {
			bs++
		}
		j++
		if bs%2 == 0 {
			return j, nil
		}
	}
}

// structural marks the bytes scanContainer must look at; everything else
// (digits, letters, punctuation, white space) is skipped in a tight loop.
var structural = [256]bool{'"': true, '{': true, '}': true, '[': true, ']': true}

func scanContainer(b []byte) (int, error) {
	// A stack of open brackets, kept small: traces nest a few levels.
	var stackArr [64]byte
	stack := stackArr[:0]
	for i := 0; i < len(b); i++ {
		for i < len(b) && !structural[b[i]] {
			i++
		}
		if i == len(b) {
			break
		}
		switch c := b[i]; c {
		case '"':
			end, err := scanString(b, i)
			if err != nil {
				return 0, err
			}
			i = end - 1
		case '{', '[':
			stack = append(stack, c)
		case '}', ']':
			if len(stack) == 0 {
				return 0, fmt.Errorf("unexpected %q", c)
			}
			open := stack[len(stack)-1]
			if (open == '{') != (c == '}') {
				return 0, fmt.Errorf("mismatched %q", c)
			}
			stack = stack[:len(stack)-1]
			if len(stack) == 0 {
				return i + 1, nil
			}
		}
	}
	return 0, errIncomplete
}

// expect consumes the byte c after optional white space.
func (s *splitter) expect(c byte) error {
	got, err := s.peekByte()
	if err != nil {
		return err
	}
	if got != c {
		return s.errorf("expected %q, found %q", c, got)
	}
	s.pos++
	return nil
}

// nextElement reads the separator before an array element and returns the
// element's raw bytes; done is true at the closing bracket. first says
// whether this is the first element (no comma expected).
func (s *splitter) nextElement(first bool) (elem []byte, done bool, err error) {
	c, err := s.peekByte()
	if err != nil {
		return nil, false, err
	}
	if c == ']' {
		s.pos++
		return nil, true, nil
	}
	if !first {
		if c != ',' {
			return nil, false, s.errorf("expected ',' or ']' between events, found %q", c)
		}
		s.pos++
	}
	v, err := s.value()
	if err != nil {
		return nil, false, err
	}
	return v, false, nil
}

func isSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\r' || c == '\t' }

// lastElementBoundary finds the last "}" ws "," ws "{" in b: cut is just
// past the '}', next is the '{'. It is only a guess at an element
// boundary, which the caller must confirm.
func lastElementBoundary(b []byte) (cut, next int, ok bool) {
	for i := len(b); i > 0; {
		j := bytes.LastIndexByte(b[:i], '{')
		if j < 0 {
			return 0, 0, false
		}
		k := j - 1
		for k >= 0 && isSpace(b[k]) {
			k--
		}
		if k >= 0 && b[k] == ',' {
			k--
			for k >= 0 && isSpace(b[k]) {
				k--
			}
			if k >= 0 && b[k] == '}' {
				return k + 1, j, true
			}
		}
		i = j
	}
	return 0, 0, false
}
