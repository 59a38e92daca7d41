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
	sites := map[string]*Site{}
	var keyBuf strings.Builder
	for _, lt := range lifetimes {
		if lt.Alloc < 0 {
			continue
		}
		s := SiteOf(attr, int(lt.Alloc), opts)
		keyBuf.Reset()
		keyBuf.WriteString(s.key())
		agg := sites[keyBuf.String()]
		if agg == nil {
			agg = &s
			sites[keyBuf.String()] = agg
		}
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
	out := make([]Site, 0, len(sites))
	for _, s := range sites {
		out = append(out, *s)
	}
	slices.SortFunc(out, func(a, b Site) int {
		return cmp.Or(cmp.Compare(b.LiveBytesAtEnd, a.LiveBytesAtEnd), cmp.Compare(b.AllocBytes, a.AllocBytes), strings.Compare(a.key(), b.key()))
	})
	return out
}

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
