package chart

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/torchmem/torchmem/chrometrace"
	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/rules"
)

// brushJS selects [a, b] ms on chart id as a user's drag does.
func brushJS(id string, a, b float64) string {
	return fmt.Sprintf(`echarts.getInstanceByDom(document.getElementById(%q)).dispatchAction({type: "brush", areas: [{brushType: "lineX", xAxisIndex: 0, coordRange: [%g, %g]}]})`, id, a, b)
}

var restNote = regexp.MustCompile(`carries the (\d+) largest of the (\d+) allocations on this device; about (\d+) smaller ones`)

// boundSpec is leak_module_cache's chart with an explorer that lists only
// the 30 largest allocations (checkExplorerBound).
func boundSpec(tr *chrometrace.Trace, attr *chrometrace.Attribution, lts []memtimeline.Lifetime) Spec {
	c := rules.TraceCharts(tr)[0]
	spec := Spec{ID: "bound0", Title: c.Title, StartNs: c.StartNs, Allocated: c.Allocated, Reserved: c.Reserved}
	spec.Explorer = memtimeline.TraceExplorer(tr, attr, lts, 0, 30)
	return spec
}

// Bounded for large traces: with only the 30 largest allocations listed, a
// range says how many smaller ones it also holds, and that count is the
// trace's own, up to the allocations within one bucket of the range's
// edges. (On the page of TestRealTraceChartsInBrowser.)
func checkExplorerBound(t *testing.T, ctx context.Context, spec Spec) {
	last := spec.Allocated.T[len(spec.Allocated.T)-1]
	a, b := float64(last-spec.StartNs)/1e6*0.4, float64(last-spec.StartNs)/1e6*0.6
	eval[any](t, ctx, brushJS("bound0", a, b))
	if err := chromedp.Do(ctx, chromedp.Sleep(500*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	text := eval[string](t, ctx, `document.querySelector("#bound0-explorer .tx-rest").textContent`)
	m := restNote.FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("the explorer does not say what it leaves out: %q", text)
	}
	got, _ := strconv.Atoi(m[3])
	ms := func(ns int64) float64 { return float64(ns-spec.StartNs) / 1e6 }
	j := toJSON(spec.Explorer, spec.StartNs)
	exact, slack := 0, 0
	for _, lt := range spec.Explorer.Rest {
		if (lt.Start < 0 || ms(lt.Start) <= b) && (lt.End < 0 || ms(lt.End) >= a) {
			exact++
		}
		for _, ts := range []int64{lt.Start, lt.End} {
			if ts >= 0 && (abs(ms(ts)-a) <= j.Rest.Dt || abs(ms(ts)-b) <= j.Rest.Dt) {
				slack++
			}
		}
	}
	t.Logf("%q; exact %d, slack %d", text, exact, slack)
	if m[1] != "30" || m[2] != strconv.Itoa(spec.Explorer.Total) || got < exact-slack || got > exact+slack || exact == 0 {
		t.Errorf("%q: the rest in %.3f..%.3f ms is %d (within %d)", text, a, b, exact, slack)
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// hostileExplorerSpec is a chart whose explorer's one allocation has the
// payload for its operator, its line and a stack frame.
func hostileExplorerSpec() Spec {
	s := memtimeline.Series{Name: "allocated", T: []int64{0, 1e6, 2e6, 3e6}, V: []int64{0, 1 << 30, 1 << 30, 0}}
	return Spec{ID: "xx", Title: "explorer", Allocated: s, Explorer: &Explorer{Total: 1, Allocs: []memtimeline.Allocation{{
		Bytes: 1 << 30, StartNs: 1e6, EndNs: 3e6, Operators: []string{xssName}, Line: xssName + ".py(1): f", Stack: []string{"main.py(1): <module>", xssName},
	}}}}
}

// Names in the explorer (an operator, a line, stack frames) are text: a
// click on a moment lists the allocation, a click on its row shows its
// stack, and no element or dialog comes from the payload. (On the page of
// TestNamesCannotInjectInBrowser.)
func checkExplorerNamesAreText(t *testing.T, ctx context.Context) {
	eval[any](t, ctx, brushJS("xx", 1.5, 1.5))
	if err := chromedp.Do(ctx, chromedp.Sleep(400*time.Millisecond), chromedp.Click(chromedp.CSS("#xx-explorer tr.tx-row")), chromedp.Sleep(100*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	text := eval[string](t, ctx, `document.getElementById("xx-explorer").innerText`)
	if n := eval[int](t, ctx, `document.querySelectorAll("img").length`); n != 0 {
		t.Errorf("%d <img> elements: a name became markup", n)
	}
	if strings.Count(text, xssName) < 3 || !strings.Contains(text, "1 allocation alive or allocated") {
		t.Errorf("the names are not shown as text (row and stack):\n%s", text)
	}
}
