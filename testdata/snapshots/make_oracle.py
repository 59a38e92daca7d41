#!/usr/bin/env python3
"""Oracle figures for the real allocator snapshots in this folder.

CPython's own pickle module decodes each snapshot (an implementation
independent of torchmem's Go decoder) and this script sums what the Go
tests compare against. memory_stats.json beside each snapshot in
/work/shared/traces (torch.cuda.memory_stats() at process end) adds
torch's own reserved bytes and segment count.

Regenerate: python3 make_oracle.py /work/shared/traces > oracle.json
"""
import collections
import gzip
import json
import os
import pickle
import sys

NAMES = ["frag_small_allocs", "leak_module_cache", "leak_eval_no_grad"]
TORCH_PARTS = {
    "nn", "autograd", "optim", "utils", "cuda", "_dynamo", "_inductor", "_functorch",
    "distributed", "amp", "fx", "jit", "profiler", "_subclasses", "_export", "export",
    "backends", "multiprocessing", "sparse", "testing", "_library", "_higher_order_ops",
    "_prims", "_refs", "_decomp", "_prims_common", "_tensor.py", "functional.py", "_ops.py",
    "overrides.py", "_jit_internal.py", "random.py", "serialization.py", "storage.py",
    "_utils.py", "__init__.py", "_compile.py", "_tensor_str.py", "_guards.py", "_logging", "func",
}

MACHINERY = (
    "torch::unwind::", "torch::CapturedTraceback::", "torch::cuda::(anonymous namespace)::gather",
    "c10::cuda::CUDACachingAllocator::", "at::detail::empty", "at::(anonymous namespace)::create_out",
)


def is_library(fn):
    if fn.startswith("<") or "/site-packages/" in fn or "/dist-packages/" in fn or "/lib/python3" in fn:
        return True
    i = fn.rfind("/torch/")
    if i >= 0:
        return fn[i + len("/torch/"):].split("/")[0] in TORCH_PARTS
    return False


def user_frame(frames):
    py = [f for f in frames if f["filename"].endswith(".py")]
    for f in py:
        if not is_library(f["filename"]):
            return f
    if py:
        return py[0]
    for f in frames:
        if f["name"] and not f["name"].startswith(MACHINERY):
            return f
    for f in frames:
        if f["name"]:
            return f
    return {"filename": "", "line": 0, "name": "<no stack recorded>"}


def site(f):
    return "%s:%d %s" % (f["filename"], f["line"], f["name"])


def oracle(snap, stats):
    segs = snap["segments"]
    blocks = [b for s in segs for b in s["blocks"]]
    out = {
        "segments": len(segs),
        "small_segments": sum(s["segment_type"] == "small" for s in segs),
        "large_segments": sum(s["segment_type"] == "large" for s in segs),
        "expandable_segments": sum(bool(s["is_expandable"]) for s in segs),
        "reserved_bytes": sum(s["total_size"] for s in segs),
        "segment_allocated_size_sum": sum(s["allocated_size"] for s in segs),
        "segment_active_size_sum": sum(s["active_size"] for s in segs),
        "allocated_bytes": sum(b["size"] for b in blocks if b["state"] == "active_allocated"),
        "requested_bytes": sum(b["requested_size"] for b in blocks if b["state"] == "active_allocated"),
        "block_states": dict(collections.Counter(b["state"] for b in blocks)),
        "inactive_split_bytes": sum(
            b["size"] for s in segs if any(x["state"] != "inactive" for x in s["blocks"])
            for b in s["blocks"] if b["state"] == "inactive"),
        "largest_free_block": max([b["size"] for b in blocks if b["state"] == "inactive"] or [0]),
        "settings": {k: v for k, v in snap["allocator_settings"].items() if not isinstance(v, dict)},
        "annotations": len(snap.get("external_annotations") or []),
        "torch_reserved_bytes_at_exit": stats["reserved_bytes.all.current"],
        "torch_segments_at_exit": stats["segment.all.current"],
    }
    traces = []
    for tr in snap["device_traces"]:
        t = {
            "entries": len(tr),
            "actions": dict(collections.Counter(e["action"] for e in tr)),
            "size_sum": sum(e["size"] for e in tr),
            "addr_xor": 0,
            "time_sum": sum(e["time_us"] for e in tr) % 2**64,  # Go sums in uint64
            "frames_total": sum(len(e.get("frames", [])) for e in tr),
            "distinct_frames": len({(f["filename"], f["line"], f["name"]) for e in tr for f in e.get("frames", [])}),
            "distinct_stacks": len({tuple((f["filename"], f["line"], f["name"]) for f in e.get("frames", [])) for e in tr}),
        }
        for e in tr:
            t["addr_xor"] ^= e.get("addr", 0)
        live = {}
        for e in tr:
            if e["action"] == "alloc":
                live[e["addr"]] = e
            elif e["action"] in ("free_requested", "free_completed"):
                live.pop(e["addr"], None)
        groups = collections.defaultdict(lambda: [0, 0])
        for e in live.values():
            g = groups[site(user_frame(e.get("frames", [])))]
            g[0] += e["size"]
            g[1] += 1
        t["leaks"] = sorted(({"site": k, "bytes": v[0], "count": v[1]} for k, v in groups.items()),
                            key=lambda g: (-g["bytes"], -g["count"], g["site"]))
        traces.append(t)
    out["device_traces"] = traces
    return out


def main():
    root = sys.argv[1]
    res = {}
    here = os.path.dirname(os.path.abspath(__file__))
    for n in NAMES:
        with gzip.open(os.path.join(here, n + ".pickle.gz"), "rb") as f:
            snap = pickle.load(f)
        with open(os.path.join(root, n, "memory_stats.json")) as f:
            stats = json.load(f)
        res[n] = oracle(snap, stats)
    json.dump(res, sys.stdout, indent=1, sort_keys=True)
    print()


main()
