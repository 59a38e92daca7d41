"""torchmem_profile: record what torchmem reads, around any PyTorch training loop.

Copy this file next to your training script, then:

    from torchmem_profile import TorchMemProfile
    with TorchMemProfile() as tm:            # files go to ./torchmem_out/
        for batch in loader:
            train_step(batch)
            tm.step()                        # once per iteration

and point torchmem at the directory: `torchmem analyze torchmem_out/`.

Hugging Face Trainer: two lines (transformers is imported only when you ask for the callback):

    from torchmem_profile import TorchMemCallback
    trainer = Trainer(..., callbacks=[TorchMemCallback()])   # TorchMemCallback(active=3) etc.

It enters on train begin, calls step() at every optimizer step (so a step is
gradient_accumulation_steps micro-batches) and writes the files on train end, or at interpreter
exit when training dies (an OOM included). Lightning: `TorchMemLightningCallback()` in
`Trainer(callbacks=[...])` does the same per training batch, and also on an exception. Any other
framework: enter TorchMemProfile when training starts and call tm.step() from its step-end hook.

What it writes into the output directory. <run> is the run id, "<host>_<pid>_<YYYYmmdd-HHMMSS>"
like torch's tensorboard_trace_handler (or TORCHMEM_RUN_ID), so a rerun never overwrites an
earlier run; <r> is the rank:
  <run>_rank<r>_step<n>.pt.trace.json.gz   one Kineto Chrome trace per profiled cycle
                                           (torch.profiler with schedule(wait, warmup, active,
                                           repeat), profile_memory, with_stack, record_shapes);
                                           n is the profiler's step count at export: a full
                                           cycle holds ProfilerStep#(n-active)..#(n-1), one cut
                                           short by an exception ends with #n.
  <run>_rank<r>.snapshot.pickle.gz         the CUDA caching allocator's snapshot with its
                                           allocation history (a gzipped pickle), dumped when the
                                           profiled window ends (the history stops there, see
                                           TORCHMEM_HISTORY), when the block ends with the history
                                           on, and when a torch.OutOfMemoryError escapes it (the
                                           error is then re-raised unchanged; between windows that
                                           dump is <run>_rank<r>.oom.snapshot.pickle.gz, without
                                           history).
  <run>_rank<r>.steps.jsonl                one JSON line per step() with the essentials of
                                           torch.cuda.memory_stats() (torch's own key names),
                                           written after prof.step(), outside the step it measures.
  <run>_rank<r>.leak.snapshot.pickle.gz    on a leak alarm: the allocator history of the next
                                           4 steps (2 periods and more for a periodic leak), each
                                           marked ProfilerStep#n, so the snapshot alone names the
                                           line that keeps the memory.
  <run>_rank<r>.near_oom.snapshot.pickle.gz  on a near-OOM alarm: the snapshot at that step.

The watchdog. Every step, LeakWatch reads the line just written to the steps log (requested
bytes, else allocated) and runs torchmem's growth model on the recent steps (the rule and its
measured limits are in its docstring: a significant, regular rise over 9 steps or more from the
step it started, or 3 regular jumps that do not fall back, at any size: step 9 of a leak at the
earliest) and, the first time it concludes a leak, says so once in the training log (through
logging's "torchmem" logger when the program configured logging, and on stderr), saying what it
will capture; when the capture is dumped it says which steps it holds (the run may end first):

  torchmem: rank 0: LEAK: requested memory grew 4.00 MB per step over 9 steps (steps 10-18,
  167.05 MB now); will capture the allocator history of the next 4 steps into
  torchmem_out/<run>_rank0.leak.snapshot.pickle.gz; then run: torchmem analyze torchmem_out
  torchmem: rank 0: captured the allocator history of steps 19-22 into
  torchmem_out/<run>_rank0.leak.snapshot.pickle.gz

If memory then stays flat for 10 steps (a measured plateau) it says that too (a bounded buffer
that filled up). When reserved memory first reaches TORCHMEM_NEAR_OOM (0.9) of what the process
may use (the device's capacity times its set_per_process_memory_fraction), it says NEAR OOM
with the figures and the lines holding the most (where the history knows them), dumps the
snapshot and keeps the history on to the end, so an OOM that follows is dumped with who
allocated what. Each alarm comes at most once per run and rank; only the ranks that alarm speak.
Each also goes to TorchMemProfile(on_alarm=callable), called with a dict (kind "leak" or
"near_oom", rank, step, files, message, and bytes_per_step, since_step and period, or used and
limit), and to
TORCHMEM_NOTIFY: a command run once per alarm without a shell, the message on its stdin and
TORCHMEM_ALARM_KIND, _RANK, _STEP, _FILES in its environment (e.g.
TORCHMEM_NOTIFY="mail -s torchmem me@example.com", or a script that posts to a chat channel); a
failure of either is logged, never raised into training. Alarms capture on the rank that alarms,
whatever TORCHMEM_RANKS says.

What it costs (torch 2.11, H200; README has the figures; examples/record/snippet_overhead.py and
watch_cost.py measure them). On a GPU-bound model (an 8-layer LM at 46 ms a step) nothing
measurable: between profiled windows -0.2% to +0.2%, inside a window +1%. On a host-bound loop
(a 4-layer LM at 9-10 ms a step, synchronized every step, alternating blocks in one process)
between windows -2.7% to +2.2% (noise) by default: the steps log, LeakWatch and the near-OOM
check. The allocator history, which takes the Python stack of every allocation (stacks="python",
context="alloc"; TORCHMEM_CPP_STACKS=1 adds C++ frames: slower steps and dumps), costs +9% to
+20% there, so by default it records only from the start through the profiled window and on an
alarm; TORCHMEM_HISTORY=always keeps it on (a snapshot at the end and on an OOM with the whole
run's history). Inside a window such a loop runs 2-2.5x as long (Python stacks, shapes, memory
events). The history is a ring buffer of max_entries events (default 100000: a long run keeps
its last steps) in host memory; its gzipped dump is a few MB and takes a fraction of a second.
After the last profiled cycle the snippet has Kineto detach CUPTI (TEARDOWN_CUPTI=1 for that one
stop, then the variable is unset again): left attached, CUPTI slowed every later kernel launch
(+35% on the host-bound loop). It does not when TEARDOWN_CUPTI is already set, when torch keeps
CUPTI for torch.compile's CUDA graphs, before CUDA 12.6, or when the block ends by an exception;
every way a run ends was run on the H200 without a hang (examples/record/teardown_exits.sh).

Which ranks: TORCHMEM_RANKS picks the ranks that profile and snapshot ("0,7", "0-3,8", "all";
default "0-7", every rank of one 8-GPU node and the first 8 of a larger job). Every rank writes
its steps log, so `torchmem steps DIR` shows which rank grows; then profile that one.

Switches. Environment variables, when set, override the constructor's arguments, so a launcher
can change them without editing code:
  TORCHMEM=0                       disable everything (no files, step() does nothing)
  TORCHMEM_DIR=path                output directory (default ./torchmem_out)
  TORCHMEM_RUN_ID=name             the run id in file names (default: one id per job under
                                   torchrun or Slurm, job-<rendezvous id>, slurm-<job>.<step>
                                   or <host>_<agent pid>_<agent start>; else <host>_<pid>_<time>)
  TORCHMEM_RANKS=list              ranks that profile and snapshot (default 0-7; "all")
  TORCHMEM_WAIT, TORCHMEM_WARMUP, TORCHMEM_ACTIVE, TORCHMEM_REPEAT, TORCHMEM_SKIP_FIRST
                                   the profiler schedule (defaults 1, 1, 5, 1, 0; repeat 0 means
                                   a cycle after another until the block ends)
  TORCHMEM_TRACE=0                 no profiler (snapshot and steps.jsonl only)
  TORCHMEM_STACK=0, TORCHMEM_SHAPES=0
                                   profile without Python stacks / without input shapes
  TORCHMEM_HISTORY=window|always|0 allocator history from the start through the profiled window
                                   and on alarms (window, the default; with TORCHMEM_REPEAT=0 to
                                   the end), all the time (always, also 1; history=True), or
                                   never, and then no snapshot (0; history=False)
  TORCHMEM_CPP_STACKS=1            allocator history with C++ frames too (stacks="all"; slow)
  TORCHMEM_MAX_ENTRIES=n           allocator history length (default 100000)
  TORCHMEM_STEPS=0                 no steps.jsonl
  TORCHMEM_TEARDOWN_CUPTI=0        leave CUPTI attached after the last profiled cycle
  TORCHMEM_WATCH=0                 no leak alarm (LeakWatch off)
  TORCHMEM_ON_LEAK=snapshot|profile|off
                                   what a leak alarm captures: the allocator history of the
                                   next steps (snapshot, the default), that and a profile of the
                                   next window (profile: a warm-up step, then TORCHMEM_ACTIVE
                                   steps), or nothing (off)
  TORCHMEM_NEAR_OOM=f              the near-OOM alarm at reserved >= f x the process's limit
                                   (default 0.9; 0 turns it off)
  TORCHMEM_NOTIFY="command args"   run once per alarm, the message on stdin (no shell)

Under DDP each rank writes its own files; the rank comes from torch.distributed when it is
initialized, else from the RANK / LOCAL_RANK environment variables. Without a usable GPU the
profiler records the CPU only, no snapshot and no steps.jsonl are written (so no alarms), and a
warning says so. Needs only torch (1.13 or newer; the allocator history needs 2.1 or newer; the
memory fraction counts in the near-OOM limit where torch has
get_per_process_memory_fraction).
"""

import atexit
import bisect
import json
import logging
import math
import operator
import os
import pickle
import re
import shlex
import shutil
import socket
import struct
import subprocess
import sys
import threading
import time
import warnings
import zlib
from itertools import repeat

try:
    import torch
except ModuleNotFoundError as _err:  # pip users: the wheel installs without torch
    if _err.name != "torch":
        raise
    raise ModuleNotFoundError(
        "torchmem_profile records what torch does, so it needs torch, which is not installed "
        "here: install it (https://pytorch.org/get-started/locally/); the torchmem command "
        "itself needs no torch",
        name="torch",
    ) from None  # one error, not torch's ModuleNotFoundError chained before it

__all__ = [
    "TorchMemProfile",
    "torchmem_profile",
    "LeakWatch",
    "TorchMemCallback",
    "TorchMemLightningCallback",
]

# The memory_stats() keys written per step: current and peak figures of the allocator, the
# counters that say the allocator struggled (retries flush the cache; ooms are failures), and
# the segment counts that show cudaMalloc churn.
STEP_STAT_KEYS = (
    "allocated_bytes.all.current",
    "allocated_bytes.all.peak",
    "reserved_bytes.all.current",
    "reserved_bytes.all.peak",
    "active_bytes.all.current",
    "active_bytes.all.peak",
    "inactive_split_bytes.all.current",
    "requested_bytes.all.current",
    "requested_bytes.all.peak",
    "segment.all.current",
    "num_alloc_retries",
    "num_ooms",
    "num_device_alloc",
    "num_device_free",
    "num_oom_rejections",
    "num_sync_all_streams",
)

# Where the allocator keeps memory for CUDA graphs and torch.cuda.MemPool: flattened as
# reserved_bytes_by_private_pools.<pool id>.current when torch reports it.
PRIVATE_POOL_STAT = "reserved_bytes_by_private_pools"

# The allocator settings as the process saw them, written on a steps log's first line, so a
# setting asked for and not in effect can be told (PYTORCH_CUDA_ALLOC_CONF is the older name).
ALLOC_CONF_VARS = ("PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF")

DEFAULT_RANKS = "0-7"

# After the last profiled cycle: CUDA calls made to let Kineto's pending CUPTI teardown finish.
TEARDOWN_SETTLE_CALLS = 10
TEARDOWN_SETTLE_SLEEP_S = 0.01

_FALSE_WORDS = ("0", "false", "no", "off", "")


class _IndexedGzip:
    """A gzip file written as independent members of 1 MiB of input, each naming its compressed
    size in an "MZ" extra subfield (mgzip's convention), then an empty member naming the total in
    a "TS" subfield. Every gzip reader reads it as one stream (gzip.open, zcat, HTA); torchmem
    finds each member without inflating the one before and inflates them on all cores at once
    (a 1 GB trace: 0.63 s instead of 1.67 s on 16 cores). It costs about 1% in size."""

    MEMBER = 1 << 20

    def __init__(self, path, level=6):
        self._f = open(path, "wb")
        self._level = level
        self._buf = bytearray()
        self._total = 0

    def write(self, data):
        data = memoryview(data).cast("B")  # len in bytes, whatever pickle hands over
        self._buf += data
        self._total += len(data)
        while len(self._buf) >= self.MEMBER:
            self._member(bytes(self._buf[: self.MEMBER]))
            del self._buf[: self.MEMBER]
        return len(data)

    def _member(self, raw):
        c = zlib.compressobj(self._level, zlib.DEFLATED, -zlib.MAX_WBITS)
        body = c.compress(raw) + c.flush()
        # ID1 ID2 CM FLG(FEXTRA) MTIME(0) XFL OS(unknown) XLEN, then the MZ subfield.
        head = b"\x1f\x8b\x08\x04\x00\x00\x00\x00\x00\xff" + struct.pack("<H2sHI", 8, b"MZ", 4, len(body))
        self._f.write(head + body + struct.pack("<II", zlib.crc32(raw) & 0xFFFFFFFF, len(raw) & 0xFFFFFFFF))

    def close(self):
        if self._f is None:
            return
        try:
            if self._buf:
                self._member(bytes(self._buf))
            head = b"\x1f\x8b\x08\x04\x00\x00\x00\x00\x00\xff" + struct.pack("<H2sHI2sHQ", 20, b"MZ", 4, 2, b"TS", 8, self._total)
            self._f.write(head + b"\x03\x00" + struct.pack("<II", 0, 0))  # an empty deflate block
        finally:
            self._f.close()
            self._f = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _env_bool(name, default):
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() not in _FALSE_WORDS


def _env_int(name, default):
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return default
    try:
        return int(value)
    except ValueError:
        warnings.warn(
            "torchmem_profile: %s=%r is not an integer; using %r" % (name, value, default)
        )
        return default


def _env_float(name, default):
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return float(default)
    try:
        return float(value)
    except ValueError:
        warnings.warn("torchmem_profile: %s=%r is not a number; using %r" % (name, value, default))
        return float(default)


def _choice(name, argument, choices, default):
    value = os.environ.get(name)
    value = value if value is not None else argument if argument is not None else default
    value = str(value).strip().lower()
    if value in _FALSE_WORDS:
        value = "off"
    if value not in choices:
        warnings.warn(
            "torchmem_profile: %s=%r is not one of %s; using %s"
            % (name, value, ", ".join(choices), default)
        )
        return default
    return value


def _history_mode(value):
    """TORCHMEM_HISTORY / history=: "window" (default), "always" (True, 1) or "off" (False, 0)."""
    if value is None:
        return "window"
    if isinstance(value, bool):
        return "always" if value else "off"
    text = str(value).strip().lower()
    if text in _FALSE_WORDS:
        return "off"
    if text in ("window", "windows"):
        return "window"
    if text in ("1", "true", "yes", "on", "always", "all"):
        return "always"
    warnings.warn(
        "torchmem_profile: TORCHMEM_HISTORY=%r is not window, always or 0; using window" % (value,)
    )
    return "window"


def parse_ranks(text):
    """Parse "0,7", "0-3,8" or "all" into a set of ranks (None for all); ValueError if bad."""
    text = str(text).strip().lower()
    if text in ("all", "*"):
        return None
    ranks = set()
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        low, dash, high = part.partition("-")
        if not low.strip().isdigit() or (dash and not high.strip().isdigit()):
            raise ValueError("%r is not a rank, a range like 0-7, or all" % part)
        low = int(low)
        high = int(high) if dash else low
        if high < low or high - low > 1 << 20:
            raise ValueError("%r is not a rank range" % part)
        ranks.update(range(low, high + 1))
    return ranks


def _rank():
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            return dist.get_rank()
    except Exception:  # a broken process group must not break the user's training
        pass
    for name in ("RANK", "LOCAL_RANK", "SLURM_PROCID"):
        value = os.environ.get(name)
        if value is not None and value.strip().isdigit():
            return int(value)
    return 0


_SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")
_run_ids = []  # run ids handed out in this process


def _job_id():
    """An id every rank of one job shares, from the launcher's environment, or None.

    Under torchrun each rank is its own process, so "<host>_<pid>_<time>" differs per rank and a
    job would read as one run per rank. torchrun's rendezvous id (a fresh uuid per --standalone
    launch), a Slurm job step, or, failing both, the launching agent (the parent process of every
    local rank and its start time) names the job instead.
    """
    run = os.environ.get("TORCHELASTIC_RUN_ID", "").strip()
    if run and run != "none":
        return "job-" + run
    slurm = os.environ.get("SLURM_JOB_ID", "").strip()
    if slurm:
        step = os.environ.get("SLURM_STEP_ID", "").strip()
        return "slurm-" + slurm + ("." + step if step else "")
    if os.environ.get("LOCAL_RANK") is None:
        return None
    host = _SAFE_NAME.sub("-", socket.gethostname().split(".")[0]) or "host"
    parent = os.getppid()
    started = _process_start(parent)
    if started is None:
        return None
    return "%s_%d_%s" % (host, parent, time.strftime("%Y%m%d-%H%M%S", time.localtime(started)))


def _process_start(pid):
    """The start time (seconds since the epoch) of process pid, from /proc; None elsewhere."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        ticks = int(fields[19])  # field 22, starttime, in clock ticks since boot
        with open("/proc/stat") as f:
            boot = next(int(line.split()[1]) for line in f if line.startswith("btime "))
        return boot + ticks / os.sysconf("SC_CLK_TCK")
    except Exception:
        return None


def _run_id():
    """One job's id (see _job_id), else <host>_<pid>_<YYYYmmdd-HHMMSS>, unique in this process;
    TORCHMEM_RUN_ID overrides both."""
    given = os.environ.get("TORCHMEM_RUN_ID", "").strip() or _job_id()
    if given:
        base = _SAFE_NAME.sub("-", given)
    else:
        host = _SAFE_NAME.sub("-", socket.gethostname().split(".")[0]) or "host"
        base = "%s_%d_%s" % (host, os.getpid(), time.strftime("%Y%m%d-%H%M%S"))
    run, n = base, 1
    while run in _run_ids:  # a second block in the same second of the same process
        n += 1
        run = "%s-%d" % (base, n)
    _run_ids.append(run)
    return run


def _oom_error_types():
    # torch.OutOfMemoryError exists from torch 2.5; torch.cuda.OutOfMemoryError from 1.13.
    types = []
    for owner in (torch, getattr(torch, "cuda", None)):
        error_type = getattr(owner, "OutOfMemoryError", None)
        if isinstance(error_type, type) and error_type not in types:
            types.append(error_type)
    return tuple(types)


def _is_oom(exc):
    if exc is None:
        return False
    oom_types = _oom_error_types()
    if oom_types and isinstance(exc, oom_types):
        return True
    # Before torch 1.13 an OOM was a plain RuntimeError.
    return isinstance(exc, RuntimeError) and "out of memory" in str(exc)


def _read_memory_stats(device):
    """memory_stats() flattened to the keys in STEP_STAT_KEYS that torch reports (a key this
    torch lacks is left out, never written as 0), private pools' reserved bytes, and pinned host
    memory (torch.cuda.host_memory_stats(), prefixed "host.") where torch has it.

    torch.cuda.memory_stats() flattens torch's nested dict with a few hundred Python calls, each
    one an event in a profiled step; the nested dict from C++ is read directly where it exists.
    """
    raw = getattr(torch._C, "_cuda_memoryStats", None)
    out = {}
    if raw is None:
        stats = torch.cuda.memory_stats(device)
        for key in STEP_STAT_KEYS:
            if key in stats:
                out[key] = int(stats[key])
    else:
        nested = raw(device)
        for key in STEP_STAT_KEYS:
            value = nested
            for part in key.split("."):
                value = value.get(part) if isinstance(value, dict) else None
            if isinstance(value, int):
                out[key] = value
        pools = nested.get(PRIVATE_POOL_STAT) if isinstance(nested, dict) else None
        if isinstance(pools, dict):
            for pool, value in pools.items():
                if isinstance(value, dict) and isinstance(value.get("current"), int):
                    out["%s.%s.current" % (PRIVATE_POOL_STAT, pool)] = value["current"]
    out.update(_read_host_memory_stats())
    return out


def _read_host_memory_stats():
    """Pinned host memory (the CUDA host allocator), flattened and prefixed "host."."""
    read = getattr(torch.cuda, "host_memory_stats", None)
    if read is None:
        return {}
    try:
        stats = read()
    except Exception:
        return {}
    out = {}

    def walk(prefix, value):
        if isinstance(value, dict):
            for k, v in value.items():
                walk(prefix + "." + str(k), v)
        elif isinstance(value, int) and not isinstance(value, bool):
            out[prefix] = value

    walk("host", stats)
    return out


def _world_size():
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            return dist.get_world_size()
    except Exception:
        pass
    value = os.environ.get("WORLD_SIZE", "").strip()
    return int(value) if value.isdigit() else 1


def _alloc_conf():
    """The allocator settings in this process's environment, only those set."""
    return {name: os.environ[name] for name in ALLOC_CONF_VARS if name in os.environ}


# ----- the watchdog: leak and near-OOM alarms (pure Python, no torch calls) -------------------

# The growth model of a step series (torchmem's, issue #38: the same constants and names as the Go
# package memtimeline/growth). LeakWatch runs it on the recent steps after every step.
#
# Growth lasting this many steps (rises, the rise into the leak's first step included) is needed
# before it is called one: a leak from step s alarms at step s+8 at the earliest. Fewer would alarm
# on bounded buffers that fill for 8 steps (testdata/gpu/watch/queue9 on the H200).
GROWTH_MIN_STEPS = 9
# Mann-Kendall: growth is significant when Z >= this (one-sided p = 0.001).
GROWTH_Z = 3.09
# Noise floor (bytes), so a perfectly flat series still has a noise (the Go model's SigmaFloor).
SIGMA_FLOOR = 64
# A jump (a staircase's step) rises more than JUMP_K times the noise and does not fall back: the
# Go model's JumpK, one value for both, measured on both corpora. Online the alarm comes at the
# third jump, and a staircase of period 3 at twice the noise per step jumps 6 times the noise,
# half of them under 6: staircases of >= 2x found here with 4 / 5 / 6: 99.1% / 98.6% / 97.9%,
# look-alike alarms the same; in Go (the whole log) recall 99.57% / 99.57% / 99.54%, false
# alarms 0.40% / 0.34% / 0.32%: 4 is the one value that meets 99% and <= 0.5% in both.
JUMP_K = 4.0
# A staircase: at least this many jumps at regular intervals.
STAIRCASE_MIN_JUMPS = 3
# Regular growth: the share of steps (of the growth) whose value rose.
GROWTH_RISE_SHARE = 0.75
# A plateau is measured over at least this many steps (and twice the longest interval between
# jumps), with |slope| x length within PLATEAU_NOISE x the noise and no significant trend.
PLATEAU_MIN_STEPS = 10
PLATEAU_NOISE = 3.0
# The recent steps LeakWatch keeps (its window).
LEAK_WATCH_WINDOW = 64
# Steps of allocator history recorded after a leak alarm before the snapshot is dumped: enough
# for torchmem's per-site rule (3 consecutive steps) to name the line that keeps the memory.
LEAK_CAPTURE_STEPS = 4
DEFAULT_NEAR_OOM = 0.9

# The key the model reads first: requested bytes carry no allocator rounding (far less noise).
_REQUESTED_KEY = "requested_bytes.all.current"
# Keys a steps log may spell allocated bytes with: the snippet's own (memory_stats()) first.
_ALLOCATED_KEYS = (
    "allocated_bytes.all.current",
    "allocated",
    "memory_allocated",
    "allocated_bytes",
)


def format_bytes(n):
    """Bytes as torch prints them (1024-based, "MB" meaning MiB), like torchmem's tables."""
    a = abs(n)
    for unit, size in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if a >= size:
            return "%.2f %s" % (n / size, unit)
    return "%d B" % n


# The model runs after every step of a training loop: its hottest loops are map() over operator
# functions (the same arithmetic, in the same order, as the formulas written out; run in C).
_sub, _mul, _gt = operator.sub, operator.mul, operator.gt


def _median(xs):
    return _median_sorted(sorted(xs))


def _median_sorted(s):
    n = len(s)
    if n == 0:
        return 0.0
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2.0


def _changes(values, lag=1):
    """values[i + lag] - values[i] for every i."""
    return list(map(_sub, values[lag:], values))


def _line_residuals(values, slope, intercept=0, first=0):
    """values[i] - intercept - slope * (first + i) for every i."""
    xs = range(first, first + len(values))
    if intercept:
        values = map(_sub, values, repeat(intercept))
    return list(map(_sub, values, map(_mul, repeat(slope), xs)))


def noise_sigma(values):
    """The step noise of a series: 1.4826 x the median absolute deviation of its step-to-step
    changes (a staircase's jumps are outliers there, so it keeps the noise between them), or of
    its changes over two steps when smaller (a staircase of period 2 jumps every other step: its
    changes over two steps are the jump and the noise), floored at SIGMA_FLOOR; the Go model's
    sigma (memtimeline/growth)."""
    best = None
    for lag in (1, 2):
        d = _changes(values, lag)
        if len(d) < 2:
            continue
        d.sort()
        m = _median_sorted(d)
        # The deviations of the sorted changes are two sorted runs (below m, above it): sort()
        # merges them in one pass.
        dev = list(map(abs, map(_sub, d, repeat(m))))
        dev.sort()
        s = 1.4826 * _median_sorted(dev)
        best = s if best is None else min(best, s)
        if best <= SIGMA_FLOOR:
            break  # at the floor: the changes over two steps cannot lower it
    return max(best or 0.0, float(SIGMA_FLOOR))


def theil_sen(values):
    """(slope, intercept) of the Theil-Sen line through (i, values[i]): the median of the pairwise
    slopes, and the median of values[i] - slope * i."""
    n = len(values)
    if n < 2:
        return 0.0, float(values[0]) if values else 0.0
    slopes = [(values[j] - values[i]) / (j - i) for i in range(n) for j in range(i + 1, n)]
    slope = _median(slopes)
    return slope, _median([v - slope * i for i, v in enumerate(values)])


def mann_kendall(values):
    """(S, Z) of the Mann-Kendall trend test, the variance corrected for ties;
    Z = (S - sign(S)) / sqrt(Var S), 0 when the variance is 0."""
    n = len(values)
    s = 0
    for i in range(n - 1):
        vi = values[i]
        for j in range(i + 1, n):
            vj = values[j]
            s += (vj > vi) - (vj < vi)
    counts = {}
    for v in values:
        counts[v] = counts.get(v, 0) + 1
    var = n * (n - 1) * (2 * n + 5) - sum(t * (t - 1) * (2 * t + 5) for t in counts.values())
    var /= 18.0
    if var <= 0 or s == 0:
        return s, 0.0
    return s, (s - (1 if s > 0 else -1)) / math.sqrt(var)


def _resistant_line(values, first):
    """A cheap robust line through (first + i, values[i]) (Tukey's three-group line): the change
    point search fits one per candidate start; the chosen segment gets Theil-Sen."""
    n = len(values)
    k = max(1, n // 3)
    left, right = values[:k], values[n - k:]
    xl, xr = first + (k - 1) / 2.0, first + n - 1 - (k - 1) / 2.0
    slope = (_median(right) - _median(left)) / (xr - xl) if xr > xl else 0.0
    return slope, _median(_line_residuals(values, slope, first=first))


def change_point(values, candidates=None):
    """The index s that best splits values into a flat part (values[:s], about its median) and a
    line from s to the end (least total absolute residual; the line has 3 values at least), among
    candidates (default: every s); None when there is none."""
    n = len(values)
    best, best_cost = None, None
    ordered, upto = [], 0  # values[:upto] sorted, grown as s grows (one insertion a candidate)
    for s in range(1, n - 2) if candidates is None else candidates:
        flat = values[:s]
        if s >= upto:
            for v in values[upto:s]:
                bisect.insort(ordered, v)  # after its equals, as sorted() keeps them
            upto = s
            level = _median_sorted(ordered)
        else:
            level = _median(flat)
        cost = sum(map(abs, map(_sub, flat, repeat(level))))
        if best_cost is not None and cost > best_cost:
            continue  # ties go to the later start: the value at s is the first one raised
        seg = values[s:]
        slope, icept = _resistant_line(seg, s)
        cost += sum(map(abs, _line_residuals(seg, slope, icept, s)))
        if best_cost is None or cost <= best_cost:
            best, best_cost = s, cost
    return best


def find_jumps(values, sigma, k=JUMP_K):
    """(index, rise) of every jump: a rise of more than k x sigma that does not fall back (the
    level after it, less the jumps kept after it, stays above the level before it by more than
    half the rise: a spike that falls back is not a jump)."""
    n = len(values)
    kept = [0] * n
    out = []
    for i in range(n - 1, 0, -1):
        rise = values[i] - values[i - 1]
        if rise <= k * sigma:
            continue
        later, fell = 0, False
        for j in range(i + 1, n):
            later += kept[j]
            if values[j] - later - values[i - 1] <= rise / 2.0:
                fell = True
                break
        if not fell:
            kept[i] = rise
            out.append((i, rise))
    out.reverse()
    return out


def staircase(values, sigma):
    """The staircase that ends within one period of the end, or None: (first jump index, period,
    median jump, number of jumps). At least STAIRCASE_MIN_JUMPS jumps (no fall-back) on a grid of
    period p >= 2 ending with the last jump (each within max(1, p/5) steps of where the grid puts
    it), flat between them (the level moves less than half a jump), of regular sizes (none more
    than twice another, or each larger than the one before); jumps off the grid, when any, under
    half the grid's (the background's own, not yet fallen back)."""
    jumps = find_jumps(values, sigma)
    if len(jumps) < STAIRCASE_MIN_JUMPS:
        return None
    end = len(values) - 1
    best = None
    for prev, _ in reversed(jumps[:-1]):
        p = jumps[-1][0] - prev
        if p < 2:
            continue
        tol = max(1.0, p / 5.0)
        run, rest = [jumps[-1]], jumps[:-1]
        while rest:
            want = run[0][0] - p
            near = [j for j in rest if abs(j[0] - want) <= tol and j[0] < run[0][0] - 1]
            if not near:
                break
            pick = min(near, key=lambda j: abs(j[0] - want))
            run.insert(0, pick)
            rest = [j for j in rest if j[0] < pick[0]]
        if len(run) < STAIRCASE_MIN_JUMPS or (best is not None and len(run) <= best[3]):
            continue
        sizes = [r for _, r in run]
        on_grid = {i for i, _ in run}
        low = min(sizes) / 2.0
        if any(i not in on_grid and run[0][0] < i < run[-1][0] and r >= low for i, r in jumps):
            continue
        if any(abs(values[b[0] - 1] - values[a[0]]) > low for a, b in zip(run, run[1:])):
            continue  # not flat between the jumps
        steady = max(sizes) <= 2 * min(sizes)
        growing = all(b > a for a, b in zip(sizes, sizes[1:]))
        if not (steady or growing):
            continue
        gaps = [b[0] - a[0] for a, b in zip(run, run[1:])]
        period = _median(gaps)
        if end - run[-1][0] > period + tol:
            continue
        # The jump, measured between the levels around each (the medians of the steps between
        # jumps): less noise than one step's change.
        at = [i for i, _ in run] + [end + 1]
        levels = [_median(values[max(0, at[0] - int(period)):at[0]])]
        levels += [_median(values[a:b]) for a, b in zip(at, at[1:])]
        jump = _median([b - a for a, b in zip(levels, levels[1:])])
        best = (run[0][0], int(round(period)), int(jump), len(run))
    return best


def plateau(values, sigma, min_steps=PLATEAU_MIN_STEPS):
    """Whether the series is flat as a measured fact: at least min_steps values, Theil-Sen
    |slope| x length within PLATEAU_NOISE x sigma, and no significant Mann-Kendall trend."""
    n = len(values)
    if n < min_steps:
        return False
    slope, _ = theil_sen(values)
    _, z = mann_kendall(values)
    return abs(slope) * n <= PLATEAU_NOISE * sigma and abs(z) < GROWTH_Z


def _regular_rises(values, lag=1, floor=0, min_steps=GROWTH_MIN_STEPS):
    """Whether values rose over `lag` steps by more than lag x floor in min_steps steps and
    GROWTH_RISE_SHARE of the steps at least, the last one included."""
    d = _changes(values, lag)
    if not d or d[-1] <= lag * floor:
        return False
    rose = sum(map(_gt, d, repeat(lag * floor)))
    return rose >= min_steps and rose >= GROWTH_RISE_SHARE * len(d)


def growth(values, sigma=None, min_steps=GROWTH_MIN_STEPS):
    """The growth of a series that goes on at its end, or None: a dict with kind ("steady",
    "accelerating" or "staircase"), start (index of the first value the growth raised),
    bytes_per_step, period and jump (a staircase's), z (Mann-Kendall, every-step growth).

    Staircase: see staircase(). Every-step growth, the Go model's trend test (memtimeline/growth)
    on the segment from the change point s (at least min_steps rises from values[s-1], the last
    value before it, to the end): the Mann-Kendall trend is significant (Z >= GROWTH_Z, ties
    corrected), and still is without the largest rise, the Theil-Sen slope is positive, the last
    PLATEAU_MIN_STEPS values are no measured plateau; online also regular (values rose in at
    least GROWTH_RISE_SHARE of the steps and at the last one, by a quarter of the pace) and the
    second half rose at least half as fast as the first (a warm-up that settles slows down; a
    leak keeps its pace or speeds up)."""
    n = len(values)
    if n < min_steps + 1 or values[-1] <= values[-2]:
        return None
    # A staircase is called at a jump (its third at the earliest): only then is it looked for,
    # and the noise measured (a rise within JUMP_K x the floor is no jump, whatever the noise).
    found = None
    if values[-1] - values[-2] > JUMP_K * (SIGMA_FLOOR if sigma is None else sigma):
        if sigma is None:
            sigma = noise_sigma(values)
        if values[-1] - values[-2] > JUMP_K * sigma:
            found = staircase(values, sigma)
    if found is not None:
        start, period, jump, count = found
        return {
            "kind": "staircase",
            "start": start,
            "bytes_per_step": jump / period,
            "period": period,
            "jump": jump,
            "jumps": count,
            "z": None,
        }
    # Every-step growth: the Go model's trend test on the segment after the change point, once
    # the growth is regular enough to be told online. A cheap gate first (most steps of most
    # runs stop here): values rose in GROWTH_RISE_SHARE of the last min_steps steps, or over
    # two steps (a staircase of period 2 whose jumps are within the noise).
    tail = values[-min_steps - 2:]
    if not (_regular_rises(tail[1:], 1, 0, min_steps) or _regular_rises(tail, 2, 0, min_steps - 1)):
        return None
    s = change_point(values)
    if s is None or n - s < min_steps:
        return None
    seg = values[s - 1:]
    # Regular: the rises are the growth's, not the noise's: a quarter of its pace at least (a
    # buffer that filled, then a small rise of noise, is not a ninth rise). Online this stands
    # for what the Go model reads in the steps after (a short tail, a plateau): without it
    # fills of 3-8 steps alarm (122 of 546 planted) and noisy backgrounds alone 122 times.
    slope = theil_sen(seg)[0]
    pace = slope / 4.0
    if not _regular_rises(seg, 1, pace, min_steps) and not _regular_rises(seg, 2, pace, min_steps):
        return None
    # Significant growth from the change point on: the Mann-Kendall Z (ties corrected) and the
    # Theil-Sen slope of the segment, and the same Z without its largest rise (not the work
    # of one rise alone), as memtimeline/growth reads it.
    _, z = mann_kendall(seg)
    if z < GROWTH_Z:
        return None
    if slope <= 0 or _without_largest(seg) < GROWTH_Z:
        return None
    # No measured plateau at the end (a buffer that filled, then stayed).
    if sigma is None:
        sigma = noise_sigma(values)
    tail = values[-PLATEAU_MIN_STEPS:]
    if plateau(tail, sigma):
        return None
    half = len(seg) // 2
    first, second = theil_sen(seg[: half + 1])[0], theil_sen(seg[half:])[0]
    if second < 0.5 * first:
        return None  # a warm-up that settles slows down; a leak keeps its pace or speeds up
    return {
        "kind": "accelerating" if second > 1.5 * first else "steady",
        "start": s,
        "bytes_per_step": slope,
        "period": 1,
        "jump": None,
        "jumps": None,
        "z": z,
    }


def _without_largest(values):
    """The Mann-Kendall Z of values with their largest rise replaced by the median rise (the
    Go model's withoutLargest)."""
    d = [b - a for a, b in zip(values, values[1:])]
    if len(d) < 2:
        return 0.0
    m = _median(d)
    i = max(range(len(d)), key=lambda k: d[k])
    if d[i] > m:
        d[i] = m
    w = [values[0]]
    for x in d:
        w.append(w[-1] + x)
    return mann_kendall(w)[1]


class LeakWatch:
    """Says "leak" from the steps log as it is written, one record at a time.

    observe(record) takes one steps.jsonl record (the dict TorchMemProfile writes: "step" and
    "requested_bytes.all.current", else "allocated_bytes.all.current"; "allocated" and
    "memory_allocated" are read too) and returns the alarm text the first time it concludes a
    leak, else None. No torch calls: it runs on any log, anywhere. It reads requested bytes when
    the log has them (no allocator rounding: a 4 MiB leak rises by exactly 4 MiB where allocated
    rises by 2 to 6), else allocated, and keeps the last LEAK_WATCH_WINDOW (64) consecutive
    steps (a gap or a restart in the step numbers starts again).

    The rule is torchmem's growth model of a step series (growth() here; memtimeline/growth in
    Go), run after every step on the recent steps; size never decides, regularity does:

    Every-step growth (steady or accelerating), the Go model's trend test on the recent steps:
    from the change point (the step that best splits them into a flat part and a line after it),
    the Mann-Kendall trend is significant (Z >= 3.09, p = 0.001, the variance corrected for ties)
    and stays so without its largest rise, the Theil-Sen slope is positive, and the last 10
    steps are no measured plateau. Online it also asks what the Go model reads in the steps that
    follow (a plateau, a short tail): memory rose in at least 9 steps (GROWTH_MIN_STEPS), in 75%
    of the steps and in the last one (over one step, or over two: a staircase of period 2 whose
    jumps hide in the noise), each rise a quarter of the growth's pace at least, and the second
    half rose at least half as fast as the first (a warm-up that settles slows down). Without
    that, 122 of 546 planted fills of 3-8 steps alarmed. A leak alarms at its 9th step at the
    earliest.

    Staircase (period 2 to 31): 3 jumps or more, each more than JUMP_K (4) times the step noise
    (1.4826 x the MAD of the step-to-step changes, or of the changes over two steps when lower,
    floored at 64 B) that did not fall back, on a
    regular grid (each within max(1, p/5) steps of it), flat between them, of regular sizes: the
    alarm comes at the third jump. An evaluation that frees what it made (a spike) never counts.

    Measured (examples/tests/test_leakwatch.py: every steps log in testdata, and a corpus of
    its 13 distinct healthy series as backgrounds, as recorded and with noise added, with 9304
    leaks and 5706 look-alikes planted, sizes relative to the background's step noise;
    `python3 examples/tests/test_leakwatch.py -v` prints the table):
    - leaks of 2x the step noise or more, every step (constant, late start, accelerating): 1098
      of 1098 alarm, the delay from the leak's first step median 8, p95 10 (max 22);
      staircases of period 2-25 (2x the noise per step, jump / period): 99.1% alarm, at the
      third jump (p95: 0 steps after it); the bytes per step within 10% in 97% of the alarms
      (constant 92%, late start 94%, staircases 98%). Leaks of 0.5-1x the noise alarm in 81-100%
      of the cases, later (p95 up to 24 steps).
    - on real healthy logs (92 in testdata, torch 2.11 on an H200): no alarm, bounded queues
      that fill for 3 or 8 steps included (round4/queue_fill_3_clean, watch/queue9); the four
      that fill regularly for 10, 10, 15 and 30 steps alarm, then get the all-clear (below). On the real leaking logs
      that last 9 steps of the leak and show it at 2x their noise or more (34): every one
      alarms, 7 to 11 steps after the leak's first step (a staircase: at its third jump).
    - warm-up ramps, evaluation spikes and spikes that fall back, on every background: 3 alarms
      in 2448 cases (0.1%), where the spike's rise extends the background's own filling.
    Limits, measured:
    - A buffer (a queue, a cache) that fills regularly for 9 steps or more cannot be told from a
      leak while it fills: it alarms at its 9th rise (94% of the planted fills of 9-30 steps;
      every real one), then, once memory stayed flat for 10 steps (a measured plateau: Theil-Sen
      slope x length within 3x the noise, no significant trend), stopped() says from which step
      (every one of them), and TorchMemProfile says so in the log. One that fills for 8 steps
      or fewer never alarms on exact bytes (requested bytes of a real log are mostly exact);
      with noise a rise of the noise right after it makes it a 9th step at times (49 of 693
      planted fills of 3-8 steps alarmed, 0 of the 108 on exact backgrounds).
    - Leaks under the step noise: testdata/gpu/round4/late_leak_30 (2 MiB a step in 0.34x that
      noise: an LM whose sequence lengths vary) and tiny_leak_churn (0.05x) never alarm: below
      what LeakWatch is asked to see within 10 steps.
    - A background that moves far beyond its step noise (a cache filling at random steps, a
      queue that fills for 8 steps, a long spike) hides leaks of a few times that noise: there
      every-step leaks of 2x or more alarm in 55-86% of the cases, later (p95 23 steps).
    - Its cost, pure Python on a CPU: about 1 us a step on a flat log, 20-25 us on noisy ones
      (an LM with dynamic lengths, gradient accumulation), 170 us where memory keeps rising
      irregularly (watch/healthy's cache, repeated), the model running at every rise.
    - The step noise is a median: a series whose changes are mostly exactly 0 has the floor
      (64 B) for noise whatever its rare moves. Host memory (pinned) is not in the series.
    """

    def __init__(self, steps=GROWTH_MIN_STEPS, window=LEAK_WATCH_WINDOW):
        self.steps = max(int(steps), 3)
        self.window = max(int(window), 2 * self.steps)
        self.alarmed = False
        self.key = None  # the record key read: requested bytes when the log has them
        # Set when the alarm fires: the leak's figures.
        self.kind = None  # "steady", "accelerating" or "staircase"
        self.bytes_per_step = None
        self.bytes_per_period = None  # a staircase's jump (= bytes per step when period is 1)
        self.period = 1
        self.since_step = None  # the first step whose value the leak raised
        self.alarm_step = None
        self.value = None  # the series' value at the alarm
        self.stopped_step = None  # after an alarm: the first step of a measured plateau
        self.flat_steps = None  # that plateau's length when found
        self._steps = []  # step numbers of the recent consecutive steps
        self._values = []  # their values

    @property
    def allocated(self):
        return self.value

    def _read(self, record):
        keys = (self.key,) if self.key is not None else (_REQUESTED_KEY,) + _ALLOCATED_KEYS
        for key in keys:
            v = record.get(key)
            # NaN and inf parse from JSON too (json.loads("NaN")): int() of them raises.
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
                return key, int(v)
        return None, None

    def observe(self, record):
        step = record.get("step")
        if not isinstance(step, int) or isinstance(step, bool):
            return None
        key, value = self._read(record)
        if value is None:
            return None
        self.key = key
        if not self._steps or step != self._steps[-1] + 1:
            self._steps, self._values = [], []  # the first record, a gap or a restart
        self._steps.append(step)
        self._values.append(value)
        if len(self._values) > self.window:
            del self._steps[0], self._values[0]
        if self.alarmed:
            self._watch_plateau()
            return None
        found = growth(self._values, min_steps=self.steps)
        if found is None:
            return None
        self.alarmed = True
        self.kind = found["kind"]
        self.period = found["period"]
        self.bytes_per_step = int(round(found["bytes_per_step"]))
        self.bytes_per_period = found["jump"] if found["jump"] is not None else self.bytes_per_step
        self.since_step = self._steps[found["start"]]
        self.alarm_step = step
        self.value = value
        return self.message()

    def _watch_plateau(self):
        if self.stopped_step is not None:
            return
        n = max(PLATEAU_MIN_STEPS, 2 * self.period)
        tail = self._values[-n:]
        if len(tail) < n:
            return
        sigma = noise_sigma(tail)  # the tail's own: the growth before it is no noise
        if abs(tail[0] - _median(tail)) > PLATEAU_NOISE * sigma:
            return  # the tail starts before the growth stopped
        if plateau(tail, sigma, n):
            self.stopped_step = self._steps[-n]
            self.flat_steps = n

    def last_value(self):
        """The last value read (bytes), or None."""
        return self._values[-1] if self._values else None

    def what(self):
        """The series read: "requested" or "allocated" (memory)."""
        return "requested" if self.key == _REQUESTED_KEY else "allocated"

    def message(self):
        """The alarm's text (None before the alarm)."""
        if not self.alarmed:
            return None
        n = self.alarm_step - self.since_step + 1
        if self.kind == "staircase":
            how = "%s every %d steps (%s per step)" % (
                format_bytes(self.bytes_per_period), self.period, format_bytes(self.bytes_per_step))
        else:
            how = "%s per step%s" % (
                format_bytes(self.bytes_per_step),
                ", accelerating" if self.kind == "accelerating" else "")
        return "LEAK: %s memory grew %s over %d steps (steps %d-%d, %s now)" % (
            self.what(), how, n, self.since_step, self.alarm_step, format_bytes(self.value))

    def stopped(self):
        """After an alarm: the step from which memory stayed flat (a measured plateau), or None."""
        return self.stopped_step


NOTIFY_TIMEOUT_S = 60
_log = logging.getLogger("torchmem")


def _say(message):
    """One line in the training log: through logging when the program configured it, and on
    stderr unless a handler already writes there."""
    on_stderr = False
    if _log.hasHandlers() and _log.isEnabledFor(logging.WARNING):
        _log.warning(message)
        logger = _log
        while logger is not None:
            for handler in logger.handlers:
                if getattr(handler, "stream", None) in (sys.stderr, sys.__stderr__):
                    on_stderr = True
            logger = logger.parent if logger.propagate else None
    if not on_stderr:
        try:
            sys.stderr.write(message + "\n")
            sys.stderr.flush()
        except Exception:
            pass


def _notify(command, alarm):
    """Runs TORCHMEM_NOTIFY's command once for an alarm, without a shell, in a thread of its
    own: the message on stdin, the figures in TORCHMEM_ALARM_* variables. A failure is logged,
    never raised into training."""

    def run():
        try:
            args = shlex.split(command)
            env = dict(os.environ)
            env.update(
                TORCHMEM_ALARM_KIND=str(alarm["kind"]),
                TORCHMEM_ALARM_RANK=str(alarm["rank"]),
                TORCHMEM_ALARM_STEP=str(alarm["step"]),
                TORCHMEM_ALARM_FILES=os.pathsep.join(alarm["files"]),
            )
            done = subprocess.run(
                args,
                input=(alarm["message"] + "\n").encode("utf-8", "replace"),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                env=env,
                timeout=NOTIFY_TIMEOUT_S,
            )
            if done.returncode != 0:
                tail = done.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or [""]
                _say(
                    "torchmem: TORCHMEM_NOTIFY command %r exited %d %s"
                    % (command, done.returncode, tail[0][:200])
                )
        except Exception as err:
            _say("torchmem: TORCHMEM_NOTIFY command %r failed: %r" % (command, err))

    thread = threading.Thread(target=run, name="torchmem-notify")
    thread.start()
    return thread


def _top_holders(snapshot, n=3):
    """The n lines holding the most live memory in an allocator snapshot, from the stacks the
    allocator history gave its blocks, and the live bytes allocated with no stack recorded."""
    held = {}
    for segment in snapshot.get("segments", []):
        for block in segment.get("blocks", []):
            if block.get("state") != "active_allocated":
                continue
            frames = block.get("frames") or []
            where = None
            for frame in frames:  # the innermost frame outside torch itself
                name = str(frame.get("filename", ""))
                if name and "/torch/" not in name and not name.startswith("<"):
                    where = "%s:%s" % (os.path.basename(name), frame.get("line"))
                    break
            if where is None and frames:
                where = "%s:%s" % (
                    os.path.basename(str(frames[0].get("filename", "?"))),
                    frames[0].get("line"),
                )
            if where is None:
                where = ""  # allocated while the history was off: no stack
            held[where] = held.get(where, 0) + int(block.get("size", 0))
    unknown = held.pop("", 0)
    return sorted(held.items(), key=lambda kv: -kv[1])[:n], unknown


def _teardown_safe():
    """Whether detaching CUPTI after profiling is safe here, by torch's own rules.

    torch.profiler keeps CUPTI (TEARDOWN_CUPTI=0, DISABLE_CUPTI_LAZY_REINIT=1) when torch.compile
    uses CUDA graphs: re-attaching after a teardown crashed with them before CUDA 12.6.
    """
    if os.environ.get("DISABLE_CUPTI_LAZY_REINIT") == "1":
        return False
    inductor = sys.modules.get("torch._inductor.config")
    if inductor is not None and getattr(getattr(inductor, "triton", None), "cudagraphs", False):
        return False
    try:
        major, minor = (int(p) for p in str(torch.version.cuda).split(".")[:2])
    except (TypeError, ValueError):
        return False
    return (major, minor) >= (12, 6)


class TorchMemProfile:
    """Profiler, allocator history and per-step memory stats around a training loop.

    Use as a context manager and call step() once per iteration. Arguments left as None take
    the defaults listed in the module docstring; TORCHMEM_* environment variables override both.
    """

    def __init__(
        self,
        out_dir=None,
        wait=None,
        warmup=None,
        active=None,
        repeat=None,
        skip_first=None,
        enabled=None,
        trace=None,
        with_stack=None,
        record_shapes=None,
        history=None,
        max_entries=None,
        steps_log=None,
        cpp_stacks=None,
        ranks=None,
        teardown_cupti=None,
        watch=None,
        on_leak=None,
        near_oom=None,
        notify=None,
        on_alarm=None,
    ):
        def pick(env_name, argument, default, parse):
            fallback = default if argument is None else argument
            return parse(env_name, fallback)

        self.enabled = pick("TORCHMEM", enabled, True, _env_bool)
        self.out_dir = os.environ.get("TORCHMEM_DIR") or out_dir or "torchmem_out"
        self.wait = pick("TORCHMEM_WAIT", wait, 1, _env_int)
        self.warmup = pick("TORCHMEM_WARMUP", warmup, 1, _env_int)
        self.active = pick("TORCHMEM_ACTIVE", active, 5, _env_int)
        self.repeat = pick("TORCHMEM_REPEAT", repeat, 1, _env_int)
        self.skip_first = pick("TORCHMEM_SKIP_FIRST", skip_first, 0, _env_int)
        self.trace = pick("TORCHMEM_TRACE", trace, True, _env_bool)
        self.with_stack = pick("TORCHMEM_STACK", with_stack, True, _env_bool)
        self.record_shapes = pick("TORCHMEM_SHAPES", record_shapes, True, _env_bool)
        self.history = _history_mode(os.environ.get("TORCHMEM_HISTORY", history))
        self.cpp_stacks = pick("TORCHMEM_CPP_STACKS", cpp_stacks, False, _env_bool)
        self.max_entries = pick("TORCHMEM_MAX_ENTRIES", max_entries, 100000, _env_int)
        self.steps_log = pick("TORCHMEM_STEPS", steps_log, True, _env_bool)
        self.teardown_cupti = pick("TORCHMEM_TEARDOWN_CUPTI", teardown_cupti, True, _env_bool)
        self.watch = pick("TORCHMEM_WATCH", watch, True, _env_bool)
        self.on_leak = _choice(
            "TORCHMEM_ON_LEAK", on_leak, ("snapshot", "profile", "off"), "snapshot"
        )
        self.near_oom = _env_float(
            "TORCHMEM_NEAR_OOM", DEFAULT_NEAR_OOM if near_oom is None else near_oom
        )
        if self.near_oom > 1:
            # "90" meant 90%: as given it could never fire, and the user would never know.
            warnings.warn(
                "torchmem_profile: TORCHMEM_NEAR_OOM=%r is a fraction of the memory the process "
                "may use (0.9), not a percentage; using %r" % (self.near_oom, DEFAULT_NEAR_OOM)
            )
            self.near_oom = DEFAULT_NEAR_OOM
        self.notify = os.environ.get("TORCHMEM_NOTIFY", notify or "").strip() or None
        self.on_alarm = on_alarm
        self._teardown_env = os.environ.get("TEARDOWN_CUPTI")  # set by the user: left alone
        ranks_text = os.environ.get("TORCHMEM_RANKS") or (DEFAULT_RANKS if ranks is None else ranks)
        if not isinstance(ranks_text, str):  # a list or set of ints
            ranks_text = ",".join(str(int(r)) for r in ranks_text)
        try:
            self.ranks = parse_ranks(ranks_text)
        except ValueError as err:
            warnings.warn("torchmem_profile: TORCHMEM_RANKS: %s; using %s" % (err, DEFAULT_RANKS))
            self.ranks = parse_ranks(DEFAULT_RANKS)

        self.run_id = None
        self.cuda = False
        self.profiled_rank = False
        self.step_num = 0
        self.written = []
        self._prof = None
        self._cycles_end = None
        self._history_on = False
        self._steps_file = None
        self._steps_written = False  # the first line also carries the allocator settings
        self._device = None
        self._leak_watch = LeakWatch() if self.watch else None
        # While the on-leak history records: its file's suffix and path, the first step it
        # records and the step count at which it is dumped.
        self._leak_capture = None
        self._keep_history = False  # after a near-OOM alarm: history on until the end
        self._step_range = None  # the ProfilerStep#n range open during an on-leak capture
        self._near_oom_done = not (self.near_oom and 0 < self.near_oom)
        self._capacity = None
        self._step_times = []  # (step, time.time()) of the last steps: the forecast's step time
        self._notifiers = []
        self.alarms = []  # the alarm dicts given to on_alarm, in order

    # ----- naming -------------------------------------------------------------------------

    def _path(self, suffix):
        # The rank is read at write time: users often enter the block before
        # init_process_group, and the names must still carry the right rank.
        os.makedirs(self.out_dir, exist_ok=True)
        if self.run_id is None:
            self.run_id = _run_id()
        name = "%s_rank%d%s" % (self.run_id, _rank(), suffix)
        return os.path.join(self.out_dir, name)

    def _note(self, path):
        if path not in self.written:
            self.written.append(path)

    # ----- context manager ----------------------------------------------------------------

    def __enter__(self):
        if not self.enabled:
            return self
        if self.run_id is None:
            self.run_id = _run_id()
        self.cuda = torch.cuda.is_available()
        if not self.cuda:
            warnings.warn(
                "torchmem_profile: CUDA is not available; profiling the CPU only, "
                "no allocator snapshot and no steps.jsonl"
            )
        self.profiled_rank = self.ranks is None or _rank() in self.ranks
        if self.profiled_rank and self.cuda and self.history != "off":
            self._start_history()
        if self.profiled_rank and self.trace:
            self._start_profiler()
        return self

    def _schedule_end(self):
        """The step count at which the last profiled cycle ends; None when cycles never end."""
        if self.repeat <= 0:
            return None
        return self.skip_first + self.repeat * (self.wait + self.warmup + self.active)

    def __exit__(self, exc_type, exc, tb):
        if not self.enabled:
            return False
        oom = _is_oom(exc)
        if oom and self.cuda and self.history != "off" and self.profiled_rank:
            sys.stderr.write("torchmem_profile: out of memory; dumping the allocator snapshot\n")
        # Snapshot first: the oom entry is then the last thing in its history, and stopping the
        # profiler (which exports the partial cycle) cannot evict it.
        if self._leak_capture is not None:
            self._finish_leak_capture()
        if self._history_on:
            self.dump_snapshot()
            self._stop_history()
        elif oom and self.cuda and self.history != "off" and self.profiled_rank:
            # Between windows the history is off: the segments still show what was reserved.
            self.dump_snapshot(".oom.snapshot.pickle.gz")
        self._stop_profiler(exc_type, exc, tb)
        if self._steps_file is not None:
            self._steps_file.close()
            self._steps_file = None
        self._join_notifiers()
        if self.written:
            sys.stderr.write(
                "torchmem_profile: wrote %d file(s) to %s\n" % (len(self.written), self.out_dir)
            )
        return False  # re-raise whatever escaped, OOM included

    # ----- per iteration ------------------------------------------------------------------

    def step(self):
        """Call once per training iteration, after the optimizer step."""
        if not self.enabled:
            return
        finished = self.step_num
        self.step_num += 1
        if self._prof is not None:
            last = self._cycles_end is not None and self.step_num >= self._cycles_end
            # Kineto reads TEARDOWN_CUPTI when a cycle stops: detach CUPTI after the last cycle
            # only (a cycle that follows a teardown can race with it).
            self._set_teardown(last and self.teardown_cupti)
            self._prof.step()
            if last:
                # The last cycle was exported by that step(): stop the profiler, so the steps
                # after it run as if it never was.
                self._stop_profiler(None, None, None)
                self._settle_teardown()
        if self._leak_capture is not None:
            self._end_step_range()
            if self.step_num >= self._leak_capture["end"]:
                self._finish_leak_capture()
            else:
                self._begin_step_range()
        if (
            self._history_on
            and self.history == "window"
            and not self._keep_history
            and self._leak_capture is None
            and self._schedule_end() is not None
            and self.step_num >= self._schedule_end()
        ):
            # The profiled window is over: its history goes to the snapshot, and the steps
            # after it run without taking a stack per allocation (the costly part).
            self.dump_snapshot()
            self._stop_history()
        # After prof.step(): the profiled step has ended, so its trace never shows this write.
        if self.cuda and (
            self.steps_log or self._leak_watch is not None or not self._near_oom_done
        ):
            record = self._step_record(finished)
            if record is None:
                return
            if self.steps_log:
                self._write_step_stats(record)
            watch = self._leak_watch
            if watch is not None:
                stopped = watch.stopped()
                try:
                    text = watch.observe(record)
                except Exception as err:  # the watchdog never raises into training
                    self._leak_watch, text = None, None
                    warnings.warn("torchmem_profile: the leak watch failed: %r" % (err,))
                if text is not None:
                    try:
                        self._leak_alarm(text, record)
                    except Exception as err:  # the watchdog never raises into training
                        _say("torchmem: %s (capturing failed: %r)" % (text, err))
                elif stopped is None and watch.stopped() is not None:
                    _say(
                        "torchmem: rank %d: %s memory stopped growing at step %d and stayed "
                        "flat for %d steps (%s now): the LEAK alarm of step %d looks like a buffer "
                        "that filled up; torchmem analyze %s tells"
                        % (
                            record.get("rank", 0),
                            watch.what(),
                            watch.stopped(),
                            watch.flat_steps,
                            format_bytes(watch.last_value()),
                            watch.alarm_step,
                            self.out_dir,
                        )
                    )
            if not self._near_oom_done:
                try:
                    self._check_near_oom(record)
                except Exception as err:  # the watchdog never raises into training
                    self._near_oom_done = True
                    warnings.warn("torchmem_profile: the near-OOM check failed: %r" % (err,))

    # ----- profiler -----------------------------------------------------------------------

    def _start_profiler(self, at_step=None):
        """Starts the profiler: the configured schedule, or (at_step, a trigger) one cycle of a
        warm-up step and `active` steps from step at_step, numbered as the run's steps."""
        from torch.profiler import ProfilerActivity, profile, schedule

        activities = [ProfilerActivity.CPU]
        if self.cuda:
            activities.append(ProfilerActivity.CUDA)
        if at_step is None:
            wait, warmup, repeat, skip_first = self.wait, self.warmup, self.repeat, self.skip_first
            self._cycles_end = self._schedule_end()
        else:
            wait, warmup, repeat, skip_first = 0, 1, 1, at_step
            self._cycles_end = at_step + 1 + self.active
        # "Profiler clears events at the end of each cycle": each cycle is exported on its own,
        # so torch's warning (given at a cycle's end) says nothing to the user.
        warnings.filterwarnings("ignore", message=".*clears events at the end of each cycle")
        try:
            prof = profile(
                activities=activities,
                schedule=schedule(
                    wait=wait,
                    warmup=warmup,
                    active=self.active,
                    repeat=repeat,
                    skip_first=skip_first,
                ),
                on_trace_ready=self._export_trace,
                profile_memory=True,
                with_stack=self.with_stack,
                record_shapes=self.record_shapes,
            )
            if at_step is not None:
                # ProfilerStep#n and the file name count the run's steps, not this profiler's.
                prof.step_num = at_step
                prof.current_action = prof.schedule(at_step)
            prof.__enter__()
        except Exception as err:
            warnings.warn("torchmem_profile: starting the profiler failed: %r" % (err,))
            return False
        self._prof = prof
        return True

    def _set_teardown(self, on):
        # A TEARDOWN_CUPTI the user set wins.
        if self._teardown_env is not None:
            return
        os.environ["TEARDOWN_CUPTI"] = "1" if on and _teardown_safe() else "0"

    def _settle_teardown(self):
        """Let Kineto finish detaching CUPTI before the caller goes on.

        Kineto detaches CUPTI from a thread of its own that waits for the next CUDA API call to
        call cuptiFinalize in its callback; a process that exits (or starts another profiler)
        while that is pending can hang. A few cheap CUDA calls here let it finish.
        """
        if self._teardown_env is not None or os.environ.get("TEARDOWN_CUPTI") != "1":
            return
        if self.cuda:
            try:
                for _ in range(TEARDOWN_SETTLE_CALLS):
                    torch.cuda.synchronize()
                    time.sleep(TEARDOWN_SETTLE_SLEEP_S)
            except Exception:
                pass
        # Back as the user had it (unset): a later profiler of the user's own is Kineto's default.
        os.environ.pop("TEARDOWN_CUPTI", None)

    def _stop_profiler(self, exc_type, exc, tb):
        prof, self._prof = self._prof, None
        if prof is None:
            return
        if self.teardown_cupti and exc_type is None and self.cuda:
            self._set_teardown(True)  # the block ends before its last cycle: detach now
        else:
            self._set_teardown(False)  # an exception: the process is likely ending
        try:
            prof.__exit__(exc_type, exc, tb)
        except Exception as err:  # never hide the user's own exception behind ours
            warnings.warn("torchmem_profile: stopping the profiler failed: %r" % (err,))
        if exc_type is None:
            self._settle_teardown()
        elif self._teardown_env is None:
            os.environ.pop("TEARDOWN_CUPTI", None)

    def _export_trace(self, prof):
        path = "_step%d.pt.trace.json.gz" % prof.step_num
        try:
            path = self._path(path)  # an output directory that cannot be made raises here
            plain = path[: -len(".gz")]
            # Torch's own export, then gzip in members torchmem inflates in parallel: every
            # torch version writes plain JSON, and gzip shrinks a trace about tenfold.
            prof.export_chrome_trace(plain)
            with open(plain, "rb") as src, _IndexedGzip(path) as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
            os.remove(plain)
            self._note(path)
        except Exception as err:
            warnings.warn("torchmem_profile: exporting %s failed: %r" % (path, err))

    # ----- allocator history and snapshot -------------------------------------------------

    def _start_history(self):
        record = getattr(torch.cuda.memory, "_record_memory_history", None)
        if record is None:
            warnings.warn("torchmem_profile: this torch has no allocator history; no snapshot")
            return
        stacks = "all" if self.cpp_stacks else "python"
        try:
            # context="alloc": a stack per allocation; a free keeps its allocation's stack
            # (torchmem reads no other), which halves the stacks gathered.
            record(max_entries=self.max_entries, stacks=stacks, context="alloc")  # torch >= 2.1
            self._history_on = True
            return
        except TypeError:
            pass
        except Exception as err:
            warnings.warn("torchmem_profile: allocator history failed to start: %r" % (err,))
            return
        try:
            # torch 2.0 spelled it differently (and had Python stacks only).
            record(True, trace_alloc_max_entries=self.max_entries, trace_alloc_record_context=True)
            self._history_on = True
        except Exception as err:
            warnings.warn("torchmem_profile: allocator history failed to start: %r" % (err,))

    def _stop_history(self):
        record = torch.cuda.memory._record_memory_history
        try:
            record(enabled=None)
        except TypeError:
            try:
                record(False)
            except Exception:
                pass
        except Exception:
            pass
        self._history_on = False

    def dump_snapshot(self, suffix=".snapshot.pickle.gz"):
        """Dump the allocator snapshot now, gzipped (also done at the end and on OOM)."""
        if not self.cuda:
            return None
        try:
            snapshot = torch.cuda.memory._snapshot()
        except Exception as err:
            warnings.warn("torchmem_profile: taking the snapshot failed: %r" % (err,))
            return None
        return self._write_snapshot(snapshot, suffix)

    def _write_snapshot(self, snapshot, suffix):
        path, partial = suffix, None
        try:
            path = self._path(suffix)  # an output directory that cannot be made raises here
            partial = path + ".partial"
            with (_IndexedGzip(partial) if path.endswith(".gz") else open(partial, "wb")) as f:
                pickle.dump(snapshot, f)
            os.replace(partial, path)
            self._note(path)
            return path
        except Exception as err:
            warnings.warn("torchmem_profile: dumping the snapshot %s failed: %r" % (path, err))
            try:
                if partial is not None:
                    os.remove(partial)
            except OSError:
                pass
            return None

    # ----- steps.jsonl --------------------------------------------------------------------

    def _step_record(self, step):
        """The steps log's record of a finished step: memory_stats() essentials."""
        try:
            if self._device is None:
                self._device = torch.cuda.current_device()
            line = {"step": step, "time": time.time(), "rank": _rank(), "device": self._device}
            if not self._steps_written:
                line["alloc_conf"] = _alloc_conf()
                line["world_size"] = _world_size()
                try:  # what this process may use: torchmem's headroom and time to OOM
                    self._memory_limit()
                    line["total_memory"] = self._capacity
                    fraction = self._memory_limit()[1]
                    if fraction is not None:
                        line["memory_fraction"] = fraction
                except Exception:
                    pass
                if self.history != "off":
                    line["history_max_entries"] = self.max_entries
            line.update(_read_memory_stats(self._device))
            self._step_times = (self._step_times + [(step, line["time"])])[-32:]
            return line
        except Exception as err:
            warnings.warn("torchmem_profile: reading memory stats failed: %r" % (err,))
            self.steps_log = False
            self._leak_watch = None
            self._near_oom_done = True
            return None

    def _write_step_stats(self, record):
        try:
            if self._steps_file is None:
                path = self._path(".steps.jsonl")
                # Append, never truncate; line-buffered, so a crash or an OOM still leaves
                # every finished step on disk.
                self._steps_file = open(path, "a", buffering=1)
                self._note(path)
            self._steps_file.write(json.dumps(record) + "\n")
            self._steps_written = True
        except Exception as err:
            warnings.warn("torchmem_profile: writing step stats failed: %r" % (err,))
            self.steps_log = False

    # ----- alarms: leak, near-OOM ---------------------------------------------------------

    def _leak_alarm(self, text, record):
        watch = self._leak_watch
        files, captured, will = [], [], []
        if self.on_leak != "off" and self.history != "off":
            if self._history_on:
                # The history already runs (a window, always, a near-OOM): dump it now.
                path = self.dump_snapshot(".leak.snapshot.pickle.gz")
                if path:
                    files.append(path)
                    captured.append("dumped the allocator snapshot with its history to %s" % path)
            else:
                try:
                    path = self._path(".leak.snapshot.pickle.gz")
                except Exception as err:  # an output directory that cannot be made
                    warnings.warn("torchmem_profile: no leak capture: %r" % (err,))
                    path = None
                if path is not None:
                    self._start_history()
                if path is not None and self._history_on:
                    # A periodic leak keeps memory once a period: capture two of them and more.
                    steps = max(LEAK_CAPTURE_STEPS, 2 * watch.period + 1)
                    self._leak_capture = {
                        "suffix": ".leak.snapshot.pickle.gz",
                        "path": path,
                        "first": self.step_num,
                        "end": self.step_num + steps,
                        "rank": record.get("rank", 0),
                    }
                    self._begin_step_range()
                    files.append(path)
                    # What is to come, said as such: the run may end first (then the dump
                    # says which steps it holds).
                    will.append(
                        "will capture the allocator history of the next %d steps into %s"
                        % (steps, path)
                    )
        if self.on_leak == "profile" and self.trace and self._prof is None:
            first = self.step_num + 1  # one warm-up step, then the window
            if self._start_profiler(at_step=self.step_num):
                path = os.path.join(
                    self.out_dir,
                    "%s_rank%d_step%d.pt.trace.json.gz"
                    % (self.run_id, _rank(), first + self.active),
                )
                files.append(path)
                will.append(
                    "will profile the next %d steps after a warm-up step into %s"
                    % (self.active, path)
                )
        what = "".join("; " + c for c in captured + will)
        message = "torchmem: rank %d: %s%s%s; then run: torchmem analyze %s" % (
            record.get("rank", 0),
            text,
            self._time_to_oom(record, watch.bytes_per_step),
            what,
            self.out_dir,
        )
        self._alarm(
            "leak",
            record,
            message,
            files,
            bytes_per_step=watch.bytes_per_step,
            since_step=watch.since_step,
            period=watch.period,
            allocated=watch.allocated,
        )

    def _time_to_oom(self, record, bytes_per_step):
        """'; at 4.00 MiB/step, the 139.8 GiB device fills in ~34,000 steps (~2.6 h at 0.27
        s/step)': the headroom (what this process may use minus reserved now) over the leak's
        rate, with the median step time of the recent steps; '' when not known."""
        try:
            if not bytes_per_step or bytes_per_step <= 0:
                return ""
            limit, fraction = self._memory_limit()
            reserved = record.get("reserved_bytes.all.current")
            if reserved is None or limit <= 0:
                return ""
            steps = int(math.ceil(max(limit - reserved, 0) / float(bytes_per_step)))
            if steps >= 1000:  # a forecast, not a count: two significant digits
                scale = 10 ** (len(str(steps)) - 2)
                steps = int(round(steps / float(scale)) * scale)
            what = (
                "the process's %s limit" % format_bytes(limit)
                if fraction is not None and fraction < 1.0
                else "the %s device" % format_bytes(limit)
            )
            out = "; at %s/step, %s fills in ~%s steps" % (
                format_bytes(bytes_per_step),
                what,
                "{:,}".format(steps),
            )
            gaps = sorted(
                (b[1] - a[1]) / float(b[0] - a[0])
                for a, b in zip(self._step_times, self._step_times[1:])
                if b[0] > a[0] and b[1] > a[1]
            )
            if gaps:
                per = gaps[len(gaps) // 2]
                sec = steps * per
                if sec >= 3600:
                    when = "%.1f h" % (sec / 3600.0)
                elif sec >= 60:
                    when = "%.0f min" % (sec / 60.0)
                else:
                    when = "%.0f s" % sec
                out += " (~%s at %.2g s/step)" % (when, per)
            return out
        except Exception:  # the watchdog never raises into training
            return ""

    def _begin_step_range(self):
        """Marks the coming step as ProfilerStep#n in the allocator history (torch records
        record_function ranges there while the history runs), so the on-leak snapshot cuts
        into steps by itself, as one taken in a profiled window does."""
        try:
            self._step_range = torch.autograd.profiler.record_function(
                "ProfilerStep#%d" % self.step_num
            )
            self._step_range.__enter__()
        except Exception:
            self._step_range = None

    def _end_step_range(self):
        step_range, self._step_range = self._step_range, None
        if step_range is not None:
            try:
                step_range.__exit__(None, None, None)
            except Exception:
                pass

    def _finish_leak_capture(self):
        capture, self._leak_capture = self._leak_capture, None
        self._end_step_range()
        if self._history_on:
            path = self.dump_snapshot(capture["suffix"])
            if self.history == "window" and not self._keep_history:
                self._stop_history()
            # Now say what was captured: the steps that ran since the alarm (the run may have
            # ended before the steps announced).
            first, last = capture["first"], self.step_num - 1
            if path is None:
                what = "dumping the allocator history captured since the LEAK alarm failed"
            elif last < first:
                what = (
                    "the run ended before a step ran after the LEAK alarm: %s holds the "
                    "allocator history since the alarm, no step of it" % path
                )
            else:
                what = "captured the allocator history of steps %s into %s" % (
                    "%d-%d" % (first, last) if last > first else "%d" % first,
                    path,
                )
            _say("torchmem: rank %d: %s" % (capture["rank"], what))

    def _memory_limit(self):
        """What this process may use: the device's capacity times its memory fraction."""
        if self._capacity is None:
            self._capacity = int(torch.cuda.get_device_properties(self._device).total_memory)
        fraction = None  # unknown: this torch cannot say (it has no getter before 2.6)
        getter = getattr(
            torch.cuda.memory, "get_per_process_memory_fraction", None
        )  # recent torch only
        if getter is not None:
            try:
                fraction = float(getter(self._device))
            except Exception:
                pass
        if fraction is None:
            return self._capacity, None
        return int(self._capacity * min(max(fraction, 0.0), 1.0)), fraction

    def _check_near_oom(self, record):
        try:
            limit, fraction = self._memory_limit()
        except Exception:
            self._near_oom_done = True
            return
        reserved = max(
            record.get("reserved_bytes.all.current", 0), record.get("reserved_bytes.all.peak", 0)
        )
        if limit <= 0 or reserved < self.near_oom * limit:
            return
        self._near_oom_done = True
        files, holders, unknown, snap_note = [], None, 0, ""
        if self.history != "off":
            path = None
            try:
                snapshot = torch.cuda.memory._snapshot()
                holders, unknown = _top_holders(snapshot)
                path = self._write_snapshot(snapshot, ".near_oom.snapshot.pickle.gz")
            except Exception as err:
                warnings.warn("torchmem_profile: near-OOM snapshot failed: %r" % (err,))
            if path:
                files.append(path)
                snap_note = "; snapshot: %s" % path
            if not self._history_on:
                self._start_history()
            self._keep_history = True  # an OOM that follows is dumped with who allocated what
        what = (
            "the device's capacity; this torch cannot report a limit set by "
            "set_per_process_memory_fraction"
            if fraction is None
            else "the device's capacity"
            if fraction >= 1.0
            else "%.3g of the device's %s (set_per_process_memory_fraction)"
            % (fraction, format_bytes(self._capacity))
        )
        held = ""
        if holders:
            held = "; top holders: " + ", ".join(
                "%s %s" % (where, format_bytes(n)) for where, n in holders
            )
        if unknown:
            held += (
                "; %s allocated while the allocator history was off "
                "(no line; it records from now on)"
                % format_bytes(unknown)
            )
        message = (
            "torchmem: rank %d: NEAR OOM at step %d: reserved %s of %s this process may use "
            "(%.0f%%, %s; "
            "allocated %s, peak %s)%s%s; then run: torchmem analyze %s"
            % (
                record.get("rank", 0),
                record["step"],
                format_bytes(reserved),
                format_bytes(limit),
                100.0 * reserved / limit,
                what,
                format_bytes(record.get("allocated_bytes.all.current", 0)),
                format_bytes(record.get("allocated_bytes.all.peak", 0)),
                held,
                snap_note,
                self.out_dir,
            )
        )
        self._alarm("near_oom", record, message, files, used=reserved, limit=limit)

    def _alarm(self, kind, record, message, files, **figures):
        alarm = {
            "kind": kind,
            "rank": record.get("rank", 0),
            "step": record.get("step"),
            "files": list(files),
            "message": message,
        }
        alarm.update(figures)
        self.alarms.append(alarm)
        _say(message)
        if self.on_alarm is not None:
            try:
                self.on_alarm(dict(alarm))
            except Exception as err:  # a broken hook must not stop training
                _say("torchmem: on_alarm raised %r" % (err,))
        if self.notify:
            self._notifiers.append(_notify(self.notify, alarm))

    def _join_notifiers(self, timeout=NOTIFY_TIMEOUT_S):
        deadline = time.time() + timeout
        for thread in self._notifiers:
            thread.join(max(0.0, deadline - time.time()))
        self._notifiers = [t for t in self._notifiers if t.is_alive()]


def torchmem_profile(**kwargs):
    """Function form: `with torchmem_profile(active=3) as tm:` is TorchMemProfile(active=3)."""
    return TorchMemProfile(**kwargs)


# ----- framework callbacks (their frameworks are imported only when asked for) ----------------


def _make_trainer_callback():
    from transformers import TrainerCallback

    class TorchMemCallback(TrainerCallback):
        """transformers.Trainer callback: TorchMemProfile around trainer.train().

            trainer = Trainer(..., callbacks=[TorchMemCallback()])

        Keyword arguments go to TorchMemProfile (out_dir, active, ...). One step() per optimizer
        step (on_step_end), so a profiled step holds gradient_accumulation_steps micro-batches.
        Trainer has no exception hook: if training dies (an OOM included), the snapshot, the
        cut-short trace and the steps log are written at interpreter exit.
        """

        def __init__(self, **kwargs):
            self.kwargs = kwargs
            self.tm = None
            self._atexit = False

        def on_train_begin(self, args, state, control, **kwargs):
            if self.tm is None:
                self.tm = TorchMemProfile(**self.kwargs)
                self.tm.__enter__()
                if not self._atexit:
                    atexit.register(self._close)
                    self._atexit = True

        def on_step_end(self, args, state, control, **kwargs):
            if self.tm is not None:
                self.tm.step()

        def on_train_end(self, args, state, control, **kwargs):
            self._close()

        def _close(self):
            tm, self.tm = self.tm, None
            if tm is not None:
                tm.__exit__(None, None, None)

    return TorchMemCallback


def _make_lightning_callback():
    try:
        from lightning.pytorch.callbacks import Callback
    except ImportError:
        from pytorch_lightning.callbacks import Callback

    class TorchMemLightningCallback(Callback):
        """Lightning callback: TorchMemProfile around fit(), step() after every training batch.

            trainer = lightning.Trainer(..., callbacks=[TorchMemLightningCallback()])
        """

        def __init__(self, **kwargs):
            super().__init__()
            self.kwargs = kwargs
            self.tm = None

        def on_train_start(self, trainer, pl_module):
            if self.tm is None:
                self.tm = TorchMemProfile(**self.kwargs)
                self.tm.__enter__()

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            if self.tm is not None:
                self.tm.step()

        def on_train_end(self, trainer, pl_module):
            self._close(None)

        def on_exception(self, trainer, pl_module, exception):
            self._close(exception)

        def _close(self, exc):
            tm, self.tm = self.tm, None
            if tm is not None:
                tm.__exit__(type(exc) if exc is not None else None, exc, None)

    return TorchMemLightningCallback


_LAZY = {
    "TorchMemCallback": _make_trainer_callback,
    "TorchMemLightningCallback": _make_lightning_callback,
}


def __getattr__(name):
    # `from torchmem_profile import TorchMemCallback` lands here (PEP 562): the framework is
    # imported only then, so the file needs nothing but torch.
    make = _LAZY.get(name)
    if make is None:
        raise AttributeError("module %r has no attribute %r" % (__name__, name))
    value = make()
    globals()[name] = value
    return value
