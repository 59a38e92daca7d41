package snapshot

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"

	"github.com/torchmem/torchmem/memtimeline"
)

// The newer fields of a snapshot, each optional: private pools
// (segment_pool_id: CUDA graphs and torch.cuda.MemPool), the labels each
// history entry carries (compile_context, user_metadata) and the
// record_function ranges (external_annotations, with
// global_record_annotations).

// PoolUse is what one private pool holds at the dump.
type PoolUse struct {
	// Pool is torch's MempoolId: (0, N) a user-created pool
	// (torch.cuda.MemPool, graph_pool_handle()), (N, 0) the pool a CUDA
	// graph capture made for itself (testdata/gpu/round4/snapshot_fields).
	Pool           [2]int64 `json:"pool"`
	Kind           string   `json:"kind"`
	Segments       int      `json:"segments"`
	ReservedBytes  int64    `json:"reserved_bytes"`
	AllocatedBytes int64    `json:"allocated_bytes"`
	// Sites are the lines holding its live blocks, largest first (at
	// most 3; none when the blocks carry no stack).
	Sites []string `json:"sites,omitempty"`
}

// Pools sums the segments of each private pool (the default pool, (0, 0),
// left out), largest first.
func (s *Snapshot) Pools() []PoolUse {
	idx := map[[2]int64]int{}
	var out []PoolUse
	for _, seg := range s.Segments {
		if seg.PoolID == ([2]int64{}) {
			continue
		}
		i, ok := idx[seg.PoolID]
		if !ok {
			i = len(out)
			idx[seg.PoolID] = i
			kind := "CUDA graph capture"
			if seg.PoolID[0] == 0 {
				kind = "torch.cuda.MemPool"
			}
			out = append(out, PoolUse{Pool: seg.PoolID, Kind: kind})
		}
		out[i].Segments++
		out[i].ReservedBytes += seg.TotalSize
		out[i].AllocatedBytes += seg.AllocatedSize
	}
	if len(out) == 0 {
		return nil
	}
	for _, l := range s.LiveSites() {
		if i, ok := idx[l.Pool]; ok && !l.NoStack() && len(out[i].Sites) < 3 {
			out[i].Sites = append(out[i].Sites, fmt.Sprintf("%s %s", FrameName(l.Site, l.Stack), memtimeline.FormatBytes(l.Bytes)))
		}
	}
	slices.SortStableFunc(out, func(a, b PoolUse) int { return cmp.Compare(b.ReservedBytes, a.ReservedBytes) })
	return out
}

// LabelUse is what the history recorded under one label: a
// compile_context (the torch.compile region, "N/A" outside) or a
// user_metadata value (torch.cuda.memory._set_memory_metadata).
type LabelUse struct {
	Field  string `json:"field"` // "compile_context" or "user_metadata"
	Value  string `json:"value"`
	Allocs int    `json:"allocs"`
	// AllocBytes is what its allocations asked for; LiveBytes what of it
	// was never freed in the history.
	AllocBytes int64 `json:"alloc_bytes"`
	LiveBytes  int64 `json:"live_bytes"`
}

// labelSum is what the allocations under one context add up to.
type labelSum struct {
	allocs      int
	bytes, live int64
}

// maxLabels bounds the labels a report lists per field.
const maxLabels = 20

// Labels sums the history's allocations by compile_context and by
// user_metadata (entries with neither left out); nil when no entry carries
// one. Each field's labels come largest first, at most maxLabels.
func (s *Snapshot) Labels() []LabelUse { return s.labels(nil) }

// labels is Labels given each device's allocations live at the end of its
// history (liveAtEnd's indices; nil: replayed here).
func (s *Snapshot) labels(live [][]int) []LabelUse {
	type key struct{ field, value string }
	idx := map[key]int{}
	var out []LabelUse
	add := func(k key, sum *labelSum) {
		i, ok := idx[k]
		if !ok {
			i = len(out)
			idx[k] = i
			out = append(out, LabelUse{Field: k.field, Value: k.value})
		}
		out[i].Allocs += sum.allocs
		out[i].AllocBytes += sum.bytes
		out[i].LiveBytes += sum.live
	}
	// Summed by context first: the entries share a few contexts, and a
	// pointer finds its sum without hashing two strings per allocation.
	sums := map[*EntryContext]*labelSum{}
	var order []*EntryContext
	for dev, tr := range s.DeviceTraces {
		var ends []int
		if live != nil {
			ends = live[dev]
		} else {
			ends, _ = liveAtEnd(tr, nil, nil)
		}
		stillLive := make([]uint64, (tr.Len()+63)/64)
		for _, j := range ends {
			stillLive[j/64] |= 1 << (j % 64)
		}
		var last *EntryContext
		var sum *labelSum
		for j, e := range tr.All() {
			if e.Context == nil || e.Action != ActionAlloc {
				continue
			}
			if e.Context != last {
				if sum = sums[e.Context]; sum == nil {
					sum = &labelSum{}
					sums[e.Context] = sum
					order = append(order, e.Context)
				}
				last = e.Context
			}
			sum.allocs++
			sum.bytes += e.Size
			if stillLive[j/64]&(1<<(j%64)) != 0 {
				sum.live += e.Size
			}
		}
	}
	for _, c := range order {
		if c.CompileContext != "" {
			add(key{"compile_context", c.CompileContext}, sums[c])
		}
		if c.UserMetadata != "" {
			add(key{"user_metadata", c.UserMetadata}, sums[c])
		}
	}
	slices.SortStableFunc(out, func(a, b LabelUse) int {
		return cmp.Or(cmp.Compare(a.Field, b.Field), cmp.Compare(b.AllocBytes, a.AllocBytes), cmp.Compare(a.Value, b.Value))
	})
	// compile_context is "N/A" on every entry outside torch.compile: a
	// history with no compiled region says nothing with it.
	compiled := slices.ContainsFunc(out, func(l LabelUse) bool { return l.Field == "compile_context" && l.Value != "N/A" })
	var kept []LabelUse
	per := map[string]int{}
	for _, l := range out {
		if l.Field == "compile_context" && !compiled {
			continue
		}
		if per[l.Field] < maxLabels {
			kept = append(kept, l)
		}
		per[l.Field]++
	}
	return kept
}

// AnnotationUse is one record_function name among the snapshot's
// external annotations, with how many ranges it opened.
type AnnotationUse struct {
	Name   string `json:"name"`
	Ranges int    `json:"ranges"`
}

// numberedName is a range name ending in its number (ProfilerStep#3).
var numberedName = regexp.MustCompile(`([#_])\d+$`)

// AnnotationNames counts the external annotations' ranges by name, most
// first (at most maxLabels).
func (s *Snapshot) AnnotationNames() []AnnotationUse {
	idx := map[string]int{}
	var out []AnnotationUse
	for _, a := range s.ExternalAnnotations {
		if a.Stage != "START" {
			continue
		}
		// One name per kind of range: ProfilerStep#3 and train_step_3
		// count as ProfilerStep#N and train_step_N.
		name := numberedName.ReplaceAllString(a.Name, "${1}N")
		i, ok := idx[name]
		if !ok {
			i = len(out)
			idx[name] = i
			out = append(out, AnnotationUse{Name: name})
		}
		out[i].Ranges++
	}
	slices.SortStableFunc(out, func(a, b AnnotationUse) int {
		return cmp.Or(cmp.Compare(b.Ranges, a.Ranges), cmp.Compare(a.Name, b.Name))
	})
	if len(out) > maxLabels {
		out = out[:maxLabels]
	}
	return out
}

// NoHistory says what a snapshot without recorded history cannot tell
// (the history off, or taken with include_traces=False): "" when it has
// one.
func (s *Snapshot) NoHistory() string {
	for _, tr := range s.DeviceTraces {
		if tr.Len() > 0 {
			return ""
		}
	}
	stacks := false
	for _, seg := range s.Segments {
		for _, b := range seg.Blocks {
			stacks = stacks || len(b.Frames) > 0
		}
	}
	if stacks {
		return "no recorded history (include_traces=False, or the history was off at the dump): segments, blocks and their stacks only; when each block was allocated, what was freed, growth per step and out-of-memory events cannot be told"
	}
	return "no recorded history and no stacks (the history was off, or include_traces=False): segments and blocks only; which line allocated what, when, growth per step and out-of-memory events cannot be told (the live bytes, pools and fragmentation can)"
}
