package main

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/torchmem/torchmem/memtimeline/memtest"
)

// The real multi-rank recordings (torchrun + gloo on one GPU, the snippet
// on every rank) as a user runs leaks on the run's folder: one verdict per
// rank, the leaking rank named alone across ranks, exit 1 when a rank
// leaks and 0 for the clean 8-rank job. The synthesized 64 ranks are in
// summarize_test.go.
func TestLeaksOnRealMultiRankRuns(t *testing.T) {
	t.Parallel() // see torchmem: which tests may run side by side
	for _, run := range []string{"ddp4_leak", "ddp8_clean", "fsdp2_leak"} {
		t.Run(run, func(t *testing.T) {
			dir := memtest.Testdata("gpu", "multirank", run)
			var truth struct {
				WorldSize int    `json:"world_size"`
				LeakyRank *int64 `json:"leaky_rank"`
			}
			memtest.ReadJSON(t, filepath.Join(dir, "truth.json"), &truth)
			out, stderr, code := torchmem(t, "leaks", dir, "--format", "json")
			wantCode, wantOutliers := exitOK, []int64{}
			if truth.LeakyRank != nil {
				wantCode, wantOutliers = exitFindings, []int64{*truth.LeakyRank}
			}
			if code != wantCode {
				t.Fatalf("exit %d, want %d: %s", code, wantCode, stderr)
			}
			var got struct {
				Verdicts []struct {
					Rank int64 `json:"rank"`
					Leak struct {
						Verdict string `json:"verdict"`
					} `json:"leak"`
				} `json:"verdicts"`
				CrossRank struct {
					Outliers []int64 `json:"outliers"`
				} `json:"cross_rank"`
			}
			decodeJSON(t, out, &got)
			if len(got.Verdicts) != truth.WorldSize {
				t.Errorf("%d verdicts for %d ranks", len(got.Verdicts), truth.WorldSize)
			}
			for i, v := range got.Verdicts {
				want := "clean"
				if truth.LeakyRank != nil && v.Rank == *truth.LeakyRank {
					want = "leak"
				}
				if v.Rank != int64(i) || v.Leak.Verdict != want {
					t.Errorf("verdict %d: rank %d %s, want rank %d %s", i, v.Rank, v.Leak.Verdict, i, want)
				}
			}
			if !slices.Equal(got.CrossRank.Outliers, wantOutliers) {
				t.Errorf("outliers %v, want %v", got.CrossRank.Outliers, wantOutliers)
			}
		})
	}
}
