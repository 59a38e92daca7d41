// Package memtimeline is the shared core of torchmem's memory pipeline:
// the vocabulary every reader and analysis speaks (Series, Lifetime, Site,
// Composition, byte formatting in units.go) and the bounds every reader
// keeps (limits.go: MaxInputBytes, MaxRecords, MaxSeries, LimitError).
//
// The pipeline, after google/pprof's split (readers produce models,
// analyses take models, rendering is separate):
//
//	input kind                   package                  content test, reader
//	Kineto trace                 chrometrace              (its own package)
//	allocator snapshot pickle    memtimeline (snapshot.go, pickle.go)  IsPickle, ReadSnapshot
//	export_memory_timeline       memtimeline/exported     LooksLike, Read
//	nvidia-smi CSV               memtimeline/smi          LooksLike, Read
//	per-step JSONL               memtimeline/steplog      LooksLike, Read
//	memory_summary() text        memtimeline/memsummary   LooksLike, Read
//
// Each reader package also holds its input's analysis (steplog.Analyze,
// smi.Analyze; a
// memory_summary() log is analysed as a step log: memsummary.Log.StepLog).
// The loader (cmd/torchmem/load) orders the content tests.
//
// This package holds the analyses of a trace (package chrometrace):
// Lifetimes pairs allocations with frees, Sites groups them by Python
// stack, TraceTimelines and PeakComposition say what memory held when.
// Rendering is memtimeline/chart (the report's echarts charts), which
// imports this package and never the reverse: subpackages import
// memtimeline, memtimeline imports none of them.
package memtimeline
