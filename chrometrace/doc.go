// Package chrometrace reads Kineto Chrome traces (what torch.profiler's
// export_chrome_trace writes) as a stream into one compact model that every
// analysis shares, and aggregates it per operator the way torch's
// key_averages() does.
//
// It is the first stage of torchmem's pipeline for traces:
//
//	LooksLikeTrace (sniff.go)   is this input a trace? (the loader asks)
//	Read (reader.go, split.go,  bytes -> Trace: events split into batches,
//	  scan.go, builder.go)      decoded in parallel, kept as flat records
//	Attribute (attribution.go)  memory event -> operator chain, Python stack
//	Operators (operators.go)    per-operator table, as key_averages()
//	Summarize (summary.go)      what the trace is and what it recorded
//	frames.go, canonical.go     one way to name a frame and an operator
//
// memtimeline builds lifetimes, sites and series on these; rules judges
// them; cmd/torchmem renders. Callers that analyze one trace several ways
// share Attribute's result through rules.Input (computed once).
package chrometrace
