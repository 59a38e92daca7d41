// Package snapshot reads CUDA caching-allocator snapshots (the pickle
// torch.cuda.memory._dump_snapshot writes, gzipped or not) and analyses
// them.
//
// LooksLike is the loader's content test; Read decodes the pickle with
// the bounded, plain-data-only decoder of internal/pickle (no str, bytes
// or container over chrometrace.Limits.ValueBytes, given to ReadLimited; class-building opcodes refused, so a
// pickle cannot run code) and maps it onto the typed model: a Snapshot of
// Segments, Blocks and the per-device history, a Trace of TraceEntry
// events (stored compact, read through At and All).
//
// Analysis: Analyze gives a Report (Stats, the SegmentFills map,
// LeakCandidates replayed from the history, steps, OOMs); UserFrame and
// FrameName name an allocation's site in the shared frame vocabulary
// (chrometrace.Frame); PeakComposition is what the history held at its
// peak, in memtimeline's Composition. The leak and fragmentation rules
// (rules/leak, rules/frag) and the report's run timeline
// (cmd/internal/report/chart) take the Report and the Snapshot from here.
package snapshot
