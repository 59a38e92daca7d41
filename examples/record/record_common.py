"""Shared plumbing for the recording scripts in this folder (plain torch.profiler usage).

Every scenario profiles its loop with schedule(wait=1, warmup=1, active=N), record_shapes,
profile_memory and with_stack, and writes into its output folder:
  trace.json.gz           prof.export_chrome_trace() output, gzipped
  key_averages.json       torch's own prof.key_averages() rows: the oracle for per-operator memory
  key_averages_stack.json group_by_stack_n=5 rows (the oracle for per-site memory)
  table.txt               torch's printed table, sorted by self CUDA memory
  memory_timeline.raw.json.gz  export_memory_timeline() raw output, where torch can make it
  stats_steps.jsonl       allocator figures after every step, profiled or not
  memory_stats.json       torch.cuda.memory_stats() at the end
  snapshot.pickle         allocator snapshot with history, when asked for
  truth.json              what the scenario planted, written by the scenario itself
"""

import gzip
import inspect
import json
import os
import shutil
import socket
import time

import torch
from torch.profiler import ProfilerActivity, profile, schedule


def site(marker, path=None):
    """Return {"file", "line", "text"} of the first source line holding `marker` in `path`.

    The planted leak lines carry a marker comment, so the truth follows the code when it moves.
    """
    if path is None:
        path = inspect.stack()[1].filename
    with open(path) as f:
        for number, text in enumerate(f, 1):
            if marker in text and "site(" not in text:
                return {"file": os.path.basename(path), "line": number, "text": text.strip()}
    raise LookupError("marker %r not found in %s" % (marker, path))


def function_frame(func):
    """The name torch's Python tracer gives a call of func: 'file.py(first line): name'."""
    code = func.__code__
    return "%s(%d): %s" % (os.path.basename(code.co_filename), code.co_firstlineno, code.co_name)


def _device_mem(avg, name):
    # torch 2.4 renamed cuda_memory_usage to device_memory_usage.
    for attr in (name, name.replace("device", "cuda")):
        if hasattr(avg, attr):
            return int(getattr(avg, attr))
    return 0


def _time(avg, name):
    for attr in (name, name.replace("device", "cuda")):
        if hasattr(avg, attr):
            return float(getattr(avg, attr))
    return 0.0


def key_average_rows(averages, with_stack=False):
    rows = []
    for avg in averages:
        row = {
            "key": avg.key,
            "count": int(avg.count),
            "self_device_memory_usage": _device_mem(avg, "self_device_memory_usage"),
            "device_memory_usage": _device_mem(avg, "device_memory_usage"),
            "self_cpu_memory_usage": int(avg.self_cpu_memory_usage),
            "cpu_memory_usage": int(avg.cpu_memory_usage),
            "self_cpu_time_total": float(avg.self_cpu_time_total),
            "cpu_time_total": float(avg.cpu_time_total),
            "self_device_time_total": _time(avg, "self_device_time_total"),
            "device_time_total": _time(avg, "device_time_total"),
        }
        if with_stack:
            row["stack"] = list(avg.stack or [])
        rows.append(row)
    return rows


def write_json(path, value):
    with open(path, "w") as f:
        json.dump(value, f, indent=1)
        f.write("\n")


def gzip_file(plain, gz):
    with open(plain, "rb") as src, gzip.open(gz, "wb", compresslevel=6) as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
    os.remove(plain)


def step_stats(step):
    stats = torch.cuda.memory_stats()
    return {
        "step": step,
        "t": time.time(),
        "allocated": int(stats.get("allocated_bytes.all.current", 0)),
        "reserved": int(stats.get("reserved_bytes.all.current", 0)),
        "active": int(stats.get("active_bytes.all.current", 0)),
        "inactive_split": int(stats.get("inactive_split_bytes.all.current", 0)),
        "allocated_peak": int(stats.get("allocated_bytes.all.peak", 0)),
        "num_alloc_retries": int(stats.get("num_alloc_retries", 0)),
        "num_ooms": int(stats.get("num_ooms", 0)),
    }


def export_cycle(prof, out_dir, device_index=0):
    """on_trace_ready body: the trace and torch's own per-operator figures for it."""
    plain = os.path.join(out_dir, "trace.json")
    prof.export_chrome_trace(plain)
    gzip_file(plain, plain + ".gz")
    write_json(os.path.join(out_dir, "key_averages.json"), key_average_rows(prof.key_averages()))
    # The extras below must never cost the trace and its oracle: each may fail on its own.
    try:
        write_json(
            os.path.join(out_dir, "key_averages_stack.json"),
            key_average_rows(prof.key_averages(group_by_stack_n=5), with_stack=True),
        )
    except Exception as err:
        print("key_averages_stack.json not written: %r" % (err,))
    try:
        with open(os.path.join(out_dir, "table.txt"), "w") as f:
            f.write(prof.key_averages().table(sort_by="self_device_memory_usage", row_limit=40))
    except Exception as err:
        print("table.txt not written: %r" % (err,))
    try:
        prof.export_memory_timeline(
            os.path.join(out_dir, "memory_timeline.raw.json.gz"), device="cuda:%d" % device_index
        )
    except Exception as err:  # deprecated in 2.11
        print("memory timeline not written: %r" % (err,))


def run_profiled(out_dir, step_fn, active=6, wait=1, warmup=1, extra_steps=0, snapshot=False,
                 device_index=0, sync=True):
    """Run wait+warmup+active(+extra) steps of step_fn(i) under the profiler.

    Returns the stats_steps lines. extra_steps run after the profiled window, unprofiled.
    sync=False leaves out the torch.cuda.synchronize() after each step, for scenarios whose
    point is the program's own synchronizations.
    """
    os.makedirs(out_dir, exist_ok=True)
    if snapshot:
        torch.cuda.memory._record_memory_history(max_entries=200000)
    lines = []
    steps = wait + warmup + active + extra_steps
    with profile(
        activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
        schedule=schedule(wait=wait, warmup=warmup, active=active, repeat=1),
        on_trace_ready=lambda p: export_cycle(p, out_dir, device_index),
        record_shapes=True,
        profile_memory=True,
        with_stack=True,
    ) as prof:
        for i in range(steps):
            step_fn(i)
            if sync:
                torch.cuda.synchronize()
            lines.append(step_stats(i))
            prof.step()
    with open(os.path.join(out_dir, "stats_steps.jsonl"), "w") as f:
        for line in lines:
            f.write(json.dumps(line) + "\n")
    write_json(os.path.join(out_dir, "memory_stats.json"), dict(torch.cuda.memory_stats()))
    if snapshot:
        torch.cuda.memory._dump_snapshot(os.path.join(out_dir, "snapshot.pickle"))
        torch.cuda.memory._record_memory_history(enabled=None)
    return lines


def per_step_growth(lines, first, last):
    """Allocated-bytes growth per step between steps first and last (inclusive), and each diff."""
    diffs = [lines[i]["allocated"] - lines[i - 1]["allocated"] for i in range(first + 1, last + 1)]
    return diffs


def base_truth(scenario, started, window):
    return {
        "scenario": scenario,
        "torch": torch.__version__,
        "gpu": torch.cuda.get_device_name(),
        "host": socket.gethostname(),
        "window": window,
        "seconds": round(time.time() - started, 3),
        "profiled_with": "schedule(wait=%d, warmup=%d, active=%d), record_shapes, profile_memory, "
        "with_stack" % (window["wait"], window["warmup"], window["active"]),
    }
