package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/memtimeline/memtest"
)

// frag words no verdict of its own: on a trace, a snapshot and a
// memory_summary() log it says what analyze says, and its flags are the
// thresholds the Evaluation judges with.
func TestFragIsTheEvaluationsAnswer(t *testing.T) {
	t.Parallel() // see torchmem: which tests may run side by side
	fragmentedLog := summaryLog(t, func(s string) string {
		return strings.Replace(s, "| Non-releasable memory |      0 B   |", "| Non-releasable memory |   1536 MiB |", 1)
	})
	retriedLog := summaryLog(t, func(s string) string {
		i := strings.LastIndex(s, "cudaMalloc retries:")
		if i < 0 {
			t.Fatal("no retries row in the log")
		}
		return s[:i] + strings.Replace(s[i:], "cudaMalloc retries: 0", "cudaMalloc retries: 3", 1)
	})
	for _, c := range []struct{ name, path, want string }{
		{"trace", realTrace("frag_small_allocs"), "ok"}, // a flood of small blocks that cost nothing
		{"snapshot", memtest.Testdata("snapshots", "frag_small_allocs.pickle.gz"), ""},
		{"clean memory_summary", summaryLog(t, func(s string) string { return s }), "ok"},
		{"memory_summary", fragmentedLog, "ok"}, // 1.5 GiB non-releasable, no retry: no cost
		{"memory_summary with retries", retriedLog, "fragmented"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, errOut, _ := torchmem(t, "frag", c.path, "--format", "json")
			var fragDoc struct {
				Verdict string `json:"verdict"`
			}
			if err := json.Unmarshal([]byte(onlyInput(t, out)), &fragDoc); err != nil {
				t.Fatalf("frag: %v\n%s%s", err, out, errOut)
			}
			out, errOut, _ = torchmem(t, "analyze", c.path, "--format", "json")
			var an struct {
				Verdicts []struct {
					Frag *struct {
						Verdict string `json:"verdict"`
					} `json:"fragmentation"`
				} `json:"verdicts"`
			}
			if err := json.Unmarshal([]byte(out), &an); err != nil || len(an.Verdicts) != 1 || an.Verdicts[0].Frag == nil {
				t.Fatalf("analyze: %v\n%s%s", err, out, errOut)
			}
			if got := an.Verdicts[0].Frag.Verdict; got != fragDoc.Verdict || (c.want != "" && got != c.want) {
				t.Errorf("frag says %q, analyze %q (want %q)", fragDoc.Verdict, got, c.want)
			}
		})
	}
	// The thresholds given to frag are the ones its verdict is judged with.
	out, _, code := torchmem(t, "frag", realTrace("frag_small_allocs"), "--min-small-per-step", "1e9", "--min-gap-fraction", "1", "--min-churn-per-step", "1e9")
	if code != exitOK || strings.Contains(out, "Verdict: FRAGMENTED") {
		t.Errorf("thresholds out of reach: exit %d\n%s", code, out)
	}
}
