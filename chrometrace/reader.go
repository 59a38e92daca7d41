package chrometrace

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"github.com/bytedance/sonic"
	"github.com/bytedance/sonic/decoder"
)

// maxWorkers caps the decoding workers of one Read. Each holds a batch and
// its records, so more cost memory; measured on the 1 GB trace (1010 MiB)
// on 16 cores, ops then analyze, wall and peak RSS, 3 runs each:
//
//	 4 workers  0.61-0.78 s  0.78-0.99 s  133-139 MiB  189-190 MiB
//	 8 workers  0.46-0.51 s  0.58-0.64 s  138-150 MiB  195-197 MiB
//	12 workers  0.36-0.41 s  0.50-0.56 s  156-158 MiB  200-202 MiB (20% of the file)
//	16 workers  0.36-0.38 s  0.49-0.55 s  169-172 MiB  218 MiB
//
// 8 keeps analyze's peak clear of a fifth of the file. A gzipped trace
// waits on its one inflater whatever the count.
const maxWorkers = 8

// ErrNotTrace means the input is JSON but not a Chrome trace.
var ErrNotTrace = errors.New("not a Chrome trace")

// ReadOptions tune Read. The zero value is ready to use.
type ReadOptions struct {
	// Workers decoding batches in parallel; 0 means GOMAXPROCS, at most
	// maxWorkers.
	Workers int
	// Progress, when set, is called now and then from the reading goroutine.
	Progress func(eventsRead int64)
	// Limits cap what the trace may make Read build (ValueBytes, Events,
	// MemoryEvents; zero fields are the defaults). Past one Read fails with
	// a *LimitError or a *CountLimitError.
	Limits Limits
	// SkipPyFrames leaves Trace.PyFrames empty and SkipFlows Trace.Flows:
	// those events are still read, checked and counted, but not kept. For
	// commands that never look at them (ops), a trace recorded with
	// with_stack then takes a third less memory.
	SkipPyFrames, SkipFlows bool
}

// skipSet is what ReadOptions says not to keep.
type skipSet struct{ py, flows bool }

func (o *ReadOptions) skip() skipSet { return skipSet{py: o.SkipPyFrames, flows: o.SkipFlows} }

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
	// tsNs and durNs are Ts and Dur in nanoseconds, read by fastDecode
	// while it checks them, where tsFast and durFast say so: what
	// parseMicros makes of the text, without reading it again.
	tsNs, durNs     int64
	tsFast, durFast bool
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
	Bytes int64 `json:"Bytes"`
	// Addr and the totals are kept as text: torch before 1.10 wrote
	// [memory] events without them, and an absent figure must stay
	// absent, not read as 0 (see rawInt).
	Addr           rawJSON `json:"Addr"`
	TotalAllocated rawJSON `json:"Total Allocated"`
	TotalReserved  rawJSON `json:"Total Reserved"`
	DeviceType     int64   `json:"Device Type"`
	DeviceID       int64   `json:"Device Id"`
	// OptDeviceType and OptDeviceID are another build's spelling of the
	// two ("device_option Type", "device_option Id"), read when the usual
	// keys are absent.
	OptDeviceType rawJSON `json:"device_option Type"`
	OptDeviceID   rawJSON `json:"device_option Id"`
	ExternalID    int64   `json:"External id"`
	// externalIDOld is torch 1.8/1.9's spelling on GPU events.
	ExternalIDOld  int64       `json:"external id"`
	SeqNr          json.Number `json:"Sequence number"`
	FwdThread      json.Number `json:"Fwd thread id"`
	InputDims      rawJSON     `json:"Input Dims"`
	CallStack      string      `json:"Call stack"`
	PythonID       json.Number `json:"Python id"`
	PythonParentID json.Number `json:"Python parent id"`
	MemBytes       int64       `json:"bytes"`
	// CopySize is ROCm's "size" of a HIP copy call (a string there): its
	// GPU-side gpu_memcpy carries no "bytes".
	CopySize rawJSON `json:"size"`
	Device   int64   `json:"device"`
	// Stream is a number in CUDA traces but a string ("0x0") on ROCm's
	// HIP runtime events: kept as text, read when it holds a number.
	Stream   rawJSON `json:"stream"`
	MetaName string  `json:"name"`
}

// sonicAPI decodes without copying strings: the merger copies the few
// distinct ones when it interns them.
var sonicAPI = sonic.Config{CopyString: false, CaseSensitive: true, NoValidateJSONSkip: true}.Froze()

// sonicValidating also validates the values it skips (unknown fields):
// a speculative batch is only trusted if all of it is valid JSON, which
// the exact path's splitter would have accepted too (its bracket check
// is what sonicAPI's skipping leaves out).
var sonicValidating = sonic.Config{CopyString: false, CaseSensitive: true}.Froze()

// batch is a run of whole events, written as one JSON array so that sonic
// decodes thousands of events per call.
type batch struct {
	seq    int
	data   []byte
	starts []int32 // offset of each element in data
	// inputOffsets is each element's offset in the input, for errors:
	// white space between elements is not copied into data.
	inputOffsets []int64
	offset       int64 // input offset of the first element
	first        int64 // index of the first event in the trace
	events       []rawEvent
	err          error
	warn         string
	// Speculative batches are raw input cut at a guessed element
	// boundary (see readEventsSpeculative); sep holds the input bytes
	// between the last element and the next batch, which data no longer
	// has, and failed says the guess could not be confirmed.
	speculative bool
	sep         []byte
	failed      bool
	noPh        bool // the fast decoder met an event without "ph" (speculative batches)
	// local holds the batch's events converted on the worker, with
	// batch-local string and thread ids; the merger only renumbers them.
	local *builder
	// scratch is fastDecode's event, reused for every event of the batch.
	scratch rawEvent
	// skip is what the batch's builder does not keep (ReadOptions).
	skip skipSet
}

// convert turns the decoded events into local records on the worker, while
// they are in its cache, and drops the decoded events.
func (bt *batch) convert() {
	if bt.local == nil {
		bt.local = newLocalBuilder(bt.skip)
	}
	bt.local.reset()
	for i := range bt.events {
		bt.local.add(&bt.events[i])
	}
	clear(bt.events)
	bt.events = bt.events[:0]
}

// batchBytes is the size of an exact-path batch (a variable for tests);
// batchEvents caps its events (a real 1 MiB holds 3,000 to 5,000), so
// that a batch of tiny events ("{}") does not decode into a million
// structs at once.
var batchBytes = 1 << 20

const batchEvents = 1 << 14

// Read parses a whole Kineto Chrome trace from r, streaming: memory use is
// the compact model plus a few MB of batches, whatever the input size. A
// trace cut off mid-write yields what was read and sets Trace.Truncated.
// When the model passes 16 MB, Read forces a few garbage collections at
// the end (runtime/debug.FreeOSMemory) to keep the process's peak memory
// near the model's size.
func Read(r io.Reader, opts ReadOptions) (*Trace, error) {
	workers := opts.Workers
	if workers <= 0 {
		workers = min(runtime.GOMAXPROCS(0), maxWorkers)
	}
	b := newBuilder()
	b.limits = opts.Limits.WithDefaults()
	if in, ok := r.(*Input); ok {
		b.sizeHint = in.sizeHint
		// The batches are the buffer: reading into them straight from
		// the decompressor (or the file) saves copying every byte
		// through the Input's buffer first.
		r = in.Unbuffered()
	}
	sp := newSplitter(r, b.limits.ValueBytes)

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

// metaKeys are the top-level fields setMeta reads.
var metaKeys = map[string]bool{
	"schemaVersion": true, "trace_id": true, "traceName": true, "displayTimeUnit": true,
	"baseTimeNanoseconds": true, "profile_memory": true, "with_stack": true, "record_shapes": true,
	"cuda_driver_version": true, "cuda_runtime_version": true, "cupti_version": true,
	"deviceProperties": true, "distributedInfo": true,
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
		if metaKeys[key] {
			// Only the fields setMeta reads are kept: a file of many
			// large unknown fields costs no memory.
			meta[key] = append([]byte(nil), v...)
		}
	}
	if !sawEvents {
		return fmt.Errorf("%w: no traceEvents array", ErrNotTrace)
	}
	return b.setMeta(meta)
}

// readEvents streams the elements of the traceEvents array (or a legacy
// bare array) through the decoding workers into the builder: as many
// whole batches as possible the fast way, the rest (at least the array's
// end, and everything from an element the fast way cannot vouch for) with
// the exact splitter.
func readEvents(sp *splitter, b *builder, workers int, opts ReadOptions) error {
	before := b.t.Events
	if err := readEventsSpeculative(sp, b, workers, opts); err != nil {
		return err
	}
	return readEventsExact(sp, b, workers, opts, b.t.Events-before)
}

// readEventsExact cuts elements with the splitter, which walks every byte
// on one goroutine. firstEvent is the index in the array of the element
// at the splitter's position, for messages.
func readEventsExact(sp *splitter, b *builder, workers int, opts ReadOptions, firstEvent int64) error {
	jobs, results, free := startWorkers(workers, opts.skip(), func(bt *batch) {
		if bt.speculative {
			decodeSpeculative(bt)
		} else {
			decodeBatch(bt)
		}
	})

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
		events := firstEvent
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
			cur.inputOffsets = append(cur.inputOffsets, sp.offset()-int64(len(elem)))
			cur.data = append(cur.data, elem...)
			if len(cur.data) >= batchBytes || len(cur.starts) >= batchEvents {
				if !send() {
					return
				}
			}
		}
	}()

	// Merge batches in sequence order.
	var firstErr error
	inSequence(results, func(p *batch) {
		if firstErr == nil {
			if p.err != nil {
				firstErr = p.err
				close(stop)
			} else {
				if p.warn != "" {
					b.warnOnce(p.warn)
				}
				b.merge(p.local)
				b.reserve(p.offset + int64(len(p.data)))
				if err := b.overCount(); err != nil {
					firstErr = err
					close(stop)
				}
				if opts.Progress != nil {
					opts.Progress(b.t.Events)
				}
			}
		}
		clear(p.events)
		p.events = p.events[:0]
		recycle(free, p)
	})
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

// inSequence hands the batches coming out of the workers to merge in
// their input order (seq), whatever order the workers finish them in.
func inSequence(results <-chan *batch, merge func(*batch)) {
	pending := map[int]*batch{}
	next := 0
	for bt := range results {
		pending[bt.seq] = bt
		for p, ok := pending[next]; ok; p, ok = pending[next] {
			delete(pending, next)
			next++
			merge(p)
		}
	}
}

// recycle returns a merged batch to the free list, dropping it if full.
// A buffer that grew for an outsized element is dropped rather than kept.
func recycle(free chan *batch, p *batch) {
	if cap(p.data) > 4*max(batchBytes, specChunkBytes) {
		p.data = nil
	}
	select {
	case free <- p:
	default:
	}
}

// startWorkers starts the decoding workers: they take batches from jobs,
// decode them and pass them on to results, which closes once jobs is
// closed and every worker is done. free holds the recycled batches.
func startWorkers(workers int, skip skipSet, decode func(*batch)) (jobs chan *batch, results <-chan *batch, free chan *batch) {
	jobs = make(chan *batch, workers)
	out := make(chan *batch, workers)
	free = make(chan *batch, 2*workers+2)
	for i := 0; i < 2*workers+2; i++ {
		free <- &batch{skip: skip}
	}
	var wg sync.WaitGroup
	for i := 0; i < workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for bt := range jobs {
				decode(bt)
				out <- bt
			}
		}()
	}
	go func() {
		wg.Wait()
		close(out)
	}()
	return jobs, out, free
}

func (bt *batch) reset(seq int, first int64, offset int64) {
	bt.seq = seq
	bt.first = first
	bt.offset = offset
	bt.data = append(bt.data[:0], '[')
	bt.starts = bt.starts[:0]
	bt.inputOffsets = bt.inputOffsets[:0]
	bt.err = nil
	bt.warn = ""
	bt.speculative = false
	bt.failed = false
}

func unsafeString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// decodeFast converts the batch with fastDecode straight into bt.local;
// if fastDecode gives up, bt.local is left empty. Speculative batches
// also give up on an event without a "ph" (see decodeSpeculative).
func decodeFast(bt *batch) bool {
	if !useFastDecode {
		return false
	}
	if bt.local == nil {
		bt.local = newLocalBuilder(bt.skip)
	}
	l := bt.local
	l.reset()
	spec := bt.speculative
	if fastDecode(bt.data, &bt.scratch, func(ev *rawEvent) bool {
		if spec && ev.Ph == "" {
			bt.noPh = true
			return false
		}
		l.add(ev)
		return true
	}) {
		return true
	}
	l.reset()
	return false
}

// useFastDecode off decodes every batch with sonic, for tests that compare.
var useFastDecode = true

func decodeBatch(bt *batch) {
	if decodeFast(bt) {
		return
	}
	err := sonicAPI.UnmarshalFromString(unsafeString(bt.data), &bt.events)
	if err == nil {
		bt.convert()
		return
	}
	var mismatch *decoder.MismatchTypeError
	if errors.As(err, &mismatch) {
		// sonic decodes the rest and reports the first field of an
		// unexpected type; the event keeps its other fields.
		bt.warn = "some event fields had an unexpected type and were ignored"
		bt.convert()
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
			bt.err = &SyntaxError{Offset: bt.inputOffsets[i], Msg: fmt.Sprintf("event %d: %s", bt.first+int64(i), firstLine(e.Error()))}
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
// rawInt reads the text of a JSON value as an integer: a number, or a
// string holding a decimal or 0x-hex integer (ROCm writes "stream": "0x0").
// ok is false when the value is absent, null or holds no integer.
func rawInt(r rawJSON) (v int64, ok bool) {
	if len(r) == 0 {
		return 0, false
	}
	s := unsafeString(r)
	if s[0] == '"' {
		if len(s) < 2 || s[len(s)-1] != '"' {
			return 0, false
		}
		s = s[1 : len(s)-1]
		if len(s) > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') {
			u, err := strconv.ParseUint(s[2:], 16, 64)
			return int64(u), err == nil
		}
	}
	if v, ok := plainInt(s); ok {
		return v, true
	}
	if v, err := strconv.ParseInt(s, 10, 64); err == nil {
		return v, true
	}
	return 0, false
}

// plainInt reads an optional '-' and at most 18 decimal digits, which is
// what strconv.ParseInt makes of them without its generality (most of the
// builder's integers are these); ok is false for anything else.
func plainInt(s string) (int64, bool) {
	d := s
	if len(d) > 0 && d[0] == '-' {
		d = d[1:]
	}
	if len(d) == 0 || len(d) > 18 {
		return 0, false
	}
	var v int64
	for i := 0; i < len(d); i++ {
		c := d[i] - '0'
		if c > 9 {
			return 0, false
		}
		v = v*10 + int64(c)
	}
	if len(d) < len(s) {
		v = -v
	}
	return v, true
}

// rawUint is rawInt for addresses, which use all 64 bits.
func rawUint(r rawJSON) (v uint64, ok bool) {
	if len(r) == 0 || r[0] == '"' {
		i, ok := rawInt(r)
		return uint64(i), ok
	}
	if v, ok := plainInt(unsafeString(r)); ok && v >= 0 && r[0] != '-' {
		return uint64(v), true
	}
	v, err := strconv.ParseUint(unsafeString(r), 10, 64)
	return v, err == nil
}

// int32Or is v when it fits an int32, else def.
func int32Or(v int64, def int32) int32 {
	if v != int64(int32(v)) {
		return def
	}
	return int32(v)
}

func numberOr(n json.Number, def int64) int64 {
	if n == "" {
		return def
	}
	if v, ok := plainInt(string(n)); ok {
		return v
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

// specChunkBytes is the size of a speculative batch; maxSpecChunkBytes is
// how far a batch grows to find a boundary before the exact splitter takes
// over. Variables so that tests can make them tiny.
var (
	specChunkBytes    = 1 << 20
	maxSpecChunkBytes = 16 << 20
	// speculate off reads everything with the exact splitter, for tests
	// that compare the two.
	speculate = true
)

// specEnd is where the speculative reader stopped: the input bytes it read
// but did not hand out as batches, from input offset restOffset, and how
// the input ended if it did.
type specEnd struct {
	rest       []byte
	restOffset int64
	eof        bool
	err        error
}

// readEventsSpeculative decodes the array's elements without walking them
// on one goroutine, which capped the reader at the splitter's speed. The
// input is read straight into ~1 MB batches, each cut after the last
// "}" , "{" in it and decoded by sonic as "[" + batch + "]" on the
// workers.
//
// The cut is a guess (those bytes may sit inside a string or deeper in an
// event), but sonic confirms it: if the batch starts at a true element
// boundary and decodes as a complete array, the parse ended outside any
// string at the array's own depth, so the cut is a true boundary too, and
// by induction so is every batch start. A batch that fails (a wrong guess,
// malformed JSON, a field of an unexpected type, or an element that is
// not an object with a "ph") is not used: from its first byte the exact
// splitter reads again, so errors, warnings and offsets are those of the
// exact path. The array's last batch is always left to the exact path,
// which finds the closing bracket.
//
// On return the splitter is positioned at the first byte not consumed,
// the start of an element (or the array's first byte if none was).
func readEventsSpeculative(sp *splitter, b *builder, workers int, opts ReadOptions) error {
	if !speculate {
		return nil
	}
	jobs, results, free := startWorkers(workers, opts.skip(), decodeSpeculative)

	stop := make(chan struct{})
	endc := make(chan specEnd, 1)
	go func() {
		defer close(jobs)
		endc <- cutSpeculative(sp, jobs, free, stop)
	}()

	failedAt := -1
	var kept []*batch // from the first failed batch on, in order
	var firstErr error
	stopOnce := func() {
		if failedAt < 0 && firstErr == nil {
			close(stop)
		}
	}
	inSequence(results, func(p *batch) {
		if failedAt < 0 && firstErr == nil && p.failed {
			stopOnce()
			failedAt = p.seq
		}
		if failedAt >= 0 {
			kept = append(kept, p)
			return
		}
		if firstErr == nil {
			b.t.speculativeBatches++
			b.merge(p.local)
			b.reserve(p.offset + int64(len(p.data)))
			if err := b.overCount(); err != nil {
				stopOnce()
				firstErr = err
			}
			if opts.Progress != nil {
				opts.Progress(b.t.Events)
			}
		}
		recycle(free, p)
	})
	end := <-endc
	if firstErr != nil {
		return firstErr
	}

	// Hand the unconsumed input back to the splitter: the raw bytes of the
	// unused batches, what the reader held back, then the rest of the input.
	resume := end.restOffset
	var parts []io.Reader
	if len(kept) > 0 {
		resume = kept[0].offset
		for _, p := range kept {
			parts = append(parts, bytes.NewReader(p.data[1:len(p.data)-1]), bytes.NewReader(p.sep))
		}
	}
	parts = append(parts, bytes.NewReader(end.rest))
	switch {
	case end.err != nil:
		parts = append(parts, errReader{end.err})
	case !end.eof:
		parts = append(parts, sp.r)
	}
	sp.r = io.MultiReader(parts...)
	sp.base, sp.pos, sp.end = resume, 0, 0
	sp.eof, sp.rerr = false, nil
	return nil
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// cutSpeculative reads the input into batches cut at guessed element
// boundaries and sends them to jobs until the input ends, no boundary is
// found, or stop is closed.
func cutSpeculative(sp *splitter, jobs chan<- *batch, free <-chan *batch, stop <-chan struct{}) specEnd {
	carry := slices.Clone(sp.buf[sp.pos:sp.end])
	offset := sp.offset() // input offset of carry[0]
	eof, rerr := sp.eof, sp.rerr
	r := sp.r
	for seq := 0; ; seq++ {
		if (eof || rerr != nil) && len(carry) <= specChunkBytes {
			// The last batch is the exact splitter's: it finds the end.
			break
		}
		var bt *batch
		select {
		case bt = <-free:
		case <-stop:
			return specEnd{rest: carry, restOffset: offset, eof: eof, err: rerr}
		}
		bt.data = append(append(bt.data[:0], '['), carry...)
		var cut, next int
		for want := specChunkBytes; ; want *= 2 {
			for len(bt.data) <= want && !eof && rerr == nil {
				if cap(bt.data)-len(bt.data) < 4096 {
					bt.data = slices.Grow(bt.data, want+1-len(bt.data))
				}
				n, err := r.Read(bt.data[len(bt.data):cap(bt.data)])
				bt.data = bt.data[:len(bt.data)+n]
				if err == io.EOF {
					eof = true
				} else if err != nil {
					rerr = err
				}
			}
			var ok bool
			cut, next, ok = lastElementBoundary(bt.data[:min(len(bt.data), want+1)])
			if ok {
				break
			}
			if len(bt.data) <= want+1 && (eof || rerr != nil) || want >= maxSpecChunkBytes {
				// No boundary: the exact splitter takes what is left.
				return specEnd{rest: bt.data[1:], restOffset: offset, eof: eof, err: rerr}
			}
		}
		carry = append(carry[:0], bt.data[next:]...)
		bt.seq, bt.offset, bt.speculative, bt.failed = seq, offset, true, false
		bt.sep = append(bt.sep[:0], bt.data[cut:next]...)
		bt.data[cut] = ']'
		bt.data = bt.data[:cut+1]
		offset += int64(next - 1)
		select {
		case jobs <- bt:
		case <-stop:
			rest := append(append(bt.data[1:cut:cut], bt.sep...), carry...)
			return specEnd{rest: rest, restOffset: bt.offset, eof: eof, err: rerr}
		}
	}
	return specEnd{rest: carry, restOffset: offset, eof: eof, err: rerr}
}

// decodeSpeculative decodes a speculative batch, marking it failed unless
// it is a complete array of objects that all have a "ph".
func decodeSpeculative(bt *batch) {
	bt.noPh = false
	if decodeFast(bt) {
		if bt.local.t.Events == 0 {
			bt.failed = true
		}
		return
	}
	if bt.noPh {
		// The exact path decides about an event without "ph"; sonic would
		// only decode the whole chunk first (a chunk of "{}" is 350,000
		// events).
		bt.failed = true
		return
	}
	err := sonicValidating.UnmarshalFromString(unsafeString(bt.data), &bt.events)
	if err != nil || len(bt.events) == 0 {
		bt.failed = true
		return
	}
	for i := range bt.events {
		// A null element decodes to an empty event; the exact path
		// rejects it, so let that path see it.
		if bt.events[i].Ph == "" {
			bt.failed = true
			return
		}
	}
	bt.convert()
}
