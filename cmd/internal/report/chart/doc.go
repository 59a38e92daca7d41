// Package chart is the rendering end of the memory pipeline, inside the
// report package (the one rendering layer): it turns the series rules
// and the readers produce (a trace's allocator totals, an
// allocator snapshot's history, a per-step log) into echarts charts, as
// HTML snippets for the report or a standalone page.
//
// A Spec says what one chart shows (allocated and reserved lines, more
// lines, ProfilerStep bands, markers, the holders at sampled times, the
// explorer's allocations); the report makes one from each of the
// Evaluation's rules.MemoryChart (rules computes the series, markers,
// holders and explorer rows, one chart per GPU of a trace and one for a
// whole run whose files share the Unix clock). Snippet renders a
// Spec; the page includes EchartsScript, the embedded echarts library
// (assets/, Apache-2.0), once, so that a report opens offline.
//
// chart reads no file and computes no figure itself; it fits a series to
// the points it draws (memtimeline's Downsample).
package chart
