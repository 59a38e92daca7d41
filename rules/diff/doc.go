// Package diff says what changed between two runs: each run is reduced to
// a Side (peaks, growth per step, the leak verdict and suspects, bytes per
// operator and per site named the one way, survivors per step), and
// Compare puts two sides next to each other: the metrics that moved, the
// operators and sites whose bytes moved most (per step, so runs of
// different lengths compare), and the leak suspects new in HEAD.
//
// A Budget is one --fail-if condition (ParseBudget, Exceeded); LeakGate is
// what `torchmem diff` fails on without any flag. A side is plain data:
// rules.NewInputSide makes one from a trace input's shared analyses,
// NewSnapshotSide from an allocator snapshot, Merge sums per-rank sides.
package diff
