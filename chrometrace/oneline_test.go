package chrometrace

import "testing"

func TestOneLine(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"aten::mm", "aten::mm"},
		{"H200\nCLEAN: passed", `H200\nCLEAN: passed`},
		{"a\r\nb", `a\r\nb`},
		{`a\nb` + "\n", `a\\nb\n`}, // a literal \n stays told apart from a newline
		{`C:\new`, `C:\new`},       // no line break: unchanged
		{`C:\temp`, `C:\temp`},
	} {
		if got := OneLine(c.in); got != c.want {
			t.Errorf("OneLine(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
