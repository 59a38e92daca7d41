package main

import (
	"bytes"
	"fmt"
	"io"

	"github.com/torchmem/torchmem/chrometrace"
	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/rules"
)

// inputKind is what a file holds, decided from its content.
type inputKind string

const (
	kindTrace    inputKind = "trace"
	kindSnapshot inputKind = "snapshot"
	kindSMI      inputKind = "nvidia-smi"
	kindSteps    inputKind = "steps"
	kindTimeline inputKind = "memory-timeline"
	kindUnknown  inputKind = "unknown"
)

// sniffInput reads the start of a file (decompressed) and says what it is.
func sniffInput(path string) (inputKind, error) {
	in, err := chrometrace.Open(path)
	if err != nil {
		return kindUnknown, badInput(fmt.Errorf("%s: %w", path, describeOpenError(path, err)))
	}
	defer in.Close()
	head, err := in.Peek(64 << 10)
	if err != nil && err != io.EOF && len(head) == 0 {
		return kindUnknown, badInput(fmt.Errorf("%s: %w", path, err))
	}
	return sniffHead(head), nil
}

func sniffHead(head []byte) inputKind {
	if len(head) >= 2 && head[0] == 0x80 && head[1] >= 2 && head[1] <= 5 {
		return kindSnapshot
	}
	if memtimeline.LooksLikeSMILog(head) {
		return kindSMI
	}
	if memtimeline.LooksLikeStepLog(head) {
		return kindSteps
	}
	trimmed := bytes.TrimLeft(head, " \t\r\n")
	if len(trimmed) > 0 && trimmed[0] == '[' {
		rest := bytes.TrimLeft(trimmed[1:], " \t\r\n")
		if len(rest) > 0 && rest[0] == '[' {
			return kindTimeline // [[times...], [sizes...]] or [[t, action, bytes, cat], ...]
		}
		return kindTrace // legacy bare-array trace
	}
	if len(trimmed) > 0 && trimmed[0] == '{' {
		return kindTrace
	}
	return kindUnknown
}

// loadRuleInput reads one file of any supported kind for the rules.
func loadRuleInput(path string, stderr io.Writer) (*rules.Input, inputKind, error) {
	kind, err := sniffInput(path)
	if err != nil {
		return nil, kind, err
	}
	in := &rules.Input{Source: path}
	switch kind {
	case kindTrace:
		in.Trace, err = loadTrace(path, stderr)
	case kindSMI:
		if in.SMI, err = readSMIFile(path); err != nil {
			err = badInput(err)
		}
	case kindSteps:
		if in.StepLog, err = readStepFile(path); err != nil {
			err = badInput(err)
		}
	case kindSnapshot:
		in.Snapshot, err = readSnapshotFile(path)
	case kindTimeline:
		if in.Timeline, err = memtimeline.ReadExportedTimeline(path); err != nil {
			err = badInput(err)
		}
	default:
		err = badInput(fmt.Errorf("%s: not a file torchmem reads (a Kineto trace, allocator snapshot, nvidia-smi CSV, per-step JSONL or memory timeline)", path))
	}
	return in, kind, err
}
