// Package leak answers "does memory creep up step after step, and why?"
// from a profiler trace (Analyze) or an allocator snapshot's recorded
// history (AnalyzeSnapshot). A leak is evidence of regularity, not size: a
// site (the user's call chain and operator) that keeps memory from each of
// at least three consecutive ProfilerSteps, steadily or more every step,
// is a leak at any size; memory made once (parameters, optimizer state)
// or by the last step or two (outputs, gradients) is not.
//
// The analysis is a plain function over plain data: Data carries the
// trace with its attribution and allocation lifetimes, which the rule
// engine (package rules) computes once per input and shares; Report is the
// answer, with the per-step survivors, the suspects (sites), the leaks
// they make grouped by kind (container, autograd_graph, retain_graph,
// hook), the evidence for each kind, its fix and the line that holds the
// memory. Package rules turns a Report into findings and verdicts.
//
//	leak.go       the types and the trace analysis (Analyze): steps, survivors, suspects
//	steps.go      per-site regularity: a steady or periodic run of steps
//	kinds.go      kinds, grouping suspects into leaks, the evidence and fix wording
//	hooks.go      hooks registered every step (growing call counts)
//	autograd.go   whether a block's op recorded an autograd graph, and backward ran
//	snapshot.go   the same question answered from an allocator snapshot
package leak
