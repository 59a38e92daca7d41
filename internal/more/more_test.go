package more

import "testing"

func TestJoin(t *testing.T) {
	items := []string{"a", "b", "c", "d", "e"}
	for _, c := range []struct {
		n, sep, want string
		k            int
	}{
		{k: 3, sep: ", ", want: "a, b, c and 2 more"},
		{k: 5, sep: ", ", want: "a, b, c, d, e"},
		{k: 0, sep: "; ", want: "a; b; c; d; e"},
		{k: 1, sep: ", ", want: "a and 4 more"},
	} {
		if got := Join(items, c.k, c.sep); got != c.want {
			t.Errorf("Join(%d, %q) = %q, want %q", c.k, c.sep, got, c.want)
		}
	}
	if got := Join(nil, 3, ", "); got != "" {
		t.Errorf("Join(nil) = %q", got)
	}
}
