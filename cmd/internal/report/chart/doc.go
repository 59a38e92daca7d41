// Package chart is the rendering end of the memory pipeline, inside the
// report package (the one rendering layer): it turns the series rules
// and the readers produce (a trace's allocator totals, an
// allocator snapshot's history, a per-step log) into echarts charts, as
// HTML snippets for the report or a standalone page.
//
// A Spec says what one chart shows (allocated and reserved lines, more
// lines, ProfilerStep bands, markers, the holders at sampled times);
// the report makes one per GPU of a Kineto trace from rules.TraceCharts
// (rules keeps series, not chart specs) and RunTimeline one
// for a whole run whose files share the Unix clock. Snippet renders a
// Spec; the page includes EchartsScript, the embedded echarts library
// (assets/, Apache-2.0), once, so that a report opens offline.
//
// chart reads no file itself (the readers produce its inputs); the
// series arithmetic (Series, Downsample) is memtimeline's.
package chart
