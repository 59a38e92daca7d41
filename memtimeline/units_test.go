package memtimeline

import "testing"

func TestFormatBytesMatchesTorch(t *testing.T) {
	// Values and strings taken from torch's own table.txt printouts.
	cases := []struct {
		n    int64
		want string
	}{
		{0, "0 B"},
		{512, "512 B"},
		{4096, "4.00 KB"},
		{51200, "50.00 KB"},
		{1081344, "1.03 MB"},
		{-2677198848, "-2.49 GB"},
		{2738880512, "2.55 GB"},
	}
	for _, c := range cases {
		if got := FormatBytes(c.n); got != c.want {
			t.Errorf("FormatBytes(%d) = %q, want %q", c.n, got, c.want)
		}
	}
}
