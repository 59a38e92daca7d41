package chrometrace

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"github.com/bytedance/sonic"
	"github.com/bytedance/sonic/decoder"
)

// ErrNotTrace means the input is JSON but not a Chrome trace.
var ErrNotTrace = errors.New("not a Chrome trace")

// ReadOptions tune Read. The zero value is ready to use.
type ReadOptions struct {
	// Workers decoding batches in parallel; 0 means GOMAXPROCS (at most 4).
	Workers int
	// Progress, when set, is called now and then from the reading goroutine.
	Progress func(eventsRead int64)
}

// rawEvent is what sonic decodes one trace event into. Strings reference the
// batch's bytes (no copy) until the merger interns them.
type rawEvent struct {
	Ph   string      `json:"ph"`
	Cat  string      `json:"cat"`
	Name string      `json:"name"`
	Pid  rawJSON     `json:"pid"`
	Tid  rawJSON     `json:"tid"`
	Ts   json.Number `json:"ts"`
	Dur  json.Number `json:"dur"`
	ID   rawJSON     `json:"id"`
	Args rawArgs     `json:"args"`
}

// rawJSON is the JSON text of a value, like json.RawMessage but pointing
// into the batch's bytes instead of a copy: sonic hands UnmarshalJSON a
// view of its input, and copying it cost an allocation for every pid and
// tid of every event. Valid until the batch is reused; never appended to.
type rawJSON []byte

func (r *rawJSON) UnmarshalJSON(b []byte) error {
	*r = b
	return nil
}

type rawArgs struct {
	Bytes          int64       `json:"Bytes"`
	Addr           uint64      `json:"Addr"`
	TotalAllocated int64       `json:"Total Allocated"`
	TotalReserved  int64       `json:"Total Reserved"`
	DeviceType     int64       `json:"Device Type"`
	DeviceID       int64       `json:"Device Id"`
	ExternalID     int64       `json:"External id"`
	SeqNr          json.Number `json:"Sequence number"`
	FwdThread      json.Number `json:"Fwd thread id"`
	InputDims      rawJSON     `json:"Input Dims"`
	CallStack      string      `json:"Call stack"`
	PythonID       json.Number `json:"Python id"`
	PythonParentID json.Number `json:"Python parent id"`
	MemBytes       int64       `json:"bytes"`
	Device         int64       `json:"device"`
	Stream         int64       `json:"stream"`
	MetaName       string      `json:"name"`
}

// sonicAPI decodes without copying strings: the merger copies the few
// distinct ones when it interns them.
var sonicAPI = sonic.Config{CopyString: false, CaseSensitive: true, NoValidateJSONSkip: true}.Froze()

// batch is a run of whole events, written as one JSON array so that sonic
// decodes thousands of events per call.
type batch struct {
	seq    int
	data   []byte
	starts []int32 // offset of each element in data
	offset int64   // input offset of the first element
	first  int64   // index of the first event in the trace
	events []rawEvent
	err    error
	warn   string
}

const batchBytes = 1 << 20

// Read parses a whole Kineto Chrome trace from r, streaming: memory use is
// the compact model plus a few MB of batches, whatever the input size. A
// trace cut off mid-write yields what was read and sets Trace.Truncated.
func Read(r io.Reader, opts ReadOptions) (*Trace, error) {
	workers := opts.Workers
	if workers <= 0 {
		workers = min(runtime.GOMAXPROCS(0), 4)
	}
	b := newBuilder()
	sp := newSplitter(r)

	c, err := sp.peekByte()
	if err != nil {
		if err == errIncomplete {
			return nil, ErrEmpty
		}
		return nil, err
	}
	switch c {
	case '{':
		sp.pos++
		err = readObject(sp, b, workers, opts)
	case '[':
		sp.pos++
		b.t.Meta.Legacy = true
		err = readEvents(sp, b, workers, opts)
		if err == nil && b.t.Events == 0 {
			return nil, fmt.Errorf("%w: an empty JSON array", ErrNotTrace)
		}
	default:
		return nil, fmt.Errorf("not JSON (starts with %q)", c)
	}
	if err != nil {
		return nil, err
	}
	b.finish()
	return b.t, nil
}

func readObject(sp *splitter, b *builder, workers int, opts ReadOptions) error {
	sawEvents := false
	meta := map[string][]byte{}
	for first := true; ; first = false {
		c, err := sp.peekByte()
		if err != nil {
			if err == errIncomplete && sawEvents {
				b.truncated(sp.offset(), "the closing '}' of the trace object")
				break
			}
			if err == errIncomplete {
				if !first {
					return b.cutBeforeEvents(sp)
				}
				return fmt.Errorf("%w: unexpected end of input", ErrNotTrace)
			}
			return err
		}
		if c == '}' {
			sp.pos++
			break
		}
		if !first {
			if c != ',' {
				return sp.errorf("expected ',' or '}' after a top-level value, found %q", c)
			}
			sp.pos++
		}
		kb, err := sp.value()
		if err != nil {
			if err == errIncomplete {
				return b.cutBeforeEvents(sp)
			}
			return err
		}
		if len(kb) < 2 || kb[0] != '"' {
			return sp.errorf("expected a key string")
		}
		key := string(kb[1 : len(kb)-1])
		if err := sp.expect(':'); err != nil {
			if err == errIncomplete {
				return b.cutBeforeEvents(sp)
			}
			return err
		}
		if key == "traceEvents" {
			if err := sp.expect('['); err != nil {
				if err == errIncomplete {
					return b.cutBeforeEvents(sp)
				}
				return fmt.Errorf("%w: traceEvents is not an array", ErrNotTrace)
			}
			sawEvents = true
			if err := readEvents(sp, b, workers, opts); err != nil {
				return err
			}
			if b.t.Truncated != nil {
				break
			}
			continue
		}
		v, err := sp.value()
		if err != nil {
			if err == errIncomplete {
				if sawEvents {
					b.truncated(sp.offset(), "the top-level fields after traceEvents")
					break
				}
				return b.cutBeforeEvents(sp)
			}
			return err
		}
		meta[key] = append([]byte(nil), v...)
	}
	if !sawEvents {
		return fmt.Errorf("%w: no traceEvents array", ErrNotTrace)
	}
	return b.setMeta(meta)
}

// readEvents streams the elements of the traceEvents array (or a legacy
// bare array) through the decoding workers into the builder.
func readEvents(sp *splitter, b *builder, workers int, opts ReadOptions) error {
	jobs := make(chan *batch, workers)
	results := make(chan *batch, workers)
	free := make(chan *batch, 2*workers+2)
	for i := 0; i < 2*workers+2; i++ {
		free <- &batch{}
	}
	var wg sync.WaitGroup
	for i := 0; i < workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for bt := range jobs {
				decodeBatch(bt)
				results <- bt
			}
		}()
	}

	// The splitter runs on its own goroutine; this one merges in order.
	type splitEnd struct {
		err       error
		truncated bool
		offset    int64
	}
	endc := make(chan splitEnd, 1)
	stop := make(chan struct{})
	go func() {
		defer close(jobs)
		seq := 0
		var events int64
		cur := <-free
		cur.reset(seq, events, sp.offset())
		send := func() bool {
			cur.data = append(cur.data, ']')
			select {
			case jobs <- cur:
			case <-stop:
				return false
			}
			events += int64(len(cur.starts))
			seq++
			select {
			case cur = <-free:
			case <-stop:
				return false
			}
			cur.reset(seq, events, sp.offset())
			return true
		}
		for first := true; ; first = false {
			elem, done, err := sp.nextElement(first)
			if err != nil || done {
				if len(cur.starts) > 0 {
					if !send() {
						return
					}
				}
				if err == errIncomplete {
					endc <- splitEnd{truncated: true, offset: sp.offset()}
				} else {
					endc <- splitEnd{err: err, offset: sp.offset()}
				}
				return
			}
			if len(elem) == 0 || elem[0] != '{' {
				if len(cur.starts) > 0 && !send() {
					return
				}
				endc <- splitEnd{err: fmt.Errorf("%w: event %d at byte %d is not an object", ErrNotTrace, events+int64(len(cur.starts)), sp.offset()-int64(len(elem)))}
				return
			}
			if len(cur.starts) > 0 {
				cur.data = append(cur.data, ',')
			}
			cur.starts = append(cur.starts, int32(len(cur.data)))
			cur.data = append(cur.data, elem...)
			if len(cur.data) >= batchBytes {
				if !send() {
					return
				}
			}
		}
	}()

	// Merge batches in sequence order.
	pending := map[int]*batch{}
	next := 0
	var firstErr error
	for bt := range resultsUntilDone(results, &wg) {
		pending[bt.seq] = bt
		for {
			p, ok := pending[next]
			if !ok {
				break
			}
			delete(pending, next)
			next++
			if firstErr == nil {
				if p.err != nil {
					firstErr = p.err
					close(stop)
				} else {
					if p.warn != "" {
						b.warnOnce(p.warn)
					}
					for i := range p.events {
						if err := b.add(&p.events[i]); err != nil {
							firstErr = fmt.Errorf("event %d: %w", p.first+int64(i), err)
							close(stop)
							break
						}
					}
					if opts.Progress != nil {
						opts.Progress(b.t.Events)
					}
				}
			}
			clear(p.events)
			p.events = p.events[:0]
			select {
			case free <- p:
			default:
			}
		}
	}
	if firstErr != nil {
		return firstErr
	}
	end := <-endc
	if end.err != nil {
		if errors.Is(end.err, ErrGzipTruncated) {
			b.truncated(end.offset, "the rest of the file (the gzip stream ends early)")
			return nil
		}
		return end.err
	}
	if end.truncated {
		b.truncated(end.offset, "the end of the traceEvents array")
	}
	return nil
}

// resultsUntilDone closes results once every worker has finished.
func resultsUntilDone(results chan *batch, wg *sync.WaitGroup) <-chan *batch {
	go func() {
		wg.Wait()
		close(results)
	}()
	return results
}

func (bt *batch) reset(seq int, first int64, offset int64) {
	bt.seq = seq
	bt.first = first
	bt.offset = offset
	bt.data = append(bt.data[:0], '[')
	bt.starts = bt.starts[:0]
	bt.err = nil
	bt.warn = ""
}

func unsafeString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

func decodeBatch(bt *batch) {
	err := sonicAPI.UnmarshalFromString(unsafeString(bt.data), &bt.events)
	if err == nil {
		return
	}
	var mismatch *decoder.MismatchTypeError
	if errors.As(err, &mismatch) {
		// sonic decodes the rest and reports the first field of an
		// unexpected type; the event keeps its other fields.
		bt.warn = "some event fields had an unexpected type and were ignored"
		return
	}
	// Find the bad element to say where it is.
	bt.events = bt.events[:0]
	for i, s := range bt.starts {
		end := len(bt.data) - 1
		if i+1 < len(bt.starts) {
			end = int(bt.starts[i+1]) - 1
		}
		var ev rawEvent
		if e := sonicAPI.UnmarshalFromString(unsafeString(bt.data[s:end]), &ev); e != nil && !errors.As(e, &mismatch) {
			bt.err = &SyntaxError{Offset: bt.offset + int64(s) - 1, Msg: fmt.Sprintf("event %d: %s", bt.first+int64(i), firstLine(e.Error()))}
			return
		}
	}
	bt.err = &SyntaxError{Offset: bt.offset, Msg: firstLine(err.Error())}
}

// firstLine keeps the first line of a sonic error, which otherwise quotes
// a multi-line excerpt of the input.
func firstLine(s string) string {
	s = strings.TrimPrefix(s, `"`)
	if i := strings.Index(s, `\n`); i >= 0 {
		s = s[:i]
	}
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return strings.TrimSpace(s)
}

// numberOr parses an optional integer argument.
func numberOr(n json.Number, def int64) int64 {
	if n == "" {
		return def
	}
	v, err := strconv.ParseInt(string(n), 10, 64)
	if err != nil {
		f, ferr := strconv.ParseFloat(string(n), 64)
		if ferr != nil {
			return def
		}
		return int64(f)
	}
	return v
}
