// Package frag answers "is the caching allocator fragmented, and why?" by
// the allocator's own rules. From a profiler trace (Analyze) it measures
// three signals, each with its own threshold (Options): floods of tiny
// blocks, new segments requested while their pool already held the bytes
// idle (pool.go follows the small and large pools from the [memory]
// events), and cudaMalloc/cudaFree calls in steady-state steps (the cache
// keeps missing, or empty_cache() gives back what the next step takes
// again). From an allocator snapshot (SnapshotPools, JudgeSnapshot) it
// reads the free space split inside segments per pool and stream exactly.
//
// The analysis is a plain function over plain data: Data carries the trace
// and its attribution, which the rule engine (package rules) computes once
// per input; Report is the answer with its signals, reasons and advice.
// Package rules turns the signals into findings under each rule's own
// threshold (Report.Rejudge).
//
//	frag.go       the types and the trace analysis (Analyze)
//	judge.go      the three signals judged under Options: verdict, reasons
//	advice.go     what each signal's advice says
//	sites.go      small allocations by size and by code site
//	segments.go   cudaMalloc/cudaFree calls, reserved drops, OOM retries
//	pool.go       the small and large pools followed through a trace
//	snapshot.go   split free space per pool and stream from a snapshot
package frag
