package lines

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/torchmem/torchmem/chrometrace"
)

// Reader yields lines without their "\n" or "\r\n", bounding the
// length of one line so that a binary file cannot make it buffer forever.
type Reader struct {
	br     *bufio.Reader
	LineNo int   // the line just read, from 1
	Bytes  int64 // bytes read so far
	// blankStart is where the current run of blank lines began (-1: the
	// last line was not blank); maxBlank bounds the run.
	blankStart int64
	maxBlank   int
}

// NewReader reads r with lines of at most maxLine bytes and runs of blank
// lines of at most maxBlank bytes (chrometrace.Limits.ValueBytes; 0: its
// default).
func NewReader(r io.Reader, maxLine, maxBlank int) *Reader {
	if maxBlank <= 0 {
		maxBlank = chrometrace.DefaultMaxValueBytes
	}
	return &Reader{br: bufio.NewReaderSize(r, maxLine), blankStart: -1, maxBlank: maxBlank}
}

// Blank notes that the line just read was blank. A run of blank lines
// longer than the reader's maxBlank is an error, like a run of white
// space in a trace: a gzip bomb of newlines would otherwise be read to its
// end one line at a time.
func (lr *Reader) Blank() error {
	if lr.blankStart < 0 {
		lr.blankStart = lr.Bytes
		return nil
	}
	if lr.Bytes-lr.blankStart > int64(lr.maxBlank) {
		return &chrometrace.LimitError{What: "a run of blank lines", Offset: lr.blankStart, Limit: lr.maxBlank}
	}
	return nil
}

// NotBlank notes that the line just read was not blank: it ends a run of
// blank lines.
func (lr *Reader) NotBlank() { lr.blankStart = -1 }

// Next returns the next line and whether it ended with a newline; io.EOF
// after the last line.
func (lr *Reader) Next() (string, bool, error) {
	b, err := lr.br.ReadSlice('\n')
	lr.Bytes += int64(len(b))
	if len(b) == 0 && err == io.EOF {
		return "", false, io.EOF
	}
	lr.LineNo++
	switch {
	case err == bufio.ErrBufferFull:
		return "", false, fmt.Errorf("line longer than %d bytes: not a text log", lr.br.Size())
	case err != nil && err != io.EOF:
		return "", false, err
	}
	terminated := err == nil
	b = bytes.TrimSuffix(b, []byte("\n"))
	b = bytes.TrimSuffix(b, []byte("\r"))
	return string(b), terminated, nil
}

// IsText rejects lines with control characters or invalid UTF-8: the
// sign of a binary file handed to a text reader.
func IsText(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 && c != '\t' {
			return false
		}
	}
	return true
}
