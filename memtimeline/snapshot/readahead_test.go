package snapshot

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"testing"
	"testing/iotest"
)

// TestReadAhead: past aheadAfter the bytes come through the goroutine in
// order and whole, and the source's error after them.
func TestReadAhead(t *testing.T) {
	data := make([]byte, aheadAfter+3*aheadBuf+12345)
	rand.NewChaCha8([32]byte{1}).Read(data)
	bad := errors.New("disk on fire")
	src := io.MultiReader(iotest.HalfReader(bytes.NewReader(data)), iotest.ErrReader(bad))
	r := &readAhead{src: src}
	defer r.close()
	var got []byte
	buf := make([]byte, 7777)
	var err error
	for err == nil {
		var n int
		n, err = r.Read(buf)
		got = append(got, buf[:n]...)
	}
	if r.full == nil {
		t.Fatal("the goroutine never started")
	}
	if !errors.Is(err, bad) {
		t.Errorf("error %v, want the source's", err)
	}
	if !bytes.Equal(got, data) {
		t.Errorf("read %d bytes, want the %d written, in order", len(got), len(data))
	}
	if _, err := r.Read(buf); !errors.Is(err, bad) {
		t.Errorf("then %v, want the same error again", err)
	}
}
