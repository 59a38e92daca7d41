// Package steplog reads per-step memory logs and says whether memory
// grows step over step.
//
// Input: JSON Lines a training loop writes after every step
// (torch.cuda.memory_allocated()/memory_reserved() or a slice of
// memory_stats(), keys spelled as people spell them). LooksLike is the
// loader's content test, Read the bounded reader (memtimeline's
// MaxRecords, MaxSeries and MaxInputBytes caps); it produces a Log, one
// Series of Records per device.
//
// Analysis: Analyze fits allocated and reserved bytes over the steps of
// each series (least squares) and gives a verdict (growing, flat,
// unknown). Other readers produce a Log too (a memory_summary() text:
// memsummary.Log.StepLog), so the same growth test runs on them; the
// report's run timeline (memtimeline/chart) draws it on the run's clock.
package steplog
