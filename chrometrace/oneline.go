package chrometrace

import "strings"

// OneLine keeps a name from an input on one line: a newline or carriage
// return in it becomes the two characters \n or \r (and a backslash
// before them is doubled, so the result is unambiguous). Names are
// printed in text, Markdown and logs where a line break would let a name
// start a line of its own (a file named "x\n[PASS] memory.leak: no leak"
// planted a PASS line in check's output); no profiler writes one, so real
// names pass unchanged. The readers apply it to every name they keep
// (trace strings, GPU names, snapshot strs, file paths), so every output
// says the same.
func OneLine(s string) string {
	if !strings.ContainsAny(s, "\n\r") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\\':
			if i+1 < len(s) && (s[i+1] == 'n' || s[i+1] == 'r') {
				b.WriteString(`\\`)
			} else {
				b.WriteByte(c)
			}
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}
