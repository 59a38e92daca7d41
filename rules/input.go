package rules

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"slices"
	"unsafe"

	"github.com/torchmem/torchmem/chrometrace"
	"github.com/torchmem/torchmem/internal/crash"
	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/rules/frag"
	"github.com/torchmem/torchmem/rules/leak"
)

// Key names one shared analysis of an Input. Its type parameter is the
// analysis's type, so a key is always read back as what it stores.
type Key[T any] struct{ name string }

// NewKey makes a key; the name must be unique among keys (options that
// change the result belong in it).
func NewKey[T any](name string) Key[T] { return Key[T]{name} }

// Get returns the analysis k of in, computing it at most once per input
// (callers racing for it wait for the first). Rules and renderers share
// what it returns: treat it as read-only.
func Get[T any](in *Input, k Key[T], compute func() T) T { return Memo(in, k.name, compute) }

// The analyses every consumer of a trace shares. Attribution and
// lifetimes are the expensive passes over all memory events; the sites,
// leak and fragmentation analyses build on them.
var (
	keyAttribution = NewKey[*chrometrace.Attribution]("attribution")
	keyLifetimes   = NewKey[[]memtimeline.Lifetime]("lifetimes")
)

func keyOverview(device int) Key[chrometrace.Summary] {
	return NewKey[chrometrace.Summary](fmt.Sprintf("summary:%d", device))
}

func keySites(o memtimeline.SiteOptions) Key[[]memtimeline.Site] {
	return NewKey[[]memtimeline.Site](fmt.Sprintf("sites:%+v", o))
}

func keyLeaks(o leak.Options) Key[leak.Report] {
	return NewKey[leak.Report](fmt.Sprintf("leaks:%+v", o))
}

func keyFrag(o frag.Options) Key[frag.Report] { return NewKey[frag.Report](fmt.Sprintf("frag:%+v", o)) }

// Attribution ties every memory event of the trace to its operator chain
// and Python stack.
func (in *Input) Attribution() *chrometrace.Attribution {
	return Get(in, keyAttribution, func() *chrometrace.Attribution { return chrometrace.Attribute(in.Trace) })
}

// Lifetimes pairs every GPU allocation of the trace with its free; device
// -1 means all GPUs. One pass serves every device: blocks pair per device,
// so one device's lifetimes are the all-device ones filtered, in order.
func (in *Input) Lifetimes(device int) []memtimeline.Lifetime {
	all := Get(in, keyLifetimes, func() []memtimeline.Lifetime { return memtimeline.Lifetimes(in.Trace, -1) })
	if device < 0 {
		return all
	}
	return Get(in, NewKey[[]memtimeline.Lifetime](fmt.Sprintf("lifetimes:%d", device)), func() []memtimeline.Lifetime {
		var out []memtimeline.Lifetime
		for _, lt := range all {
			if int(lt.Device) == device {
				out = append(out, lt)
			}
		}
		return out
	})
}

// Overview is what the trace is and what it recorded (device -1: all
// GPUs).
func (in *Input) Overview(device int) chrometrace.Summary {
	if in.Digest != nil && in.Digest.Overview != nil {
		return *in.Digest.Overview // all GPUs: a digest keeps that one
	}
	if in.Trace == nil {
		return chrometrace.Summary{Rank: -1, WorldSize: 1} // not a trace: it recorded nothing of one
	}
	return Get(in, keyOverview(device), func() chrometrace.Summary { return chrometrace.Summarize(in.Trace, device) })
}

// Sites are the trace's allocation sites. The slice is the caller's (a
// copy): renderers sort it their way.
func (in *Input) Sites(o memtimeline.SiteOptions) []memtimeline.Site {
	if in.Digest != nil {
		return slices.Clone(in.Digest.Sites) // the top rows with defaultSiteOptions
	}
	return slices.Clone(Get(in, keySites(o), func() []memtimeline.Site {
		return memtimeline.Sites(in.Trace, in.Attribution(), in.Lifetimes(o.Device), o)
	}))
}

// leaksWith is the trace's leak report with opts.
func (in *Input) leaksWith(o leak.Options) leak.Report {
	if in.Digest != nil {
		return in.digestLeaks() // made with the default options
	}
	return Get(in, keyLeaks(o), func() leak.Report {
		lifetimes := func() []memtimeline.Lifetime { return in.Lifetimes(o.Device) }
		return leak.Analyze(leak.Data{Trace: in.Trace, Attribution: in.Attribution, Lifetimes: lifetimes}, o)
	})
}

// fragWith is the trace's fragmentation report with opts.
func (in *Input) fragWith(o frag.Options) frag.Report {
	if in.Digest != nil {
		if in.Digest.Frag != nil {
			return *in.Digest.Frag
		}
		return frag.Report{Verdict: frag.VerdictUnknown, Reason: "not a trace"}
	}
	return Get(in, keyFrag(o), func() frag.Report {
		return frag.Analyze(frag.Data{Trace: in.Trace, Attribution: in.Attribution}, o)
	})
}

// prepare computes the analyses every report of a trace input needs, the
// independent ones at once (they share attribution and lifetimes through
// the cache), so that what follows only reads them.
func (in *Input) prepare(site memtimeline.SiteOptions) {
	if in.Trace == nil {
		return
	}
	in.prepareShared()
	var g crash.Group // a panic reaches the caller, and the command's top
	for _, f := range []func(){
		func() { in.Leaks() },
		func() { in.Frag() },
		func() { in.Sites(site) },
		func() { in.Overview(-1) },
		func() { in.PeakComposition() }, // the peak verdict's: else computed alone, after the rules
	} {
		g.Go(f)
	}
	g.Wait()
}

// prepareShared computes the passes the other analyses build on before
// they start: the attribution after the operator table, sharing their
// operator tree, the lifetimes beside both, then the site tables. Their scratch memory (the tree, the per-thread orders,
// the memory indexes, the site tables' memos) is garbage before the
// passes after them allocate theirs, so the peaks do not add up; on a
// large trace it is collected at once (see releaseScratch).
func (in *Input) prepareShared() {
	if in.Trace == nil || in.Digest != nil {
		return
	}
	Memo(in, "shared-passes", func() bool {
		// The lifetimes read only the memory events: they pair them
		// beside the table and the attribution, which leave a core idle
		// at times (the table's serial steps, the backward pass).
		var lifetimes crash.Group
		lifetimes.Go(func() { in.Lifetimes(-1) })
		Get(in, keyAttribution, func() *chrometrace.Attribution {
			a, ops := chrometrace.AttributeAndOperatorsWith(in.Trace, operatorOptions, chrometrace.Stages{
				// The table's indexes, collected before the attribution
				// allocates.
				TableMade: func() { releaseScratch(in.Trace, false) },
				// The tree returned to the OS before the attribution's
				// last stage.
				Meanwhile: func() { releaseScratch(in.Trace, true) },
			})
			Memo(in, keyOperators, func() []chrometrace.OperatorStats { return ops })
			return a
		})
		lifetimes.Wait()
		// The site tables next, before the analyses: their scratch (a
		// node per frame, then per op) is garbage before the analyses
		// that read them allocate theirs. What the lifetimes and the
		// backward pass left is collected first, or the scratch comes on
		// top of it.
		releaseScratch(in.Trace, false)
		var g crash.Group
		g.Go(func() { in.Overview(-1) }) // beside them: it allocates nothing
		in.Attribution().PrepareSites()
		g.Wait()
		releaseScratch(in.Trace, false)
		return true
	})
}

// releaseScratchBytes: a trace whose records take at least this much has
// scratch memory worth collecting between the shared passes and the
// analyses (a collection, a few milliseconds).
const releaseScratchBytes = 64 << 20

// releaseScratch collects the garbage of the shared passes over a large
// trace, so that the pass after reuses its pages rather than growing the
// process by its own: the runtime would collect only once the heap had
// grown further (measured on a 1 GB trace: 37 MB of freed pages still
// resident at the peak of analyze). toOS also returns the freed pages to
// the OS, where the next pass would not reuse them all (after the operator
// tree); elsewhere keeping them saves faulting them in again (page faults
// of analyze on that trace: 26k returning at every stage, 20k now, for a
// peak 6 MB higher).
func releaseScratch(t *chrometrace.Trace, toOS bool) {
	records := len(t.HostOps)*int(unsafe.Sizeof(chrometrace.HostOp{})) + len(t.PyFrames)*int(unsafe.Sizeof(chrometrace.PyFrame{})) +
		len(t.Memory)*int(unsafe.Sizeof(chrometrace.MemoryEvent{}))
	switch {
	case records < releaseScratchBytes:
	case toOS:
		debug.FreeOSMemory()
	default:
		runtime.GC()
	}
}

// SnapshotLeaks is the leak report of an allocator snapshot input.
func (in *Input) SnapshotLeaks() leak.Report { return in.snapshotLeaksWith(in.leakOptions()) }

// snapshotLeaksWith is the snapshot's leak report with opts.
func (in *Input) snapshotLeaksWith(o leak.Options) leak.Report {
	if in.Digest != nil {
		return in.digestLeaks()
	}
	return Get(in, NewKey[leak.Report](fmt.Sprintf("snapshot-leaks:%+v", o)), func() leak.Report {
		return leak.AnalyzeSnapshot(in.SnapshotReport(), o)
	})
}

// RunWith applies rules to in while the analyses its reports show are
// computed beside them (prepare); findings come out as Run's.
func RunWith(rs []Rule, in *Input, site memtimeline.SiteOptions) []Finding {
	var out []Finding
	in.prepareShared() // before the rules, which read it too
	var g crash.Group
	g.Go(func() { out = Run(rs, in) })
	in.prepare(site)
	g.Wait()
	return out
}

// digestLeaks is a digest's leak report.
func (in *Input) digestLeaks() leak.Report {
	if in.Digest.Leaks != nil {
		return *in.Digest.Leaks
	}
	return leak.Report{Verdict: leak.VerdictUnknown, Reason: "not a trace or snapshot", Steps: []leak.StepSurvivors{}, Leaks: []leak.Leak{}, Suspects: []leak.Suspect{}}
}
