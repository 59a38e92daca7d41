package chrometrace

import (
	"slices"
	"strings"
	"testing"
)

// The interned site tables name every memory event exactly as walking its
// own frames and operators does, on real traces (training with backward
// work, a compiled model, a leak).
func TestSiteTablesMatchTheWalk(t *testing.T) {
	for _, name := range []string{"leak_module_cache", "compiled_model", "resnet_train_clean", "leak_eval_no_grad"} {
		t.Run(name, func(t *testing.T) {
			tr := readTestTrace(t, name)
			a := Attribute(tr)
			withStack := 0
			for i := range tr.Memory {
				frames := a.PyStack(i)
				for k, f := range frames {
					frames[k] = NormalizeFrame(f)
				}
				var want []string
				if len(frames) > 0 {
					want = UserChain(frames)
					withStack++
				}
				if got := a.UserStack(i); !slices.Equal(got, want) {
					t.Fatalf("event %d: UserStack %q, the walk gives %q", i, got, want)
				}
				if got, want := a.OpChainText(i), strings.Join(a.OpChain(i), " > "); got != want {
					t.Fatalf("event %d: OpChainText %q, the walk gives %q", i, got, want)
				}
			}
			if withStack == 0 {
				t.Fatalf("no memory event has a Python stack: the test proves nothing")
			}
		})
	}
}

// SiteNodes are equal exactly when the named stacks and chains are: the
// analyses that sum per site by node ids name each site as the walk does.
func TestSiteNodesIdentifySites(t *testing.T) {
	for _, name := range []string{"leak_module_cache", "resnet_train_clean"} {
		t.Run(name, func(t *testing.T) {
			tr := readTestTrace(t, name)
			a := Attribute(tr)
			stacks, chains := map[int32]string{}, map[int32]string{}
			for i := range tr.Memory {
				s, c := a.SiteNodes(i)
				stack, chain := strings.Join(a.PyStack(i), "\x00"), strings.Join(a.OpChain(i), "\x00")
				if prev, ok := stacks[s]; ok && prev != stack {
					t.Fatalf("event %d: stack node %d names %q and %q", i, s, prev, stack)
				}
				if prev, ok := chains[c]; ok && prev != chain {
					t.Fatalf("event %d: chain node %d names %q and %q", i, c, prev, chain)
				}
				stacks[s], chains[c] = stack, chain
				if got, want := tr.Str(a.ForwardName(i)), a.ForwardOp(i); got != want {
					t.Fatalf("event %d: ForwardName %q, ForwardOp %q", i, got, want)
				}
			}
			if len(stacks) < 3 || len(chains) < 3 {
				t.Fatalf("%d stacks, %d chains: the test proves nothing", len(stacks), len(chains))
			}
		})
	}
}

// The attribution sweeps each thread's events against its frames; every
// event outside backward work gets the frame a search for it finds.
func TestAttributionFramesMatchTheSearch(t *testing.T) {
	for _, name := range []string{"big_transformer", "leak_module_cache", "resnet_train_clean"} {
		t.Run(name, func(t *testing.T) {
			tr := readTestTrace(t, name)
			a := Attribute(tr)
			framed := 0
			for i, ev := range a.Events {
				if ev.Forward >= 0 {
					continue
				}
				if want := a.frameAt(tr.Memory[i].Thread, tr.Memory[i].TS); ev.Frame != want {
					t.Fatalf("event %d: frame %d, the search finds %d", i, ev.Frame, want)
				}
				if ev.Frame >= 0 {
					framed++
				}
			}
			if framed == 0 {
				t.Fatal("no event has a frame: the test proves nothing")
			}
		})
	}
}
