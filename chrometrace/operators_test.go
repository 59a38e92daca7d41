package chrometrace

import (
	"cmp"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// oracleRow is one row of torch's own key_averages() output, saved beside
// each real trace when it was recorded.
type oracleRow struct {
	Key         string   `json:"key"`
	Count       int64    `json:"count"`
	Stack       []string `json:"stack"`
	InputShapes string   `json:"input_shapes"`
	Self        int64    `json:"self_device_memory_usage"`
	Total       *int64   `json:"device_memory_usage"`
	SelfCPU     *int64   `json:"self_cpu_memory_usage"`
	CPU         *int64   `json:"cpu_memory_usage"`
}

func readTestTrace(t testing.TB, name string) *Trace {
	t.Helper()
	return readTraceFile(t, filepath.Join("..", "testdata", "traces", name, "trace.json.gz"))
}

func readTraceFile(t testing.TB, path string) *Trace {
	t.Helper()
	in, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	tr, err := Read(in, ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// oracleDirs lists every recorded run with the given torch oracle beside
// its trace: the shared traces and the ones recorded for this project.
func oracleDirs(t testing.TB, oracle string) []string {
	var dirs []string
	for _, pattern := range []string{
		filepath.Join("..", "testdata", "traces", "*", oracle),
		filepath.Join("..", "testdata", "gpu", "*", oracle),
		filepath.Join("..", "testdata", "gpu", "*", "*", oracle),
	} {
		m, _ := filepath.Glob(pattern)
		for _, p := range m {
			if _, err := os.Stat(filepath.Join(filepath.Dir(p), "trace.json.gz")); err == nil {
				dirs = append(dirs, filepath.Dir(p))
			}
		}
	}
	if len(dirs) == 0 {
		t.Fatalf("no %s oracles in testdata", oracle)
	}
	return dirs
}

// cmpRow is what the oracle and our rows are compared on. Torch keys rows
// by device type too, which its JSON does not carry, so rows sharing a key
// are compared as sorted lists.
type cmpRow struct {
	Calls, Self, Total, SelfCPU, CPU int64
}

func TestOperatorsMatchTorchKeyAverages(t *testing.T) {
	type grouping struct {
		oracle string
		by     GroupBy
	}
	// Each run's trace is read once for the oracles beside it (one per
	// grouping): three reads of the same trace were two thirds of this
	// test's CPU.
	var dirs []string
	oracles := map[string][]grouping{}
	for _, g := range []grouping{
		{"key_averages.json", GroupByName},
		{"key_averages_stack.json", GroupByStack},
		{"key_averages_shape.json", GroupByShape},
	} {
		for _, dir := range oracleDirs(t, g.oracle) {
			if oracles[dir] == nil {
				dirs = append(dirs, dir)
			}
			oracles[dir] = append(oracles[dir], g)
		}
	}
	for _, dir := range dirs {
		tr := readTraceFile(t, filepath.Join(dir, "trace.json.gz"))
		for _, g := range oracles[dir] {
			name := strings.TrimPrefix(filepath.ToSlash(dir), "../testdata/")
			t.Run(name+"/"+g.oracle, func(t *testing.T) {
				data, err := os.ReadFile(filepath.Join(dir, g.oracle))
				if err != nil {
					t.Fatal(err)
				}
				var oracle []oracleRow
				if err := json.Unmarshal(data, &oracle); err != nil {
					t.Fatal(err)
				}
				// Not every oracle file has every column; compare the ones it has.
				hasTotal := oracle[0].Total != nil
				hasCPU := oracle[0].SelfCPU != nil
				want := map[string][]cmpRow{}
				for _, w := range oracle {
					r := cmpRow{Calls: w.Count, Self: w.Self}
					if hasTotal {
						r.Total = *w.Total
					}
					if hasCPU {
						r.SelfCPU, r.CPU = *w.SelfCPU, *w.CPU
					}
					k := rowKey(w.Key, w.InputShapes, w.Stack)
					want[k] = append(want[k], r)
				}
				got := map[string][]cmpRow{}
				for _, r := range Operators(tr, OperatorOptions{Device: -1, GroupBy: g.by}) {
					c := cmpRow{Calls: r.Calls, Self: r.SelfDeviceMemory}
					if hasTotal {
						c.Total = r.DeviceMemory
					}
					if hasCPU {
						c.SelfCPU, c.CPU = r.SelfCPUMemory, r.CPUMemory
					}
					k := rowKey(r.Name, r.InputShapes, r.Stack)
					got[k] = append(got[k], c)
				}
				byValue := func(a, b cmpRow) int {
					return cmp.Or(cmp.Compare(a.Calls, b.Calls), cmp.Compare(a.Self, b.Self), cmp.Compare(a.Total, b.Total))
				}
				matched := 0
				for k, w := range want {
					gr := got[k]
					delete(got, k)
					slices.SortFunc(w, byValue)
					slices.SortFunc(gr, byValue)
					if !slices.Equal(gr, w) {
						t.Errorf("%q: got %+v, torch %+v", k, gr, w)
						continue
					}
					matched += len(w)
				}
				for k := range got {
					t.Errorf("row %q not in torch's output", k)
				}
				t.Logf("%d of %d torch rows match to the byte", matched, len(oracle))
				if matched != len(oracle) {
					t.Errorf("only %d of %d rows matched", matched, len(oracle))
				}
			})
		}
	}
}

func rowKey(name, shapes string, stack []string) string {
	return name + "\x00" + shapes + "\x00" + strings.Join(stack, "|")
}

// sortNearlySorted must equal a plain sort, whatever the run structure.
func TestSortNearlySorted(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := 0; trial < 300; trial++ {
		n := rng.IntN(2000)
		keys := make([]int64, n)
		for i := range keys {
			keys[i] = int64(i)
		}
		// A few misplaced elements, or (sometimes) noise everywhere.
		moves := rng.IntN(6)
		if trial%10 == 0 {
			moves = n
		}
		for k := 0; k < moves && n > 1; k++ {
			i, j := rng.IntN(n), rng.IntN(n)
			keys[i], keys[j] = keys[j], keys[i]
		}
		for i := range keys {
			keys[i] /= int64(1 + trial%3) // ties, broken by index
		}
		cmpf := func(a, b int32) int { return cmp.Or(cmp.Compare(keys[a], keys[b]), cmp.Compare(a, b)) }
		got := make([]int32, n)
		for i := range got {
			got[i] = int32(i)
		}
		want := slices.Clone(got)
		slices.SortFunc(want, cmpf)
		sortNearlySorted(got, nil, cmpf)
		if !slices.Equal(got, want) {
			t.Fatalf("trial %d (n %d, %d moves): order differs from a sort", trial, n, moves)
		}
	}
}

// AttributeAndOperators, sharing one op tree, gives what Attribute and
// Operators give on their own, on real traces.
func TestAttributeAndOperatorsShareTheTree(t *testing.T) {
	for _, name := range []string{"big_transformer", "leak_module_cache", "resnet_train_clean"} {
		t.Run(name, func(t *testing.T) {
			tr := readTestTrace(t, name)
			opts := OperatorOptions{Device: -1}
			a, ops := AttributeAndOperators(tr, opts)
			wantA, wantOps := Attribute(tr), Operators(tr, opts)
			if !slices.Equal(a.Events, wantA.Events) || !slices.Equal(a.opParent, wantA.opParent) || !slices.Equal(a.frameParent, wantA.frameParent) {
				t.Fatal("the attribution differs from Attribute's")
			}
			if len(ops) == 0 || len(ops) != len(wantOps) {
				t.Fatalf("%d operator rows, Operators gives %d", len(ops), len(wantOps))
			}
			for i := range ops {
				if g, w := ops[i], wantOps[i]; g.Name != w.Name || g.Calls != w.Calls || g.SelfDeviceMemory != w.SelfDeviceMemory || g.DeviceMemory != w.DeviceMemory || g.Allocs != w.Allocs || g.SelfCPUMemory != w.SelfCPUMemory {
					t.Fatalf("row %d: %+v, Operators gives %+v", i, g, w)
				}
			}
		})
	}
}
