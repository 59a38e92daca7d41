// Package gpu holds the GPU-timeline analyses of a Kineto trace: what
// Nsight Systems users look for by eye, computed from the trace's host and
// device lanes. StepWindows are the ProfilerSteps on the host;
// FindHostCopies and AttributeCopies pair every host<->device copy with the
// host operator, Python line and known library loop that issued it and say
// whether the host waited for it; DeviceBusy merges each GPU's kernels,
// copies and memsets into busy intervals, IdleInWindow measures a step's
// idle time, and NewIdleIndex with CausesInWindow charges idle time to its
// cause (the host fetching data, a host sync, a pageable copy); HostDuring
// says what the host ran during a gap; FrameIndex finds the user's line
// at a moment on a thread.
//
// They are plain functions over the trace; the rule engine (package rules)
// computes each once per input and its GPU-timeline rules
// (gpu.sync-copy-every-step, gpu.pageable-h2d, gpu.pinned-h2d-blocking,
// gpu.idle-gaps, gpu.launch-bound, gpu.low-memcpy-bandwidth) turn them into
// findings.
//
//	copies.go   step windows, host<->device copies, op nesting, Python frames, busy and idle time
//	idle.go     why the GPU idles: the causes idle time is charged to
package gpu
