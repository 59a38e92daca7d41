package chrometrace

import (
	"fmt"
	"math"
)

// Limits cap what one input may make a reader read and build, whatever it
// claims or repeats, so that a hostile file (a gzip bomb, one endless
// string, millions of tiny events) costs bounded memory and time. Every
// reader takes them as an option (ReadOptions.Limits, and the
// ReadLimited function of each memtimeline reader); torchmem's loader
// passes the ones its --max-* flags set. A zero field means its default
// (the Default* constants); WithDefaults fills them in. Each default holds
// a real input many times over.
type Limits struct {
	// ValueBytes caps one value and one run of white space or blank
	// lines: a JSON trace event or top-level field, a pickle str, bytes or
	// container. --max-value-bytes.
	ValueBytes int
	// InputBytes caps the decompressed bytes read from a snapshot,
	// timeline, nvidia-smi log, per-step log, memory_summary() log or
	// digest (a gzip bomb expands 1000-fold; a trace is bounded by Events
	// instead). --max-input-bytes.
	InputBytes int64
	// Events caps the events of one trace, MemoryEvents its [memory]
	// events: what the trace reader builds, whatever the bytes.
	// --max-events, --max-memory-events.
	Events       int64
	MemoryEvents int
	// Records caps the points of an export_memory_timeline file, the rows
	// kept from an nvidia-smi log (a longer one is thinned, up to 8
	// times), the lines of a per-step log and, an eighth of it, the tables
	// of a memory_summary() log. --max-records.
	Records int
	// Series caps the distinct GPUs of an nvidia-smi log, devices of a
	// per-step log and ranks of a memory_summary() log; zero means
	// Records/64 or DefaultMaxSeries, whichever is larger.
	Series int
}

// The limits' defaults. DefaultMaxValueBytes is hundreds of times the
// largest event a profiler writes (a long "Call stack" is tens of KB) and
// thousands of times the longest string of a snapshot. DefaultMaxEvents is
// the events of an 18 GB trace (a 1 GB one has 3.5 million; an endless
// trace on stdin stops there, at about 4 GB); DefaultMaxMemoryEvents ten
// times the [memory] events of one (a real trace has one in ten; 4 million
// cost analyze and report about 1 GB, see the README's Performance). The
// largest recorded export_memory_timeline has 53k points; 2M records are an
// nvidia-smi log of 8 GPUs sampled every second for 3 days, or a per-step
// log of 2M steps (measured: 2M step lines 0.6 GB, where 4M took 1.2 GB).
const (
	DefaultMaxValueBytes         = 64 << 20
	DefaultMaxInputBytes   int64 = 16 << 30
	DefaultMaxEvents       int64 = 1 << 26
	DefaultMaxMemoryEvents       = 4 << 20
	DefaultMaxRecords            = 2 << 20
	DefaultMaxSeries             = 1 << 16
)

// MaxIndexedEvents is the most events (and [memory] events) one trace
// may have: the model and its analyses index records with int32 (the op
// tree, the memory index, the lifetimes). Events and MemoryEvents above it
// are lowered to it; the command line refuses more.
const MaxIndexedEvents = math.MaxInt32

// WithDefaults returns l with every zero (or negative) field set to its
// default, and the event caps at most MaxIndexedEvents.
func (l Limits) WithDefaults() Limits {
	if l.ValueBytes <= 0 {
		l.ValueBytes = DefaultMaxValueBytes
	}
	if l.InputBytes <= 0 {
		l.InputBytes = DefaultMaxInputBytes
	}
	if l.Events <= 0 {
		l.Events = DefaultMaxEvents
	}
	if l.MemoryEvents <= 0 {
		l.MemoryEvents = DefaultMaxMemoryEvents
	}
	l.Events = min(l.Events, MaxIndexedEvents)
	l.MemoryEvents = min(l.MemoryEvents, MaxIndexedEvents)
	if l.Records <= 0 {
		l.Records = DefaultMaxRecords
	}
	if l.Series <= 0 {
		l.Series = max(l.Records/64, DefaultMaxSeries)
	}
	return l
}

// CountLimitError is an input past a cap of Limits on how many of
// something a reader reads or builds: a trace's events, a timeline's
// points, a log's rows or devices, decompressed bytes. Every reader gives
// this one error for a count; LimitError is one value too large.
type CountLimitError struct {
	What  string // "events in one trace", "timeline points", "decompressed bytes", ...
	Limit int64
	Flag  string // the torchmem flag that raises the cap; "" for a fixed cap
}

func (e *CountLimitError) Error() string {
	if e.Flag == "" {
		return fmt.Sprintf("more than %d %s, the cap on one input", e.Limit, e.What)
	}
	return fmt.Sprintf("more than %d %s, the cap on one input (--%s raises it)", e.Limit, e.What, e.Flag)
}

// overCount says whether what was merged so far is past a cap.
func (b *builder) overCount() error {
	switch {
	case b.t.Events > b.limits.Events:
		return &CountLimitError{What: "events in one trace", Limit: b.limits.Events, Flag: "max-events"}
	case b.memory.n > b.limits.MemoryEvents:
		return &CountLimitError{What: "[memory] events in one trace", Limit: int64(b.limits.MemoryEvents), Flag: "max-memory-events"}
	}
	return nil
}
