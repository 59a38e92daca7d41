package exported

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"

	"github.com/torchmem/torchmem/chrometrace"
)

// intJSONScanner reads JSON made only of arrays and integers, which is all
// export_memory_timeline ever writes, through its own window over the
// input. It keeps no more than one number in memory, so a timeline of any
// length streams in constant space. sonic is not used here: its decoder
// buffers the whole top-level value (see GO-LIBS.md), and the `times` array
// of the coalesced format is one single top-level element, so splitting
// elements and handing them to sonic would not stream either; for bare
// integers strconv is the decoder anyway.
type intJSONScanner struct {
	src  io.Reader
	buf  []byte
	pos  int   // next byte to read in buf
	end  int   // end of valid bytes in buf
	base int64 // input offset of buf[0], for error messages
	err  error // sticky error of src (io.EOF at the end)
	lim  chrometrace.Limits
}

// scanBufSize is the read window; numbers are at most ~21 bytes, so any
// size well above that works, and 64 KiB keeps reads few.
const scanBufSize = 64 << 10

func newIntJSONScanner(r io.Reader) *intJSONScanner {
	return &intJSONScanner{src: r, buf: make([]byte, scanBufSize), lim: chrometrace.Limits{}.WithDefaults()}
}

// offset is the input position of the next byte.
func (s *intJSONScanner) offsetNow() int64 { return s.base + int64(s.pos) }

// fill moves the unread bytes to the front and reads more. It reports
// whether new bytes arrived.
func (s *intJSONScanner) fill() bool {
	if s.err != nil {
		return false
	}
	n := copy(s.buf, s.buf[s.pos:s.end])
	s.base += int64(s.pos)
	s.pos, s.end = 0, n
	for s.end < len(s.buf) {
		m, err := s.src.Read(s.buf[s.end:])
		s.end += m
		if err != nil {
			s.err = err
			break
		}
		if m > 0 {
			break
		}
	}
	return s.end > n
}

// readErr is the error for running out of input.
func (s *intJSONScanner) readErr() error {
	if s.err == nil || s.err == io.EOF {
		return errTimelineTruncated
	}
	return s.err
}

// errTimelineTruncated marks input that ends inside a value.
var errTimelineTruncated = errors.New("unexpected end of input (file truncated?)")

// peek returns the next non-space byte without consuming it. A run of
// white space longer than Limits.ValueBytes is an error, as in a
// trace: nothing torch writes has one, and a gzip bomb of spaces would
// otherwise be read to the end.
func (s *intJSONScanner) peek() (byte, error) {
	start := s.offsetNow()
	for {
		for s.pos < s.end {
			switch c := s.buf[s.pos]; c {
			case ' ', '\t', '\n', '\r':
				s.pos++
			default:
				return c, nil
			}
		}
		if s.offsetNow()-start > int64(s.lim.ValueBytes) {
			return 0, &chrometrace.LimitError{What: "a run of white space", Offset: start, Limit: s.lim.ValueBytes}
		}
		if !s.fill() {
			return 0, s.readErr()
		}
	}
}

// next consumes and returns the next non-space byte.
func (s *intJSONScanner) next() (byte, error) {
	c, err := s.peek()
	if err != nil {
		return 0, err
	}
	s.pos++
	return c, nil
}

func (s *intJSONScanner) expect(want byte) error {
	c, err := s.next()
	if err != nil {
		return err
	}
	if c != want {
		return s.errorf(-1, "expected %q, found %s", want, describeByte(c))
	}
	return nil
}

// errorf reports a problem at the current offset (plus delta).
func (s *intJSONScanner) errorf(delta int64, format string, args ...any) error {
	return fmt.Errorf("at byte %d: %s", s.offsetNow()+delta, fmt.Sprintf(format, args...))
}

func describeByte(c byte) string {
	if c >= 0x20 && c < 0x7f {
		return strconv.QuoteRune(rune(c))
	}
	return fmt.Sprintf("byte 0x%02x", c)
}

// maxIntBytes is more than any int64 needs ("-9223372036854775808" is 20).
const maxIntBytes = 24

// readInt reads one JSON integer. Fractions and exponents are rejected:
// torch writes Python ints, and a float here means the file is not what we
// think it is.
func (s *intJSONScanner) readInt() (int64, error) {
	if _, err := s.peek(); err != nil {
		return 0, err
	}
	if s.end-s.pos < maxIntBytes {
		s.fill() // at most once: then the whole number is in the window
	}
	start := s.offsetNow()
	i := s.pos
	neg := i < s.end && s.buf[i] == '-'
	if neg {
		i++
	}
	var u uint64
	digits := 0
	for ; i < s.end; i++ {
		c := s.buf[i]
		if c < '0' || c > '9' {
			break
		}
		digits++
		if digits > 19 {
			return 0, fmt.Errorf("at byte %d: integer out of 64-bit range", start)
		}
		u = u*10 + uint64(c-'0')
	}
	if digits == 0 {
		s.pos = i
		if i >= s.end {
			return 0, s.readErr()
		}
		return 0, fmt.Errorf("at byte %d: expected an integer, found %s", s.offsetNow(), describeByte(s.buf[i]))
	}
	if i < s.end {
		if c := s.buf[i]; c == '.' || c == 'e' || c == 'E' {
			return 0, fmt.Errorf("at byte %d: expected an integer, found a fractional number", start)
		}
	}
	s.pos = i
	switch {
	case !neg && u <= math.MaxInt64:
		return int64(u), nil
	case neg && u <= 1<<63:
		return int64(-u), nil // -(1<<63) wraps to MinInt64, as it should
	}
	return 0, fmt.Errorf("at byte %d: integer out of 64-bit range", start)
}

// readIntArray reads "[" int ("," int)* "]" (or "[]") after the caller has
// already consumed the opening bracket, appending to dst. At most max
// elements are accepted (max < 0: no limit); past them the error is
// tooMany, or one naming the offset when it is nil.
func (s *intJSONScanner) readIntArrayBody(dst []int64, max int, tooMany error) ([]int64, error) {
	c, err := s.peek()
	if err != nil {
		return dst, err
	}
	if c == ']' {
		s.next() //nolint:errcheck
		return dst, nil
	}
	n := 0
	for {
		v, err := s.readInt()
		if err != nil {
			return dst, err
		}
		n++
		if max >= 0 && n > max {
			if tooMany != nil {
				return dst, tooMany
			}
			return dst, s.errorf(0, "array has more than %d elements", max)
		}
		dst = append(dst, v)
		c, err := s.next()
		if err != nil {
			return dst, err
		}
		switch c {
		case ',':
			continue
		case ']':
			return dst, nil
		default:
			return dst, s.errorf(-1, "expected ',' or ']', found %s", describeByte(c))
		}
	}
}

// expectEnd checks that only whitespace follows the document.
func (s *intJSONScanner) expectEnd() error {
	c, err := s.peek()
	if err == errTimelineTruncated {
		return nil
	}
	if err != nil {
		return err
	}
	return s.errorf(0, "unexpected %s after the end of the JSON document", describeByte(c))
}
