package escape

import (
	"bytes"
	"html"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/extension"
)

func TestTerminal(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"aten::mm", "aten::mm"},
		{"", ""},
		{`C:\path\x.py`, `C:\path\x.py`},
		{"naïve ✓ 名前", "naïve ✓ 名前"},
		{"\x1b]0;TITLE\a\x1b[2J", `\x1b]0;TITLE\x07\x1b[2J`},
		{"a\tb\nc\rd", `a\tb\nc\rd`},
		{"del\x7f", `del\x7f`},
		{"c1\u0085\u009b", `c1\u0085\u009b`},
		{"bidi\u202eevil\u2066", `bidi\u202eevil\u2066`},
		{"bad\xff\xc3", `bad\xff\xc3`},
		{"nul\x00", `nul\x00`},
	} {
		if got := Terminal(tc.in); got != tc.want {
			t.Errorf("Terminal(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestMarkdown(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"aten::mm", "aten::mm"},
		{"2.55 GB", "2.55 GB"},
		{"a`b", "a\\`b"},
		{"<img src=z onerror=alert(1)>", "&lt;img src=z onerror=alert(1)&gt;"},
		{"[x](https://evil)", `\[x\](https\://evil)`},
		// GitHub autolinks a bare URL, www. name or e-mail address: each
		// is broken by an escape that renders as nothing.
		{"forward https://evil.example/x", `forward https\://evil.example/x`},
		{"see www.evil.example", `see www\.evil.example`},
		{"mail a@evil.example", `mail a\@evil.example`},
		{"a|b", "a&#124;b"},
		{"two\nlines", "two lines"},
		{"__init__ *x*", `\_\_init\_\_ \*x\*`},
		{"\x1b[2J", `\\x1b\[2J`},
	} {
		if got := Markdown(tc.in); got != tc.want {
			t.Errorf("Markdown(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestMarkdownCode(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"train.py:12", "`train.py:12`"},
		{"", ""},
		{"a`b", "``a`b``"},
		{"`x", "`` `x ``"},
		{"a``b`", "``` a``b` ```"},
		{" x ", "`  x  `"},
		{"  ", "`  `"},
		{"x\ny", "`x y`"},
	} {
		if got := MarkdownCode(tc.in); got != tc.want {
			t.Errorf("MarkdownCode(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestCSV(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"aten::mm", "aten::mm"},
		{"-1048576", "-1048576"},
		{"+5", "+5"},
		{"-", "-"},
		{"=HYPERLINK(\"https://evil\")", "'=HYPERLINK(\"https://evil\")"},
		{"@SUM(A1)", "'@SUM(A1)"},
		{"-cmd|calc", "'-cmd|calc"},
		{"a\r\nb\x1b", "a\\r\nb\\x1b"},
	} {
		if got := CSV(tc.in); got != tc.want {
			t.Errorf("CSV(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestFoldedFrame(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"train.py(12): step", "train.py(12): step"},
		{"a;b", "a:b"},
		{"x\r\ny 5\n", "x y 5 "},
		{"\x1b[2J", `\x1b[2J`},
	} {
		if got := FoldedFrame(tc.in); got != tc.want {
			t.Errorf("FoldedFrame(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestURIPath(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"src/train.py", "src/train.py"},
		{"my dir/a#b?.py", "my%20dir/a%23b%3F.py"},
		{"C:/x.py", "C%3A/x.py"},
		{`pkg\mod.py`, "pkg/mod.py"},
		{"naïve.py", "na%C3%AFve.py"},
		{"100%.py", "100%25.py"},
	} {
		if got := URIPath(tc.in); got != tc.want {
			t.Errorf("URIPath(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestTerminalWriterSplitRunes(t *testing.T) {
	in := "ok ✓\x1b[2J\n\tnaïve\u202e\xff end"
	want := terminal(in, "\n\t")
	for cut := 0; cut <= len(in); cut++ {
		var buf bytes.Buffer
		w := NewTerminalWriter(&buf)
		for _, part := range []string{in[:cut], in[cut:]} {
			if n, err := w.Write([]byte(part)); err != nil || n != len(part) {
				t.Fatalf("Write = %d, %v", n, err)
			}
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		if buf.String() != want {
			t.Errorf("cut at %d: %q, want %q", cut, buf.String(), want)
		}
	}
}

// markdown renders src as GitHub does (CommonMark and GFM tables), raw
// HTML omitted like goldmark's default.
func markdown(t testing.TB, src string) string {
	var out bytes.Buffer
	md := goldmark.New(goldmark.WithExtensions(extension.Table, extension.Strikethrough))
	if err := md.Convert([]byte(src), &out); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

// checkMarkdown asserts that s escaped renders as exactly s, as text, in a
// paragraph, in a table cell and in a code span.
func checkMarkdown(t testing.TB, s string) {
	if strings.ContainsRune(s, utf8.RuneError) {
		return // goldmark itself replaces some bytes; nothing to compare
	}
	text := html.EscapeString(oneLine(s))
	text = strings.ReplaceAll(text, "&#39;", "'")
	text = strings.ReplaceAll(text, "&#34;", "&quot;")
	if got, want := markdown(t, "x "+Markdown(s)+" y"), "<p>x "+text+" y</p>\n"; got != want {
		t.Fatalf("Markdown(%q) = %q renders as\n%q, want\n%q", s, Markdown(s), got, want)
	}
	cell := markdown(t, "| h |\n| --- |\n| x "+Markdown(s)+" y |\n")
	if want := "<td>x " + text + " y</td>"; !strings.Contains(cell, want) || strings.Count(cell, "<td>") != 1 {
		t.Fatalf("Markdown(%q) in a table renders as\n%q, want one cell %q", s, cell, want)
	}
	if oneLine(s) == "" {
		return
	}
	if got, want := markdown(t, "x "+MarkdownCode(s)+" y"), "<p>x <code>"+text+"</code> y</p>\n"; got != want {
		t.Fatalf("MarkdownCode(%q) = %q renders as\n%q, want\n%q", s, MarkdownCode(s), got, want)
	}
}

func TestMarkdownRendersAsText(t *testing.T) {
	for _, s := range markdownSeeds {
		checkMarkdown(t, s)
	}
}

var markdownSeeds = []string{
	"aten::mm", "a`b", "``", "` x `", "<img src=z onerror=alert(1)>", "[x](https://evil.example/)",
	"![i](x.png)", "a|b|c", "**bold** _it_ ~~del~~", "\\`", "&lt;", "&amp;#124;", "# h", "x\ny",
	"<!-- c -->", "<https://autolink>", "\x1b]0;T\a", "train.py:12 in step", "a\\|b", "  ", " ` ",
}

func FuzzMarkdown(f *testing.F) {
	for _, s := range markdownSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, out := range []string{Markdown(s), MarkdownCode(s)} {
			if strings.ContainsAny(out, "\n\r\x1b") || !utf8.ValidString(out) {
				t.Fatalf("%q escaped to %q: not one clean line", s, out)
			}
		}
		checkMarkdown(t, s)
	})
}

func FuzzTerminal(f *testing.F) {
	for _, s := range []string{"aten::mm", "\x1b[2J", "\u202e", "\xff\xfe", "a\tb\n", "\u0085"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := Terminal(s)
		if !utf8.ValidString(out) {
			t.Fatalf("Terminal(%q) = %q: invalid UTF-8", s, out)
		}
		for _, r := range out {
			if needsTerminalEscape(r) {
				t.Fatalf("Terminal(%q) = %q keeps %U", s, out, r)
			}
		}
		clean := utf8.ValidString(s)
		for _, r := range s {
			clean = clean && !needsTerminalEscape(r)
		}
		if clean != (out == s) {
			t.Fatalf("Terminal(%q) = %q: changed a clean string or kept a dirty one", s, out)
		}
		var buf bytes.Buffer
		w := NewTerminalWriter(&buf)
		half := len(s) / 2
		w.Write([]byte(s[:half])) //nolint:errcheck
		w.Write([]byte(s[half:])) //nolint:errcheck
		w.Flush()                 //nolint:errcheck
		if buf.String() != terminal(s, "\n\t") {
			t.Fatalf("TerminalWriter(%q) = %q, want %q", s, buf.String(), terminal(s, "\n\t"))
		}
	})
}

func TestSARIFText(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"aten::mm at x.py:3", "aten::mm at x.py:3"},
		{"[click](https://evil.example/y)", `\[click\](https\://evil.example/y)`},
		{`a\b`, `a\\b`},
		{"two\n[PASS] lines", `two\n\[PASS\] lines`},
	} {
		if got := SARIFText(tc.in); got != tc.want {
			t.Errorf("SARIFText(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
