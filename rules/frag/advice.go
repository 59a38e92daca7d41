package frag

// AllocConfExpandable is the allocator setting most fixes name: segments
// that grow in place instead of new ones beside them. Every advice that
// names it uses this constant, so it is written once.
const AllocConfExpandable = "PYTORCH_CUDA_ALLOC_CONF=" + ExpandableSegments

// ExpandableSegments is that setting as the advice names it inline.
const ExpandableSegments = "expandable_segments:True"

// AdviceLowerPeak is what to do when the allocator had to flush its cache
// to serve a request (a cudaMalloc retry): memory is nearly full.
const AdviceLowerPeak = "lower the peak or use " + ExpandableSegments

// AdviceSplitFree is what to try when free memory is split inside used
// segments (a snapshot's inactive split, memory_summary's non-releasable).
const AdviceSplitFree = "Try " + AllocConfExpandable + ", or max_split_size_mb to stop large blocks being split; pre-allocate buffers of fixed sizes."

// AdviceSnapshotShowsSplit says where to look next when a memory_summary()
// log shows split free memory but not where it is.
const AdviceSnapshotShowsSplit = "An allocator snapshot (torchmem snapshot) shows which segments hold the split blocks."

// What to try for each fragmentation signal.
const (
	AdviceReuseBuffers       = "Pre-allocate and reuse buffers (allocate once outside the loop, fill with .copy_() or out=) instead of creating thousands of tiny tensors every step."
	AdviceBatchSmall         = "Batch small tensors into one: torch.stack/torch.cat them, or keep one flat buffer and take views; move per-step Python scalars to the GPU once, not as a new tensor each time."
	AdviceExpandableSegments = "Set " + AllocConfExpandable + ": segments grow in place, so freed memory is reusable for requests of any size."
	AdviceMaxSplitSize       = "Or set PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:<N> (e.g. 128) so large cached blocks are not split for smaller requests; allocate long-lived large tensors first."
	AdviceNoEmptyCache       = "Remove torch.cuda.empty_cache() from the loop: every call gives segments back that the next step takes again with cudaMalloc, which synchronizes the device."
	AdviceAllocRetry         = "cudaFree without empty_cache() means a cudaMalloc failed and the allocator freed its cache to retry (num_alloc_retries in torch.cuda.memory_stats()): memory is nearly full; " + AdviceLowerPeak + "."
	AdviceSteadyMalloc       = "New segments after the first step without a new peak mean cached blocks did not fit the requests: try " + ExpandableSegments + ", and keep tensor shapes stable from step to step."
)
