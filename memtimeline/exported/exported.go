package exported

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"

	"github.com/torchmem/torchmem/chrometrace"
	"github.com/torchmem/torchmem/memtimeline"
)

// What torch's prof.export_memory_timeline writes (torch/profiler/_memory_profiler.py,
// checked against every real file in the shared traces, torch 2.11):
//
// Coalesced (".json", ".json.gz"): [times, sizes]. times[i] is int(t_ns/1000)
// in µs, computed with Python float division (so it is the correctly rounded
// quotient truncated, which differs from t_ns//1000 for ~15% of the real
// timestamps around 1.8e18 ns). sizes[i] has 9 numbers: index 0 is always 0
// and index k+1 is the running total of category k at the END of the group
// of events that share times[i]. The numbers are cumulative over time (a
// running sum of signed deltas), NOT stacked over categories: in 5 of the 6
// real files sizes[i][k] > sizes[i][k+1] for every point. torch's own HTML
// plot stacks them itself with np.cumsum(sizes, axis=1). Consecutive events
// are grouped only when their µs value is equal. Pre-existing tensors
// (t = -1) form their own first group, whose time is then replaced by the
// smallest positive µs time, so times[0] == times[1] when any existed.
//
// Raw (".raw.json.gz"): [[t_ns, action, signed_bytes, category], ...], one
// element per event in timeline order (sorted by time in every real file).
// action 1 PREEXISTING (t = -1), 2 CREATE, 3 INCREMENT_VERSION (written as two
// events: -bytes in the old version's category, +bytes in the new one's),
// 4 DESTROY (negative bytes). category is 0-based, 7 = Unknown.
//
// Replaying the raw events reproduces the coalesced file exactly once the
// ns timestamps are grouped by torch's µs rule (see CoalesceMicros and
// TestRawReplaysToCoalesced).

// Categories are export_memory_timeline's categories, in file order.
var Categories = []string{
	"PARAMETER", "OPTIMIZER_STATE", "INPUT", "TEMPORARY",
	"ACTIVATION", "GRADIENT", "AUTOGRAD_DETAIL", "Unknown",
}

// Format says which export_memory_timeline flavour a file was.
type Format int

const (
	// FormatCoalesced is [times_us, sizes] (".json", ".json.gz").
	FormatCoalesced Format = iota + 1
	// FormatRaw is the event list (".raw.json.gz").
	FormatRaw
)

func (f Format) String() string {
	switch f {
	case FormatCoalesced:
		return "coalesced [times, sizes]"
	case FormatRaw:
		return "raw event list"
	}
	return fmt.Sprintf("TimelineFormat(%d)", int(f))
}

// Timeline is memory per category over time for one device, as
// torch's memory profiler categorised it.
type Timeline struct {
	Format Format
	// Times are nanoseconds on the profiler's clock (the trace's clock).
	// From a coalesced file they are µs * 1000; from a raw file they keep
	// full ns resolution, one point per run of events with equal time.
	Times []int64
	// Categories names each row of Bytes (Categories).
	Categories []string
	// Bytes[k][i] is the memory held by category k right after the events
	// at Times[i] (per category, not stacked).
	Bytes [][]int64
	// HasPreexisting is true when point 0 is the state of tensors that
	// existed before profiling (raw PREEXISTING events); it is placed at the
	// first real event's time. Unknown (false) for coalesced files.
	HasPreexisting bool
}

// Len is the number of points.
func (tl *Timeline) Len() int { return len(tl.Times) }

// TotalAt is the sum over categories at point i.
func (tl *Timeline) TotalAt(i int) int64 {
	var sum int64
	for k := range tl.Bytes {
		sum = chrometrace.AddSat(sum, tl.Bytes[k][i])
	}
	return sum
}

// Total is the summed memory of all categories over time.
func (tl *Timeline) Total(name string) memtimeline.Series {
	s := memtimeline.Series{Name: name, T: append([]int64(nil), tl.Times...), V: make([]int64, len(tl.Times))}
	for i := range tl.Times {
		s.V[i] = tl.TotalAt(i)
	}
	return s
}

// CategorySeries returns one series per category that is non-zero at some
// point, in Categories order. They share T, so they can be stacked.
func (tl *Timeline) CategorySeries() []memtimeline.Series {
	var out []memtimeline.Series
	for k, row := range tl.Bytes {
		nonzero := false
		for _, v := range row {
			if v != 0 {
				nonzero = true
				break
			}
		}
		if !nonzero {
			continue
		}
		out = append(out, memtimeline.Series{Name: tl.Categories[k], T: tl.Times, V: row})
	}
	return out
}

// Peak returns the point with the largest total (the first one on ties).
// ok is false for an empty timeline.
func (tl *Timeline) Peak() (i int, bytes int64, ok bool) {
	if len(tl.Times) == 0 {
		return 0, 0, false
	}
	i, bytes = 0, tl.TotalAt(0)
	for j := 1; j < len(tl.Times); j++ {
		if v := tl.TotalAt(j); v > bytes {
			i, bytes = j, v
		}
	}
	return i, bytes, true
}

// SplitAt is torch's category split at ts (on the timeline's clock: a
// trace's ts plus its baseTimeNanoseconds), in torch's own category names
// and order (PARAMETER, ..., AUTOGRAD_DETAIL: torch's data keeps torch's
// names; memtimeline.TorchAsComposition maps them for a comparison); nil
// when ts is outside the timeline.
func (tl *Timeline) SplitAt(ts int64) []memtimeline.Share {
	i := -1
	for k, t := range tl.Times {
		if t <= ts {
			i = k
		}
	}
	if i < 0 || (tl.Len() > 0 && ts > tl.Times[tl.Len()-1]+int64(1e9)) {
		return nil
	}
	out := make([]memtimeline.Share, 0, len(tl.Categories))
	for k, name := range tl.Categories {
		out = append(out, memtimeline.Share{Name: name, Bytes: tl.Bytes[k][i]})
	}
	return out
}

// ReadFile reads a file written by prof.export_memory_timeline
// (coalesced .json/.json.gz or .raw.json.gz; the content decides, not the
// name; gzip is detected by its magic bytes).
func ReadFile(path string) (*Timeline, error) {
	in, err := chrometrace.Open(path)
	if err != nil {
		return nil, fmt.Errorf("memory timeline %s: %w", path, err)
	}
	defer in.Close()
	tl, err := Read(memtimeline.LimitInput(in, 0))
	if err != nil {
		return nil, fmt.Errorf("memory timeline %s: %w", path, err)
	}
	return tl, nil
}

// Read reads either export_memory_timeline format from r
// (already decompressed).
//
// Both start with "[[": the coalesced file's first element is the times
// array and its second element is an array of arrays (or empty), while a
// raw file's second element is an array of integers. An empty raw file is
// "[]" and an empty coalesced one "[[], []]".
func Read(r io.Reader) (*Timeline, error) { return ReadLimited(r, chrometrace.Limits{}) }

// ReadLimited is Read within lim (ValueBytes, Records; zero fields are
// the defaults).
func ReadLimited(r io.Reader, lim chrometrace.Limits) (*Timeline, error) {
	s := newIntJSONScanner(r)
	s.lim = lim.WithDefaults()
	c, err := s.peek()
	if err == errTimelineTruncated {
		return nil, errors.New("no JSON content")
	}
	if err != nil {
		return nil, err
	}
	if c == '<' {
		// export_memory_timeline("x.html") writes a matplotlib PNG in an
		// <img> tag: there are no numbers to read.
		return nil, errors.New("this is the HTML export of export_memory_timeline (a picture, no data): export to a .json, .json.gz or .raw.json.gz path instead")
	}
	if c != '[' {
		return nil, s.errorf(0, "not an export_memory_timeline file: expected a JSON array, found %s", describeByte(c))
	}
	s.next() //nolint:errcheck
	if c, err = s.peek(); err != nil {
		return nil, err
	}
	if c == ']' { // "[]": a raw timeline with no events
		s.next() //nolint:errcheck
		if err := s.expectEnd(); err != nil {
			return nil, err
		}
		return newRawBuilder().finish(), nil
	}
	if err := s.expect('['); err != nil {
		return nil, fmt.Errorf("not an export_memory_timeline file: %w", err)
	}
	first, err := s.readIntArrayBody(nil, s.lim.Records, memtimeline.RecordsError("timeline points", s.lim.Records))
	if err != nil {
		return nil, err
	}
	c, err = s.next()
	if err != nil {
		return nil, err
	}
	if c == ']' {
		// A single element: only a raw file with one event looks like this.
		if len(first) != 4 {
			return nil, s.errorf(-1, "a one-element top-level array must be one raw event [t, action, bytes, category], found %d numbers", len(first))
		}
		b := newRawBuilder()
		if err := b.add(first, 0); err != nil {
			return nil, err
		}
		if err := s.expectEnd(); err != nil {
			return nil, err
		}
		return b.finish(), nil
	}
	if c != ',' {
		return nil, s.errorf(-1, "expected ',' or ']', found %s", describeByte(c))
	}
	if err := s.expect('['); err != nil {
		return nil, err
	}
	if c, err = s.peek(); err != nil {
		return nil, err
	}
	if c == '[' || c == ']' {
		return parseCoalesced(s, first)
	}
	return parseRaw(s, first)
}

// parseCoalesced continues after "[times, [" and reads the sizes rows.
func parseCoalesced(s *intJSONScanner, timesUs []int64) (*Timeline, error) {
	n := len(timesUs)
	tl := &Timeline{
		Format:     FormatCoalesced,
		Times:      make([]int64, n),
		Categories: append([]string(nil), Categories...),
		Bytes:      make([][]int64, len(Categories)),
	}
	for i, us := range timesUs {
		if us > math.MaxInt64/1000 || us < math.MinInt64/1000 {
			return nil, fmt.Errorf("times[%d] = %d µs overflows nanoseconds", i, us)
		}
		tl.Times[i] = us * 1000
	}
	for k := range tl.Bytes {
		tl.Bytes[k] = make([]int64, 0, n)
	}
	row := make([]int64, 0, 9)
	i := 0
	c, err := s.next()
	if err != nil {
		return nil, err
	}
	if c != ']' {
		for {
			if c != '[' {
				return nil, s.errorf(-1, "sizes[%d]: expected '[', found %s", i, describeByte(c))
			}
			row, err = s.readIntArrayBody(row[:0], 9, nil)
			if err != nil {
				return nil, fmt.Errorf("sizes[%d]: %w", i, err)
			}
			if len(row) != 9 {
				return nil, fmt.Errorf("sizes[%d] has %d numbers, want 9 (an unused 0 and 8 categories)", i, len(row))
			}
			if row[0] != 0 {
				// torch never writes to index 0; anything else is not its file.
				return nil, fmt.Errorf("sizes[%d][0] = %d, want 0", i, row[0])
			}
			if i >= n {
				return nil, fmt.Errorf("more sizes rows than the %d times", n)
			}
			for k := range tl.Bytes {
				tl.Bytes[k] = append(tl.Bytes[k], row[k+1])
			}
			i++
			if c, err = s.next(); err != nil {
				return nil, err
			}
			if c == ']' {
				break
			}
			if c != ',' {
				return nil, s.errorf(-1, "expected ',' or ']' after sizes[%d], found %s", i-1, describeByte(c))
			}
			if c, err = s.next(); err != nil {
				return nil, err
			}
		}
	}
	if i != n {
		return nil, fmt.Errorf("%d times but %d sizes rows", n, i)
	}
	if err := s.expect(']'); err != nil {
		return nil, fmt.Errorf("after [times, sizes]: %w", err)
	}
	if err := s.expectEnd(); err != nil {
		return nil, err
	}
	return tl, nil
}

// parseRaw continues after "[event0, [" and replays every event.
func parseRaw(s *intJSONScanner, first []int64) (*Timeline, error) {
	b := newRawBuilder()
	if len(first) != 4 {
		return nil, fmt.Errorf("event 0 has %d numbers, want 4 [t_ns, action, bytes, category]", len(first))
	}
	if err := b.add(first, 0); err != nil {
		return nil, err
	}
	ev := make([]int64, 0, 4)
	var err error
	for idx := 1; ; idx++ {
		if idx >= s.lim.Records {
			return nil, memtimeline.RecordsError("timeline events", s.lim.Records)
		}
		ev, err = s.readIntArrayBody(ev[:0], 4, nil)
		if err != nil {
			return nil, fmt.Errorf("event %d: %w", idx, err)
		}
		if len(ev) != 4 {
			return nil, fmt.Errorf("event %d has %d numbers, want 4 [t_ns, action, bytes, category]", idx, len(ev))
		}
		if err := b.add(ev, idx); err != nil {
			return nil, err
		}
		c, err := s.next()
		if err != nil {
			return nil, err
		}
		if c == ']' {
			break
		}
		if c != ',' {
			return nil, s.errorf(-1, "expected ',' or ']' after event %d, found %s", idx, describeByte(c))
		}
		if err := s.expect('['); err != nil {
			return nil, fmt.Errorf("event %d: %w", idx+1, err)
		}
	}
	if err := s.expectEnd(); err != nil {
		return nil, err
	}
	return b.finish(), nil
}

// Raw actions (torch's _ACTION_TO_INDEX).
const (
	actionPreexisting      = 1
	actionCreate           = 2
	actionIncrementVersion = 3
	actionDestroy          = 4
)

// rawBuilder replays raw events the way torch's _coalesce_timeline does,
// but at ns resolution: one point per run of consecutive events with the
// same timestamp, holding the state after the run.
type rawBuilder struct {
	tl        *Timeline
	cur       [8]int64
	curT      int64
	open      bool // a group is in progress
	minPosT   int64
	havePosT  bool
	sawPreexT bool
}

func newRawBuilder() *rawBuilder {
	b := &rawBuilder{tl: &Timeline{
		Format:     FormatRaw,
		Categories: append([]string(nil), Categories...),
		Bytes:      make([][]int64, len(Categories)),
	}}
	return b
}

func (b *rawBuilder) add(ev []int64, idx int) error {
	t, action, delta, cat := ev[0], ev[1], ev[2], ev[3]
	if action < actionPreexisting || action > actionDestroy {
		return fmt.Errorf("event %d: unknown action %d (want 1 PREEXISTING .. 4 DESTROY)", idx, action)
	}
	if cat < 0 || cat >= int64(len(Categories)) {
		return fmt.Errorf("event %d: category %d out of range 0..%d", idx, cat, len(Categories)-1)
	}
	if t < 0 {
		t = -1 // torch maps every negative time to the first real time
		b.sawPreexT = true
	} else if t > 0 && (!b.havePosT || t < b.minPosT) {
		b.minPosT, b.havePosT = t, true
	}
	if b.open && t != b.curT {
		b.flush()
	}
	b.curT, b.open = t, true
	b.cur[cat] = chrometrace.AddSat(b.cur[cat], delta)
	return nil
}

func (b *rawBuilder) flush() {
	b.tl.Times = append(b.tl.Times, b.curT)
	for k := range b.tl.Bytes {
		b.tl.Bytes[k] = append(b.tl.Bytes[k], b.cur[k])
	}
}

func (b *rawBuilder) finish() *Timeline {
	if b.open {
		b.flush()
		b.open = false
	}
	tl := b.tl
	for k := range tl.Bytes {
		if tl.Bytes[k] == nil {
			tl.Bytes[k] = []int64{}
		}
	}
	if tl.Times == nil {
		tl.Times = []int64{}
	}
	tl.HasPreexisting = b.sawPreexT && len(tl.Times) > 0 && tl.Times[0] == -1
	if b.havePosT {
		for i, t := range tl.Times {
			if t < 0 {
				tl.Times[i] = b.minPosT
			}
		}
	}
	return tl
}

// CoalesceMicros groups points the way torch does before writing the
// coalesced file: consecutive points whose timestamps fall in the same µs
// (torch's int(t_ns / 1000) with float division) become one point holding
// the last state; the pre-existing point stays on its own. Applied to a
// timeline read from a .raw.json.gz file it yields exactly the timeline of
// the coalesced file of the same run. A coalesced timeline is returned as a
// copy.
func (tl *Timeline) CoalesceMicros() *Timeline {
	out := &Timeline{
		Format:         tl.Format,
		Categories:     append([]string(nil), tl.Categories...),
		Bytes:          make([][]int64, len(tl.Bytes)),
		HasPreexisting: tl.HasPreexisting,
		Times:          []int64{},
	}
	for k := range out.Bytes {
		out.Bytes[k] = []int64{}
	}
	if tl.Format != FormatRaw {
		out.Times = append(out.Times, tl.Times...)
		for k := range tl.Bytes {
			out.Bytes[k] = append(out.Bytes[k], tl.Bytes[k]...)
		}
		return out
	}
	var lastUs int64
	for i, t := range tl.Times {
		us := pythonMicros(t)
		if i > 0 && us == lastUs && !(i == 1 && tl.HasPreexisting) {
			last := len(out.Times) - 1
			for k := range tl.Bytes {
				out.Bytes[k][last] = tl.Bytes[k][i]
			}
			continue
		}
		lastUs = us
		out.Times = append(out.Times, us*1000)
		for k := range tl.Bytes {
			out.Bytes[k] = append(out.Bytes[k], tl.Bytes[k][i])
		}
	}
	return out
}

// pythonMicros is Python's int(t / 1000) for an int t: the quotient
// correctly rounded to a float64, then truncated toward zero. Go's
// float64(t)/1000 rounds twice and disagrees with it for about half of the
// real timestamps whose two results differ from t/1000 at all, so the exact
// quotient is rounded once with big.Float. Negative times (pre-existing) are
// kept as -1 like torch.
func pythonMicros(t int64) int64 {
	if t < 0 {
		return -1
	}
	if t < 1<<53 {
		return int64(float64(t) / 1000) // float64(t) is exact: one rounding only
	}
	q := new(big.Float).SetPrec(53).SetMode(big.ToNearestEven)
	q.Quo(new(big.Float).SetInt64(t), new(big.Float).SetInt64(1000))
	f, _ := q.Float64()
	return int64(f)
}

// LooksLike reports whether head, the first bytes of a
// file, starts an export_memory_timeline file: both formats open with "[["
// (the coalesced times array, or the raw file's first [t, action, bytes,
// category] entry).
func LooksLike(head []byte) bool {
	b := bytes.TrimLeft(bytes.TrimPrefix(head, []byte("\ufeff")), " \t\r\n")
	if len(b) == 0 || b[0] != '[' {
		return false
	}
	b = bytes.TrimLeft(b[1:], " \t\r\n")
	return len(b) > 0 && b[0] == '['
}
