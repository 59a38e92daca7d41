// Package memtimeline is the shared core of torchmem's memory pipeline:
// the vocabulary every reader and analysis speaks (Series, Lifetime, Site,
// Share and Composition, FormatBytes in units.go) and the bounds every
// reader keeps (limits.go: LimitInput, RecordsError; the caps themselves are
// chrometrace.Limits, an option of every reader).
//
// The pipeline follows google/pprof's split: readers produce models,
// analyses take models, rendering is separate. Each input kind has a
// package holding its content test (next to the parser; the loader,
// cmd/torchmem/load, only orders the tests), its reader and its analysis:
//
//	input kind                 package                 test, reader, analysis
//	Kineto trace               chrometrace             LooksLikeTrace, Read, Attribute
//	allocator snapshot pickle  memtimeline/snapshot    LooksLike, Read, Analyze
//	export_memory_timeline     memtimeline/exported    LooksLike, Read, Timeline.SplitAt
//	nvidia-smi CSV             memtimeline/smi         LooksLike, Read, Analyze
//	per-step JSONL             memtimeline/steplog     LooksLike, Read, Analyze
//	memory_summary() text      memtimeline/memsummary  LooksLike, Read, Log.StepLog
//
// (a memory_summary() log is analysed as a step log). The pickle decoder
// is memtimeline/snapshot/internal/pickle, the bounded line reader of the
// text logs memtimeline/internal/lines.
//
// This package holds the analyses of a trace: Lifetimes pairs
// allocations with frees, Sites groups them by Python stack,
// TraceTimelines gives each GPU's allocator totals over time,
// PeakComposition and CompositionAt say what memory held at an instant
// (Composition.CompareWithTorch holds that against torch's own split).
// Rendering is cmd/internal/report/chart (the report's echarts charts). The
// subpackages import memtimeline; memtimeline imports none of them.
package memtimeline
