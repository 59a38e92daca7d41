// Package escape makes text from input files (operator names, file paths,
// Python frames, anything a trace can hold) safe to print in each output
// medium torchmem writes. It is the one place that knows each medium's
// special characters; every renderer goes through it:
//
//   - Terminal: control characters, C1 controls, bidirectional overrides and
//     invalid UTF-8 are shown as visible escapes (\x1b, \u202e), so a name
//     cannot move the cursor, set the window title or clear the screen.
//   - Markdown: inline text with every character that could start a code
//     span, emphasis, link, image, autolinked tag or HTML escaped, and
//     newlines turned into spaces; MarkdownCode builds a code span that no
//     backtick in the name can close.
//   - CSV: controls escaped, formulas (=, +, -, @) defused; quoting is
//     the table renderer's.
//   - URIPath: a relative path percent-encoded for a SARIF artifact URI.
//
// HTML is not handled here: html/template escapes by context already. JSON
// is escaped by encoding/json.
package escape

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// needsTerminalEscape reports whether r (decoded from valid UTF-8) is shown
// as an escape on a terminal: C0 and C1 controls, DEL, Unicode bidi
// controls (which reorder what is displayed: "Trojan Source") and the line
// and paragraph separators.
func needsTerminalEscape(r rune) bool {
	switch {
	case r < 0x20, r == 0x7f:
		return true
	case r >= 0x80 && r <= 0x9f:
		return true
	case r == 0x061c, r == 0x200e, r == 0x200f,
		r >= 0x202a && r <= 0x202e,
		r >= 0x2066 && r <= 0x2069,
		r == 0x2028, r == 0x2029:
		return true
	}
	return false
}

// writeEscape appends the visible form of r: \t \n \r for the common
// ones, \xNN for other ASCII controls, \uNNNN above ASCII. The forms are
// also valid JSON string escapes except \xNN, which encoding/json never
// leaves raw, so filtering JSON output through TerminalWriter keeps it
// valid and equal.
func writeEscape(b *strings.Builder, r rune) {
	switch {
	case r == '\t':
		b.WriteString(`\t`)
	case r == '\n':
		b.WriteString(`\n`)
	case r == '\r':
		b.WriteString(`\r`)
	case r < 0x80:
		fmt.Fprintf(b, `\x%02x`, r)
	default:
		fmt.Fprintf(b, `\u%04x`, r)
	}
}

// Terminal returns s with every character that a terminal would interpret
// (ESC, BEL, CR, newline, tab, C1 controls, bidi overrides) and every byte
// of invalid UTF-8 written as a visible escape. Printable text, including
// backslashes and non-ASCII letters, is unchanged.
func Terminal(s string) string {
	return terminal(s, "")
}

// terminal escapes s, passing the runes in keep through raw.
func terminal(s, keep string) string {
	i := 0
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size == 1) || (needsTerminalEscape(r) && !strings.ContainsRune(keep, r)) {
			break
		}
		i += size
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	b.WriteString(s[:i])
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case needsTerminalEscape(r) && !strings.ContainsRune(keep, r):
			writeEscape(&b, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// TerminalLines is Terminal for a table cell that may span lines: it
// keeps newlines (the table lays them out) and escapes everything else.
func TerminalLines(s string) string {
	return terminal(s, "\n")
}

// CSV escapes a CSV field's content like Terminal except for newlines and
// tabs, which a quoted CSV field holds as they are; quoting itself is the
// CSV writer's job. A field that a spreadsheet would run as a formula (it
// starts with =, +, -, @ and is not a number) gets a leading ' (OWASP's
// advice against CSV injection): an operator named =HYPERLINK(...) stays
// text when the CSV is opened in a spreadsheet.
func CSV(s string) string {
	s = terminal(s, "\n\t")
	if s != "" && strings.ContainsRune("=+-@", rune(s[0])) && s != "-" {
		if _, err := strconv.ParseFloat(s, 64); err != nil {
			s = "'" + s
		}
	}
	return s
}

// FoldedFrame makes s one frame of a folded stack line (flamegraph.pl,
// speedscope: "a;b;c 123"): ';' separates frames, so it becomes ':', line
// breaks become spaces, other controls visible escapes.
func FoldedFrame(s string) string {
	return strings.ReplaceAll(oneLine(s), ";", ":")
}

// oneLine turns line breaks into spaces and escapes the other controls:
// the common start of both Markdown forms.
func oneLine(s string) string {
	if strings.ContainsAny(s, "\r\n") {
		s = strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ").Replace(s)
	}
	return Terminal(s)
}

// markdownReplacer escapes every character that Markdown (CommonMark and
// GitHub's extensions) gives a meaning inline. Backslash escapes are used
// where CommonMark defines them; '<', '>' and '&' become entities, which
// every Markdown dialect decodes; '|' becomes an entity too, so that a
// table renderer that turns '|' into "\|" cannot double the escape.
var markdownReplacer = strings.NewReplacer(
	`\`, `\\`,
	"`", "\\`",
	`*`, `\*`,
	`_`, `\_`,
	`[`, `\[`,
	`]`, `\]`,
	`~`, `\~`,
	`#`, `\#`,
	`!`, `\!`,
	`&`, `&amp;`,
	`<`, `&lt;`,
	`>`, `&gt;`,
	`|`, `&#124;`,
)

// Markdown returns s escaped as inline Markdown text: it renders as
// exactly s (on one line), never as a code span, emphasis, link, image or
// HTML, and it cannot end a table cell.
func Markdown(s string) string {
	return defuseAutolinks(markdownReplacer.Replace(oneLine(s)))
}

// defuseAutolinks keeps GitHub's autolink extension from turning a URL or
// a "www." name in escaped Markdown text into a live link: it backslash-
// escapes the ':' of "://" and the '.' of "www." (CommonMark escapes of
// punctuation; the text renders the same, and the extension, which only
// matches within one run of text, no longer sees a URL) and the '@' of an
// e-mail address.
func defuseAutolinks(s string) string {
	if !strings.Contains(s, "://") && !strings.Contains(strings.ToLower(s), "www.") && !strings.Contains(s, "@") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == ':' && strings.HasPrefix(s[i:], "://"):
			b.WriteString(`\:`)
		case s[i] == '.' && i >= 3 && strings.EqualFold(s[i-3:i], "www"):
			b.WriteString(`\.`)
		case s[i] == '@':
			b.WriteString(`\@`)
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

// SARIFText escapes a SARIF message.text: it is plain text in which
// "[text](target)" is an embedded link (SARIF 2.1.0, 3.11.6), and viewers
// (GitHub code scanning) render it as Markdown. '\', '[' and ']' are
// backslash-escaped as the standard says, URLs defused as in Markdown,
// and line breaks written as \n, so a name in a message can neither link
// nor start a line.
func SARIFText(s string) string {
	s = strings.NewReplacer(`\`, `\\`, `[`, `\[`, `]`, `\]`, "\n", `\n`, "\r", `\r`).Replace(s)
	return defuseAutolinks(s)
}

// MarkdownCode returns s as a Markdown code span (`s`), on one line. The
// fence is one backtick longer than the longest run of backticks in s, so
// nothing in s can close it; inside a code span nothing else is special.
// In a table cell the renderer must still escape '|' (GitHub splits cells
// before it parses code spans); go-pretty's RenderMarkdown does. An empty s
// gives "" (an empty code span does not exist).
func MarkdownCode(s string) string {
	s = oneLine(s)
	if s == "" {
		return ""
	}
	longest, run := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	fence := strings.Repeat("`", longest+1)
	if s[0] == '`' || s[len(s)-1] == '`' || (s[0] == ' ' && s[len(s)-1] == ' ' && strings.Trim(s, " ") != "") {
		// CommonMark strips one space from each end when both are
		// spaces: pad so the content stays exactly s.
		s = " " + s + " "
	}
	return fence + s + fence
}

// MarkdownText is Markdown that torchmem wrote itself (a code span from
// MarkdownCode, emphasis around an escaped value): table renderers pass it
// through instead of escaping it again.
type MarkdownText string

// URIPath percent-encodes a relative file path for a URI reference (a SARIF
// artifactLocation.uri): every byte other than RFC 3986's unreserved
// characters and '/' is written as %XX. Backslashes become '/' first, as
// Windows paths are meant. A ':' is encoded too, so that a first segment
// such as "C:" is not read as a URI scheme.
func URIPath(p string) string {
	p = strings.ReplaceAll(p, `\`, "/")
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(p))
	for i := 0; i < len(p); i++ {
		c := p[i]
		if c == '/' || c == '-' || c == '.' || c == '_' || c == '~' ||
			('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9') {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}
