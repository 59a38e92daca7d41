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
