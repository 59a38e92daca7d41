package chrometrace

import (
	"math/rand/v2"
	"strconv"
	"testing"
)

// TestPlainInt: where plainInt reads a number, strconv.ParseInt reads the
// same; it refuses what it does not cover (signs, over 18 digits, text).
func TestPlainInt(t *testing.T) {
	cases := []string{"", "-", "0", "-0", "007", "+5", "12a", "123456789012345678", "1234567890123456789", "-999999999999999999", " 1", "1.5"}
	r := rand.New(rand.NewPCG(3, 4))
	for range 5000 {
		cases = append(cases, strconv.FormatInt(r.Int64()>>r.IntN(63), 10), strconv.FormatInt(-r.Int64N(1e18), 10))
	}
	covered := 0
	for _, s := range cases {
		v, ok := plainInt(s)
		if !ok {
			continue
		}
		covered++
		if want, err := strconv.ParseInt(s, 10, 64); err != nil || want != v {
			t.Fatalf("plainInt(%q) = %d, ParseInt = %d, %v", s, v, want, err)
		}
	}
	if covered < 5000 {
		t.Fatalf("plainInt read only %d of the numbers", covered)
	}
}

// TestKeyTable: every key of the tables is found whole (with or without
// white space around the ':'), the guesses included, and a key that is a
// prefix or an extension of a known one is not taken for it.
func TestKeyTable(t *testing.T) {
	for _, tab := range []*keyTable{eventKeyTable, argKeyTable} {
		var p keyPred
		for round := 0; round < 3; round++ { // the later rounds hit the guesses
			p.prev = 0
			for k := 0; k < tab.len; k++ {
				e := &tab.entries[k]
				for _, text := range []string{`"` + e.name + `": 1`, `"` + e.name + `" :1`, `"` + e.name + `":` + "\n 1"} {
					b := []byte(text + `,                 `)
					id, j, ok := tab.scan(b, 0, &p)
					if !ok || id != e.id || b[j] != '1' {
						t.Fatalf("%q: got id %d at %d (%v), want id %d at the value", text, id, j, ok, e.id)
					}
				}
				for _, other := range []string{e.name[:len(e.name)-1], e.name + "x", "x" + e.name} {
					if other == "" {
						continue
					}
					b := []byte(`"` + other + `": 1,                 `)
					id, _, ok := tab.scan(b, 0, &p)
					known := false
					for k2 := 0; k2 < tab.len; k2++ {
						known = known || tab.entries[k2].name == other && tab.entries[k2].id == id
					}
					if !ok || id != keySkip && !known {
						t.Fatalf("%q read as id %d (%v)", other, id, ok)
					}
				}
			}
		}
	}
}
