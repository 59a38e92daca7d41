// Package steplog reads per-step memory logs and says whether memory
// grows step over step.
//
// Input: JSON Lines a training loop writes after every step
// (torch.cuda.memory_allocated()/memory_reserved() or a slice of
// memory_stats(), keys spelled as people spell them). LooksLike is the
// loader's content test, Read the bounded reader (ReadLimited takes the
// caps, chrometrace.Limits: Records, Series, ValueBytes); it produces a Log, one
// Series of Records per device.
//
// Analysis: Analyze judges each series with the growth model
// (memtimeline/growth, growth.go here: the one model of a step series,
// also followed by the snippet's LeakWatch), on requested bytes when the
// log has them, else allocated bytes: growing (a significant trend from
// the step it starts, or a staircase of regular jumps), flat with evidence
// (a measured plateau after a fill, or flat throughout), or unknown (the
// model is inconclusive); size decides nothing. A least-squares line of
// allocated and reserved bytes is kept for the table only. Other readers
// produce a Log too (a memory_summary() text: memsummary.Log.
// StepLog), so the same test runs on them; the report's run timeline
// (cmd/internal/report/chart) draws it on the run's clock.
package steplog
