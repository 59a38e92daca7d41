// Package memsummary reads torch.cuda.memory_summary() text: every
// summary table anywhere in a training log, also when each line carries
// a logger prefix ("2026-11-30 12:00:01 INFO rank0: |  Allocated ...").
//
// LooksLike is the loader's content test, Read the bounded reader; it
// produces a Log of Summary samples (allocated, reserved, active and
// non-releasable bytes, current and peak, cudaMalloc retries, OOMs, per
// device and rank). From there the pipeline reuses the other readers'
// analyses: Log.StepLog turns the tables into a steplog.Log (growth per
// summary interval, steplog.Analyze), and Log.Frag gives the allocator
// figures the fragmentation rules read.
package memsummary
