package rules

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/torchmem/torchmem/chrometrace"
)

func readTrace(t testing.TB, name string) *chrometrace.Trace {
	t.Helper()
	in, err := chrometrace.Open(filepath.Join("..", "testdata", "traces", name, "trace.json.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	tr, err := chrometrace.Read(in, chrometrace.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func TestLeakDump(t *testing.T) {
	for _, name := range []string{"leak_module_cache", "leak_eval_no_grad", "resnet_train_clean", "big_transformer", "compiled_model", "frag_small_allocs", "no_memory"} {
		rep := AnalyzeLeaks(readTrace(t, name), DefaultLeakOptions())
		b, _ := json.Marshal(rep.Steps)
		t.Logf("%s: %s growth=%d reason=%s\n steps=%s", name, rep.Verdict, rep.GrowthBytesPerStep, rep.Reason, b)
		for _, s := range rep.Suspects[:min(3, len(rep.Suspects))] {
			t.Logf("   suspect %d/step blocks=%d op=%s stack=%v", s.BytesPerStep, s.Blocks, s.Operator, s.Stack)
		}
	}
	_ = os.Getenv
}
