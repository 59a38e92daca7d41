package memtimeline

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// intJSONScanner reads JSON made only of arrays and integers, which is all
// export_memory_timeline ever writes, one byte at a time from a buffered
// reader. It keeps no more than one number in memory, so a timeline of any
// length streams in constant space. sonic is not used here: its decoder
// buffers the whole top-level value (see GO-LIBS.md), and the `times` array
// of the coalesced format is one single top-level element, so splitting
// elements and handing them to sonic would not stream either; for bare
// integers strconv is the decoder anyway.
type intJSONScanner struct {
	r      *bufio.Reader
	offset int64 // bytes consumed so far, for error messages
	digits []byte
}

func newIntJSONScanner(r io.Reader) *intJSONScanner {
	br, ok := r.(*bufio.Reader)
	if !ok {
		br = bufio.NewReaderSize(r, 1<<16)
	}
	return &intJSONScanner{r: br, digits: make([]byte, 0, 24)}
}

// errTruncated marks input that ends inside a value.
var errTruncated = errors.New("unexpected end of input (file truncated?)")

// peek returns the next non-space byte without consuming it.
func (s *intJSONScanner) peek() (byte, error) {
	for {
		c, err := s.r.ReadByte()
		if err != nil {
			if err == io.EOF {
				return 0, errTruncated
			}
			return 0, err
		}
		switch c {
		case ' ', '\t', '\n', '\r':
			s.offset++
			continue
		}
		if err := s.r.UnreadByte(); err != nil {
			return 0, err
		}
		return c, nil
	}
}

// next consumes and returns the next non-space byte.
func (s *intJSONScanner) next() (byte, error) {
	c, err := s.peek()
	if err != nil {
		return 0, err
	}
	s.r.ReadByte() //nolint:errcheck // peek just unread it
	s.offset++
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
	return fmt.Errorf("at byte %d: %s", s.offset+delta, fmt.Sprintf(format, args...))
}

func describeByte(c byte) string {
	if c >= 0x20 && c < 0x7f {
		return strconv.QuoteRune(rune(c))
	}
	return fmt.Sprintf("byte 0x%02x", c)
}

// readInt reads one JSON integer. Fractions and exponents are rejected:
// torch writes Python ints, and a float here means the file is not what we
// think it is.
func (s *intJSONScanner) readInt() (int64, error) {
	c, err := s.peek()
	if err != nil {
		return 0, err
	}
	start := s.offset
	s.digits = s.digits[:0]
	if c == '-' {
		s.r.ReadByte() //nolint:errcheck
		s.offset++
		s.digits = append(s.digits, '-')
	}
	for {
		c, err := s.r.ReadByte()
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, err
		}
		if c >= '0' && c <= '9' {
			s.digits = append(s.digits, c)
			s.offset++
			if len(s.digits) > 21 {
				return 0, fmt.Errorf("at byte %d: number too long for a 64-bit integer", start)
			}
			continue
		}
		if c == '.' || c == 'e' || c == 'E' {
			return 0, fmt.Errorf("at byte %d: expected an integer, found a fractional number", start)
		}
		s.r.UnreadByte() //nolint:errcheck
		break
	}
	if len(s.digits) == 0 || (len(s.digits) == 1 && s.digits[0] == '-') {
		c, err := s.peek()
		if err != nil {
			return 0, err
		}
		return 0, fmt.Errorf("at byte %d: expected an integer, found %s", s.offset, describeByte(c))
	}
	v, err := strconv.ParseInt(string(s.digits), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("at byte %d: integer %s out of 64-bit range", start, s.digits)
	}
	return v, nil
}

// readIntArray reads "[" int ("," int)* "]" (or "[]") after the caller has
// already consumed the opening bracket, appending to dst. At most max
// elements are accepted (max < 0: no limit).
func (s *intJSONScanner) readIntArrayBody(dst []int64, max int) ([]int64, error) {
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
	if err == errTruncated {
		return nil
	}
	if err != nil {
		return err
	}
	return s.errorf(0, "unexpected %s after the end of the JSON document", describeByte(c))
}
