"""torchmem_profile: record what torchmem reads, around any PyTorch training loop.

Copy this file next to your training script, then:

    from torchmem_profile import TorchMemProfile
    with TorchMemProfile() as tm:            # files go to ./torchmem_out/
        for batch in loader:
            train_step(batch)
            tm.step()                        # once per iteration

and point torchmem at the files, e.g. `torchmem ops torchmem_out/<host>_rank0_step7.pt.trace.json.gz`.

What it writes into the output directory (<host> is the machine name, <r> the rank):
  <host>_rank<r>_step<n>.pt.trace.json.gz  one Kineto Chrome trace per profiled cycle
                                           (torch.profiler with schedule(wait, warmup, active,
                                           repeat), profile_memory, with_stack, record_shapes);
                                           n is the profiler's step count at export: a full
                                           cycle holds ProfilerStep#(n-active)..#(n-1), one cut
                                           short by an exception ends with #n.
  <host>_rank<r>.snapshot.pickle           the CUDA caching allocator's snapshot with its
                                           allocation history, dumped when the block ends and
                                           when a torch.OutOfMemoryError escapes it (the error
                                           is then re-raised unchanged).
  <host>_rank<r>.steps.jsonl               one JSON line per step() with the essentials of
                                           torch.cuda.memory_stats() (torch's own key names).

Switches. Environment variables, when set, override the constructor's arguments, so a launcher
can change them without editing code:
  TORCHMEM=0                       disable everything (no files, step() does nothing)
  TORCHMEM_DIR=path                output directory (default ./torchmem_out)
  TORCHMEM_WAIT, TORCHMEM_WARMUP, TORCHMEM_ACTIVE, TORCHMEM_REPEAT, TORCHMEM_SKIP_FIRST
                                   the profiler schedule (defaults 1, 1, 5, 1, 0; repeat 0 means
                                   a cycle after another until the block ends)
  TORCHMEM_TRACE=0                 no profiler (snapshot and steps.jsonl only)
  TORCHMEM_STACK=0, TORCHMEM_SHAPES=0
                                   profile without Python stacks / without input shapes
  TORCHMEM_HISTORY=0               no allocator history and no snapshot
  TORCHMEM_MAX_ENTRIES=n           allocator history length (default 100000)
  TORCHMEM_STEPS=0                 no steps.jsonl

Under DDP each rank writes its own files; the rank comes from torch.distributed when it is
initialized, else from the RANK / LOCAL_RANK environment variables. Without a usable GPU the
profiler records the CPU only, no snapshot and no steps.jsonl are written, and a warning says so.
Needs only torch (1.13 or newer; the allocator history needs 2.1 or newer).
"""

import gzip
import json
import os
import pickle
import shutil
import socket
import sys
import time
import warnings

import torch

__all__ = ["TorchMemProfile", "torchmem_profile"]

# The memory_stats() keys written per step: current and peak figures of the allocator, plus
# the counters that say the allocator struggled (retries flush the cache; ooms are failures).
STEP_STAT_KEYS = (
    "allocated_bytes.all.current",
    "allocated_bytes.all.peak",
    "reserved_bytes.all.current",
    "reserved_bytes.all.peak",
    "active_bytes.all.current",
    "active_bytes.all.peak",
    "inactive_split_bytes.all.current",
    "requested_bytes.all.current",
    "num_alloc_retries",
    "num_ooms",
)

_FALSE_WORDS = ("0", "false", "no", "off", "")


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
        warnings.warn("torchmem_profile: %s=%r is not an integer; using %r" % (name, value, default))
        return default


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
        self.history = pick("TORCHMEM_HISTORY", history, True, _env_bool)
        self.max_entries = pick("TORCHMEM_MAX_ENTRIES", max_entries, 100000, _env_int)
        self.steps_log = pick("TORCHMEM_STEPS", steps_log, True, _env_bool)

        self.cuda = False
        self.step_num = 0
        self.written = []
        self._prof = None
        self._history_on = False
        self._steps_file = None
        self._host = socket.gethostname().split(".")[0] or "host"

    # ----- naming -------------------------------------------------------------------------

    def _path(self, suffix):
        # The rank is read at write time: users often enter the block before
        # init_process_group, and the names must still carry the right rank.
        os.makedirs(self.out_dir, exist_ok=True)
        name = "%s_rank%d%s" % (self._host, _rank(), suffix)
        return os.path.join(self.out_dir, name)

    def _note(self, path):
        self.written.append(path)

    # ----- context manager ----------------------------------------------------------------

    def __enter__(self):
        if not self.enabled:
            return self
        self.cuda = torch.cuda.is_available()
        if not self.cuda:
            warnings.warn(
                "torchmem_profile: CUDA is not available; profiling the CPU only, "
                "no allocator snapshot and no steps.jsonl"
            )
        if self.cuda and self.history:
            self._start_history()
        if self.trace:
            self._start_profiler()
        return self

    def __exit__(self, exc_type, exc, tb):
        if not self.enabled:
            return False
        oom = _is_oom(exc)
        if oom:
            sys.stderr.write("torchmem_profile: out of memory; dumping the allocator snapshot\n")
        # Snapshot first: the oom entry is then the last thing in its history, and stopping the
        # profiler (which exports the partial cycle) cannot evict it.
        if self._history_on:
            self.dump_snapshot()
            self._stop_history()
        if self._prof is not None:
            try:
                self._prof.__exit__(exc_type, exc, tb)
            except Exception as err:  # never hide the user's own exception behind ours
                warnings.warn("torchmem_profile: stopping the profiler failed: %r" % (err,))
            self._prof = None
        if self._steps_file is not None:
            self._steps_file.close()
            self._steps_file = None
        if self.written:
            sys.stderr.write(
                "torchmem_profile: wrote %d file(s) to %s\n" % (len(set(self.written)), self.out_dir)
            )
        return False  # re-raise whatever escaped, OOM included

    # ----- per iteration ------------------------------------------------------------------

    def step(self):
        """Call once per training iteration, after the optimizer step."""
        if not self.enabled:
            return
        if self.cuda and self.steps_log:
            self._write_step_stats()
        self.step_num += 1
        if self._prof is not None:
            self._prof.step()

    # ----- profiler -----------------------------------------------------------------------

    def _start_profiler(self):
        from torch.profiler import ProfilerActivity, profile, schedule

        activities = [ProfilerActivity.CPU]
        if self.cuda:
            activities.append(ProfilerActivity.CUDA)
        self._prof = profile(
            activities=activities,
            schedule=schedule(
                wait=self.wait,
                warmup=self.warmup,
                active=self.active,
                repeat=self.repeat,
                skip_first=self.skip_first,
            ),
            on_trace_ready=self._export_trace,
            profile_memory=True,
            with_stack=self.with_stack,
            record_shapes=self.record_shapes,
        )
        self._prof.__enter__()

    def _export_trace(self, prof):
        path = self._path("_step%d.pt.trace.json.gz" % prof.step_num)
        plain = path[: -len(".gz")]
        try:
            # Torch's own export, then one ordinary gzip member: every torch version writes
            # plain JSON, and gzip shrinks a trace about tenfold.
            prof.export_chrome_trace(plain)
            with open(plain, "rb") as src, gzip.open(path, "wb", compresslevel=6) as dst:
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
        try:
            record(max_entries=self.max_entries)  # torch >= 2.1
            self._history_on = True
            return
        except TypeError:
            pass
        except Exception as err:
            warnings.warn("torchmem_profile: allocator history failed to start: %r" % (err,))
            return
        try:
            # torch 2.0 spelled it differently.
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

    def dump_snapshot(self, suffix=".snapshot.pickle"):
        """Dump the allocator snapshot now (also done automatically at the end and on OOM)."""
        if not self.cuda:
            return None
        path = self._path(suffix)
        try:
            dump = getattr(torch.cuda.memory, "_dump_snapshot", None)
            if dump is not None:
                dump(path)
            else:
                with open(path, "wb") as f:
                    pickle.dump(torch.cuda.memory._snapshot(), f)
            self._note(path)
            return path
        except Exception as err:
            warnings.warn("torchmem_profile: dumping the snapshot %s failed: %r" % (path, err))
            return None

    # ----- steps.jsonl --------------------------------------------------------------------

    def _write_step_stats(self):
        try:
            if self._steps_file is None:
                path = self._path(".steps.jsonl")
                # Line-buffered, so a crash or an OOM still leaves every finished step on disk.
                self._steps_file = open(path, "w", buffering=1)
                self._note(path)
            device = torch.cuda.current_device()
            stats = torch.cuda.memory_stats(device)
            line = {"step": self.step_num, "time": time.time(), "rank": _rank(), "device": device}
            for key in STEP_STAT_KEYS:
                line[key] = int(stats.get(key, 0))
            self._steps_file.write(json.dumps(line) + "\n")
        except Exception as err:
            warnings.warn("torchmem_profile: writing step stats failed: %r" % (err,))
            self.steps_log = False


def torchmem_profile(**kwargs):
    """Function form: `with torchmem_profile(active=3) as tm:` is TorchMemProfile(active=3)."""
    return TorchMemProfile(**kwargs)
