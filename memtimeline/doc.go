// Package memtimeline turns allocation events, export_memory_timeline files,
// allocator snapshots and device logs into memory-over-time series and the
// allocation lifetimes that leak and fragmentation analyses share.
//
// Each input kind has its reader and its content test side by side (the
// loader, cmd/torchmem/load, orders the tests):
//
//	kind                         test                        reader
//	allocator snapshot pickle    IsPickle                    ReadSnapshot (pickle.go, snapshot.go)
//	export_memory_timeline       LooksLikeExportedTimeline   ParseExportedTimeline (exported.go)
//	nvidia-smi CSV               LooksLikeSMILog             ReadSMILog (smi.go)
//	per-step JSONL               LooksLikeStepLog            ReadStepLog (steplog.go)
//	memory_summary() text        LooksLikeMemorySummary      ReadMemorySummaries (summary.go)
//
// and its analysis: AnalyzeSnapshot, AnalyzeSMI, AnalyzeSteps (a
// memory_summary() log is read as a step log: SummaryLog.StepLog). On
// traces (package chrometrace): Lifetimes pairs allocations with frees,
// Sites groups them by Python stack, the series and PeakComposition say
// what memory held when; package chart (memtimeline/chart) draws
// every series (the report's charts). Every reader is bounded (limits.go).
package memtimeline
