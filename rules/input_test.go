package rules

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/torchmem/torchmem/chrometrace"
	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/memtimeline/memtest"
	"github.com/torchmem/torchmem/memtimeline/smi"
	"github.com/torchmem/torchmem/rules/frag"
	"github.com/torchmem/torchmem/rules/leak"
)

// What analyze does with a trace (every rule, then the reports' tables)
// computes each analysis once: one attribution, one lifetimes pass, one
// leak and one fragmentation analysis, shared by rules and renderers.
func TestAnalysesComputedOnce(t *testing.T) {
	for _, name := range []string{"leak_retain_graph", "amp_item_sync_slow_loader"} {
		tr := memtest.Trace(t, memtest.Testdata("gpu", name, "trace.json.gz"))
		in := &Input{Source: name, Trace: tr}
		site := memtimeline.SiteOptions{Device: -1, Depth: 5}
		RunWith(Builtin(), in, site)
		// The renderers' reads after the rules.
		in.Leaks()
		in.Frag()
		in.Sites(site)
		in.Operators()
		in.Overview(-1)
		NewInputSide(in)
		prefixes := map[string]int{}
		for key, n := range in.computed {
			if n != 1 {
				t.Errorf("%s: %s computed %d times", name, key, n)
			}
			prefixes[strings.SplitN(key, ":", 2)[0]]++
		}
		for _, p := range []string{"attribution", "lifetimes", "leaks", "frag", "operators"} {
			if prefixes[p] != 1 {
				t.Errorf("%s: %d analyses %q (keys %v)", name, prefixes[p], p, in.computed)
			}
		}
	}
}

// The shared analyses are the ones computed on their own.
func TestSharedAnalysesMatchStandalone(t *testing.T) {
	tr := memtest.Trace(t, memtest.Testdata("gpu", "leak_retain_graph", "trace.json.gz"))
	in := &Input{Trace: tr}
	RunWith(Builtin(), in, memtimeline.SiteOptions{Device: -1, Depth: 5})
	if got, want := in.Leaks(), leak.Analyze(leak.TraceData(tr, -1), leak.DefaultOptions()); !reflect.DeepEqual(got, want) {
		t.Errorf("leaks differ: shared %s %d, standalone %s %d", got.Verdict, got.GrowthBytesPerStep, want.Verdict, want.GrowthBytesPerStep)
	}
	if got, want := in.Frag(), frag.Analyze(frag.TraceData(tr), frag.DefaultOptions()); !reflect.DeepEqual(got, want) {
		t.Errorf("frag differs: shared %s, standalone %s", got.Verdict, want.Verdict)
	}
	for _, dev := range []int{-1, 0, 1} {
		if got, want := in.Lifetimes(dev), memtimeline.Lifetimes(tr, dev); !reflect.DeepEqual(got, want) && (len(got) != 0 || len(want) != 0) {
			t.Errorf("device %d: %d lifetimes shared, %d standalone", dev, len(got), len(want))
		}
	}
	o := memtimeline.SiteOptions{Device: -1, Depth: 3}
	if got, want := in.Sites(o), memtimeline.Sites(tr, chrometrace.Attribute(tr), memtimeline.Lifetimes(tr, -1), o); !reflect.DeepEqual(got, want) {
		t.Errorf("sites differ: %d shared, %d standalone", len(got), len(want))
	}
}

// Every smi rule, the leak verdict and the GPU entry read one analysis of
// an nvidia-smi log, and one of its per-process log, with the defaults
// and with the smi command's options alike.
func TestSMIAnalysisComputedOnce(t *testing.T) {
	dir := memtest.Testdata("smi", "per_process", "shared")
	load := func() (gpu, apps *Input) {
		open := func(name string) *os.File {
			f, err := os.Open(filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { f.Close() })
			return f
		}
		g, err := smi.Read(open("nvidia_smi.csv"))
		if err != nil {
			t.Fatal(err)
		}
		a, err := smi.ReadApps(open("compute_apps.csv"))
		if err != nil {
			t.Fatal(err)
		}
		return &Input{Source: "nvidia_smi.csv", SMI: g}, &Input{Source: "compute_apps.csv", SMIApps: a}
	}
	custom := smi.DefaultOptions()
	custom.Threshold, custom.MinGrowthDuration = 0.5, 3*time.Second
	for name, o := range map[string]*smi.Options{"defaults": nil, "options": &custom} {
		gpu, apps := load()
		ev := Evaluate([]*Input{gpu, apps}, Options{Rules: DefaultRuleSet(), SMI: o})
		if len(ev.Verdicts) != 1 || ev.Verdicts[0].GPU == nil {
			t.Fatalf("%s: %d verdicts, want one with its GPU entry", name, len(ev.Verdicts))
		}
		gpu.SMIAnalysis()
		apps.AppsAnalysisBeside(gpu)
		// The per-process log's analysis beside its GPU log (the zombie
		// rule's, on its own, is another).
		for in, prefix := range map[*Input]string{gpu: "smi:{", apps: `smi:apps:"nvidia_smi.csv":`} {
			n := 0
			for key, c := range in.computed {
				if c != 1 {
					t.Errorf("%s: %s computed %d times", name, key, c)
				}
				if strings.HasPrefix(key, prefix) {
					n++
				}
			}
			if n != 1 {
				t.Errorf("%s: %s: %d analyses %q (keys %v)", name, in.Source, n, prefix, in.computed)
			}
		}
	}
}
