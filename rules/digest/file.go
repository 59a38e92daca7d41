// Package digest is the file `torchmem summarize` writes (a digest): one small,
// versioned JSON document (gzipped) per input, holding the analyses the
// multi-input commands need (the verdict and leak evidence, per-step
// survivors and leak suspects with their stacks, fragmentation, the peak
// and what holds it, the operator table's top rows, the memory charts
// downsampled with their peaks kept, findings, run metadata) and none of the
// raw events. Digests are the map step's output: made next to the traces
// (one cluster task per shard of ranks), read anywhere by leaks, analyze,
// check, report and diff, which judge them as they judge the files.
//
// It lives under rules because a digest is made of rules' analyses
// (rules.Digest) and read back into a rules.Input; memtimeline and
// chrometrace sit below rules and cannot hold it, and rules itself stays
// free of a file format.
package digest

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/torchmem/torchmem/internal/rankname"
	"github.com/torchmem/torchmem/rules"
)

// Format is the value of the first key, "format", of every digest: what
// the loader's sniffer looks for.
const Format = "torchmem-summary"

// SchemaVersion is the digest layout this torchmem writes and reads. A
// reader accepts its own version and older ones; new optional fields do
// not change it, a changed meaning does.
const SchemaVersion = 1

// Ext ends every digest's file name.
const Ext = ".summary.json.gz"

// MaxBytes bounds a digest read back (decompressed): they are a few
// hundred KiB; anything larger is not one.
const MaxBytes = 64 << 20

// File is one input's digest.
type File struct {
	Format        string `json:"format"`
	SchemaVersion int    `json:"schema_version"`
	// Torchmem is the version that wrote it.
	Torchmem string `json:"torchmem_version,omitempty"`
	// Source is the input as it was named when summarized; SourceBytes its
	// size on disk (-1: a pipe).
	Source      string `json:"source"`
	SourceBytes int64  `json:"source_bytes"`
	// Kind is what the input was: trace, snapshot, steps, nvidia-smi,
	// memory-timeline or memory-summary.
	Kind rules.SourceKind `json:"kind"`
	// Rank is the distributed rank (-1 unknown); WorldSize from the trace.
	Rank int64 `json:"rank"`
	rules.Digest
	// Warnings are what the reader tolerated in the input (a cut end).
	Warnings []string `json:"warnings,omitempty"`
}

// Make summarizes one input. sourceBytes is the input's size on disk (-1
// when unknown), version the torchmem that writes it.
func Make(in *rules.Input, sourceBytes int64, version string, warnings []string) *File {
	return &File{Format: Format, SchemaVersion: SchemaVersion, Torchmem: version, Source: in.Source, SourceBytes: sourceBytes,
		Kind: in.InputKind(), Rank: in.Rank, Digest: *rules.MakeDigest(in), Warnings: warnings}
}

// Input is the digest read back as an input of the rules: its Source is
// the summarized file's name (so that it groups with the rest of its run
// and rank as that file would), its analyses the digest's.
func (s *File) Input() (*rules.Input, error) {
	d := s.Digest
	return rules.NewDigestInput(s.Source, s.Kind, s.Rank, &d)
}

// Write writes s gzipped.
func (s *File) Write(w io.Writer) error {
	zw := gzip.NewWriter(w)
	enc := json.NewEncoder(zw)
	if err := enc.Encode(s); err != nil {
		return err
	}
	return zw.Close()
}

// Read reads a digest (already decompressed: the loader undoes gzip).
func Read(r io.Reader) (*File, error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("torchmem summary: %w", err)
	}
	if len(b) > MaxBytes {
		return nil, fmt.Errorf("larger than %d MiB: not a torchmem summary", MaxBytes>>20)
	}
	if err := checkShape(b); err != nil {
		return nil, err
	}
	var s File
	if err := json.NewDecoder(bytes.NewReader(b)).Decode(&s); err != nil {
		return nil, fmt.Errorf("torchmem summary: %w", err)
	}
	switch {
	case s.Format != Format:
		return nil, errors.New("not a torchmem summary (no \"format\": \"" + Format + "\")")
	case s.SchemaVersion < 1:
		return nil, fmt.Errorf("torchmem summary without a schema_version")
	case s.SchemaVersion > SchemaVersion:
		return nil, fmt.Errorf("torchmem summary schema_version %d is newer than this torchmem reads (%d): upgrade torchmem", s.SchemaVersion, SchemaVersion)
	case s.Kind == "":
		return nil, errors.New("torchmem summary without the kind of its input")
	}
	if _, err := rules.ParseSourceKind(string(s.Kind)); err != nil {
		return nil, fmt.Errorf("torchmem summary: %w", err)
	}
	if err := s.complete(); err != nil {
		return nil, err
	}
	if s.Findings == nil {
		s.Findings = []rules.DigestFinding{}
	}
	s.RestoreCharts()
	return &s, nil
}

// LooksLike says whether head, the first decompressed bytes of an input,
// is a digest: a JSON object whose first key is "format" with Format.
func LooksLike(head []byte) bool {
	b := bytes.TrimLeft(head, " \t\r\n")
	b, ok := bytes.CutPrefix(b, []byte("{"))
	if !ok {
		return false
	}
	b = bytes.TrimLeft(b, " \t\r\n")
	b, ok = bytes.CutPrefix(b, []byte(`"format"`))
	if !ok {
		return false
	}
	b = bytes.TrimLeft(b, " \t\r\n")
	b, ok = bytes.CutPrefix(b, []byte(":"))
	if !ok {
		return false
	}
	return bytes.HasPrefix(bytes.TrimLeft(b, " \t\r\n"), []byte(`"`+Format+`"`))
}

// knownExts are the input file endings a digest's name drops.
var knownExts = []string{".gz", ".json", ".trace", ".pt", ".pickle", ".pkl", ".jsonl", ".csv", ".log", ".txt", ".html"}

// Name is the digest file name for an input: its base name without the
// input's endings, plus Ext ("host_rank3.pt.trace.json.gz" ->
// "host_rank3.summary.json.gz").
func Name(source string) string {
	base := filepath.Base(source)
	for {
		trimmed := false
		for _, e := range knownExts {
			if len(base) > len(e) && strings.HasSuffix(strings.ToLower(base), e) {
				base, trimmed = base[:len(base)-len(e)], true
			}
		}
		if !trimmed {
			break
		}
	}
	if base == "" || base == "-" || base == "." || base == string(filepath.Separator) {
		base = "stdin"
	}
	// rank3/trace.json.gz: the folder names the rank; the digest's name
	// keeps it, so that shards summarized apart (one cluster task each)
	// do not write the same name.
	if !hasRank(base) {
		if dir := filepath.Base(filepath.Dir(filepath.Clean(source))); hasRank(dir) {
			base = dir + "_" + base
		}
	}
	return base + Ext
}

func hasRank(name string) bool { _, ok := rankname.InName(name); return ok }

// Names gives each source its digest file name, unique among them: files
// of the same base name (rank0/trace.json.gz, rank1/trace.json.gz) are told
// apart by their folder ("rank0_trace.summary.json.gz"), then by a number.
func Names(sources []string) []string {
	out := make([]string, len(sources))
	count := map[string]int{}
	for i, s := range sources {
		out[i] = Name(s)
		count[out[i]]++
	}
	for i, s := range sources {
		if count[out[i]] < 2 {
			continue
		}
		if dir := filepath.Base(filepath.Dir(filepath.Clean(s))); dir != "." && dir != string(filepath.Separator) && !strings.HasPrefix(out[i], dir+"_") {
			out[i] = dir + "_" + out[i]
		}
	}
	seen := map[string]int{}
	for i := range out {
		seen[out[i]]++
		if n := seen[out[i]]; n > 1 {
			out[i] = strings.TrimSuffix(out[i], Ext) + fmt.Sprintf("_%d", n) + Ext
		}
	}
	return out
}

// Caps on what a digest read back may build, whatever its bytes: a 3 KB
// gzip of a million empty objects would otherwise build a million charts
// (1 GB). A real digest has about 800 objects and arrays and a few
// thousand values; the caps hold a hundredfold that.
const (
	// MaxContainers caps a digest's JSON objects and arrays together.
	MaxContainers = 1 << 18
	// MaxValues caps its values of any kind (numbers, strings, ...).
	MaxValues = 1 << 22
	// MaxCharts caps its memory charts (one per GPU of the trace).
	MaxCharts = 1 << 10
)

// checkShape counts b's JSON values without building them and refuses a
// document past the caps above. b need not be valid JSON (the decoder
// says what is wrong with it): the count only bounds what decoding it
// would build.
func checkShape(b []byte) error {
	containers, values := 0, 0
	for i := 0; i < len(b); i++ {
		switch c := b[i]; c {
		case '"':
			values++
			for i++; i < len(b) && b[i] != '"'; i++ {
				if b[i] == '\\' {
					i++
					if i < len(b) && lineBreakEscape(b[i:]) {
						return errors.New("a line break inside a string: not a torchmem summary (torchmem writes every name on one line)")
					}
				}
			}
		case '{', '[':
			containers++
			values++
		case ' ', '\t', '\r', '\n', ',', ':', '}', ']':
		default:
			// a number, true, false or null: one value up to its end
			values++
			for i+1 < len(b) && !jsonDelim[b[i+1]] {
				i++
			}
		}
		if containers > MaxContainers {
			return fmt.Errorf("more than %d JSON objects and arrays: not a torchmem summary (a real one has about a thousand)", MaxContainers)
		}
		if values > MaxValues {
			return fmt.Errorf("more than %d JSON values: not a torchmem summary (a real one has a few thousand)", MaxValues)
		}
	}
	return nil
}

// lineBreakEscape says whether e, what follows a backslash in a JSON
// string, is a newline or carriage return (\n, \r, \u000a, \u000d).
func lineBreakEscape(e []byte) bool {
	switch {
	case e[0] == 'n' || e[0] == 'r':
		return true
	case e[0] == 'u' && len(e) >= 5:
		u := strings.ToLower(string(e[1:5]))
		return u == "000a" || u == "000d"
	}
	return false
}

var jsonDelim = [256]bool{' ': true, '\t': true, '\r': true, '\n': true, ',': true, ':': true, '}': true, ']': true, '"': true, '{': true, '[': true}

// complete says what a digest of its kind lacks of what summarize always
// writes (nil when nothing): the analyses the commands read back. A digest
// without them is not one torchmem wrote, and the commands would otherwise
// answer (or pass a gate) on evidence it does not hold.
func (s *File) complete() error {
	var missing []string
	need := func(ok bool, key string) {
		if !ok {
			missing = append(missing, key)
		}
	}
	need(s.OOMFacts != nil, "oom_facts")
	switch s.Kind {
	case rules.SourceTrace:
		need(s.Leaks != nil, "leaks")
		need(s.Frag != nil, "fragmentation")
		need(s.Overview != nil, "trace_summary")
		need(s.Side != nil, "diff_side")
		need(s.ZeroGrad != nil, "zero_grad")
	case rules.SourceSnapshot:
		need(s.Leaks != nil, "leaks")
		need(s.Side != nil, "diff_side")
		need(s.SnapshotStats != nil, "snapshot_stats")
	case rules.SourceTimeline:
		need(s.TorchTimeline != nil, "torch_timeline")
	}
	if len(s.Charts) > MaxCharts {
		return fmt.Errorf("%d memory charts, more than %d (one per GPU): not a torchmem summary", len(s.Charts), MaxCharts)
	}
	if len(missing) > 0 {
		return fmt.Errorf("torchmem summary of a %s without %s, which summarize always writes: not a summary torchmem wrote, or a damaged one", s.Kind, strings.Join(missing, ", "))
	}
	return nil
}
