package memtimeline

import "testing"

func TestParseBytes(t *testing.T) {
	for s, want := range map[string]int64{
		"0": 0, "1048576": 1 << 20, "512KiB": 512 << 10, "512kb": 512 << 10, "1.5 MiB": 3 << 19, "2MiB": 2 << 20,
		"1.5GB": 3 << 29, "2GB": 2 << 30, "64M": 64 << 20, "4k": 4 << 10, " 7 B ": 7, "1TiB": 1 << 40,
	} {
		if got, err := ParseBytes(s); err != nil || got != want {
			t.Errorf("%q: %d %v, want %d", s, got, err, want)
		}
	}
	for _, s := range []string{"", "-1", "1 parsec", "1e400", "99999999999999999999TiB", "0.5", "1.5", "MiB", "1,000", "0x10", "NaN", "Inf"} {
		if _, err := ParseBytes(s); err == nil {
			t.Errorf("accepted %q", s)
		}
	}
}
