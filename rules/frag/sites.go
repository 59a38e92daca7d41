package frag

import (
	"cmp"
	"slices"
	"strings"

	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/rules/internal/fmtutil"
	"github.com/torchmem/torchmem/rules/site"
)

// SizeBucket is one bar of the allocation size histogram: blocks of
// (MinBytes, MaxBytes] bytes, MaxBytes 0 meaning no upper bound.
type SizeBucket struct {
	Label    string  `json:"label"`
	MinBytes int64   `json:"min_bytes"`
	MaxBytes int64   `json:"max_bytes"`
	Pool     string  `json:"pool"` // the caching allocator pool these blocks come from
	Count    int64   `json:"count"`
	Bytes    int64   `json:"bytes"`
	Fraction float64 `json:"fraction"` // of all allocations, by count
}

// fragBuckets follow the caching allocator's own size classes: 512 B is its
// rounding unit, <= 1 MiB the small pool (2 MiB segments), < 10 MiB large
// blocks carved from 20 MiB segments, larger ones get their own segment.
var fragBuckets = []SizeBucket{
	{Label: "<= 512 B", MaxBytes: 512, Pool: "small"},
	{Label: "<= 4 KiB", MinBytes: 512, MaxBytes: 4 << 10, Pool: "small"},
	{Label: "<= 64 KiB", MinBytes: 4 << 10, MaxBytes: 64 << 10, Pool: "small"},
	{Label: "<= 1 MiB", MinBytes: 64 << 10, MaxBytes: 1 << 20, Pool: "small"},
	{Label: "<= 10 MiB", MinBytes: 1 << 20, MaxBytes: 10 << 20, Pool: "large (20 MiB segments)"},
	{Label: "> 10 MiB", MinBytes: 10 << 20, Pool: "large (own segment)"},
}

// CodeSite is a place in the code (Python stack and operator chain) with
// how many times it did something.
type CodeSite struct {
	Count     int64          `json:"count"`
	Bytes     int64          `json:"bytes"`
	PerStep   float64        `json:"per_step"`
	Fraction  float64        `json:"fraction"` // of the counted events
	Operator  string         `json:"operator"`
	ForwardOp string         `json:"forward_operator,omitempty"`
	Stack     []string       `json:"stack"`
	Location  *site.Location `json:"location,omitempty"`
}

// SmallAllocs counts blocks of at most MaxBytes.
type SmallAllocs struct {
	MaxBytes int64 `json:"max_bytes"`
	Count    int64 `json:"count"`
	Bytes    int64 `json:"bytes"`
	// PerStep is the mean over profiled steps (the whole count without steps).
	PerStep  float64 `json:"per_step"`
	Fraction float64 `json:"fraction"` // of all GPU allocations, by count
	// TopSites are the code sites making most of them, by count.
	TopSites []CodeSite `json:"top_sites"`
}

// siteCounter counts events per code site.
type siteCounter struct {
	sites map[string]*CodeSite
	// byIndex caches the sites of a SiteIndex's numbers (addEvent).
	byIndex []*CodeSite
}

func newSiteCounter() *siteCounter { return &siteCounter{sites: map[string]*CodeSite{}} }

func (c *siteCounter) add(s memtimeline.Site, bytes int64) {
	agg := c.site(s)
	agg.Count++
	agg.Bytes += bytes
}

// addEvent counts memory event i at its site in x, naming each site once.
func (c *siteCounter) addEvent(x *memtimeline.SiteIndex, i int, bytes int64) {
	k := x.Of(i)
	if int(k) >= len(c.byIndex) {
		c.byIndex = append(c.byIndex, make([]*CodeSite, int(k)+1-len(c.byIndex))...)
	}
	agg := c.byIndex[k]
	if agg == nil {
		agg = c.site(x.Site(k))
		c.byIndex[k] = agg
	}
	agg.Count++
	agg.Bytes += bytes
}

func (c *siteCounter) site(s memtimeline.Site) *CodeSite {
	key := strings.Join(s.Frames, "\x00") + "\x01" + s.Operator + "\x01" + s.ForwardOp
	agg := c.sites[key]
	if agg == nil {
		// The frames are a trace's: their N is the def line of the
		// function, never the line that ran (site.Location.FromTrace).
		agg = &CodeSite{Operator: s.Operator, ForwardOp: s.ForwardOp, Stack: fmtutil.NonNil(s.Frames), Location: site.LocationOf(s.Frames).FromTrace(false)}
		c.sites[key] = agg
	}
	return agg
}

// top returns the n sites with the most events (0: all), with per-step
// rates and shares of total.
func (c *siteCounter) top(n int, total int64, steps int) []CodeSite {
	out := make([]CodeSite, 0, len(c.sites))
	for _, s := range c.sites {
		s.PerStep = float64(s.Count) / float64(steps)
		s.Fraction = fmtutil.Ratio(s.Count, total)
		out = append(out, *s)
	}
	slices.SortFunc(out, func(a, b CodeSite) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(b.Bytes, a.Bytes), strings.Compare(a.Operator, b.Operator), slices.Compare(a.Stack, b.Stack))
	})
	if n > 0 && len(out) > n {
		out = out[:n]
	}
	return out
}
