package chart

import (
	"encoding/json"
	"strings"

	"github.com/torchmem/torchmem/memtimeline"
)

// The explorer under a trace's memory chart: brush a time range (or click
// a moment) and the allocations alive or allocated in it are listed with
// their size, operator, Python line, allocation and free times and
// lifetime, sortable; a row's click shows its full Python stack and
// operator chain, as torch's memory_viz shows a block's. It works offline
// from data embedded in the page (memtimeline.Explorer, computed by rules),
// bounded: the largest allocations in full, and for the rest only counts
// and bytes per time bucket, so that a range can say how many smaller ones
// it holds beyond those listed.

// Explorer is what a chart's explorer lists (memtimeline's, which rules
// computes once per input).
type Explorer = memtimeline.Explorer

// explorerBuckets is the resolution of the counts of the rest.
const explorerBuckets = 512

// explorerJSON is the explorer as the page's script reads it: strings
// interned, times in ms from the chart's origin (null: before the window
// or alive at its end).
type explorerJSON struct {
	Total   int      `json:"total"`
	Strings []string `json:"strings"`
	Stacks  [][]int  `json:"stacks"`
	// Allocs: [bytes, start, end, operator chain (string id), line
	// (string id, -1 none), stack id (-1 none)].
	Allocs [][6]any  `json:"allocs"`
	Rest   *restJSON `json:"rest,omitempty"`
	Chains [][]int   `json:"chains"`
}

// restJSON counts the lifetimes not listed: Pre* were allocated before
// the window; Alloc*[k] started and Free*[k] ended in bucket k, which
// spans [T0 + k*Dt, T0 + (k+1)*Dt) ms.
type restJSON struct {
	MaxBytes   int64       `json:"max_bytes"`
	T0         json.Number `json:"t0"`
	Dt         float64     `json:"dt"`
	Pre        int64       `json:"pre"`
	PreBytes   int64       `json:"pre_bytes"`
	Alloc      []int64     `json:"alloc"`
	AllocBytes []int64     `json:"alloc_bytes"`
	Free       []int64     `json:"free"`
	FreeBytes  []int64     `json:"free_bytes"`
}

// toJSON is ex as the page's script reads it.
func toJSON(ex *Explorer, startNs int64) explorerJSON {
	out := explorerJSON{Total: ex.Total, Strings: []string{}, Stacks: [][]int{}, Chains: [][]int{}, Allocs: [][6]any{}}
	strIdx := map[string]int{}
	str := func(s string) int {
		if k, ok := strIdx[s]; ok {
			return k
		}
		strIdx[s] = len(out.Strings)
		out.Strings = append(out.Strings, s)
		return len(out.Strings) - 1
	}
	listIdx := func(list *[][]int, seen map[string]int, items []string) int {
		if len(items) == 0 {
			return -1
		}
		key := strings.Join(items, "\x00")
		if k, ok := seen[key]; ok {
			return k
		}
		ids := make([]int, len(items))
		for i, s := range items {
			ids[i] = str(s)
		}
		seen[key] = len(*list)
		*list = append(*list, ids)
		return len(*list) - 1
	}
	stackIdx, chainIdx := map[string]int{}, map[string]int{}
	tm := func(ns int64) any {
		if ns < 0 {
			return nil
		}
		return msNumber(ns, startNs)
	}
	for _, a := range ex.Allocs {
		line := -1
		if a.Line != "" {
			line = str(a.Line)
		}
		out.Allocs = append(out.Allocs, [6]any{a.Bytes, tm(a.StartNs), tm(a.EndNs), listIdx(&out.Chains, chainIdx, a.Operators), line, listIdx(&out.Stacks, stackIdx, a.Stack)})
	}
	if len(ex.Rest) == 0 {
		return out
	}
	lo, hi := int64(-1), int64(-1)
	r := &restJSON{Alloc: make([]int64, explorerBuckets), AllocBytes: make([]int64, explorerBuckets), Free: make([]int64, explorerBuckets), FreeBytes: make([]int64, explorerBuckets)}
	for _, lt := range ex.Rest {
		r.MaxBytes = max(r.MaxBytes, lt.Bytes)
		for _, t := range []int64{lt.Start, lt.End} {
			if t >= 0 {
				if lo < 0 || t < lo {
					lo = t
				}
				hi = max(hi, t)
			}
		}
	}
	if lo < 0 {
		lo, hi = startNs, startNs
	}
	dtNs := max(1, (hi-lo+explorerBuckets-1)/explorerBuckets+1)
	bucket := func(t int64) int { return min(explorerBuckets-1, int((t-lo)/dtNs)) }
	for _, lt := range ex.Rest {
		if lt.Start < 0 {
			r.Pre++
			r.PreBytes += lt.Bytes
		} else {
			k := bucket(lt.Start)
			r.Alloc[k]++
			r.AllocBytes[k] += lt.Bytes
		}
		if lt.End >= 0 {
			k := bucket(lt.End)
			r.Free[k]++
			r.FreeBytes[k] += lt.Bytes
		}
	}
	r.T0 = msNumber(lo, startNs)
	r.Dt = float64(dtNs) / 1e6
	out.Rest = r
	return out
}

// explorerMaxRows is the most rows the explorer's table shows at once.
const explorerMaxRows = 500

// explorerCSS styles the explorer in any page (the report's or the
// standalone one).
const explorerCSS = `<style>
.torchmem-explorer { font: 13px/1.4 system-ui, sans-serif; margin: 4px 0 16px; }
.torchmem-explorer .tx-note { color: #555; margin: 4px 0; }
.torchmem-explorer table { border-collapse: collapse; font-size: 12px; }
.torchmem-explorer th, .torchmem-explorer td { border: 1px solid #ddd; padding: 2px 6px; text-align: left; vertical-align: top; }
.torchmem-explorer th { background: #f5f5f7; cursor: pointer; user-select: none; white-space: nowrap; }
.torchmem-explorer td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.torchmem-explorer td.mono, .torchmem-explorer .tx-stack { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 11px; }
.torchmem-explorer tr.tx-row { cursor: pointer; } .torchmem-explorer tr.tx-row:hover { background: #f0f4ff; }
.torchmem-explorer tr.tx-selected { background: #dde7ff; }
.torchmem-explorer .tx-scroll { max-height: 420px; overflow: auto; display: inline-block; max-width: 100%; }
.torchmem-explorer .tx-stack { white-space: pre; background: #fafafa; border: 1px solid #ddd; padding: 6px 8px; margin: 6px 0; overflow-x: auto; }
</style>
`

// explorerRuntimeJS lists the allocations of a brushed range. Every name
// goes into the page as textContent, never as markup. It is defined once
// per page (the first chart with an explorer defines it).
const explorerRuntimeJS = `window.torchmemExplorer = window.torchmemExplorer || function (chart, box, ex, fmtBytes) {
  var S = ex.strings, MAX = __MAX__;
  var rows = ex.allocs.map(function (a, i) {
    return {i: i, bytes: a[0], start: a[1], end: a[2], chain: a[3], line: a[4], stack: a[5]};
  });
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function ms(v) { return v === null ? "" : (+v).toFixed(3) + " ms"; }
  function chainOf(r) { return r.chain < 0 ? [] : ex.chains[r.chain].map(function (k) { return S[k]; }); }
  function opOf(r) {
    if (r.start === null) return "(allocated before the window)";
    var c = chainOf(r);
    return c.length ? c[0] : "(no operator)";
  }
  function lineOf(r) { return r.line < 0 ? "(no Python line)" : S[r.line]; }
  function life(r) { return r.start === null || r.end === null ? Infinity : r.end - r.start; }
  var cols = [
    {name: "Size", key: function (r) { return r.bytes; }, text: function (r) { return fmtBytes(r.bytes); }, num: true},
    {name: "Operator", key: opOf, text: opOf, mono: true},
    {name: "Python line", key: lineOf, text: lineOf, mono: true},
    {name: "Allocated at", key: function (r) { return r.start === null ? -Infinity : r.start; }, text: function (r) { return r.start === null ? "before the window" : ms(r.start); }, num: true},
    {name: "Freed at", key: function (r) { return r.end === null ? Infinity : r.end; }, text: function (r) { return r.end === null ? "alive at the end" : ms(r.end); }, num: true},
    {name: "Lifetime", key: life, text: function (r) { var l = life(r); return l === Infinity ? "" : ms(l); }, num: true}
  ];
  // A snapshot records no operators: no column of blanks then.
  if (!ex.chains.length) cols.splice(1, 1);
  var sortCol = 0, sortDir = -1, current = [], lo = null, hi = null, chosen = -1;
  box.textContent = "";
  var help = el("div", "tx-note", "Drag across the chart to list the allocations alive or allocated in a time range, or click one moment; click a row for its stack. Mouse wheel zooms, the slider below pans.");
  var note = el("div", "tx-note tx-count");
  var rest = el("div", "tx-note tx-rest");
  var scroll = el("div", "tx-scroll");
  var table = el("table", "tx-table");
  var stack = el("div", "tx-stack");
  stack.style.display = "none";
  scroll.appendChild(table);
  box.appendChild(help); box.appendChild(note); box.appendChild(rest); box.appendChild(scroll); box.appendChild(stack);
  function restIn(a, b) {
    var r = ex.rest;
    if (!r) return null;
    var n = r.pre, bytes = r.pre_bytes, t0 = +r.t0, B = r.alloc.length;
    var kb = Math.floor((b - t0) / r.dt), ka = Math.floor((a - t0) / r.dt);
    for (var k = 0; k < B && k <= kb; k++) { n += r.alloc[k]; bytes += r.alloc_bytes[k]; }
    for (k = 0; k < B && k < ka; k++) { n -= r.free[k]; bytes -= r.free_bytes[k]; }
    return {n: Math.max(0, n), bytes: Math.max(0, bytes)};
  }
  function render() {
    var c = cols[sortCol];
    current.sort(function (x, y) {
      var p = c.key(x), q = c.key(y);
      var d = p < q ? -1 : p > q ? 1 : 0;
      return d * sortDir || x.i - y.i;
    });
    table.textContent = "";
    var tr = el("tr");
    cols.forEach(function (col, k) {
      var th = el("th", null, col.name + (k === sortCol ? (sortDir < 0 ? " \u25bc" : " \u25b2") : ""));
      th.setAttribute("data-col", k);
      th.addEventListener("click", function () {
        if (sortCol === k) { sortDir = -sortDir; } else { sortCol = k; sortDir = col.num ? -1 : 1; }
        render();
      });
      tr.appendChild(th);
    });
    table.appendChild(tr);
    current.slice(0, MAX).forEach(function (r) {
      var row = el("tr", "tx-row" + (r.i === chosen ? " tx-selected" : ""));
      row.setAttribute("data-alloc", r.i);
      cols.forEach(function (col) {
        row.appendChild(el("td", col.num ? "num" : (col.mono ? "mono" : null), col.text(r)));
      });
      row.addEventListener("click", function () { chosen = r.i; showStack(r); render(); });
      table.appendChild(row);
    });
  }
  function showStack(r) {
    var lines = [fmtBytes(r.bytes) + ", allocated " + (r.start === null ? "before the window" : "at " + ms(r.start)) +
      ", " + (r.end === null ? "alive at the end" : "freed at " + ms(r.end))];
    var c = chainOf(r);
    lines.push("", "Operators (outermost first):", c.length ? "  " + c.join(" > ") : "  (none recorded)");
    lines.push("", "Python stack (outermost first):");
    if (r.stack < 0) {
      lines.push("  (none recorded: profile with with_stack=True)");
    } else {
      ex.stacks[r.stack].forEach(function (k) { lines.push("  " + S[k]); });
    }
    stack.textContent = lines.join("\n");
    stack.style.display = "";
    // The block's lifetime, shaded on the chart (to the axis' ends when it
    // began before the window or outlived it).
    var ext = chart.getModel().getComponent("xAxis", 0).axis.scale.getExtent();
    chart.setOption({series: [{id: "torchmem-selected", name: "selected allocation", type: "line", data: [], silent: true,
      markArea: {silent: true, itemStyle: {color: "rgba(255,152,0,0.28)"},
        label: {show: true, position: "insideBottom", color: "#8a4b00", formatter: function () { return fmtBytes(r.bytes); }},
        data: [[{xAxis: r.start === null ? ext[0] : +r.start}, {xAxis: r.end === null ? ext[1] : +r.end}]]}}]});
  }
  function show(a, b) {
    if (b < a) { var t = a; a = b; b = t; }
    // echarts repeats brushSelected on a resize: the same range keeps the
    // table as the user left it (sort, chosen row, stack).
    if (a === lo && b === hi) return;
    lo = a; hi = b; chosen = -1;
    stack.style.display = "none";
    current = rows.filter(function (r) {
      return (r.start === null || r.start <= b) && (r.end === null || r.end >= a);
    });
    var sum = current.reduce(function (s, r) { return s + r.bytes; }, 0);
    var where = a === b ? "at " + ms(a) : "between " + ms(a) + " and " + ms(b);
    note.textContent = current.length + " allocation" + (current.length === 1 ? "" : "s") + " alive or allocated " + where +
      " (" + fmtBytes(sum) + ")" + (current.length > MAX ? "; the first " + MAX + " shown" : "") + ".";
    var rr = restIn(a, b);
    rest.textContent = rr ? "This report carries the " + rows.length + " largest of the " + ex.total +
      " allocations on this device; about " + rr.n + " smaller ones (each at most " + fmtBytes(ex.rest.max_bytes) + ", " +
      fmtBytes(rr.bytes) + " in all) are also in this range, not listed." : "";
    render();
  }
  chart.on("brushSelected", function (p) {
    var areas = (p.batch && p.batch[0] && p.batch[0].areas) || [];
    if (areas.length && areas[0].coordRange) show(+areas[0].coordRange[0], +areas[0].coordRange[1]);
  });
  chart.getZr().on("click", function (e) {
    if (!chart.containPixel({gridIndex: 0}, [e.offsetX, e.offsetY])) return;
    var x = chart.convertFromPixel({gridIndex: 0}, [e.offsetX, e.offsetY])[0];
    show(x, x);
  });
  chart.dispatchAction({type: "takeGlobalCursor", key: "brush", brushOption: {brushType: "lineX", brushMode: "single"}});
  return {show: show};
};`
