package memtimeline

import (
	"cmp"
	"slices"
	"strings"

	"github.com/torchmem/torchmem/chrometrace"
)

// Site is a place in the code that allocates GPU memory: a Python stack
// and the operator chain that ran under it.
type Site struct {
	Frames   []string // outermost..innermost
	Operator string   // "aten::clone > aten::empty_like > aten::empty_strided"
	// ForwardOp is set for backward work: the forward op whose autograd
	// node allocated (the frames are the forward op's).
	ForwardOp string
	Allocs    int64
	// AllocBytes sums the blocks the site allocated in the window.
	AllocBytes int64
	// LiveBytesAtEnd and LiveBlocksAtEnd are blocks allocated here and not
	// freed by the end of the trace, wherever the frees happened.
	LiveBytesAtEnd  int64
	LiveBlocksAtEnd int64
	// LiveBytesAtPeak is what the site held when allocated memory peaked.
	LiveBytesAtPeak int64
}

// SiteOptions shape how stacks are keyed.
type SiteOptions struct {
	Device int // GPU index, -1 all
	// Depth keeps the innermost Depth frames of each stack (0: all).
	Depth int
	// AllFrames keeps torch, site-packages and standard-library frames;
	// by default they are collapsed so the user's own lines lead.
	AllFrames bool
}

// SiteKey renders a site's identity for maps and folded stacks.
func (s *Site) key() string {
	return strings.Join(s.Frames, "\x00") + "\x01" + s.Operator + "\x01" + s.ForwardOp
}

// Sites attributes every GPU allocation in the window to its site and sums
// bytes allocated, bytes still alive at the end, and bytes alive at the
// moment allocated memory peaked. Sorted by live bytes at end, then
// allocated bytes.
func Sites(t *chrometrace.Trace, attr *chrometrace.Attribution, lifetimes []Lifetime, opts SiteOptions) []Site {
	_, peakTS := PeakAllocated(t, opts.Device)
	index := NewSiteIndex(attr, opts)
	var sums []Site // per site index: the counters
	for _, lt := range lifetimes {
		if lt.Alloc < 0 {
			continue
		}
		k := index.Of(int(lt.Alloc))
		if int(k) == len(sums) {
			sums = append(sums, Site{})
		}
		agg := &sums[k]
		agg.Allocs++
		agg.AllocBytes = chrometrace.AddSat(agg.AllocBytes, lt.Bytes)
		if lt.State == Unreleased {
			agg.LiveBytesAtEnd = chrometrace.AddSat(agg.LiveBytesAtEnd, lt.Bytes)
			agg.LiveBlocksAtEnd++
		}
		if peakTS >= 0 && lt.Start <= peakTS && (lt.End < 0 || lt.End > peakTS) {
			agg.LiveBytesAtPeak = chrometrace.AddSat(agg.LiveBytesAtPeak, lt.Bytes)
		}
	}
	out := make([]Site, len(sums))
	for k, c := range sums {
		s := index.Site(int32(k))
		s.Allocs, s.AllocBytes, s.LiveBytesAtEnd, s.LiveBlocksAtEnd, s.LiveBytesAtPeak = c.Allocs, c.AllocBytes, c.LiveBytesAtEnd, c.LiveBlocksAtEnd, c.LiveBytesAtPeak
		out[k] = s
	}
	slices.SortFunc(out, func(a, b Site) int {
		return cmp.Or(cmp.Compare(b.LiveBytesAtEnd, a.LiveBytesAtEnd), cmp.Compare(b.AllocBytes, a.AllocBytes), strings.Compare(a.key(), b.key()))
	})
	return out
}

// SiteIndex numbers the sites of memory events 0, 1, 2... in the order
// first seen, naming each distinct site once. A trace repeats a few
// thousand sites over millions of allocations: per-site sums keyed by the
// index skip building (and hashing) a site's text for every block.
type SiteIndex struct {
	attr  *chrometrace.Attribution
	opts  SiteOptions
	byIDs map[siteIDs]int32
	byKey map[string]int32
	sites []Site
}

// siteIDs is what an event's site is made of before it is named: equal
// ids give equal sites (different ids may too: a stack cut to Depth).
type siteIDs struct {
	stack, chain int32
	forward      chrometrace.StrID
}

// NewSiteIndex numbers sites as SiteOf(attr, i, opts) names them.
func NewSiteIndex(attr *chrometrace.Attribution, opts SiteOptions) *SiteIndex {
	return &SiteIndex{attr: attr, opts: opts, byIDs: map[siteIDs]int32{}, byKey: map[string]int32{}}
}

// Of is memory event i's site number: equal numbers for equal sites.
func (x *SiteIndex) Of(i int) int32 {
	stack, chain := x.attr.SiteNodes(i)
	ids := siteIDs{stack, chain, x.attr.ForwardName(i)}
	if k, ok := x.byIDs[ids]; ok {
		return k
	}
	s := SiteOf(x.attr, i, x.opts)
	key := s.key()
	k, ok := x.byKey[key]
	if !ok {
		k = int32(len(x.sites))
		x.sites = append(x.sites, s)
		x.byKey[key] = k
	}
	x.byIDs[ids] = k
	return k
}

// Site is site k as SiteOf names it (counters zero). Sites share their
// Frames slices: read them, never modify them.
func (x *SiteIndex) Site(k int32) Site { return x.sites[k] }

// Len is the number of distinct sites seen.
func (x *SiteIndex) Len() int { return len(x.sites) }

// SiteOf returns the (empty-counted) site of memory event i.
// Sites share their Frames slices (one per distinct stack): read them,
// never modify them.
func SiteOf(attr *chrometrace.Attribution, i int, opts SiteOptions) Site {
	var frames []string
	if opts.AllFrames {
		frames = attr.PyStack(i)
		for k, f := range frames {
			frames[k] = chrometrace.NormalizeFrame(f)
		}
	} else {
		frames = attr.UserStack(i)
	}
	if opts.Depth > 0 && len(frames) > opts.Depth {
		frames = frames[len(frames)-opts.Depth:]
	}
	return Site{Frames: frames, Operator: attr.OpChainText(i), ForwardOp: attr.ForwardOp(i)}
}

// UserFrames drops library frames, keeping the user's own code and module
// frames. A stack made only of library frames is kept whole: something
// must name the site.
func UserFrames(frames []string) []string {
	var out []string
	for _, f := range frames {
		if !chrometrace.IsLibraryFrame(f) {
			out = append(out, f)
		}
	}
	if len(out) == 0 {
		return frames
	}
	return out
}
