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
                                           block ends and when a torch.OutOfMemoryError escapes it
                                           (the error is then re-raised unchanged).
  <run>_rank<r>.steps.jsonl                one JSON line per step() with the essentials of
                                           torch.cuda.memory_stats() (torch's own key names),
                                           written after prof.step(), outside the step it measures.

What it costs (torch 2.11, H200; README has the figures; examples/record/snippet_overhead.py and
history_cost.py measure them). On a GPU-bound model (an 8-layer LM at 46 ms a step) nothing
measurable: between profiled windows -0.2% to +0.2%, inside a window +1%. On a host-bound loop
(a 4-layer LM at 8-9 ms a step, synchronized every step) the allocator history costs 8-10%
between windows (0.7-0.8 ms a step, in alternating blocks of one process): torch takes the
Python stack of every allocation (stacks="python", context="alloc"; TORCHMEM_CPP_STACKS=1 adds
C++ frames: slower steps and dumps); without it (TORCHMEM_HISTORY=0) +4% or less, noise.
Inside a window such a loop runs 2-2.5x as long (Python stacks, shapes, memory events). The
history is a ring buffer of max_entries events (default 100000: a long run keeps its last steps)
in host memory; its gzipped dump is a few MB and takes a fraction of a second. After the last
profiled cycle the snippet has Kineto detach CUPTI (TEARDOWN_CUPTI=1 for that one stop, then the
variable is unset again): left attached, CUPTI slowed every later kernel launch (+35% on the
host-bound loop). It does not when TEARDOWN_CUPTI is already set, when torch keeps CUPTI for
torch.compile's CUDA graphs, before CUDA 12.6, or when the block ends by an exception; every way
a run ends was run on the H200 without a hang (examples/record/teardown_exits.sh).

Which ranks: TORCHMEM_RANKS picks the ranks that profile and snapshot ("0,7", "0-3,8", "all";
default "0-7", every rank of one 8-GPU node and the first 8 of a larger job). Every rank writes
its steps log, so `torchmem steps DIR` shows which rank grows; then profile that one.

Switches. Environment variables, when set, override the constructor's arguments, so a launcher
can change them without editing code:
  TORCHMEM=0                       disable everything (no files, step() does nothing)
  TORCHMEM_DIR=path                output directory (default ./torchmem_out)
  TORCHMEM_RUN_ID=name             the run id in file names (default <host>_<pid>_<time>)
  TORCHMEM_RANKS=list              ranks that profile and snapshot (default 0-7; "all")
  TORCHMEM_WAIT, TORCHMEM_WARMUP, TORCHMEM_ACTIVE, TORCHMEM_REPEAT, TORCHMEM_SKIP_FIRST
                                   the profiler schedule (defaults 1, 1, 5, 1, 0; repeat 0 means
                                   a cycle after another until the block ends)
  TORCHMEM_TRACE=0                 no profiler (snapshot and steps.jsonl only)
  TORCHMEM_STACK=0, TORCHMEM_SHAPES=0
                                   profile without Python stacks / without input shapes
  TORCHMEM_HISTORY=0               no allocator history and no snapshot
  TORCHMEM_CPP_STACKS=1            allocator history with C++ frames too (stacks="all"; slow)
  TORCHMEM_MAX_ENTRIES=n           allocator history length (default 100000)
  TORCHMEM_STEPS=0                 no steps.jsonl
  TORCHMEM_TEARDOWN_CUPTI=0        leave CUPTI attached after the last profiled cycle

Under DDP each rank writes its own files; the rank comes from torch.distributed when it is
initialized, else from the RANK / LOCAL_RANK environment variables. Without a usable GPU the
profiler records the CPU only, no snapshot and no steps.jsonl are written, and a warning says so.
Needs only torch (1.13 or newer; the allocator history needs 2.1 or newer).
"""

import atexit
import gzip
import json
import os
import pickle
import re
import shutil
import socket
import sys
import time
import warnings

import torch

__all__ = ["TorchMemProfile", "torchmem_profile", "TorchMemCallback", "TorchMemLightningCallback"]

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
    "segment.all.current",
    "num_alloc_retries",
    "num_ooms",
    "num_device_alloc",
    "num_device_free",
)

DEFAULT_RANKS = "0-7"

# After the last profiled cycle: CUDA calls made to let Kineto's pending CUPTI teardown finish.
TEARDOWN_SETTLE_CALLS = 10
TEARDOWN_SETTLE_SLEEP_S = 0.01

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


def _run_id():
    """<host>_<pid>_<YYYYmmdd-HHMMSS>, unique in this process; TORCHMEM_RUN_ID overrides it."""
    given = os.environ.get("TORCHMEM_RUN_ID", "").strip()
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
    """memory_stats() flattened to the keys in STEP_STAT_KEYS.

    torch.cuda.memory_stats() flattens torch's nested dict with a few hundred Python calls, each
    one an event in a profiled step; the nested dict from C++ is read directly where it exists.
    """
    raw = getattr(torch._C, "_cuda_memoryStats", None)
    if raw is None:
        stats = torch.cuda.memory_stats(device)
        return {key: int(stats.get(key, 0)) for key in STEP_STAT_KEYS}
    nested = raw(device)
    out = {}
    for key in STEP_STAT_KEYS:
        value = nested
        for part in key.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        out[key] = int(value or 0)
    return out


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
        self.cpp_stacks = pick("TORCHMEM_CPP_STACKS", cpp_stacks, False, _env_bool)
        self.max_entries = pick("TORCHMEM_MAX_ENTRIES", max_entries, 100000, _env_int)
        self.steps_log = pick("TORCHMEM_STEPS", steps_log, True, _env_bool)
        self.teardown_cupti = pick("TORCHMEM_TEARDOWN_CUPTI", teardown_cupti, True, _env_bool)
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
        self._device = None

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
        if self.profiled_rank and self.cuda and self.history:
            self._start_history()
        if self.profiled_rank and self.trace:
            self._start_profiler()
        return self

    def __exit__(self, exc_type, exc, tb):
        if not self.enabled:
            return False
        oom = _is_oom(exc)
        if oom and self._history_on:
            sys.stderr.write("torchmem_profile: out of memory; dumping the allocator snapshot\n")
        # Snapshot first: the oom entry is then the last thing in its history, and stopping the
        # profiler (which exports the partial cycle) cannot evict it.
        if self._history_on:
            self.dump_snapshot()
            self._stop_history()
        self._stop_profiler(exc_type, exc, tb)
        if self._steps_file is not None:
            self._steps_file.close()
            self._steps_file = None
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
        # After prof.step(): the profiled step has ended, so its trace never shows this write.
        if self.cuda and self.steps_log:
            self._write_step_stats(finished)

    # ----- profiler -----------------------------------------------------------------------

    def _start_profiler(self):
        from torch.profiler import ProfilerActivity, profile, schedule

        activities = [ProfilerActivity.CPU]
        if self.cuda:
            activities.append(ProfilerActivity.CUDA)
        self._cycles_end = None
        if self.repeat > 0:
            self._cycles_end = self.skip_first + self.repeat * (self.wait + self.warmup + self.active)
        # "Profiler clears events at the end of each cycle": each cycle is exported on its own,
        # so torch's warning (given at a cycle's end) says nothing to the user.
        warnings.filterwarnings("ignore", message=".*clears events at the end of each cycle")
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
        path = self._path(suffix)
        partial = path + ".partial"
        try:
            snapshot = torch.cuda.memory._snapshot()
            opener = gzip.open if path.endswith(".gz") else open
            with opener(partial, "wb") as f:
                pickle.dump(snapshot, f)
            os.replace(partial, path)
            self._note(path)
            return path
        except Exception as err:
            warnings.warn("torchmem_profile: dumping the snapshot %s failed: %r" % (path, err))
            try:
                os.remove(partial)
            except OSError:
                pass
            return None

    # ----- steps.jsonl --------------------------------------------------------------------

    def _write_step_stats(self, step):
        try:
            if self._steps_file is None:
                path = self._path(".steps.jsonl")
                # Append, never truncate; line-buffered, so a crash or an OOM still leaves
                # every finished step on disk.
                self._steps_file = open(path, "a", buffering=1)
                self._note(path)
                self._device = torch.cuda.current_device()
            line = {"step": step, "time": time.time(), "rank": _rank(), "device": self._device}
            line.update(_read_memory_stats(self._device))
            self._steps_file.write(json.dumps(line) + "\n")
        except Exception as err:
            warnings.warn("torchmem_profile: writing step stats failed: %r" % (err,))
            self.steps_log = False


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


_LAZY = {"TorchMemCallback": _make_trainer_callback, "TorchMemLightningCallback": _make_lightning_callback}


def __getattr__(name):
    # `from torchmem_profile import TorchMemCallback` lands here (PEP 562): the framework is
    # imported only then, so the file needs nothing but torch.
    make = _LAZY.get(name)
    if make is None:
        raise AttributeError("module %r has no attribute %r" % (__name__, name))
    value = make()
    globals()[name] = value
    return value
