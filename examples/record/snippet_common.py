"""Shared plumbing for the recordings made with the snippet itself (examples/torchmem_profile.py).

Unlike record_common.py (plain torch.profiler, with torch's key_averages oracle), these scenarios
use TorchMemProfile exactly as a user would, so their folders hold what the snippet writes:
  <run>_rank0_step<n>.pt.trace.json.gz   the profiled cycle
  <run>_rank0.snapshot.pickle.gz         allocator snapshot with history (Python stacks)
  <run>_rank0.steps.jsonl                memory_stats() after every step
plus, written here:
  memory_stats.json                      torch.cuda.memory_stats() at the end
  truth.json                             what was planted, and what the steps log measured
"""

import json
import os
import socket
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from record_common import site, write_json  # noqa: E402  (re-exported for the scenarios)
from torchmem_profile import TorchMemProfile  # noqa: E402

__all__ = ["TorchMemProfile", "site", "write_json", "run_snippet", "read_steps", "finish"]


def run_snippet(out_dir, step_fn, steps, active, wait=1, warmup=1, **kwargs):
    """steps calls of step_fn(i), each followed by tm.step(), inside TorchMemProfile."""
    with TorchMemProfile(out_dir=out_dir, wait=wait, warmup=warmup, active=active, repeat=1,
                         **kwargs) as tm:
        for i in range(steps):
            step_fn(i)
            tm.step()
    return tm


def read_steps(tm):
    """The lines of the steps log tm wrote."""
    for path in tm.written:
        if path.endswith(".steps.jsonl"):
            with open(path) as f:
                return [json.loads(line) for line in f if line.strip()]
    return []


def growth(lines, key="allocated_bytes.all.current"):
    """Per-step change of key: [line[i] - line[i-1]] for i = 1..last."""
    return [lines[i][key] - lines[i - 1][key] for i in range(1, len(lines))]


def finish(out_dir, scenario, tm, started, planted, leak=None, expect=None, **extra):
    """Write memory_stats.json and truth.json.

    leak: None for a clean run, else {"kind", "bytes_per_step", "first_leaking_step", "site",
    ...}: first_leaking_step is the step() index (= ProfilerStep#) of the first kept block.
    """
    write_json(os.path.join(out_dir, "memory_stats.json"), dict(torch.cuda.memory_stats()))
    lines = read_steps(tm)
    first_profiled = tm.wait + tm.warmup + tm.skip_first
    truth = {
        "scenario": scenario,
        "recorded_with": "examples/torchmem_profile.py (snippet v2), TorchMemProfile defaults "
        "except the schedule: stacks=python allocator history, gzipped snapshot",
        "torch": torch.__version__,
        "gpu": torch.cuda.get_device_name(),
        "host": socket.gethostname(),
        "seconds": round(time.time() - started, 3),
        "schedule": {"wait": tm.wait, "warmup": tm.warmup, "active": tm.active, "repeat": tm.repeat},
        "steps": tm.step_num,
        "profiled_steps": "ProfilerStep#%d..#%d" % (first_profiled, first_profiled + tm.active - 1),
        "planted": planted,
        "leak": leak,
        "expect": expect or {},
        "files": sorted(os.path.basename(p) for p in tm.written),
        "steps_log": {
            "allocated_growth_per_step": growth(lines),
            "allocated_first_last": [lines[0]["allocated_bytes.all.current"],
                                     lines[-1]["allocated_bytes.all.current"]] if lines else None,
            "allocated_peak": max((l["allocated_bytes.all.peak"] for l in lines), default=0),
            "reserved_last": lines[-1]["reserved_bytes.all.current"] if lines else 0,
            "num_alloc_retries": lines[-1]["num_alloc_retries"] if lines else 0,
            "inactive_split_last": lines[-1]["inactive_split_bytes.all.current"] if lines else 0,
        },
    }
    truth.update(extra)
    write_json(os.path.join(out_dir, "truth.json"), truth)
    print(json.dumps({"scenario": scenario, "growth": truth["steps_log"]["allocated_growth_per_step"]}))
    return truth
