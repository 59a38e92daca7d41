package report

import (
	"bytes"
	"io"
	"regexp"
	"strings"

	"github.com/jedib0t/go-pretty/v6/text"
)

// WrapWriter is the text output's last step: a line wider than the width
// wraps at spaces with a hanging indent, so that nothing the user needs
// (a fix, a location) is cut or runs off a CI log. Table lines are left
// as they are: tables fit themselves (escapingTable.Render).
type WrapWriter struct {
	w     io.Writer
	width int
	buf   []byte
	err   error
}

func NewWrapWriter(w io.Writer, width int) *WrapWriter { return &WrapWriter{w: w, width: width} }

func (ww *WrapWriter) Write(p []byte) (int, error) {
	ww.buf = append(ww.buf, p...)
	for {
		i := bytes.IndexByte(ww.buf, '\n')
		if i < 0 {
			break
		}
		ww.emit(string(ww.buf[:i]), true)
		ww.buf = ww.buf[i+1:]
	}
	return len(p), ww.err
}

// Flush writes a last line without its newline.
func (ww *WrapWriter) Flush() error {
	if len(ww.buf) > 0 {
		ww.emit(string(ww.buf), false)
		ww.buf = nil
	}
	return ww.err
}

// labelled is a line's label: a checklist mark ("[pass] "), a finding's
// severity ("[WARNING] "), or a verdict word ("LEAK   ", "ACROSS RANKS  ");
// continuation lines hang under the text after it.
var labelled = regexp.MustCompile(`^(\[[^\]]{1,12}\] +|[A-Z]+(?: [A-Z]+)?  +)`)

func (ww *WrapWriter) emit(line string, newline bool) {
	if ww.err != nil {
		return
	}
	out := line
	if text.StringWidthWithoutEscSequences(line) > ww.width && !IsTableLine(line) {
		out = hangingWrap(line, ww.width)
	}
	if newline {
		out += "\n"
	}
	_, ww.err = io.WriteString(ww.w, out)
}

// IsTableLine reports whether line is a box-drawn table's line (or a Markdown table row).
func IsTableLine(line string) bool {
	t := strings.TrimLeft(line, " ")
	return t != "" && strings.ContainsRune("┌├└│╭╰┃┏┗┣║╔╚╟|", []rune(t)[0])
}

// hangingWrap wraps line at width: the first line as is, the others
// indented under the text that follows the line's indent and label.
func hangingWrap(line string, width int) string {
	body := strings.TrimLeft(line, " ")
	indent := len(line) - len(body)
	hang := indent + 2
	if indent >= 8 {
		hang = indent // already a continuation: keep its column
	}
	if m := labelled.FindString(body); m != "" {
		hang = indent + len(m)
	}
	hang = min(hang, width/2)
	// Greedy by words: the first line has the width after the indent, the
	// others after the hang; a word longer than a line is split at a
	// joint (cutAtJoint).
	lines := fillWords(strings.Split(body, " "), width-indent, width-hang)
	var out strings.Builder
	for i, l := range lines {
		if i == 0 {
			out.WriteString(strings.Repeat(" ", indent) + l)
		} else {
			out.WriteString("\n" + strings.Repeat(" ", hang) + l)
		}
	}
	return out.String()
}

// fillWords fills lines greedily with words: the first line holds first
// columns, the others rest; a word longer than a line is split at a joint
// (cutAtJoint). Both wrappers (table cells, hanging paragraphs) use it.
func fillWords(words []string, first, rest int) []string {
	var lines []string
	cur, curW, limit := "", 0, first
	flush := func() {
		lines = append(lines, cur)
		cur, curW, limit = "", 0, rest
	}
	for _, word := range words {
		ww := text.StringWidthWithoutEscSequences(word)
		if curW > 0 && curW+1+ww > limit {
			flush()
		}
		for curW == 0 && ww > limit {
			head := cutAtJoint(word, limit)
			lines = append(lines, head)
			limit = rest
			word = strings.TrimPrefix(word, head)
			ww = text.StringWidthWithoutEscSequences(word)
		}
		if curW > 0 {
			cur += " "
			curW++
		}
		cur += word
		curW += ww
	}
	if cur != "" || len(lines) == 0 {
		lines = append(lines, cur)
	}
	return lines
}
