package rules

import (
	"cmp"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/memtimeline/smi"
	"github.com/torchmem/torchmem/memtimeline/snapshot"
	"github.com/torchmem/torchmem/memtimeline/steplog"
	"github.com/torchmem/torchmem/rules/frag"
	"github.com/torchmem/torchmem/rules/leak"
	"github.com/torchmem/torchmem/rules/site"
)

// The verdict is the answer a user reads first: does it leak (how much per
// step, what kind, which line holds it), did it run out of memory and why,
// does the cache waste memory, and what fills the peak. It is computed once
// per run and rank from the inputs' memoized analyses and rendered by every
// output format (text, Markdown, JSON, HTML) from this one structure.

// LeakEvidence is what one input says about growth step over step.
type LeakEvidence struct {
	Source string     `json:"source"` // the file
	Kind   SourceKind `json:"input"`  // SourceSteps, SourceTrace, ...
	// Verdict is leak.VerdictLeak, leak.VerdictClean or leak.VerdictUnknown.
	Verdict      string `json:"verdict"`
	BytesPerStep int64  `json:"bytes_per_step"`
	// Steps is how many steps the figure rests on; FirstStep..LastStep
	// their numbers (-1 when the input has none).
	Steps     int   `json:"steps"`
	FirstStep int64 `json:"first_step"`
	LastStep  int64 `json:"last_step"`
	// R2 is the straight-line fit's R² for logs (1 for exact survivor
	// counts from traces and snapshots).
	R2     float64 `json:"r2"`
	Reason string  `json:"reason"`
	// LeakKind, Holding and Location come from the top suspect, when the
	// input has one.
	LeakKind     string         `json:"kind,omitempty"`
	KindEvidence string         `json:"kind_evidence,omitempty"`
	Fix          string         `json:"fix,omitempty"`
	Holding      []string       `json:"holding,omitempty"`
	StackNote    string         `json:"stack_note,omitempty"`
	Location     *site.Location `json:"location,omitempty"`
	Operator     string         `json:"operator,omitempty"`
	// Leaks counts the distinct leaks (causes) the input found.
	Leaks int `json:"leaks,omitempty"`
	// GrowthFirst..GrowthLast are the steps the growth spans (the leak's
	// own steps, not the source's coverage); Period the steps between its
	// rises (1 every step; 0 unknown). Sustained: the source saw the end
	// of the run flat after its last growth, or no growth at all over
	// steps it covers in full (weigh.go).
	GrowthFirst int64 `json:"growth_first_step,omitempty"`
	GrowthLast  int64 `json:"growth_last_step,omitempty"`
	Period      int64 `json:"period_steps,omitempty"`
	Sustained   bool  `json:"sustained,omitempty"`
	// JumpBytes is a staircase's jump (a leak every Period steps); Plateau:
	// a log measured a plateau after growth (positive evidence that the
	// growth stopped: a bounded queue or cache).
	JumpBytes int64 `json:"jump_bytes,omitempty"`
	Plateau   bool  `json:"plateau,omitempty"`
	// BytesPerSecond is the growth rate of a log with times but no steps
	// (nvidia-smi); smiRun and smiGPU locate that growth for smiLeakRates.
	BytesPerSecond float64 `json:"bytes_per_second,omitempty"`
	smiRun         *smi.GrowthRun
	smiGPU         string
	// series names a snapshot series' evidence in sentences ("the 3
	// snapshots at steps 10, 20, 30"): its Source is only the last dump.
	series string
}

// LeakAnswer is the leak verdict of a run and rank, from all its evidence.
type LeakAnswer struct {
	Verdict      string `json:"verdict"`
	BytesPerStep int64  `json:"bytes_per_step"`
	// BytesPerSecond is the rate of growth when the evidence is timed
	// rather than stepped (nvidia-smi); 0 otherwise.
	BytesPerSecond float64 `json:"bytes_per_second,omitempty"`
	// From names the evidence the figure is taken from and why; FromFile
	// is its file.
	From     string `json:"from,omitempty"`
	FromFile string `json:"from_file,omitempty"`
	// Kind, KindEvidence and Fix describe the leak (container,
	// autograd_graph, retain_graph, hook, unknown) when a source knows it.
	Kind         string `json:"kind,omitempty"`
	KindEvidence string `json:"kind_evidence,omitempty"`
	Fix          string `json:"fix,omitempty"`
	// Holding is the chain of frames that keeps the memory, outermost
	// first; Location the holding line.
	Holding   []string       `json:"holding,omitempty"`
	StackNote string         `json:"stack_note,omitempty"`
	Location  *site.Location `json:"location,omitempty"`
	Operator  string         `json:"operator,omitempty"`
	// Leaks is how many distinct leaks the best source found (0: none, or
	// no source counts them); always present, so that one trace and the
	// folder holding it give one shape.
	Leaks  int    `json:"leaks"`
	Reason string `json:"reason"`
	// Agreement says which sources agree or disagree, with their figures;
	// Settle says what to record when they disagree.
	Agreement string         `json:"agreement"`
	Settle    string         `json:"settle"`
	Evidence  []LeakEvidence `json:"evidence"`
	// Forecast is when the leak fills the memory the process may use
	// (nil when the headroom is not known, or the run ran out already).
	Forecast *Forecast `json:"forecast,omitempty"`
}

// OOMAnswer is one out-of-memory with the allocator's state around it.
type OOMAnswer struct {
	Source       string `json:"source"`
	RequestBytes int64  `json:"request_bytes"`
	// AllocatedBytes and ReservedBytes are the totals at the failure (from
	// a trace) or at the snapshot's dump; -1 when unknown.
	AllocatedBytes int64 `json:"allocated_bytes"`
	ReservedBytes  int64 `json:"reserved_bytes"`
	// FreeInCacheBytes is reserved minus allocated; LargestFreeBlock the
	// largest free block in the cache (snapshot only); DeviceFreeBytes what
	// the driver had left; CapacityBytes the GPU's memory. -1 when unknown.
	FreeInCacheBytes int64 `json:"free_in_cache_bytes"`
	LargestFreeBlock int64 `json:"largest_free_block"`
	DeviceFreeBytes  int64 `json:"device_free_bytes"`
	CapacityBytes    int64 `json:"capacity_bytes"`
	// AtFailure: the allocated, reserved and free figures are the
	// allocator's when the request failed (a trace's OOM event, or a
	// snapshot's segments with the history after the OOM undone); false
	// when they are a later dump's. StateNote says why they are not.
	AtFailure bool   `json:"at_failure"`
	StateNote string `json:"state_note,omitempty"`
	// Pool is the pool the request is served from ("small" up to 1 MiB,
	// "large"); PoolFreeBytes and PoolLargestFreeBlock that pool's free
	// bytes and largest free run on the request's stream at the failure,
	// -1 when unknown. SplitFreeBytes: free bytes inside segments that
	// also hold live blocks (the allocator's retry cannot give them back).
	Pool                 string `json:"pool,omitempty"`
	PoolFreeBytes        int64  `json:"pool_free_bytes"`
	PoolLargestFreeBlock int64  `json:"pool_largest_free_block"`
	SplitFreeBytes       int64  `json:"split_free_bytes"`
	// Cause is "capacity" (the memory was not there), "process_limit"
	// (the process's memory fraction refused it), "fragmentation" (the
	// cache held enough free bytes at the failure, none in one piece
	// the request could use) or "unknown".
	Cause string `json:"cause"`
	// FilledBy names the leak that filled the memory, when the run leaks
	// and the OOM is not fragmentation (the chain: leak, then OOM).
	FilledBy string         `json:"filled_by,omitempty"`
	Reason   string         `json:"reason"`
	Location *site.Location `json:"location,omitempty"`
	// Composition is what was alive when it failed (traces only).
	Composition *memtimeline.Composition `json:"composition,omitempty"`
}

// OOM causes.
const (
	OOMCapacity      = "capacity"
	OOMFragmentation = "fragmentation"
	// OOMProcessLimit: the device had the bytes, the process's own cap
	// (torch.cuda.set_per_process_memory_fraction) refused them.
	OOMProcessLimit = "process_limit"
	// OOMCauseUnknown: the allocator's state at the failure not recorded.
	OOMCauseUnknown = "unknown"
)

// FragAnswer is the fragmentation verdict with the bytes it wastes.
type FragAnswer struct {
	Source      string `json:"source"`
	Verdict     string `json:"verdict"`
	WastedBytes int64  `json:"wasted_bytes"`
	// Wasted says what WastedBytes measures.
	Wasted string `json:"wasted"`
	Reason string `json:"reason"`
	// AllocRetries is how often the allocator gave its cache back and
	// retried a cudaMalloc during the run (torch's num_alloc_retries, from
	// a step log or memory_summary() tables, else the trace's window);
	// Retries says so in a sentence, with what it means. Zero: none seen.
	AllocRetries int64  `json:"alloc_retries,omitempty"`
	Retries      string `json:"retries,omitempty"`
	// Costs are what fragmentation cost (CostAllocRetries, ...): the
	// verdict is fragmented only with one. Cost says it in a sentence,
	// or the figure and that it cost nothing.
	Costs []string `json:"costs"`
	Cost  string   `json:"cost,omitempty"`
	// LimitBytes is what the process may use (-1 not recorded) and
	// HeadroomBytes what was left under it at the worst step (-1).
	LimitBytes    int64 `json:"limit_bytes"`
	HeadroomBytes int64 `json:"headroom_bytes"`
	// ReservedGrowth: reserved rising while allocated stays flat.
	ReservedGrowth *ReservedGrowth `json:"reserved_growth,omitempty"`
	// AllocConf is the allocator settings in the process's environment
	// (steps log); Settings what the snapshot says against them.
	AllocConf string `json:"alloc_conf,omitempty"`
	Settings  string `json:"settings,omitempty"`
}

// Holder is a line (or operator) holding memory at a moment.
type Holder struct {
	Where    string `json:"where"`
	Operator string `json:"operator,omitempty"`
	Bytes    int64  `json:"bytes"`
}

// PeakAnswer is the peak of allocated memory and what fills it.
type PeakAnswer struct {
	Source         string `json:"source"`
	AllocatedBytes int64  `json:"allocated_bytes"`
	// Step is the ProfilerStep (or logged step) the peak falls in.
	Step string `json:"step,omitempty"`
	// TNs is the peak's time on the trace's clock (traces only).
	TNs     int64    `json:"t_ns,omitempty"`
	Holders []Holder `json:"holders"`
	// Composition splits the peak by line, operator and category.
	Composition *memtimeline.Composition `json:"composition,omitempty"`
	// TorchSource is the export_memory_timeline file whose categories
	// Composition.Torch holds.
	TorchSource string `json:"torch_categories_from,omitempty"`
	// RelativeToWindowStart: the trace records no allocator totals (torch
	// < 1.10), so AllocatedBytes is the running sum of the window's events,
	// not counting what was allocated before it.
	RelativeToWindowStart bool `json:"relative_to_window_start,omitempty"`
}

// Verdict is the answer for one run and rank.
type Verdict struct {
	// Name labels the group ("rank 0", the file name for a lone input).
	Name string `json:"name"`
	Run  string `json:"run,omitempty"`
	// Job says when several process run ids were read as one job's ranks
	// (older snippets: one run id per process), and which.
	Job     string      `json:"job,omitempty"`
	Rank    int64       `json:"rank"`
	Sources []string    `json:"sources"`
	Leak    LeakAnswer  `json:"leak"`
	OOMs    []OOMAnswer `json:"ooms"`
	Frag    *FragAnswer `json:"fragmentation,omitempty"`
	Peak    *PeakAnswer `json:"peak,omitempty"`
	// GPU is nvidia-smi against torch's numbers, and per process.
	GPU *GPUAnswer `json:"gpu,omitempty"`
	// Host is pinned host memory, from a steps log that records it.
	Host   *HostAnswer `json:"pinned_host,omitempty"`
	Inputs []*Input    `json:"-"`
}

// rankOrContents is the loader's rank, else one a memory_summary log
// names in its logger prefix ("rank0:").
func (in *Input) rankOrContents() int64 {
	if in.Rank >= 0 || !in.Has(SourceSummary) {
		return in.Rank
	}
	r := int64(-1)
	for _, s := range in.Summary.Samples {
		switch {
		case s.Rank < 0:
		case r < 0:
			r = int64(s.Rank)
		case r != int64(s.Rank):
			return -1 // several ranks in one log
		}
	}
	return r
}

// LeakEvidence is what this input says about leaks (memoized).
func (in *Input) LeakEvidence() []LeakEvidence {
	return Memo(in, "verdict:leak-evidence", func() []LeakEvidence { return leakEvidence(in) })
}

func leakEvidence(in *Input) []LeakEvidence {
	if in.IsDigest() {
		return slices.Clone(in.Digest.Verdict.Leak.Evidence)
	}
	var out []LeakEvidence
	// stepEvidence judges a log of steps; kind is the file's own (a
	// memory_summary() log is read as steps but is named as what it is).
	stepEvidence := func(kind SourceKind) {
		for _, s := range in.StepAnalysis().Series {
			e := LeakEvidence{Source: in.Source, Kind: kind, Steps: s.Records, FirstStep: s.FirstStep, LastStep: s.LastStep, Reason: s.Reason}
			logVerdict(&e, s)
			out = append(out, e)
		}
	}
	switch in.InputKind() {
	case SourceTrace:
		out = append(out, reportEvidence(in, SourceTrace, in.Leaks()))
	case SourceSnapshot:
		// The snapshot's history covers the steps it annotates (fromReport
		// counts them): coverage, like a trace's window, not the leak's length.
		out = append(out, reportEvidence(in, SourceSnapshot, in.SnapshotLeaks()))
	case SourceSteps:
		stepEvidence(SourceSteps)
	case SourceSummary:
		// memory_summary() tables logged with a step number read like a
		// step log of the steps they were printed at. NewInput gives the
		// log its tables as steps, read as a step log's; an Input made
		// without them is judged from the tables (summaryEvidence).
		if in.StepLog != nil {
			stepEvidence(SourceSummary)
		} else {
			out = append(out, summaryEvidence(in)...)
		}
	case SourceSMI:
		a := in.SMIAnalysis()
		e := LeakEvidence{Source: in.Source, Kind: SourceSMI, Verdict: leak.VerdictClean, FirstStep: -1, LastStep: -1, Reason: "memory.used does not grow steadily"}
		for _, g := range a.GPUs {
			if len(g.Leaks) == 0 {
				continue
			}
			l := g.Leaks[0]
			e.Verdict, e.R2, e.BytesPerSecond, e.smiRun, e.smiGPU = leak.VerdictLeak, l.R2, l.SlopeBytesPerSec, &l, g.Key
			e.Reason = fmt.Sprintf("memory.used of GPU %s grew %s at %.1f MiB/s from %s to %s (nvidia-smi has no steps)", g.Key, memtimeline.FormatBytes(l.GrowthBytes), l.SlopeBytesPerSec/(1<<20),
				l.Start.Format("15:04:05"), l.End.Format("15:04:05"))
			break
		}
		if e.Verdict == leak.VerdictClean {
			for _, g := range a.GPUs {
				if r := g.StillGrowing; r != nil {
					e.Verdict = leak.VerdictUnknown
					e.Reason = fmt.Sprintf("memory.used of GPU %s was still rising when the process or the log ended (%s over %s, to %s at %s): too short to tell a leak from a warm-up; log longer, or add the run's steps log",
						g.Key, memtimeline.FormatBytes(r.GrowthBytes), r.Duration.Round(100*time.Millisecond), memtimeline.FormatBytes(r.EndBytes), r.End.Format("15:04:05"))
					break
				}
			}
			if e.Verdict == leak.VerdictClean {
				e.Reason = "memory.used rises at start-up, then holds steady: no growth in steady state"
			}
		}
		out = append(out, e)
	}
	return out
}

// reportEvidence is the evidence of a trace or snapshot leak report.
func reportEvidence(in *Input, kind SourceKind, rep leak.Report) LeakEvidence {
	e := LeakEvidence{Source: in.Source, Kind: kind, Verdict: rep.Verdict, BytesPerStep: rep.GrowthBytesPerStep, Reason: rep.Reason, R2: 1, FirstStep: -1, LastStep: -1}
	e.Steps, e.FirstStep, e.LastStep = rep.StepsCovered()
	if rep.Verdict != leak.VerdictLeak {
		e.BytesPerStep = 0
		// A window or history with no growth in it saw no growth over
		// every step it covers.
		e.Sustained = rep.Verdict == leak.VerdictClean
		return e
	}
	var s *leak.Suspect
	if len(rep.Leaks) > 0 {
		// One leak per cause; its largest site holds the line.
		l := rep.Leaks[0]
		e.LeakKind, e.KindEvidence, e.Fix, e.Leaks = l.Kind, l.Evidence, l.Fix, len(rep.Leaks)
		e.GrowthFirst, e.GrowthLast, e.Period = l.FirstStep, l.LastStep, max(l.Period, 1)
		if len(l.Sites) > 0 {
			s = &l.Sites[0]
		}
	} else if len(rep.Suspects) > 0 {
		s = &rep.Suspects[0]
		e.LeakKind, e.KindEvidence, e.Fix, e.Leaks = s.Kind, s.Evidence, s.Fix, 1
	} else if g := rep.StepSeries; g != nil {
		e.GrowthFirst, e.GrowthLast, e.Period = g.GrowthFirst, g.GrowthLast, max(g.Period, 1)
		e.StackNote = leak.NoAddrNote
	}
	if s != nil {
		e.Holding, e.StackNote = s.Stack, s.StackNote
		e.Location = site.LocationOf(s.Stack)
		if l := site.LocationOf([]string{s.HoldingLine}); l != nil {
			e.Location = l // the line that holds it (leak detector's word)
		}
		if kind == SourceTrace && e.Location != nil {
			traceLine(&e, s.LineNotRecorded) // weigh.go
		}
		if s.Operator != "" {
			e.Operator = site.FirstOp(s.Operator)
		}
	}
	return e
}

// summaryEvidence fits the allocated bytes of logged memory_summary()
// tables over the steps they name, per device.
func summaryEvidence(in *Input) []LeakEvidence {
	byDev := map[int]*steplog.Series{}
	var devs []int
	for _, s := range in.Summary.Samples {
		if s.Step < 0 || s.AllocatedBytes < 0 {
			continue
		}
		ser := byDev[s.Device]
		if ser == nil {
			ser = &steplog.Series{Device: fmt.Sprint(s.Device)}
			byDev[s.Device] = ser
			devs = append(devs, s.Device)
		}
		r := steplog.Record{Step: s.Step, AllocatedBytes: s.AllocatedBytes, ReservedBytes: s.ReservedBytes, ActiveBytes: s.ActiveBytes, PeakAllocatedBytes: s.AllocatedPeakBytes, PeakReservedBytes: s.ReservedPeakBytes, AllocRetries: s.Retries, InactiveSplitBytes: s.NonReleasableBytes, OOMs: s.OOMs, Line: s.Line}
		r.NotRecorded()
		if !s.Time.IsZero() {
			r.Time, r.HasTime = float64(s.Time.UnixNano())/1e9, true
		}
		// One table per step: a later table of the same step replaces it.
		if n := len(ser.Records); n > 0 && ser.Records[n-1].Step == s.Step {
			ser.Records[n-1] = r
		} else {
			ser.Records = append(ser.Records, r)
		}
	}
	if len(devs) == 0 {
		return []LeakEvidence{{Source: in.Source, Kind: SourceSummary, Verdict: leak.VerdictUnknown, FirstStep: -1, LastStep: -1,
			Reason: "the memory_summary() tables carry no step number (log \"step N\" before each)"}}
	}
	log := &steplog.Log{TotalMemoryBytes: -1, MemoryFraction: -1, HistoryMaxEntries: -1}
	for _, d := range devs {
		log.Series = append(log.Series, byDev[d])
	}
	var out []LeakEvidence
	for _, s := range steplog.Analyze(log, steplog.DefaultOptions()).Series {
		e := LeakEvidence{Source: in.Source, Kind: SourceSummary, Steps: s.Records, FirstStep: s.FirstStep, LastStep: s.LastStep, Reason: "memory_summary() tables: " + s.Reason}
		logVerdict(&e, s)
		out = append(out, e)
	}
	return out
}

// Input.SnapshotLeaks, Attribution and Lifetimes are in input.go.

// sourceRank orders sources when their step counts tie: a step log fits a
// line through every step, a snapshot's history sees every allocation, a
// trace a window, nvidia-smi only the whole process.
func sourceRank(kind SourceKind) int {
	switch kind {
	case SourceSteps:
		return 0
	case SourceSummary:
		return 1
	case SourceSnapshot:
		return 2
	case SourceTrace:
		return 3
	}
	return 4
}

// better reports whether a is better evidence than b: more steps, then
// less noise, then the source kind's order.
func better(a, b LeakEvidence) bool {
	if (a.Kind == SourceSMI) != (b.Kind == SourceSMI) {
		return b.Kind == SourceSMI
	}
	if a.Steps != b.Steps {
		return a.Steps > b.Steps // coverage (weigh.go)
	}
	return sourceRank(a.Kind) < sourceRank(b.Kind)
}

func describeEvidence(e LeakEvidence) string {
	var s string
	if e.Steps > 0 {
		s = fmt.Sprintf("%d steps", e.Steps)
		if e.FirstStep >= 0 {
			s += fmt.Sprintf(": %d..%d", e.FirstStep, e.LastStep)
		}
	}
	if e.Verdict == leak.VerdictLeak && (e.GrowthFirst > 0 || e.GrowthLast > 0) && (e.GrowthFirst != e.FirstStep || e.GrowthLast != e.LastStep || e.Period > 1) {
		every := "every step"
		if e.Period > 1 {
			every = fmt.Sprintf("every %d steps", e.Period)
			if e.JumpBytes > 0 {
				every = memtimeline.FormatBytes(e.JumpBytes) + " " + every
			}
		}
		s += fmt.Sprintf("; grows %s over steps %d..%d", every, e.GrowthFirst, e.GrowthLast)
	}
	return s
}

// from names the evidence a figure comes from.
func (k kindCount) from(e LeakEvidence) string {
	if e.series != "" {
		return e.series // names its steps
	}
	if d := describeEvidence(e); d != "" {
		return k.name(e) + " (" + d + ")"
	}
	return k.name(e)
}

// judgeLeak combines the evidence of one run and rank.
func judgeLeak(ev []LeakEvidence) LeakAnswer {
	ev = slices.Clone(ev)
	sortEvidence(ev)
	kinds := countKinds(ev)
	ans := LeakAnswer{Verdict: leak.VerdictUnknown, Evidence: ev}
	if ans.Evidence == nil {
		ans.Evidence = []LeakEvidence{}
	}
	var leaks, cleans []LeakEvidence
	for _, e := range ev {
		switch e.Verdict {
		case leak.VerdictLeak:
			leaks = append(leaks, e)
		case leak.VerdictClean:
			cleans = append(cleans, e)
		}
	}
	best := func(es []LeakEvidence) LeakEvidence {
		b := es[0]
		for _, e := range es[1:] {
			if better(e, b) {
				b = e
			}
		}
		return b
	}
	var over *LeakEvidence
	if len(leaks) > 0 {
		over = overrules(best(leaks), cleans)
	}
	switch {
	case over != nil:
		overruled(&ans, kinds, *over, leaks)
	case len(leaks) > 0:
		b := best(leaks)
		ans.Verdict, ans.BytesPerStep, ans.BytesPerSecond, ans.Reason = leak.VerdictLeak, b.BytesPerStep, b.BytesPerSecond, b.Reason
		ans.From, ans.FromFile = kinds.from(b), b.Source
		if len(leaks)+len(cleans) > 1 {
			ans.From += ": the source covering the most steps"
		}
		// The holding line: the snapshot has the exact allocating line and
		// its callers, a trace the operator chain under the def lines.
		var site *LeakEvidence
		for i := range leaks {
			e := &leaks[i]
			if len(e.Holding) == 0 && e.Location == nil {
				continue
			}
			if site == nil || (e.Kind == SourceSnapshot && site.Kind != SourceSnapshot) {
				site = e
			}
		}
		ans.Leaks = b.Leaks
		if ans.Leaks == 0 && site != nil {
			// A log counts growth, not leaks: the count of the source
			// that names the line.
			ans.Leaks = site.Leaks
		}
		if site != nil {
			ans.Holding, ans.Location, ans.StackNote = site.Holding, site.Location, site.StackNote
			if ans.Operator = site.Operator; ans.Operator == "" {
				for _, e := range leaks {
					if e.Operator != "" {
						ans.Operator = e.Operator
						break
					}
				}
			}
		}
		// The kind from whichever source knows it: a trace tells it from
		// autograd sequence numbers and hook call counts, so it goes first.
		byKind := slices.Clone(leaks)
		slices.SortStableFunc(byKind, func(a, b LeakEvidence) int {
			rank := func(e LeakEvidence) int {
				switch {
				case e.LeakKind == "" || e.LeakKind == leak.KindUnknown:
					return 3
				case e.Kind == SourceTrace:
					return 0
				case e.Kind == SourceSnapshot:
					return 1
				}
				return 2
			}
			return cmp.Compare(rank(a), rank(b))
		})
		if len(byKind) > 0 && byKind[0].LeakKind != "" {
			e := byKind[0]
			ans.Kind, ans.KindEvidence, ans.Fix = e.LeakKind, e.KindEvidence, e.Fix
		}
		ans.Agreement, ans.Settle = kinds.agreement(b, leaks, cleans)
	case len(cleans) > 0:
		b := best(cleans)
		ans.Verdict, ans.Reason = leak.VerdictClean, b.Reason
		ans.From, ans.FromFile = kinds.from(b), b.Source
		if len(cleans) > 1 {
			ans.Agreement = "all agree: " + kinds.figures(cleans)
		}
	default:
		if len(ev) > 0 {
			ans.Reason = ev[0].Reason
			ans.From = filepath.Base(ev[0].Source)
		} else {
			ans.Reason = "no input here can tell growth per step (a trace with profile_memory, an allocator snapshot with history, or a per-step log)"
		}
	}
	return ans
}

// kindCount counts the evidence of each kind: a source is named by its
// kind alone ("the step log") when it is the only one of that kind, by its
// file otherwise.
type kindCount map[SourceKind]int

func countKinds(ev []LeakEvidence) kindCount {
	k := kindCount{}
	for _, e := range ev {
		k[e.Kind]++
	}
	return k
}

// name is how a sentence names the evidence's source.
func (k kindCount) name(e LeakEvidence) string {
	if e.series != "" {
		return e.series
	}
	if k[e.Kind] > 1 {
		name := filepath.Base(e.Source)
		if _, ok := DumpPlaceOf(e.Source); ok {
			// a dump tree's files differ by their iteration folder
			name = filepath.Join(filepath.Base(filepath.Dir(e.Source)), name)
		}
		return string(e.Kind) + " " + name
	}
	switch e.Kind {
	case SourceSteps:
		return "the step log"
	case SourceSummary:
		return "the memory_summary() log"
	case SourceSMI:
		return "nvidia-smi"
	}
	return "the " + string(e.Kind)
}

func (k kindCount) figures(es []LeakEvidence) string {
	var parts []string
	for _, e := range es {
		f := "clean"
		if e.Verdict == leak.VerdictLeak {
			f = memtimeline.FormatBytes(e.BytesPerStep) + "/step"
			if e.BytesPerSecond > 0 {
				f = fmt.Sprintf("%.1f MiB/s", e.BytesPerSecond/(1<<20))
				if e.BytesPerStep > 0 {
					f = memtimeline.FormatBytes(e.BytesPerStep) + "/step (" + f + ")"
				}
			}
		}
		parts = append(parts, k.name(e)+" "+f)
	}
	return strings.Join(parts, ", ")
}

// agreement says which sources agree with the best leak figure (within
// 25% or 1 MiB), which disagree, and what to record to settle it.
func (k kindCount) agreement(best LeakEvidence, leaks, cleans []LeakEvidence) (string, string) {
	var agree, differ []LeakEvidence
	for _, e := range leaks {
		if e.Source == best.Source && e.Kind == best.Kind && e.series == best.series {
			continue
		}
		d := math.Abs(float64(e.BytesPerStep - best.BytesPerStep))
		if e.Kind == SourceSMI || d <= max(0.25*float64(best.BytesPerStep), 1<<20) {
			agree = append(agree, e)
		} else {
			differ = append(differ, e)
		}
	}
	var parts []string
	if len(agree) > 0 {
		parts = append(parts, "agree: "+k.figures(agree))
	}
	if len(differ) > 0 {
		parts = append(parts, "differ: "+k.figures(differ))
	}
	var settle string
	if len(cleans) > 0 {
		parts = append(parts, "no growth in: "+k.figures(cleans))
		var windowClean, logClean bool
		for _, c := range cleans {
			switch c.Kind {
			case SourceTrace, SourceSnapshot:
				windowClean = true
			case SourceSteps, SourceSummary:
				logClean = true
			}
		}
		bestIsLog := best.Kind == SourceSteps || best.Kind == SourceSummary || best.Kind == SourceSMI
		switch {
		case bestIsLog && windowClean:
			settle = "the step log grows but the profiled window does not: the leak starts after the window or comes and goes; profile later steps (a later wait= in the schedule, or TORCHMEM_ACTIVE) and keep the allocator history on, then run torchmem again"
		case !bestIsLog && logClean:
			settle = "the profiled window keeps memory step after step but the step log over the whole run does not grow: it stops (a cache that fills up) or is freed later; log more steps and profile a window late in the run to see whether it levels off"
		default:
			settle = "the sources cover different steps: record the allocator history (snapshot) over the whole run together with the step log"
		}
	}
	if len(differ) > 0 && settle == "" {
		settle = "the figures differ: a window of few steps counts the survivors it sees, a log fits every step; profile more steps (raise active= in the schedule) to narrow it"
	}
	return strings.Join(parts, "; "), settle
}

// OOMFacts are what one input records about out-of-memory errors, before
// they are judged together with the other inputs of the run and rank (a
// summary keeps them so that the merge below happens at the reduce).
type OOMFacts struct {
	// CapacityBytes is the largest GPU memory a trace names (-1 none).
	CapacityBytes int64 `json:"capacity_bytes"`
	// TraceOOMs are a trace's OOM events, unjudged (Cause empty); the
	// first carries what was alive.
	TraceOOMs []OOMAnswer `json:"trace_ooms,omitempty"`
	// SnapshotStats are a snapshot's totals; SnapshotOOMs its OOM records.
	SnapshotStats *snapshot.Stats `json:"snapshot_stats,omitempty"`
	SnapshotOOMs  []SnapshotOOM   `json:"snapshot_ooms,omitempty"`
}

// SnapshotOOM is an allocator snapshot's record of one failed request.
type SnapshotOOM struct {
	RequestBytes    int64          `json:"request_bytes"`
	DeviceFreeBytes int64          `json:"device_free_bytes"`
	Stream          int64          `json:"stream"`
	Location        *site.Location `json:"location,omitempty"`
	// State is the allocator when the request failed, rebuilt from the
	// dump and the history after the OOM entry.
	State *snapshot.OOMState `json:"state,omitempty"`
}

// OOMFacts are the input's out-of-memory records (memoized).
func (in *Input) OOMFacts() OOMFacts {
	if in.IsDigest() {
		if in.Digest.OOMFacts != nil {
			return *in.Digest.OOMFacts
		}
		return OOMFacts{CapacityBytes: -1}
	}
	return Memo(in, "verdict:oom-facts", func() OOMFacts {
		f := OOMFacts{CapacityBytes: -1}
		switch in.InputKind() {
		case SourceTrace:
			for _, d := range in.Trace.Meta.Devices {
				f.CapacityBytes = max(f.CapacityBytes, d.TotalGlobalMem)
			}
			for i, o := range in.Trace.OOMs {
				a := OOMAnswer{Source: in.Source, RequestBytes: o.Bytes, AllocatedBytes: o.TotalAllocated, ReservedBytes: o.TotalReserved,
					FreeInCacheBytes: max(0, o.TotalReserved-o.TotalAllocated), LargestFreeBlock: -1, DeviceFreeBytes: -1, CapacityBytes: -1}
				if i == 0 {
					a.Composition = in.OOMComposition()
				}
				f.TraceOOMs = append(f.TraceOOMs, a)
			}
		case SourceSnapshot:
			rep := in.SnapshotReport()
			st := rep.Stats
			f.SnapshotStats = &st
			for _, o := range rep.OOMs {
				st := o.State
				so := SnapshotOOM{RequestBytes: o.RequestedBytes, DeviceFreeBytes: o.DeviceFreeBytes, Stream: o.Stream, State: &st}
				if o.Site.Filename != "" {
					so.Location = &site.Location{File: o.Site.Filename, Line: o.Site.Line, Function: o.Site.Name}
				}
				f.SnapshotOOMs = append(f.SnapshotOOMs, so)
			}
		}
		return f
	})
}

// judgeOOMs collects the out-of-memory errors of the group, merging a
// trace's event with the snapshot's record of the same request: one OOM
// is one error, whichever files recorded it.
func judgeOOMs(ins []*Input) []OOMAnswer {
	var out []OOMAnswer
	var capacity int64 = -1
	facts := make([]OOMFacts, len(ins))
	for i, in := range ins {
		facts[i] = in.OOMFacts()
		capacity = max(capacity, facts[i].CapacityBytes)
	}
	for _, f := range facts {
		for _, a := range f.TraceOOMs {
			a.CapacityBytes, a.AtFailure = capacity, true // the event carries the totals at the failure
			a.PoolFreeBytes, a.PoolLargestFreeBlock, a.SplitFreeBytes = -1, -1, -1
			a.Pool = snapshot.PoolOf(a.RequestBytes)
			out = append(out, a)
		}
	}
	for i, f := range facts {
		for _, o := range f.SnapshotOOMs {
			merged := false
			for j := range out {
				if out[j].RequestBytes == o.RequestBytes && out[j].DeviceFreeBytes < 0 {
					out[j].DeviceFreeBytes, out[j].Location = o.DeviceFreeBytes, o.Location
					addSnapshotState(&out[j], o, false)
					merged = true
					break
				}
			}
			if merged {
				continue
			}
			a := OOMAnswer{Source: ins[i].Source, RequestBytes: o.RequestBytes, AllocatedBytes: -1, ReservedBytes: -1, FreeInCacheBytes: -1,
				LargestFreeBlock: -1, DeviceFreeBytes: o.DeviceFreeBytes, CapacityBytes: capacity, Location: o.Location,
				Pool: snapshot.PoolOf(o.RequestBytes), PoolFreeBytes: -1, PoolLargestFreeBlock: -1, SplitFreeBytes: -1}
			addSnapshotState(&a, o, true)
			out = append(out, a)
		}
	}
	for i := range out {
		out[i].Cause, out[i].Reason = oomCause(out[i])
	}
	return out
}

// addSnapshotState fills an OOM's figures from the snapshot's segments
// as they were at the failure; totals only when the OOM has none yet
// (a trace's event already carries them).
func addSnapshotState(a *OOMAnswer, o SnapshotOOM, totals bool) {
	st := o.State
	if st == nil || !st.Exact {
		if st != nil && !a.AtFailure {
			a.StateNote = "the snapshot was dumped after the error and its history cannot rebuild the segments at the failure (" + st.Note + "): the cache's free bytes then are not known"
		}
		return
	}
	p := st.Pool(a.Pool, o.Stream)
	a.PoolFreeBytes, a.PoolLargestFreeBlock, a.SplitFreeBytes = p.FreeBytes, p.LargestFreeBlock, st.SplitFreeBytes
	for _, q := range st.Pools {
		a.LargestFreeBlock = max(a.LargestFreeBlock, q.LargestFreeBlock)
	}
	if totals || !a.AtFailure {
		a.AllocatedBytes, a.ReservedBytes, a.FreeInCacheBytes = st.AllocatedBytes, st.ReservedBytes, st.FreeBytes
		a.AtFailure = true
	}
	if !st.AtDump {
		a.StateNote = fmt.Sprintf("the snapshot was dumped after the error; its segments at the failure are rebuilt by undoing the %d allocator events recorded after it", st.Undone)
	}
}

// oomCause says why a request failed, from the allocator at the failure.
// torch's caching allocator fails a request only after it found no free
// block of the request's pool and stream large enough, could not get a
// new segment (the device, or the process's memory fraction, refused
// it), and gave back every cached segment with no live block in it and
// tried again. What free memory is left in the cache then sits in
// segments that also hold live blocks. So: when those free bytes could
// hold the request, the memory was there but split (fragmentation);
// when they could not (a rounding error of the request), it was
// capacity: the device's, or the process limit's when the device still
// had the bytes.
func oomCause(a OOMAnswer) (string, string) {
	req := a.RequestBytes
	mb := memtimeline.FormatBytes
	if a.CapacityBytes > 0 && req > a.CapacityBytes {
		return OOMCapacity, fmt.Sprintf("the request alone is larger than the GPU's %s", mb(a.CapacityBytes))
	}
	known := a.AtFailure && a.FreeInCacheBytes >= 0
	if known && a.PoolLargestFreeBlock >= req {
		// The allocator would have used that block: the figures are not
		// the failure's.
		known = false
	}
	share := ""
	if known && req > 0 {
		share = fmt.Sprintf("; the %s free in the cache at the failure is %s of the request, not enough whatever its layout, so this is not fragmentation", mb(a.FreeInCacheBytes), pct(a.FreeInCacheBytes, req))
	}
	switch {
	case known && a.FreeInCacheBytes >= req:
		s := fmt.Sprintf("the cache held %s free at the failure, enough for the %s request, but not in a piece the request could use", mb(a.FreeInCacheBytes), mb(req))
		if a.PoolFreeBytes >= 0 {
			s += fmt.Sprintf(": %s in the %s pool the request is served from (largest piece %s)", mb(a.PoolFreeBytes), a.Pool, mb(a.PoolLargestFreeBlock))
			if other := a.FreeInCacheBytes - a.PoolFreeBytes; other > 0 {
				s += fmt.Sprintf(", %s in the other pool's segments", mb(other))
			}
		}
		s += "; the free bytes sit in segments that also hold live blocks, so the allocator's retry could not give them back; " + frag.AdviceSplitFree
		return OOMFragmentation, s
	case a.DeviceFreeBytes >= req && a.ReservedBytes >= 0:
		// The driver had the bytes and the cache had not: the process's
		// own cap refused a new segment. torch fails when reserved plus
		// the new segment passes the cap, so the cap lies in [reserved,
		// reserved + request); the files do not record it exactly.
		lim := fmt.Sprintf("between %s and %s", mb(a.ReservedBytes), mb(a.ReservedBytes+req))
		if a.CapacityBytes > 0 {
			lim += fmt.Sprintf(" (%.1f%%-%.1f%% of the GPU's %s)", 100*float64(a.ReservedBytes)/float64(a.CapacityBytes), 100*float64(a.ReservedBytes+req)/float64(a.CapacityBytes), mb(a.CapacityBytes))
		}
		return OOMProcessLimit, fmt.Sprintf("the device had %s free, but the process is capped: torch.cuda.set_per_process_memory_fraction (or a framework setting it) limits this process to %s, and %s reserved plus the %s requested passed it; the OOM message says the cap (\"... allowed\")%s; raise the fraction, or lower the peak under it", mb(a.DeviceFreeBytes), lim, mb(a.ReservedBytes), mb(req), share)
	case a.DeviceFreeBytes >= req:
		return OOMProcessLimit, "the device had " + mb(a.DeviceFreeBytes) + " free, so the process's own limit (torch.cuda.set_per_process_memory_fraction) refused a new segment; " + a.StateNote
	case a.AllocatedBytes >= 0 && a.CapacityBytes > 0:
		return OOMCapacity, fmt.Sprintf("%s allocated of %s: the memory was in use%s; lower the peak (batch size, activation checkpointing, mixed precision)", mb(a.AllocatedBytes), mb(a.CapacityBytes), share)
	case known && a.DeviceFreeBytes >= 0:
		return OOMCapacity, fmt.Sprintf("free on the device %s plus free in the cache %s is less than the request", mb(a.DeviceFreeBytes), mb(a.FreeInCacheBytes))
	}
	return OOMCauseUnknown, "the allocator's state at the failure was not recorded"
}

// pct is a as a percentage of b, in words ("2%", "under 1%").
func pct(a, b int64) string {
	if b <= 0 {
		return "?"
	}
	f := 100 * float64(a) / float64(b)
	if f < 1 {
		return "under 1%"
	}
	return fmt.Sprintf("%.0f%%", math.Floor(f)) // 99.6% of a request is not all of it
}

// judgeFrag prefers a snapshot (it sees inside segments) to a trace.
func judgeFrag(ins []*Input, o JudgeOptions) *FragAnswer {
	var ans *FragAnswer
	for _, in := range ins {
		if !in.Is(SourceSnapshot) {
			continue
		}
		if in.IsDigest() {
			if in.Digest.Verdict.Frag != nil {
				f := *in.Digest.Verdict.Frag
				return &f
			}
			continue
		}
		rep := in.SnapshotReport()
		if rep.Stats.ReservedBytes == 0 {
			continue
		}
		// One judgment with the snapshot.inactive-split rule and frag
		// (frag/snapshot.go): per pool and stream, over the rule's
		// threshold (20% by default) and 64 MiB.
		j := frag.JudgeSnapshot(rep, o.SnapshotSplit)
		return &FragAnswer{Source: in.Source, Verdict: j.Verdict, WastedBytes: j.InactiveSplitBytes, Wasted: "free but split inside used segments (snapshot)", Reason: j.Reason}
	}
	for _, in := range ins {
		if !in.Is(SourceTrace) {
			continue
		}
		if in.IsDigest() {
			a := in.Digest.Verdict.Frag
			if a == nil || a.Verdict == frag.VerdictUnknown && ans != nil {
				continue
			}
			if ans == nil || (a.Verdict == frag.VerdictFragmented && ans.Verdict != frag.VerdictFragmented) || (a.Verdict == ans.Verdict && a.WastedBytes > ans.WastedBytes) {
				f := *a
				ans = &f
			}
			continue
		}
		f := fragJudged(in, o.Frag) // the rules' thresholds in force
		if f.Verdict == frag.VerdictUnknown && ans != nil {
			continue
		}
		a := &FragAnswer{Source: in.Source, Verdict: f.Verdict, Reason: f.Reason}
		if f.GapAtPeak != nil {
			a.WastedBytes, a.Wasted = f.GapAtPeak.Gap, "idle in the cache at peak allocated (reserved - allocated)"
		}
		if f.Signal(frag.ReservedGap).Fired {
			// What fragmentation cost: segments added while their pool
			// held the requested bytes idle (rules/frag).
			a.WastedBytes, a.Wasted = f.FragmentedMissBytes, "reserved by new segments while their pool held the requested bytes idle"
		}
		var fired []string
		for _, s := range f.Signals {
			if s.Fired {
				fired = append(fired, s.Detail)
			}
		}
		switch {
		case f.Verdict == frag.VerdictFragmented:
			a.Reason = f.Reason // leads with the bytes wasted
		case len(fired) > 0:
			a.Reason = strings.Join(fired, "; ")
		case f.Verdict == frag.VerdictOK:
			a.Reason = "no small-block flood, no new segments while the cache held the bytes, no cudaMalloc churn"
		}
		if ans == nil || (a.Verdict == frag.VerdictFragmented && ans.Verdict != frag.VerdictFragmented) || (a.Verdict == ans.Verdict && a.WastedBytes > ans.WastedBytes) {
			ans = a
		}
	}
	if ans != nil && ans.Verdict != frag.VerdictUnknown {
		return ans
	}
	for _, in := range ins { // without a trace that can tell, memory_summary() tables
		if a := summaryFrag(in, o.SnapshotSplit); a != nil {
			return a
		}
	}
	return ans
}

// addRetries tells how often the allocator freed its cache and retried: a
// run at its memory limit, one step from an OOM, whatever the frag verdict.
// torch's own counter (a step log or memory_summary() tables) covers the
// run; a trace sees its window only.
func addRetries(ans *FragAnswer, ins []*Input) *FragAnswer {
	var n int64
	var steps, records int
	from, what := "", ""
	for _, in := range ins {
		if in.StepLog == nil { // a memory_summary() log comes with its tables as steps
			continue
		}
		for _, s := range in.StepLog.Series {
			first, prev := int64(-1), int64(-1)
			var up, seen int
			for _, r := range s.Records {
				if r.AllocRetries < 0 {
					continue
				}
				seen++
				if first < 0 {
					first = r.AllocRetries
				}
				if prev >= 0 && r.AllocRetries > prev {
					up++
				}
				prev = r.AllocRetries
			}
			if first >= 0 && prev-first > n {
				n, steps, records, from = prev-first, up, seen, in.Source
				what = "step log"
				if in.Is(SourceSummary) {
					what = "memory_summary()"
				}
			}
		}
	}
	if n > 0 {
		sentence := fmt.Sprintf("%d cudaMalloc retries in %d of %d steps (%s)", n, steps, records, what) + retryMeaning
		return withRetries(ans, from, n, sentence)
	}
	for _, in := range ins {
		if !in.Has(SourceTrace) {
			continue
		}
		if f := in.Frag(); f.AllocRetries > n {
			n, from = f.AllocRetries, in.Source
		}
	}
	if n == 0 {
		return ans
	}
	sentence := fmt.Sprintf("%d cudaMalloc retries in the profiled window (trace)", n) + retryMeaning
	return withRetries(ans, from, n, sentence)
}

// retryMeaning says what allocator retries mean, after their count.
const retryMeaning = ": at its limit the allocator flushed its cache; " + frag.AdviceLowerPeak + " (near an OOM, and slow)"

func withRetries(ans *FragAnswer, from string, n int64, sentence string) *FragAnswer {
	if ans == nil {
		ans = &FragAnswer{Source: from, Verdict: frag.VerdictUnknown, Reason: "no trace or snapshot to judge the cache by"}
	}
	ans.AllocRetries, ans.Retries = n, sentence
	return ans
}

// judgePeak takes the highest allocated peak among the group's traces,
// with what held it; without a trace, a step log's peak.
func judgePeak(ins []*Input) *PeakAnswer {
	var ans *PeakAnswer
	for _, in := range ins {
		if !in.Is(SourceTrace) {
			continue
		}
		if in.IsDigest() {
			if p := in.Digest.Verdict.Peak; p != nil && (ans == nil || p.AllocatedBytes > ans.AllocatedBytes) {
				c := *p
				ans = &c
			}
			continue
		}
		c := in.PeakComposition()
		if c == nil {
			continue
		}
		if ans != nil && ans.AllocatedBytes >= c.AllocatedBytes {
			continue
		}
		ans = &PeakAnswer{Source: in.Source, AllocatedBytes: c.AllocatedBytes, Step: c.Step, TNs: c.TNs, Composition: c, Holders: []Holder{},
			RelativeToWindowStart: in.Trace.MemorySchema.DerivedAllocated}
		ans.Holders = topHolders(c)
	}
	if ans != nil {
		// Torch's own categories, when the run exported its memory
		// timeline: measured, not estimated.
		var base int64
		for _, in := range ins {
			switch {
			case in.Source != ans.Source:
			case in.Has(SourceTrace):
				base = in.Trace.Meta.BaseTimeNanoseconds
			case in.IsDigest():
				base = in.Digest.TraceBaseNs
			}
		}
		for _, in := range ins {
			if in.Timeline == nil || base <= 0 {
				continue
			}
			c := *ans.Composition
			if c.CompareWithTorch(in.Timeline.SplitAt(c.TNs + base)) {
				ans.Composition = &c
				ans.TorchSource = in.Source
				break
			}
		}
		// The run's peak is torch's own (allocated_bytes.all.peak) when a
		// step log of the run records a higher one than the profiled
		// window's: the same figure steps gives. The holders stay the
		// window's (Composition says when).
		if logged := loggedPeak(ins); logged != nil && logged.AllocatedBytes > ans.AllocatedBytes {
			ans.Source, ans.AllocatedBytes, ans.Step = logged.Source, logged.AllocatedBytes, logged.Step
		}
		return ans
	}
	// Without a trace, an allocator snapshot's history names the lines
	// alive at its highest point.
	for _, in := range ins {
		if !in.Has(SourceSnapshot) {
			continue
		}
		c := Memo(in, "verdict:snapshot-peak", func() *memtimeline.Composition { return snapshot.PeakComposition(in.Snapshot) })
		if c == nil || (ans != nil && ans.AllocatedBytes >= c.AllocatedBytes) {
			continue
		}
		ans = &PeakAnswer{Source: in.Source, AllocatedBytes: c.AllocatedBytes, TNs: c.TNs, Composition: c, Holders: topHolders(c)}
	}
	if ans != nil {
		if logged := loggedPeak(ins); logged != nil && logged.AllocatedBytes > ans.AllocatedBytes {
			ans.Source, ans.AllocatedBytes, ans.Step = logged.Source, logged.AllocatedBytes, logged.Step
		}
		return ans
	}
	// Without a trace, torch's own timeline knows the peak and its
	// categories (tensors only).
	for _, in := range ins {
		tl := in.Timeline
		if tl == nil {
			continue
		}
		i, peak, ok := tl.Peak()
		if !ok {
			continue
		}
		split := tl.SplitAt(tl.Times[i])
		ans = &PeakAnswer{Source: in.Source, AllocatedBytes: peak, Holders: []Holder{}, TorchSource: in.Source,
			Composition: &memtimeline.Composition{TNs: tl.Times[i], Device: -1, AllocatedBytes: peak, SeenBytes: peak, Torch: split, Agreement: 0,
				ByLine: []memtimeline.Share{}, ByOperator: []memtimeline.Share{}, ByCategory: memtimeline.TorchAsComposition(split),
				Note: "torch's export_memory_timeline categories at its peak (tensors only: allocator blocks that are no tensor are not in it); no trace to name lines"}}
		return ans
	}
	return loggedPeak(ins)
}

// loggedPeak is the highest peak the run's per-step logs record (torch's
// allocated_bytes.all.peak where logged), nil without a log.
func loggedPeak(ins []*Input) *PeakAnswer {
	var ans *PeakAnswer
	for _, in := range ins {
		if !in.HasSteps() {
			continue
		}
		if in.IsDigest() {
			if p := in.Digest.Verdict.Peak; p != nil && (ans == nil || p.AllocatedBytes > ans.AllocatedBytes) {
				c := *p
				ans = &c
			}
			continue
		}
		for _, s := range in.StepAnalysis().Series {
			peak, step := s.PeakAllocatedBytes, fmt.Sprint(s.PeakAllocatedStep)
			if s.MaxAllocatedBytes > peak {
				peak, step = s.MaxAllocatedBytes, ""
			}
			if ans == nil || peak > ans.AllocatedBytes {
				ans = &PeakAnswer{Source: in.Source, AllocatedBytes: peak, Holders: []Holder{}}
				if step != "" {
					ans.Step = "step " + step
				}
			}
		}
	}
	return ans
}

// topHolders are the three lines holding the most of a composition.
func topHolders(c *memtimeline.Composition) []Holder {
	out := []Holder{}
	for _, h := range c.ByLine {
		if len(out) == 3 {
			break
		}
		if h.Name == memtimeline.BeforeProfiling {
			continue // no line: said by the categories
		}
		out = append(out, Holder{Where: h.Name, Operator: h.Detail, Bytes: h.Bytes})
	}
	return out
}

// PeakComposition is what fills the trace's peak of allocated memory
// (memoized; nil without GPU memory events).
func (in *Input) PeakComposition() *memtimeline.Composition {
	return Memo(in, "verdict:peak-composition", func() *memtimeline.Composition {
		if !in.Has(SourceTrace) {
			return nil
		}
		return memtimeline.PeakComposition(in.Trace, in.Attribution(), in.Lifetimes(-1), -1)
	})
}

// OOMComposition is what was alive at the trace's first out-of-memory.
func (in *Input) OOMComposition() *memtimeline.Composition {
	return Memo(in, "verdict:oom-composition", func() *memtimeline.Composition {
		if !in.Has(SourceTrace) || len(in.Trace.OOMs) == 0 {
			return nil
		}
		o := in.Trace.OOMs[0]
		return memtimeline.CompositionAt(in.Trace, in.Attribution(), in.Lifetimes(-1), int(o.DeviceID), o.TS)
	})
}

// Judge is the verdict of one run and rank from all of its inputs, with
// the built-in rules' thresholds.
func Judge(name string, ins []*Input) Verdict { return JudgeWith(name, ins, DefaultJudgeOptions()) }

// JudgeWith is Judge with the thresholds in force.
func JudgeWith(name string, ins []*Input, o JudgeOptions) Verdict {
	v := Verdict{Name: name, Rank: -1, Inputs: ins, Sources: []string{}}
	var ev []LeakEvidence
	for _, in := range ins {
		v.Sources = append(v.Sources, in.Source)
		ev = append(ev, groupLeakEvidence(in, ins)...)
		if r := in.rankOrContents(); r >= 0 && v.Rank < 0 {
			v.Rank = r
		}
	}
	ev = append(ev, snapshotSeriesEvidence(ins)...)
	smiLeakRates(ev, ins)
	v.Leak = judgeLeak(ev)
	v.GPU = judgeGPU(ins)
	v.OOMs = judgeOOMs(ins)
	if v.OOMs == nil {
		v.OOMs = []OOMAnswer{}
	}
	v.Frag = judgeFrag(ins, o)
	v.Frag = addRetries(v.Frag, ins)
	v.Frag = fragCost(v.Frag, v.OOMs, ins) // fragcost.go
	chainOOMs(&v)                          // oomchain.go
	if s := allocSettings(ins); s != "" {  // allocsettings.go
		if v.Frag == nil {
			v.Frag = &FragAnswer{Verdict: frag.VerdictUnknown, Costs: []string{}, LimitBytes: -1, HeadroomBytes: -1}
		}
		v.Frag.Settings = s
	}
	v.Leak.Forecast = forecast(&v)
	v.Peak = judgePeak(ins)
	v.Host = judgeHost(ins)
	return v
}

// Status is the verdict's word for a headline: LEAK, OOM, CLEAN, UNKNOWN.
func (v *Verdict) Status() string {
	switch {
	case v.Leak.Verdict == leak.VerdictLeak:
		return "LEAK"
	case len(v.OOMs) > 0:
		return "OOM"
	case v.Host != nil && v.Host.Verdict == leak.VerdictLeak:
		return "LEAK" // of pinned host memory: its own line says so
	}
	return strings.ToUpper(v.Leak.Verdict)
}

// sortEvidence orders evidence best first.
func sortEvidence(ev []LeakEvidence) {
	slices.SortStableFunc(ev, func(a, b LeakEvidence) int {
		if better(a, b) {
			return -1
		}
		if better(b, a) {
			return 1
		}
		return cmp.Compare(a.Source, b.Source)
	})
}
