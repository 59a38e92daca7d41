package rules

import (
	"strings"
	"testing"

	"github.com/torchmem/torchmem/chrometrace"
	"github.com/torchmem/torchmem/memtimeline/memsummary"
	"github.com/torchmem/torchmem/memtimeline/memtest"
	"github.com/torchmem/torchmem/memtimeline/smi"
	"github.com/torchmem/torchmem/memtimeline/snapshot"
	"github.com/torchmem/torchmem/memtimeline/steplog"
)

// NewInput takes its kind from the data and refuses none or several.
func TestNewInputKindFromData(t *testing.T) {
	tr := memtest.NamedTrace(t, "leak_module_cache")
	snap := memtest.Decode(t, memtest.NamedSnapshot("leak_module_cache"), snapshot.Read)
	for _, c := range []struct {
		data Data
		want SourceKind
	}{
		{Data{Trace: tr}, SourceTrace},
		{Data{Snapshot: snap}, SourceSnapshot},
		{Data{StepLog: &steplog.Log{}}, SourceSteps},
		{Data{SMI: &smi.Log{}}, SourceSMI},
		{Data{SMIApps: &smi.AppsLog{}}, SourceSMIApps},
		{Data{MemSummary: &memsummary.Log{}}, SourceMemSummary},
	} {
		in, err := NewInput("f", 3, c.data)
		if err != nil {
			t.Fatalf("%s: %v", c.want, err)
		}
		if in.Kind != c.want || in.InputKind() != c.want || !in.Is(c.want) || in.Rank != 3 || in.Source != "f" {
			t.Errorf("%s: got kind %q (InputKind %q), rank %d", c.want, in.Kind, in.InputKind(), in.Rank)
		}
		if c.want == SourceMemSummary && in.StepLog == nil {
			t.Error("a memory_summary() input reads as a step log too")
		}
		if in.hasSteps() != (c.want == SourceSteps || c.want == SourceMemSummary) {
			t.Errorf("%s: HasSteps %v", c.want, in.hasSteps())
		}
	}
	if _, err := NewInput("f", -1, Data{}); err == nil {
		t.Error("an input with no data was accepted")
	}
	if _, err := NewInput("f", -1, Data{Trace: tr, Snapshot: snap}); err == nil || !strings.Contains(err.Error(), "trace and snapshot") {
		t.Errorf("a trace and a snapshot in one input: %v", err)
	}
	if _, err := NewInput("f", -1, Data{MemSummary: &memsummary.Log{}, StepLog: &steplog.Log{}}); err == nil {
		t.Error("a memory_summary() log beside another step log was accepted")
	}
	if _, err := NewDigestInput("f", "pickle", -1, &Digest{}); err == nil {
		t.Error("a digest of an unknown kind was accepted")
	}
	if _, err := NewDigestInput("f", SourceTrace, -1, nil); err == nil {
		t.Error("a summary without its digest was accepted")
	}
	in, err := NewDigestInput("f", SourceTrace, -1, &Digest{})
	if err != nil || !in.Is(SourceTrace) || !in.IsDigest() {
		t.Errorf("a trace's digest: %v %+v", err, in)
	}
	if (&Input{Trace: &chrometrace.Trace{}}).InputKind() != SourceTrace || (&Input{}).InputKind() != sourceUnknown {
		t.Error("a literal's kind is its data's")
	}
}

// Every built-in rule says what it reads, in kinds that exist.
func TestEveryRuleDeclaresWhatItReads(t *testing.T) {
	for _, r := range Builtin() {
		if len(r.Reads) == 0 {
			t.Errorf("%s reads no kind of input", r.ID)
		}
		for _, k := range r.Reads {
			if _, err := ParseSourceKind(string(k)); err != nil {
				t.Errorf("%s: %v", r.ID, err)
			}
		}
	}
}

// Run calls a rule only on inputs of the kinds it reads, and never on a
// summary's digest (its findings were computed when it was summarized):
// on a real trace, a rule that reads snapshots is not called, one that
// reads traces is.
func TestRunCallsRulesOnlyOnTheirKinds(t *testing.T) {
	in, err := NewInput("leak_module_cache", -1, Data{Trace: memtest.NamedTrace(t, "leak_module_cache")})
	if err != nil {
		t.Fatal(err)
	}
	called := 0
	rs := []Rule{
		{ID: "test.snapshot-only", Reads: []SourceKind{SourceSnapshot, SourceSteps, SourceSMI, SourceSMIApps, SourceTimeline, SourceMemSummary},
			Check: func(r *Rule, in *Input) []Finding {
				t.Errorf("%s called on a %s input", r.ID, in.InputKind())
				return nil
			}},
		{ID: "test.reads-nothing", Check: func(r *Rule, in *Input) []Finding {
			t.Errorf("%s called though it reads no kind", r.ID)
			return nil
		}},
		{ID: "test.trace", Reads: []SourceKind{SourceTrace}, Check: func(r *Rule, in *Input) []Finding {
			called++
			return []Finding{{Title: "seen"}}
		}},
	}
	if fs := Run(rs, in); called != 1 || len(fs) != 1 || fs[0].Rule != "test.trace" {
		t.Errorf("the trace rule was called %d times, findings %+v", called, fs)
	}
	digest, err := NewDigestInput("leak_module_cache", SourceTrace, -1, MakeDigest(in))
	if err != nil {
		t.Fatal(err)
	}
	called = 0
	Run(rs, digest)
	if called != 0 {
		t.Error("a rule was called on a digest")
	}
}
