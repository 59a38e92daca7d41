package memtimeline

import (
	"strings"
	"testing"

	"github.com/torchmem/torchmem/chrometrace"
	"github.com/torchmem/torchmem/memtimeline/memtest"
)

type truth struct {
	LeakBytesPerStep int64 `json:"leak_bytes_per_step"`
	Window           struct {
		Active int `json:"active"`
	} `json:"window"`
}

func readTruth(t testing.TB, name string) truth {
	var tr truth
	memtest.ReadJSON(t, memtest.Testdata("traces", name, "truth.json"), &tr)
	return tr
}

// The planted leak (a module appending a 4 MiB clone to a list every
// forward) is the site with the most bytes alive at the end.
func TestSitesFindPlantedLeakLine(t *testing.T) {
	tr := memtest.NamedTrace(t, "leak_module_cache")
	truth := readTruth(t, "leak_module_cache")
	sites := Sites(tr, chrometrace.Attribute(tr), Lifetimes(tr, -1), SiteOptions{Device: -1, Depth: 5})
	top := sites[0]
	if inner := top.Frames[len(top.Frames)-1]; inner != "gen_traces.py(143): forward" {
		t.Errorf("innermost frame %q", inner)
	}
	if !strings.HasPrefix(top.Operator, "aten::clone") {
		t.Errorf("operator %q", top.Operator)
	}
	want := truth.LeakBytesPerStep * int64(truth.Window.Active)
	if top.LiveBytesAtEnd != want || top.LiveBlocksAtEnd != int64(truth.Window.Active) {
		t.Errorf("live at end %d bytes in %d blocks, planted %d bytes in %d", top.LiveBytesAtEnd, top.LiveBlocksAtEnd, want, truth.Window.Active)
	}
}

// Every allocated byte lands in exactly one site, and the bytes alive at
// the end equal the unreleased blocks.
func TestSitesConserveBytes(t *testing.T) {
	for _, name := range []string{"resnet_train_clean", "leak_eval_no_grad", "compiled_model"} {
		tr := memtest.NamedTrace(t, name)
		lts := Lifetimes(tr, -1)
		var alloc, live int64
		for _, lt := range lts {
			if lt.Alloc >= 0 {
				alloc += lt.Bytes
			}
			if lt.State == Unreleased {
				live += lt.Bytes
			}
		}
		var eventsAlloc int64
		for _, e := range tr.Memory {
			if e.DeviceType.IsGPU() && e.Bytes > 0 {
				eventsAlloc += e.Bytes
			}
		}
		var sAlloc, sLive int64
		for _, s := range Sites(tr, chrometrace.Attribute(tr), lts, SiteOptions{Device: -1}) {
			sAlloc += s.AllocBytes
			sLive += s.LiveBytesAtEnd
		}
		if sAlloc != alloc || alloc != eventsAlloc || sLive != live {
			t.Errorf("%s: sites alloc %d live %d; lifetimes alloc %d live %d; events alloc %d", name, sAlloc, sLive, alloc, live, eventsAlloc)
		}
	}
}

// Backward-pass allocations have no Python frames on their own thread;
// they must be tied to the forward op and its Python stack.
func TestBackwardAllocationsReachForwardCode(t *testing.T) {
	tr := memtest.NamedTrace(t, "resnet_train_clean")
	attr := chrometrace.Attribute(tr)
	var backward, linked int
	for i, e := range tr.Memory {
		if !e.DeviceType.IsGPU() || e.Bytes <= 0 {
			continue
		}
		chain := attr.OpChain(i)
		if len(chain) == 0 || !strings.Contains(chain[0], "Backward") && !strings.HasPrefix(chain[0], "autograd::") {
			continue
		}
		backward++
		if attr.ForwardOp(i) != "" && len(attr.PyStack(i)) > 0 {
			linked++
		}
	}
	if backward == 0 || linked < backward*9/10 {
		t.Errorf("%d of %d backward allocations linked to forward code", linked, backward)
	}
}

// Without with_stack, sites are operator chains only.
func TestSitesWithoutStacks(t *testing.T) {
	tr := memtest.NamedTrace(t, "leak_module_cache")
	tr.PyFrames = nil
	sites := Sites(tr, chrometrace.Attribute(tr), Lifetimes(tr, -1), SiteOptions{Device: -1})
	found := false
	for _, s := range sites {
		if len(s.Frames) != 0 {
			t.Errorf("frames without python_function events: %+v", s)
		}
		if strings.HasPrefix(s.Operator, "aten::clone") && s.LiveBytesAtEnd == 6<<22 {
			found = true
		}
	}
	if !found {
		t.Error("the leaking aten::clone site is not found by operator chain alone")
	}
}

func TestLifetimesClassify(t *testing.T) {
	tr := memtest.NamedTrace(t, "leak_module_cache")
	counts := map[BlockState]int{}
	for _, lt := range Lifetimes(tr, -1) {
		counts[lt.State]++
		if lt.State == Freed && lt.End < lt.Start {
			t.Fatalf("freed before allocated: %+v", lt)
		}
	}
	if counts[Freed] == 0 || counts[Unreleased] == 0 || counts[Preexisting] == 0 {
		t.Errorf("states %v: a training window frees pre-window blocks, frees its own and keeps some", counts)
	}
}
