package chrometrace

import "testing"

func TestParseMicros(t *testing.T) {
	cases := []struct {
		in   string
		want int64
		bad  bool
	}{
		{"5116167643092.396", 5116167643092396, false},
		{"5116167643092.3", 5116167643092300, false},
		{"1660000000000000", 1660000000000000000, false}, // 2022-style absolute integer µs
		{"0.608", 608, false},
		{"254.400", 254400, false},
		{"-1", -1000, false},
		{"1.0005", 1001, false},
		{"1e3", 1000000, false},
		{"", 0, true},
		{"abc", 0, true},
		{"99999999999999999999", 0, true},
	}
	for _, c := range cases {
		got, err := parseMicros(c.in)
		if (err != nil) != c.bad {
			t.Errorf("parseMicros(%q) error = %v, want bad=%v", c.in, err, c.bad)
			continue
		}
		if !c.bad && got != c.want {
			t.Errorf("parseMicros(%q) = %d, want %d", c.in, got, c.want)
		}
	}
}
