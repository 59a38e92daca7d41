// Package smi reads the CSV that `nvidia-smi --query-gpu=... --format=csv`
// prints (once or in a loop) and says, per GPU, whether device memory
// grew and how it was used.
//
// LooksLike is the loader's content test, Read the lenient, bounded
// reader (units or not, header or not, N/A values, repeated headers,
// interleaved GPUs; ReadLimited's chrometrace.Limits.Records thins a very
// long log and Limits.Series caps the GPUs); it produces a Log with one GPU of Samples per
// device. Analyze takes the Log and gives an Analysis: per GPU a
// GPUReport with its growth runs (GrowthRun), periods (Period) and the
// time above the alarm threshold (ThresholdAlarm); Buckets summarises a
// GPU's samples for a table or chart.
// A GPU still rising when its process or the log ends, too briefly to
// judge, is StillGrowing: neither a leak nor a plateau.
//
// LooksLikeApps and ReadApps read the per-process log of
// `nvidia-smi --query-compute-apps=...` (AppsLog, one Process per pid and
// GPU); AnalyzeApps names zombies, processes sharing a GPU and the process
// that grows (AppsAnalysis). Reconcile puts torch's own figures of the same
// run (TorchPoint: memory_allocated() and memory_reserved() per step, on the
// Unix clock; ClockOffset finds the smi log's time zone) beside memory.used
// and splits it into torch allocated, torch's cache and outside torch
// (Reconciliation, with the one-sentence Answer). PerStep turns a growth
// rate into bytes per step by the steps that ran while it grew.
//
// nvidia-smi sees the device, not the allocator: it is the input for runs
// that were not profiled.
package smi
