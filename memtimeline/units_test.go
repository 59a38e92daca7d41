package memtimeline

import (
	"testing"
	"time"
)

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

func TestFormatDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		850 * time.Microsecond:   "850.0 µs",
		12300 * time.Microsecond: "12.3 ms",
		4500 * time.Millisecond:  "4.5 s",
		150 * time.Second:        "2.5 min",
		156 * time.Minute:        "2.6 h",
		72 * time.Hour:           "3.0 days",
		-2 * time.Millisecond:    "-2.0 ms",
	} {
		if got := FormatDuration(d); got != want {
			t.Errorf("FormatDuration(%v) = %q, want %q", d, got, want)
		}
	}
}
