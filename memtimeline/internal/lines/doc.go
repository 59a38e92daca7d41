// Package lines reads text logs line by line for the memtimeline
// readers (nvidia-smi CSV, per-step JSONL), bounded: one line may not be
// longer than the reader's buffer, a run of blank lines not longer than
// chrometrace.Limits.ValueBytes, and IsText tells a text line from binary.
package lines
