// Package exported reads the files torch's prof.export_memory_timeline
// writes: memory per category (parameter, optimizer state, input,
// temporary, activation, gradient, autograd detail, unknown) over time for
// one device, as torch's memory profiler categorised it.
//
// LooksLike is the loader's content test; Read (a stream) and ReadFile (a
// path) accept both flavours, the coalesced [times, sizes] file and the
// raw event list, with a bounded streaming scanner (ReadLimited takes
// the caps, chrometrace.Limits; the caller bounds the bytes with
// memtimeline.LimitInput), and produce a Timeline. A Timeline
// gives its totals and per-category series (memtimeline.Series, for the
// charts) and its peak; SplitAt is torch's own category split at an
// instant, which memtimeline.Composition.CompareWithTorch holds our peak
// composition estimate against.
package exported
