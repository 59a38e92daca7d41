package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/memtimeline/memtest"
	"github.com/torchmem/torchmem/rules"
)

type annotatedEvent struct {
	Name string         `json:"name"`
	Cat  string         `json:"cat"`
	Ph   string         `json:"ph"`
	TS   float64        `json:"ts"`
	S    string         `json:"s"`
	Args map[string]any `json:"args"`
}

// annotate on real recordings: the output is valid JSON, it is the input
// byte for byte with the new events inserted at the end of traceEvents
// (so every original event is kept unchanged), and the added tracks carry
// torch's own numbers: the last allocated value is the trace's, the OOM
// marker sits at the trace's OOM, a leak's track ends at what it kept.
func TestAnnotateRealTraces(t *testing.T) {
	t.Parallel() // see torchmem: which tests may run side by side
	for _, tc := range []struct {
		name, trace, out string
		oom, leak, retry bool
	}{
		{"oom, gzipped", memtest.Testdata("gpu", "hf_trainer_oom", "vm_1270_20261201-082809_rank0_step5.pt.trace.json.gz"), "a.json.gz", true, false, false},
		{"leak", memtest.Testdata("gpu", "leak_hook_every_step", "trace.json.gz"), "a.json", false, true, false},
		{"allocator retries", memtest.GlobOne(t, memtest.Testdata("gpu", "alloc_retry"), "*.pt.trace.json.gz"), "a.json", false, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), tc.out)
			stdout, stderr, code := torchmem(t, "annotate", tc.trace, "-o", out)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			raw, _ := os.ReadFile(out)
			if gz := bytes.HasPrefix(raw, []byte{0x1f, 0x8b}); gz != strings.HasSuffix(out, ".gz") {
				t.Errorf("%s: gzipped %v", out, gz)
			}
			in, got := memtest.ReadAll(t, tc.trace), memtest.ReadAll(t, out)
			if !json.Valid(got) {
				t.Fatal("the output is not valid JSON")
			}
			// got = in[:k] + added + in[k:]: one insertion, nothing else changed.
			k := 0
			for k < len(in) && in[k] == got[k] {
				k++
			}
			extra := len(got) - len(in)
			if extra <= 0 || !bytes.Equal(in[k:], got[k+extra:]) {
				t.Fatalf("the output is not the input with events inserted at one place (differs from byte %d)", k)
			}
			var doc, orig struct {
				TraceEvents []json.RawMessage `json:"traceEvents"`
			}
			if err := json.Unmarshal(got, &doc); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(in, &orig); err != nil {
				t.Fatal(err)
			}
			for i, e := range orig.TraceEvents {
				if !bytes.Equal(e, doc.TraceEvents[i]) {
					t.Fatalf("event %d changed:\n%s\n%s", i, e, doc.TraceEvents[i])
				}
			}
			added := doc.TraceEvents[len(orig.TraceEvents):]
			if !strings.Contains(stdout, "and "+strconv.Itoa(len(added))+" added") {
				t.Errorf("stdout %q does not count the %d added events", stdout, len(added))
			}
			tr := memtest.Trace(t, tc.trace)
			lastAlloc := map[string]float64{}
			var ooms, leakMarks, retries int
			var leakKept float64
			for _, r := range added {
				var e annotatedEvent
				if err := json.Unmarshal(r, &e); err != nil {
					t.Fatal(err)
				}
				if e.Cat != "torchmem" {
					t.Errorf("added event %s without the torchmem category", r)
				}
				switch {
				case e.Ph == "C" && strings.HasSuffix(e.Name, " allocated (torchmem)"):
					lastAlloc[e.Name] = e.Args["bytes"].(float64)
				case e.Ph == "C" && strings.HasPrefix(e.Name, "leak 1 kept"):
					leakKept = e.Args["bytes"].(float64)
				case e.Ph == "i" && strings.HasPrefix(e.Name, "OOM: "):
					ooms++
					if o := tr.OOMs[0]; e.TS != float64(o.TS)/1e3 || e.Args["requested_bytes"].(float64) != float64(o.Bytes) {
						t.Errorf("OOM marker %s, trace's OOM at %d ns for %d bytes", r, o.TS, o.Bytes)
					}
				case e.Ph == "i" && strings.HasPrefix(e.Name, "leak 1: "):
					leakMarks++
				case e.Ph == "i" && strings.Contains(e.Name, ": cudaMalloc retry"):
					retries++
				}
			}
			var lastEvent int64 = -1
			var want float64
			for _, m := range tr.Memory {
				if m.DeviceType.IsGPU() && m.TS >= lastEvent {
					lastEvent, want = m.TS, float64(m.TotalAllocated)
				}
			}
			if got := lastAlloc["cuda:0 allocated (torchmem)"]; len(lastAlloc) != 1 || got != want {
				t.Errorf("allocated tracks %v, want cuda:0 ending at the trace's last total_allocated %.0f", lastAlloc, want)
			}
			if want := (&rules.Input{Source: tc.trace, Rank: -1, Trace: tr}).Frag().AllocRetries; tc.retry && (retries == 0 || int64(retries) != want) {
				t.Errorf("%d retry markers, the allocator retried %d times in the trace", retries, want)
			}
			if tc.oom && ooms != len(tr.OOMs) {
				t.Errorf("%d OOM markers, the trace has %d", ooms, len(tr.OOMs))
			}
			if tc.leak {
				in := &rules.Input{Source: tc.trace, Rank: -1, Trace: tr}
				kept := int64(0)
				for _, s := range in.Leaks().Leaks[0].Sites {
					for _, b := range s.BytesByStep {
						kept += b
					}
				}
				if leakMarks < 3 || leakKept != float64(kept) {
					t.Errorf("%d leak markers, track ends at %.0f bytes; the leak kept %d", leakMarks, leakKept, kept)
				}
			}
		})
	}
}

// Bad input: one clear error and exit 2, and no output file left behind.
func TestAnnotateBadInput(t *testing.T) {
	dir := t.TempDir()
	whole := memtest.ReadAll(t, memtest.Testdata("gpu", "leak_hook_every_step", "trace.json.gz"))
	cut := filepath.Join(dir, "cut.json")
	os.WriteFile(cut, whole[:len(whole)/2], 0o644)
	notTrace := filepath.Join(dir, "notes.json")
	os.WriteFile(notTrace, []byte(`{"hello": 1}`), 0o644)
	out := filepath.Join(dir, "out.json")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no -o", []string{"annotate", cut}, "-o OUT"},
		{"truncated", []string{"annotate", cut, "-o", out}, "truncated"},
		{"directory", []string{"annotate", dir, "-o", out}, "is a directory"},
		{"stdin", []string{"annotate", "-", "-o", out}, "name a file"},
		{"not a trace", []string{"annotate", notTrace, "-o", out}, "notes.json"},
		{"two traces", []string{"annotate", cut, cut, "-o", out}, "accepts 1 arg"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, stderr, code := torchmem(t, tc.args...)
			if code != exitBadInput || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want 2 and %q", code, stderr, tc.want)
			}
			if _, err := os.Stat(out); err == nil {
				t.Error("an output was left behind")
			}
		})
	}
}

// Names from the trace (an operator named like markup, a thread named with
// quotes) stay strings in the added events: the output is valid JSON.
func TestAnnotateHostileNames(t *testing.T) {
	dir := t.TempDir()
	trace := filepath.Join(dir, "hostile.json")
	os.WriteFile(trace, []byte(hostileTrace), 0o644)
	out := filepath.Join(dir, "out.json")
	if _, stderr, code := torchmem(t, "annotate", trace, "-o", out); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	b, _ := os.ReadFile(out)
	if !json.Valid(b) || !bytes.HasPrefix(b, []byte(hostileTrace[:strings.Index(hostileTrace, `], "deviceProperties"`)])) {
		t.Errorf("output not valid JSON or the input changed:\n%s", b)
	}
}

// A torch 1.8 trace records no Total Reserved and no Total Allocated: the
// annotated trace has no reserved track (a track at 0 B would read as a
// measurement in Perfetto) and its allocated track says it counts from
// the window's start; the original events are still all there.
func TestAnnotateTraceWithoutTotals(t *testing.T) {
	t.Parallel() // see torchmem: which tests may run side by side
	trace := memtest.Testdata("public", "kineto_tb_plugin", "worker0.1623143089861.pt.trace.json.gz")
	out := filepath.Join(t.TempDir(), "a.json")
	if _, stderr, code := torchmem(t, "annotate", trace, "-o", out); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var doc, orig struct {
		TraceEvents []json.RawMessage `json:"traceEvents"`
	}
	if err := json.Unmarshal(memtest.ReadAll(t, out), &doc); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(memtest.ReadAll(t, trace), &orig); err != nil {
		t.Fatal(err)
	}
	if len(doc.TraceEvents) <= len(orig.TraceEvents) {
		t.Fatalf("%d events, the input has %d", len(doc.TraceEvents), len(orig.TraceEvents))
	}
	for i, e := range orig.TraceEvents {
		if !bytes.Equal(e, doc.TraceEvents[i]) {
			t.Fatalf("event %d changed", i)
		}
	}
	names := map[string]int{}
	for _, r := range doc.TraceEvents[len(orig.TraceEvents):] {
		var e annotatedEvent
		if json.Unmarshal(r, &e) == nil && e.Cat == "torchmem" && e.Ph == "C" {
			names[e.Name]++
		}
	}
	if len(names) != 1 || names["cuda:0 allocated since the window's start (torchmem)"] == 0 {
		t.Errorf("counter tracks %v, want the allocated one alone, named as counted from the window's start", names)
	}
}
