// Package smi reads the CSV that `nvidia-smi --query-gpu=... --format=csv`
// prints (once or in a loop) and says, per GPU, whether device memory
// grew and how it was used.
//
// LooksLike is the loader's content test, Read the lenient, bounded
// reader (units or not, header or not, N/A values, repeated headers,
// interleaved GPUs; memtimeline's MaxRecords thins a very long log and
// MaxSeries caps the GPUs); it produces a Log with one GPU of Samples per
// device. Analyze takes the Log and gives an Analysis: per GPU a
// GPUReport with its growth runs (GrowthRun), periods (Period) and the
// time above the alarm threshold (ThresholdAlarm); Buckets summarises a
// GPU's samples for a table or chart.
// nvidia-smi sees the device, not the allocator: it is the input for runs
// that were not profiled.
package smi
