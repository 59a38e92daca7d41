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
// Analysis: Analyze judges each series by regularity (regular.go: the
// one rule for step logs, also followed by the snippet's LeakWatch): the
// log must end in 3 or more consecutive steady rises, or 2 or more rises
// exactly every P steps with flat records between; rises that stop and
// stay flat are bounded, not growth; size decides nothing. A least-squares
// line of allocated and reserved bytes is kept for the table only. Other
// readers produce a Log too (a memory_summary() text: memsummary.Log.
// StepLog), so the same test runs on them; the report's run timeline
// (memtimeline/chart) draws it on the run's clock.
package steplog
