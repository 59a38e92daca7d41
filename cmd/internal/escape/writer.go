package escape

import (
	"io"
	"unicode/utf8"
)

// TerminalWriter filters everything written through it the way Terminal
// does, except that newlines and tabs pass (they lay out text). torchmem
// puts it in front of stdout and stderr, so that no name printed by any
// command, in any format, can reach a terminal as a control sequence.
// JSON passes unchanged: encoding/json already escapes ASCII controls, and
// the \uNNNN form used for C1 controls and bidi overrides is a JSON escape
// of the same character.
type TerminalWriter struct {
	w       io.Writer
	pending []byte // an incomplete UTF-8 sequence at the end of the last Write
}

// NewTerminalWriter returns a TerminalWriter writing to w.
func NewTerminalWriter(w io.Writer) *TerminalWriter { return &TerminalWriter{w: w} }

// Write escapes p and writes it. It reports len(p) on success; a rune cut
// between two writes is held until the next one (or Flush).
func (t *TerminalWriter) Write(p []byte) (int, error) {
	n := len(p)
	if len(t.pending) > 0 {
		p = append(t.pending, p...)
		t.pending = nil
	}
	// Hold back a cut-off rune at the end.
	if tail := incompleteTail(p); tail > 0 {
		t.pending = append([]byte(nil), p[len(p)-tail:]...)
		p = p[:len(p)-tail]
	}
	s := string(p)
	out := terminal(s, "\n\t")
	if _, err := io.WriteString(t.w, out); err != nil {
		return 0, err
	}
	return n, nil
}

// Flush writes a rune left incomplete by the last Write (escaped, since
// on its own it is invalid UTF-8).
func (t *TerminalWriter) Flush() error {
	if len(t.pending) == 0 {
		return nil
	}
	s := string(t.pending)
	t.pending = nil
	_, err := io.WriteString(t.w, terminal(s, "\n\t"))
	return err
}

// incompleteTail is the length of a UTF-8 sequence at the end of p that
// has started but not finished (0 when p ends on a rune boundary or in
// bytes that can never become valid).
func incompleteTail(p []byte) int {
	for k := 1; k <= utf8.UTFMax-1 && k <= len(p); k++ {
		c := p[len(p)-k]
		if c < 0x80 {
			return 0
		}
		if utf8.RuneStart(c) {
			if !utf8.FullRune(p[len(p)-k:]) {
				return k
			}
			return 0
		}
	}
	return 0
}
