package rules

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/torchmem/torchmem/chrometrace"
	"github.com/torchmem/torchmem/memtimeline/exported"
	"github.com/torchmem/torchmem/memtimeline/memsummary"
	"github.com/torchmem/torchmem/memtimeline/smi"
	"github.com/torchmem/torchmem/memtimeline/snapshot"
	"github.com/torchmem/torchmem/memtimeline/steplog"
)

// SourceKind is what an input file holds. Every kind torchmem reads is
// listed here; an Input has exactly one, rules declare the kinds they read
// (Rule.Reads) and code that differs by kind switches on it.
type SourceKind string

// The kinds of input, in the order a tie between leak evidence of
// different kinds is settled (sourceRank) where that applies.
const (
	// SourceTrace: a Kineto trace (torch.profiler), Input.Trace.
	SourceTrace SourceKind = "trace"
	// SourceSnapshot: an allocator snapshot (torch.cuda.memory._snapshot()),
	// Input.Snapshot.
	SourceSnapshot SourceKind = "snapshot"
	// SourceSteps: torch.cuda.memory_stats() logged per step, Input.StepLog.
	SourceSteps SourceKind = "steps"
	// SourceSMI: an nvidia-smi --query-gpu log, Input.SMI.
	SourceSMI SourceKind = "nvidia-smi"
	// SourceSMIApps: an nvidia-smi --query-compute-apps (per-process) log,
	// Input.SMIApps.
	SourceSMIApps SourceKind = "nvidia-smi-apps"
	// SourceTimeline: torch's exported memory timeline
	// (export_memory_timeline), Input.Timeline.
	SourceTimeline SourceKind = "memory-timeline"
	// SourceMemSummary: torch.cuda.memory_summary() tables from a log,
	// Input.MemSummary; its tables logged with a step are also Input.StepLog.
	SourceMemSummary SourceKind = "memory-summary"
)

// sourceKinds are every kind of input, as `torchmem rules` lists them.
var sourceKinds = []SourceKind{SourceTrace, SourceSnapshot, SourceSteps, SourceSMI, SourceSMIApps, SourceTimeline, SourceMemSummary}

// sourceUnknown is the kind of an Input that holds nothing (a test's
// bare literal); NewInput refuses one.
const sourceUnknown SourceKind = "unknown"

// ParseSourceKind reads a kind's name (a digest file names the kind of
// the file it was made from).
func ParseSourceKind(s string) (SourceKind, error) {
	if k := SourceKind(s); slices.Contains(sourceKinds, k) {
		return k, nil
	}
	return "", fmt.Errorf("unknown kind of input %q (want one of %s)", s, joinKinds(sourceKinds, ", "))
}

// Data is what the loader read from one file: exactly one field is set.
// (A memory_summary() log's per-step view is derived by NewInput.)
type Data struct {
	Trace      *chrometrace.Trace
	Snapshot   *snapshot.Snapshot
	StepLog    *steplog.Log
	SMI        *smi.Log
	SMIApps    *smi.AppsLog
	Timeline   *exported.Timeline
	MemSummary *memsummary.Log
}

// kinds are the kinds of d's set fields, in sourceKinds order.
func (d Data) kinds() []SourceKind {
	var ks []SourceKind
	for _, c := range []struct {
		set  bool
		kind SourceKind
	}{
		{d.Trace != nil, SourceTrace}, {d.Snapshot != nil, SourceSnapshot}, {d.StepLog != nil, SourceSteps},
		{d.SMI != nil, SourceSMI}, {d.SMIApps != nil, SourceSMIApps}, {d.Timeline != nil, SourceTimeline},
		{d.MemSummary != nil, SourceMemSummary},
	} {
		if c.set {
			ks = append(ks, c.kind)
		}
	}
	return ks
}

// NewInput makes the rules' input of one file from what the loader read,
// its kind the kind of that data. It refuses data of no kind or of several.
func NewInput(source string, rank int64, d Data) (*Input, error) {
	ks := d.kinds()
	switch len(ks) {
	case 0:
		return nil, errors.New("no data read from the input")
	case 1:
	default:
		return nil, fmt.Errorf("the input holds %s data at once: one file is one kind", joinKinds(ks, " and "))
	}
	in := &Input{Source: source, Kind: ks[0], Rank: rank, Trace: d.Trace, Snapshot: d.Snapshot, StepLog: d.StepLog,
		SMI: d.SMI, SMIApps: d.SMIApps, Timeline: d.Timeline, MemSummary: d.MemSummary}
	if d.MemSummary != nil {
		// memory_summary() tables logged with a step number read like
		// memory_stats() lines: step growth, the rules, the verdict and
		// the report's chart take them as a step log.
		in.StepLog = d.MemSummary.StepLog()
	}
	return in, nil
}

// NewDigestInput makes the input read back from a digest (torchmem
// summarize) of a file of kind: its analyses are the digest's. torch's
// memory timeline, downsampled, is the digest's own data: the verdict
// lines a trace's peak up with it as with the file.
func NewDigestInput(source string, kind SourceKind, rank int64, d *Digest) (*Input, error) {
	if d == nil {
		return nil, errors.New("no digest in the summary")
	}
	if _, err := ParseSourceKind(string(kind)); err != nil {
		return nil, err
	}
	return &Input{Source: source, Kind: kind, Rank: rank, Digest: d, Timeline: d.TorchTimeline}, nil
}

// joinKinds names kinds in a sentence, joined by sep.
func joinKinds(ks []SourceKind, sep string) string {
	s := make([]string, len(ks))
	for i, k := range ks {
		s[i] = string(k)
	}
	return strings.Join(s, sep)
}

// InputKind is the kind of input in is: the one NewInput set; for an
// Input built as a literal (tests), the kind of its data.
func (in *Input) InputKind() SourceKind {
	if in.Kind != "" {
		return in.Kind
	}
	d := Data{Trace: in.Trace, Snapshot: in.Snapshot, StepLog: in.StepLog, SMI: in.SMI, SMIApps: in.SMIApps, Timeline: in.Timeline, MemSummary: in.MemSummary}
	if d.MemSummary != nil {
		d.StepLog = nil // its tables as steps: still a memory_summary() log
	}
	if ks := d.kinds(); len(ks) > 0 {
		return ks[0]
	}
	return sourceUnknown
}

// Is says whether in is of kind k: the file itself, or a digest
// (torchmem summarize) made from one.
func (in *Input) Is(k SourceKind) bool { return in.InputKind() == k }

// Has says whether in is a file of kind k with its data at hand (not a
// digest read back): the field of kind k is set.
func (in *Input) Has(k SourceKind) bool { return in.Digest == nil && in.Is(k) }

// IsDigest says whether in was read back from a digest: its analyses are
// the digest's, the raw data is gone.
func (in *Input) IsDigest() bool { return in.Digest != nil }

// hasSteps says whether in reads as per-step memory_stats(): a steps log,
// or memory_summary() tables logged with their step (a summary of either
// included).
func (in *Input) hasSteps() bool { return in.Is(SourceSteps) || in.Is(SourceMemSummary) }
