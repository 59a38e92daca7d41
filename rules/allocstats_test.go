package rules

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/memtimeline/memtest"
)

// stepKeys reads key of every line of a steps log, by step, with plain
// JSON: the oracle the answers are checked against.
func stepKeys(t *testing.T, path, key string) map[int64]int64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[int64]int64{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) != nil {
			continue
		}
		s, ok1 := m["step"].(float64)
		v, ok2 := m[key].(float64)
		if ok1 && ok2 {
			out[int64(s)] = int64(v)
		}
	}
	return out
}

// Reserved growing while allocated stays flat: the answer counts the
// cudaMalloc calls that made the new segments (num_device_alloc), and
// that none were given back (num_device_free), over the growth's steps.
func TestReservedGrowthCountsCudaMalloc(t *testing.T) {
	path := memtest.Testdata("gpu", "round4", "reserved_growth_flat_allocated", "run_rank0.steps.jsonl")
	v := judgeAll(loadInputs(t, path))[0]
	if v.Frag == nil || v.Frag.ReservedGrowth == nil || v.Frag.ReservedGrowth.Counts == nil {
		t.Fatalf("no reserved growth with counts: %+v", v.Frag)
	}
	g := v.Frag.ReservedGrowth
	allocs, frees := stepKeys(t, path, "num_device_alloc"), stepKeys(t, path, "num_device_free")
	wantA, wantF := allocs[g.LastStep]-allocs[g.FirstStep], frees[g.LastStep]-frees[g.FirstStep]
	if wantA <= 0 || g.Counts.DeviceAllocs != wantA || g.Counts.DeviceFrees != wantF || g.PrivatePools {
		t.Errorf("counts %+v, want %d cudaMalloc and %d cudaFree over steps %d..%d", g.Counts, wantA, wantF, g.FirstStep, g.LastStep)
	}
	if want := fmt.Sprintf("%d cudaMalloc and %d cudaFree over steps %d..%d", wantA, wantF, g.FirstStep, g.LastStep); !strings.Contains(g.Reason, want) {
		t.Errorf("reason %q lacks %q", g.Reason, want)
	}
	// The run records no private pools (torch 2.11's memory_stats has no
	// reserved_bytes_by_private_pools): nothing is said of them.
	if g.Counts.PrivatePoolBytes != -1 || strings.Contains(g.Reason, "private pools") {
		t.Errorf("private pools said without being recorded: %+v %q", g.Counts, g.Reason)
	}
}

// cudaMalloc retries: the answer adds the cudaMalloc and cudaFree calls
// the log counts, the retries giving segments back and taking them again.
func TestRetriesCountCudaMallocAndFree(t *testing.T) {
	path := memtest.Testdata("gpu", "round4", "retries_under_cap", "run_rank0.steps.jsonl")
	v := judgeAll(loadInputs(t, path))[0]
	allocs, frees := stepKeys(t, path, "num_device_alloc"), stepKeys(t, path, "num_device_free")
	first, last := int64(-1), int64(-1)
	for s := range allocs {
		if first < 0 || s < first {
			first = s
		}
		last = max(last, s)
	}
	want := fmt.Sprintf("%d cudaMalloc and %d cudaFree over steps %d..%d", allocs[last]-allocs[first], frees[last]-frees[first], first, last)
	if v.Frag == nil || !strings.Contains(v.Frag.Retries, want) || frees[last]-frees[first] <= 0 {
		t.Errorf("retries %q, want %q", v.Frag.Retries, want)
	}
}

// Private pools (CUDA graphs, torch.cuda.MemPool) that hold the reserved
// growth make it no fragmentation cost: the answer says so. No recorded
// log carries reserved_bytes_by_private_pools (torch 2.11 does not report
// it), so the recorded log above gets the key as a newer torch writes it:
// the pool holding all of the growth, then a quarter of it.
func TestReservedGrowthInPrivatePools(t *testing.T) {
	in := loadInput(t, memtest.Testdata("gpu", "round4", "reserved_growth_flat_allocated", "run_rank0.steps.jsonl"))
	recs := in.StepLog.Series[0].Records
	for _, share := range []int64{1, 4} {
		for i := range recs {
			recs[i].PrivatePoolBytes = (recs[i].ReservedBytes - recs[0].ReservedBytes) / share
		}
		g := reservedGrowth(recs)
		if g == nil {
			t.Fatal("no reserved growth")
		}
		explainReservedGrowth(g, recs)
		pooled := share == 1
		if g.PrivatePools != pooled || strings.Contains(g.Reason, "not a leak nor fragmentation") != pooled || (g.Advice == AdvicePrivatePools) != pooled {
			t.Errorf("pools hold 1/%d of the growth: private pools %v, reason %q, advice %q", share, g.PrivatePools, g.Reason, g.Advice)
		}
		if !strings.Contains(g.Reason, "of reserved is in private pools") {
			t.Errorf("reason %q does not say what the pools hold", g.Reason)
		}
	}
}
