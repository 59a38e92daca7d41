package readahead

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"
)

// TestReadAhead: past After the bytes come through the goroutine in
// order and whole, and the source's error after them.
func TestReadAhead(t *testing.T) {
	data := make([]byte, 16<<20+3*bufSize+12345)
	rand.NewChaCha8([32]byte{1}).Read(data)
	bad := errors.New("disk on fire")
	src := io.MultiReader(iotest.HalfReader(bytes.NewReader(data)), iotest.ErrReader(bad))
	r := New(src, 16<<20)
	defer r.Close()
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

// TestDirect: before the goroutine starts, Direct hands over the source
// and the goroutine never starts; after, Direct is the reader itself, so
// no byte it holds is lost.
func TestDirect(t *testing.T) {
	data := make([]byte, 3*bufSize)
	rand.NewChaCha8([32]byte{2}).Read(data)

	r := New(bytes.NewReader(data), 1<<10)
	head := make([]byte, 100)
	if _, err := io.ReadFull(r, head); err != nil {
		t.Fatal(err)
	}
	d := r.Direct()
	rest, err := io.ReadAll(d)
	if err != nil {
		t.Fatal(err)
	}
	if r.Started() {
		t.Error("the goroutine started after Direct")
	}
	if got := append(head, rest...); !bytes.Equal(got, data) {
		t.Errorf("head and the direct rest: %d bytes, want the %d written", len(got), len(data))
	}
	if _, isSrc := d.(*bytes.Reader); !isSrc {
		t.Errorf("Direct before the start gave %T, want the source", d)
	}

	r = New(bytes.NewReader(data), 1<<10)
	defer r.Close()
	head = make([]byte, 2<<10)
	if _, err := io.ReadFull(r, head[:1<<10]); err != nil { // passes through
		t.Fatal(err)
	}
	if r.Started() {
		t.Fatal("the goroutine started within After")
	}
	if _, err := io.ReadFull(r, head[1<<10:]); err != nil { // starts it
		t.Fatal(err)
	}
	if !r.Started() {
		t.Fatal("past After, the goroutine did not start")
	}
	if d := r.Direct(); d != io.Reader(r) {
		t.Errorf("Direct after the start gave %T, want the reader", d)
	}
	rest, err = io.ReadAll(r.Direct())
	if err != nil {
		t.Fatal(err)
	}
	if got := append(head, rest...); !bytes.Equal(got, data) {
		t.Errorf("read %d bytes, want the %d written, in order", len(got), len(data))
	}
}

// blockingReader blocks each Read until release is closed, counting
// the reads begun; the first says so on inside.
type blockingReader struct {
	release chan struct{}
	inside  chan struct{}
	reads   atomic.Int32
}

func (b *blockingReader) Read(p []byte) (int, error) {
	if b.reads.Add(1) == 1 {
		b.inside <- struct{}{}
	}
	<-b.release
	return len(p), nil
}

// TestCloseStops: Close returns at once, even while the goroutine is
// blocked in the source (a silent pipe must not hang the caller), and
// once that read returns the goroutine reads the source no more.
func TestCloseStops(t *testing.T) {
	src := &blockingReader{release: make(chan struct{}), inside: make(chan struct{}, 1)}
	r := New(src, 0)
	go r.Read(make([]byte, 1)) // starts the goroutine, which blocks in src
	<-src.inside
	closed := make(chan struct{})
	go func() {
		r.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close waited for the read in progress")
	}
	close(src.release)
	time.Sleep(50 * time.Millisecond)
	if n := src.reads.Load(); n != 1 {
		t.Errorf("the source was read %d times; after Close, only the read in progress should finish", n)
	}
}
