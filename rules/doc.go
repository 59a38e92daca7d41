// Package rules is torchmem's rule engine: detectors for leaks,
// fragmentation, OOM, per-operator limits and GPU-timeline problems. Each
// rule is a small unit with an id, a default threshold and a severity;
// running it on an input gives findings that carry their evidence and what
// to do next.
//
// An Input is one loaded file of one SourceKind (source.go lists them:
// trace, snapshot, steps, nvidia-smi, nvidia-smi-apps, memory-timeline,
// memory-summary), made by NewInput from what the loader read, or by
// NewDigestInput from a digest. Each rule declares the kinds it reads
// (Rule.Reads) and Run calls it on those only; code that differs by kind
// asks Input.Is, Has or InputKind, never which field is nil.
//
// An Input carries its analysis context: the
// expensive analyses (attribution, lifetimes, sites, the leak and
// fragmentation reports, input.go) are computed once per input under typed
// keys and shared by every rule and renderer. The analyses themselves are
// plain functions over plain data in subpackages; the engine caches them
// per input and turns them into findings and verdicts (pprof's split):
//
//	leak/        leak verdicts from regularity (traces, snapshots)
//	frag/        fragmentation by the allocator's own rules (traces, snapshots)
//	gpu/         GPU-timeline analyses: step windows, host copies, busy and idle time, idle causes
//	zerograd/    optimizer steps without a gradient reset (traces)
//	diff/        what changed between two runs, budgets, the leak gate
//	site/        how every output names a code site and its location
//	digest/      the file `torchmem summarize` writes (a Digest, in a File)
//
// Files of the engine:
//
//	source.go                  the kinds of input, NewInput, Is and Has
//	rule.go, config.go         rules, registry, YAML overrides
//	input.go                   the shared analyses (Key, Get, accessors)
//	leakfindings.go,           leak findings (traces, snapshots), the
//	  snapshotrules.go           snapshot's OOM and split rules
//	fragfindings.go            fragmentation findings, one rule per signal
//	memory.go, timeline.go     OOMs, operator limits, GPU-timeline rules
//	logs.go, memsummary.go     per-step logs, nvidia-smi, memory_summary()
//	verdict.go, checklist.go   one verdict per run and rank, the checklist
//	leakevidence.go,           the verdict's parts: what each input says
//	  leakanswer.go,             about growth and how it is weighed and
//	  oomanswer.go,              worded; OOMs and their cause; the
//	  fraganswer.go,             fragmentation answer; the peak and what
//	  peakanswer.go              fills it
//	diffside.go                a trace input reduced for diff
package rules
