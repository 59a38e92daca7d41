package rules

import (
	"fmt"

	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/memtimeline/steplog"
)

// AllocCounts are the steps log's newer memory_stats keys over a span of
// steps (the snippet records them with each line): how often the
// allocator called cudaMalloc and cudaFree (num_device_alloc,
// num_device_free), what the private pools of CUDA graphs and
// torch.cuda.MemPool reserve (reserved_bytes_by_private_pools.*), and the
// allocations refused under the memory fraction (num_oom_rejections).
// They explain answers: reserved growth that is a graph's pool, not
// fragmentation; retries that free and malloc segments again; an OOM's
// refused requests. -1: not recorded.
type AllocCounts struct {
	FirstStep int64 `json:"first_step"`
	LastStep  int64 `json:"last_step"`
	// DeviceAllocs and DeviceFrees are the cudaMalloc and cudaFree calls
	// from FirstStep's line to LastStep's.
	DeviceAllocs int64 `json:"device_allocs"`
	DeviceFrees  int64 `json:"device_frees"`
	// PrivatePoolBytes is what the private pools reserve at LastStep;
	// PrivatePoolGrowth its change from FirstStep.
	PrivatePoolBytes  int64 `json:"private_pool_bytes"`
	PrivatePoolGrowth int64 `json:"private_pool_growth_bytes"`
	// OOMRejections is torch's count at LastStep.
	OOMRejections int64 `json:"oom_rejections"`
}

// allocCounts reads the keys over the records with steps first..last
// (-1: from the first, to the last); nil when no record has any of them.
func allocCounts(recs []steplog.Record, first, last int64) *AllocCounts {
	c := AllocCounts{FirstStep: -1, LastStep: -1, DeviceAllocs: -1, DeviceFrees: -1, PrivatePoolBytes: -1, PrivatePoolGrowth: -1, OOMRejections: -1}
	var a0, f0, p0 int64 = -1, -1, -1
	any := false
	for _, r := range recs {
		if (first >= 0 && r.Step < first) || (last >= 0 && r.Step > last) {
			continue
		}
		if r.DeviceAllocs < 0 && r.DeviceFrees < 0 && r.PrivatePoolBytes < 0 && r.OOMRejections < 0 {
			continue
		}
		any = true
		if c.FirstStep < 0 {
			c.FirstStep = r.Step
		}
		c.LastStep = r.Step
		if r.DeviceAllocs >= 0 {
			if a0 < 0 {
				a0 = r.DeviceAllocs
			}
			c.DeviceAllocs = r.DeviceAllocs - a0
		}
		if r.DeviceFrees >= 0 {
			if f0 < 0 {
				f0 = r.DeviceFrees
			}
			c.DeviceFrees = r.DeviceFrees - f0
		}
		if r.PrivatePoolBytes >= 0 {
			if p0 < 0 {
				p0 = r.PrivatePoolBytes
			}
			c.PrivatePoolBytes, c.PrivatePoolGrowth = r.PrivatePoolBytes, r.PrivatePoolBytes-p0
		}
		if r.OOMRejections >= 0 {
			c.OOMRejections = r.OOMRejections
		}
	}
	if !any {
		return nil
	}
	return &c
}

// mallocs says the cudaMalloc and cudaFree calls, "" when not recorded.
func (c *AllocCounts) mallocs() string {
	if c == nil || c.DeviceAllocs < 0 {
		return ""
	}
	s := fmt.Sprintf("%d cudaMalloc", c.DeviceAllocs)
	if c.DeviceFrees >= 0 {
		s += fmt.Sprintf(" and %d cudaFree", c.DeviceFrees)
	}
	return s + fmt.Sprintf(" over steps %d..%d (num_device_alloc, num_device_free)", c.FirstStep, c.LastStep)
}

// explainReservedGrowth adds to reserved growth what the allocator's
// counts say about it: the cudaMalloc calls that made the new segments,
// and the share of private pools (CUDA graphs, torch.cuda.MemPool), whose
// memory a graph keeps for its replays: when they hold most of the
// growth it is neither a leak nor fragmentation, and the answer says so.
func explainReservedGrowth(g *ReservedGrowth, recs []steplog.Record) {
	c := allocCounts(recs, g.FirstStep, g.LastStep)
	if c == nil {
		return
	}
	g.Counts = c
	if m := c.mallocs(); m != "" {
		g.Reason += "; " + m
		if c.DeviceAllocs > 0 && c.DeviceFrees == 0 {
			g.Reason += ": new segments, none given back"
		}
	}
	if c.PrivatePoolBytes >= 0 {
		mb := memtimeline.FormatBytes
		g.Reason += fmt.Sprintf("; %s of reserved is in private pools (CUDA graphs, torch.cuda.MemPool) at step %d, %s more than at step %d",
			mb(c.PrivatePoolBytes), c.LastStep, signedBytes(c.PrivatePoolGrowth), c.FirstStep)
		if c.PrivatePoolGrowth*2 >= g.GrowthBytes {
			g.PrivatePools = true
			g.Reason += ": the growth is the pools' (a graph keeps its memory for its replays), not a leak nor fragmentation"
			g.Advice = AdvicePrivatePools
		}
	}
}

// AdvicePrivatePools is the advice when private pools hold the growth.
const AdvicePrivatePools = "Private pools hold the growth: each CUDA graph (torch.compile mode=\"reduce-overhead\", torch.cuda.graphs) or torch.cuda.MemPool keeps its memory for its replays. " +
	"New shapes record new graphs: mark dynamic dimensions or pad to a few sizes; free a pool by deleting its graphs or the MemPool."

// retryCounts says what the cudaMalloc and cudaFree counts add to the
// retries' answer: each retry gives cached segments back (cudaFree) and
// mallocs again.
func retryCounts(c *AllocCounts) string {
	m := c.mallocs()
	if m == "" || c.DeviceFrees <= 0 {
		return ""
	}
	return "; " + m + ": the retries give cached segments back and malloc them again"
}
