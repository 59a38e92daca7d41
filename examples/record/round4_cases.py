"""Round-4 recordings (issues #38, #40, #41): a labeled corpus of real training loops, each run
under the snippet (examples/torchmem_profile.py) as a user would, with truth.json saying what was
planted.

    python3 round4_cases.py SCENARIO OUT_DIR
    python3 round4_cases.py --list

Corpus scenarios (#38) default to the steps log only (TORCHMEM_TRACE=0 TORCHMEM_HISTORY=0 set by
run_round4.sh) unless their name ends in _traced. Healthy ones vary the background: CNN, LM, MLP,
dynamic sequence lengths, torch.compile (default, reduce-overhead, dynamic), AMP with GradScaler,
gradient checkpointing, gradient accumulation, evaluation spikes, warm-up ramps, bounded queues
and caches that fill for 3-30 steps. Leaks: uneven rises, late starts, tiny leaks under churn,
staircases of period 2-25, accelerating, a loss kept with its graph, hooks registered per step.
Allocator cases (#40) and framework layouts (#41) follow.
"""

import collections
import json
import os
import pickle
import random
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from snippet_common import TorchMemProfile, finish, read_steps, site, write_json

MIB = 1 << 20


# ----- models ------------------------------------------------------------------------------

def mlp(width=1024, hidden=4096, out=None):
    return nn.Sequential(nn.Linear(width, hidden), nn.GELU(), nn.Linear(hidden, out or width)).cuda()


class TinyLM(nn.Module):
    def __init__(self, vocab=2000, d=256, layers=2, heads=4):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        layer = nn.TransformerEncoderLayer(d, heads, 4 * d, batch_first=True, dropout=0.0)
        self.enc = nn.TransformerEncoder(layer, layers)
        self.head = nn.Linear(d, vocab)

    def forward(self, tokens):
        return self.head(self.enc(self.emb(tokens)))


def cnn():
    return nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
        nn.Conv2d(32, 64, 3, padding=1, stride=2), nn.BatchNorm2d(64), nn.ReLU(),
        nn.Conv2d(64, 128, 3, padding=1, stride=2), nn.BatchNorm2d(128), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(128, 10)).cuda()


class Trainer:
    """One model, one optimizer, one step function; kind = mlp | lm | cnn."""

    def __init__(self, kind="mlp", seed=0, amp=False, checkpoint=False, compile_mode=None,
                 dynamic=None, seqlen=(128, 128), lr=1e-3):
        torch.manual_seed(seed)
        self.rng = random.Random(seed)
        self.kind = kind
        self.amp = amp
        self.checkpoint = checkpoint
        self.seqlen = seqlen
        self.model = {"mlp": mlp, "lm": lambda: TinyLM().cuda(), "cnn": cnn}[kind]()
        self.forward = self.model
        if compile_mode is not None:
            kwargs = {} if compile_mode == "default" else {"mode": compile_mode}
            if dynamic is not None:
                kwargs["dynamic"] = dynamic
            self.forward = torch.compile(self.model, **kwargs)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=lr)
        self.scaler = torch.amp.GradScaler("cuda") if amp else None
        self.last = None

    def batch(self):
        if self.kind == "mlp":
            return torch.randn(256, 1024, device="cuda"), None
        if self.kind == "cnn":
            return torch.randn(64, 3, 64, 64, device="cuda"), torch.randint(0, 10, (64,), device="cuda")
        n = self.rng.randint(*self.seqlen)
        tokens = torch.randint(0, 2000, (16, n), device="cuda")
        return tokens, tokens

    def loss(self, x, y):
        if self.checkpoint and self.kind == "mlp":
            from torch.utils.checkpoint import checkpoint
            out = checkpoint(self.forward, x, use_reentrant=False)
        else:
            out = self.forward(x)
        self.last = out
        if self.kind == "mlp":
            return out.float().square().mean()
        if self.kind == "cnn":
            return F.cross_entropy(out, y)
        return F.cross_entropy(out.reshape(-1, out.shape[-1]).float(), y.reshape(-1))

    def step(self, zero=True, update=True):
        x, y = self.batch()
        if self.amp:
            with torch.autocast("cuda", dtype=torch.float16):
                loss = self.loss(x, y)
            self.scaler.scale(loss).backward()
            if update:
                self.scaler.step(self.optimizer)
                self.scaler.update()
        else:
            loss = self.loss(x, y)
            loss.backward()
            if update:
                self.optimizer.step()
        if update and zero:
            self.optimizer.zero_grad(set_to_none=True)
        return loss


def loop(out_dir, steps, body, active=3, **kwargs):
    """steps calls of body(i), each followed by tm.step(), inside TorchMemProfile."""
    with TorchMemProfile(out_dir=out_dir, wait=1, warmup=1, active=active, repeat=1, **kwargs) as tm:
        for i in range(steps):
            body(i)
            tm.step()
    return tm


def done(out_dir, name, tm, started, planted, leak=None, **extra):
    expect = {"leak": leak is not None}
    expect.update(extra.pop("expect", {}))
    finish(out_dir, name, tm, started, planted=planted, leak=leak, expect=expect, **extra)


def leak_info(kind, per_step, first, marker, **more):
    info = {"kind": kind, "bytes_per_step": per_step, "first_leaking_step": first,
            "site": site(marker)}
    info.update(more)
    return info


# ----- healthy backgrounds -------------------------------------------------------------------

def healthy(name, steps, planted, **trainer):
    def run(out_dir):
        started = time.time()
        t = Trainer(**trainer)
        tm = loop(out_dir, steps, lambda i: t.step())
        done(out_dir, name, tm, started, planted)
    run.__name__ = name
    return run


mlp_clean = healthy("mlp_clean", 100, "MLP 1024-4096-1024 with Adam, correct loop", kind="mlp")
cnn_clean = healthy("cnn_clean", 60, "small CNN with BatchNorm on 64x64 images, Adam", kind="cnn")
lm_clean = healthy("lm_clean", 80, "2-layer transformer LM, fixed sequence length 128", kind="lm")
lm_dynamic_seqlen_clean = healthy("lm_dynamic_seqlen_clean", 120,
                                  "2-layer transformer LM, sequence length drawn from 32-256 "
                                  "every step", kind="lm", seqlen=(32, 256))
compile_default_clean = healthy("compile_default_clean", 50, "torch.compile(MLP) default mode",
                                kind="mlp", compile_mode="default")
compile_reduce_overhead_clean = healthy("compile_reduce_overhead_clean", 50,
                                        "torch.compile(MLP, mode='reduce-overhead'): CUDA graphs "
                                        "in a private pool", kind="mlp",
                                        compile_mode="reduce-overhead")
compile_dynamic_clean = healthy("compile_dynamic_clean", 60,
                                "torch.compile(LM, dynamic=True), sequence length 32-256",
                                kind="lm", compile_mode="default", dynamic=True, seqlen=(32, 256))
amp_gradscaler_clean = healthy("amp_gradscaler_clean", 80,
                               "LM under autocast fp16 with GradScaler, lengths 64-192",
                               kind="lm", amp=True, seqlen=(64, 192))
checkpointing_clean = healthy("checkpointing_clean", 60,
                              "MLP with torch.utils.checkpoint (non-reentrant)", kind="mlp",
                              checkpoint=True)


def grad_accum_clean(out_dir):
    """tm.step() per micro-batch; the optimizer steps every 4: a sawtooth that falls back."""
    started = time.time()
    t = Trainer(kind="lm", seqlen=(96, 160))

    def body(i):
        t.step(update=(i % 4 == 3))
        if i % 4 == 3:
            t.optimizer.zero_grad(set_to_none=True)
    tm = loop(out_dir, 80, body)
    done(out_dir, "grad_accum_clean", tm, started,
         "LM, gradient accumulation over 4 micro-batches (a step per micro-batch)")


def eval_spikes_clean(out_dir):
    started = time.time()
    t = Trainer(kind="mlp")

    def body(i):
        t.step()
        if i % 7 == 6:
            with torch.no_grad():
                big = t.model(torch.randn(4096, 1024, device="cuda"))  # EVAL SPIKE SITE
                big.sum().item()
    tm = loop(out_dir, 80, body)
    done(out_dir, "eval_spikes_clean", tm, started,
         "MLP; every 7 steps an evaluation under no_grad on a 16x batch, outputs dropped")


def warmup_ramp_clean(out_dir):
    """Batch size ramps 64 -> 256 over the first 8 steps (the cache grows), then stays."""
    started = time.time()
    torch.manual_seed(0)
    model = mlp()
    opt = torch.optim.Adam(model.parameters())

    def body(i):
        b = min(256, 64 + 24 * i + random.Random(i).randint(0, 16))
        loss = model(torch.randn(b, 1024, device="cuda")).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    tm = loop(out_dir, 60, body)
    done(out_dir, "warmup_ramp_clean", tm, started,
         "MLP whose batch ramps from 64 to 256 over the first 8 steps, then stays")


def queue_fill(n, steps):
    name = "queue_fill_%d_clean" % n

    def run(out_dir):
        started = time.time()
        t = Trainer(kind="mlp")
        queue = collections.deque(maxlen=n)

        def body(i):
            t.step()
            queue.append(t.last.detach().clone())  # QUEUE SITE: 1 MiB per step, bounded
        tm = loop(out_dir, steps, body)
        done(out_dir, name, tm, started,
             "MLP; a deque(maxlen=%d) keeps each step's output (1 MiB): fills for %d steps, "
             "then stays" % (n, n), fills_for_steps=n)
    run.__name__ = name
    return run


queue_fill_3_clean = queue_fill(3, 60)
queue_fill_10_clean = queue_fill(10, 60)
queue_fill_30_clean = queue_fill(30, 90)


def lru_cache_clean(out_dir):
    """A cache keyed by sequence length (8 lengths): fills irregularly, bounded."""
    started = time.time()
    t = Trainer(kind="lm", seqlen=(64, 64))
    rng = random.Random(3)
    cache = {}

    def body(i):
        t.seqlen = (rng.choice([32, 48, 64, 80, 96, 128, 160, 192]),) * 2
        t.step()
        n = t.seqlen[0]
        if n not in cache:
            cache[n] = torch.zeros(n, 4096, device="cuda")  # CACHE SITE: one per length
    tm = loop(out_dir, 100, body)
    done(out_dir, "lru_cache_clean", tm, started,
         "LM; a cache keyed by the sequence length (8 lengths) keeps one buffer per new length")


# ----- leaks ---------------------------------------------------------------------------------

def uneven_leak_late(out_dir):
    """The issue's first case: 4 MiB kept per step from step 12 to the end (45 steps), with a
    temporary of random size (0-4 MiB) alive across each step boundary: rises of 2-6 MiB."""
    started = time.time()
    t = Trainer(kind="mlp")
    rng = random.Random(7)
    kept, carry = [], [None]

    def body(i):
        t.step()
        carry[0] = torch.empty(rng.randint(0, 4 * MIB // 4), device="cuda")  # CARRY SITE
        if i >= 12:
            kept.append(torch.empty(MIB, device="cuda"))  # UNEVEN LEAK SITE: 4 MiB per step
    tm = loop(out_dir, 45, body)
    done(out_dir, "uneven_leak_late", tm, started,
         "MLP; from step 12 each step keeps 4 MiB; a 0-4 MiB temporary crosses each step boundary",
         leak=leak_info("container", 4 * MIB, 12, "# UNEVEN LEAK SITE"))


def compiled_keeps_logits_40(out_dir):
    started = time.time()
    t = Trainer(kind="mlp", compile_mode="default")
    kept = []

    def body(i):
        t.step()
        kept.append(t.last.detach())  # COMPILED LOGITS SITE: 256 x 1024 fp32 = 1 MiB per step
        kept.append(torch.empty(3 * MIB // 4, device="cuda"))  # COMPILED EXTRA SITE: 3 MiB
    tm = loop(out_dir, 40, body)
    done(out_dir, "compiled_keeps_logits_40", tm, started,
         "torch.compile(MLP); the loop keeps each step's output (1 MiB) and a 3 MiB buffer",
         leak=leak_info("container", 4 * MIB, 0, "# COMPILED LOGITS SITE"))


def eval5_keeps_outputs(out_dir):
    started = time.time()
    t = Trainer(kind="mlp")
    rng = random.Random(5)
    kept, carry = [], [None]

    def body(i):
        t.step()
        carry[0] = torch.empty(rng.randint(0, 2 * MIB // 4), device="cuda")
        if i % 5 == 4:
            out = t.model(torch.randn(2048, 1024, device="cuda"))  # EVAL KEEP SITE: 8 MiB, with graph
            kept.append(out.detach())
    tm = loop(out_dir, 40, body)
    done(out_dir, "eval5_keeps_outputs", tm, started,
         "MLP; every 5 steps an evaluation keeps its 8 MiB output; 0-2 MiB temporaries cross steps",
         leak=leak_info("container", 8 * MIB // 5, 4, "# EVAL KEEP SITE", period=5,
                        bytes_per_jump=8 * MIB))


def optimizer_recreated(out_dir):
    started = time.time()
    torch.manual_seed(0)
    model = mlp(width=2048, hidden=4096)
    old = []
    opt = [torch.optim.Adam(model.parameters())]

    def body(i):
        if i > 0 and i % 10 == 0:
            old.append(opt[0])  # OLD OPTIMIZER SITE: its Adam states stay alive
            opt[0] = torch.optim.Adam(model.parameters())
        loss = model(torch.randn(256, 2048, device="cuda")).square().mean()
        loss.backward()
        opt[0].step()
        opt[0].zero_grad(set_to_none=True)
    tm = loop(out_dir, 45, body)
    params = sum(p.numel() * p.element_size() for p in model.parameters())
    done(out_dir, "optimizer_recreated", tm, started,
         "MLP 2048-4096-2048; Adam re-created every 10 steps, the old one kept in a list",
         leak=leak_info("container", 2 * params // 10, 10, "# OLD OPTIMIZER SITE", period=10,
                        bytes_per_jump=2 * params))


def late_leak_30(out_dir):
    started = time.time()
    t = Trainer(kind="lm", seqlen=(64, 192))
    kept = []

    def body(i):
        t.step()
        if i >= 30:
            kept.append(torch.empty(MIB // 2, device="cuda"))  # LATE LEAK SITE: 2 MiB per step
    tm = loop(out_dir, 80, body)
    done(out_dir, "late_leak_30", tm, started,
         "LM with lengths 64-192; from step 30 each step keeps 2 MiB",
         leak=leak_info("container", 2 * MIB, 30, "# LATE LEAK SITE"))


def tiny_leak_churn(out_dir):
    started = time.time()
    t = Trainer(kind="lm", seqlen=(32, 256))
    kept = []

    def body(i):
        t.step()
        kept.append(torch.empty(MIB // 8, device="cuda"))  # TINY LEAK SITE: 0.5 MiB per step
    tm = loop(out_dir, 100, body)
    done(out_dir, "tiny_leak_churn", tm, started,
         "LM with lengths 32-256 (heavy churn); each step keeps 0.5 MiB",
         leak=leak_info("container", MIB // 2, 0, "# TINY LEAK SITE"))


def staircase(p, steps):
    name = "staircase_p%d" % p

    def run(out_dir):
        started = time.time()
        t = Trainer(kind="mlp")
        kept = []

        def body(i):
            t.step()
            if i % p == p - 1:
                kept.append(torch.empty(2 * MIB, device="cuda"))  # STAIR SITE: 8 MiB every p steps
        tm = loop(out_dir, steps, body)
        done(out_dir, name, tm, started,
             "MLP; every %d steps the loop keeps 8 MiB" % p,
             leak=leak_info("container", 8 * MIB // p, p - 1, "# STAIR SITE", period=p,
                            bytes_per_jump=8 * MIB))
    run.__name__ = name
    return run


staircase_p2 = staircase(2, 60)
staircase_p7 = staircase(7, 80)
staircase_p25 = staircase(25, 110)


def accelerating_leak(out_dir):
    started = time.time()
    t = Trainer(kind="mlp")
    kept = []

    def body(i):
        t.step()
        kept.append(torch.empty((i + 1) * MIB // 16, device="cuda"))  # ACCEL SITE: (i+1)/4 MiB
    tm = loop(out_dir, 60, body)
    done(out_dir, "accelerating_leak", tm, started,
         "MLP; step i keeps (i+1)/4 MiB (the leak accelerates)",
         leak=leak_info("container", None, 0, "# ACCEL SITE", accelerating=True))


def loss_kept_with_graph(out_dir):
    started = time.time()
    t = Trainer(kind="lm", amp=True, seqlen=(64, 128))
    losses = []

    def body(i):
        x, y = t.batch()
        with torch.autocast("cuda", dtype=torch.float16):
            loss = t.loss(x, y)
        t.scaler.scale(loss).backward(retain_graph=True)
        t.scaler.step(t.optimizer)
        t.scaler.update()
        t.optimizer.zero_grad(set_to_none=True)
        losses.append(loss)  # LOSS GRAPH SITE: the loss keeps its graph (activations) alive
    tm = loop(out_dir, 50, body)
    done(out_dir, "loss_kept_with_graph", tm, started,
         "LM under AMP; backward(retain_graph=True) and the loss kept in a list: its graph's "
         "saved activations stay alive every step (irregular sizes)",
         leak=leak_info("graph", None, 0, "# LOSS GRAPH SITE"))


def hook_lambda_traced(out_dir):
    started = time.time()
    t = Trainer(kind="mlp")
    saved = []

    def body(i):
        t.model[0].register_forward_hook(lambda m, a, o: saved.append(o.detach()))  # HOOK REG SITE
        t.step()
    tm = loop(out_dir, 16, body, active=4)
    done(out_dir, "hook_lambda_traced", tm, started,
         "MLP; every step registers a forward hook (a lambda) that keeps the layer's output: "
         "step k runs k hooks",
         leak=leak_info("hook", None, 0, "# HOOK REG SITE", accelerating=True))


# ----- allocator (#40) -----------------------------------------------------------------------

def retries_under_cap(out_dir):
    """Alternating 1 MiB x 96 and 96 MiB scratch under a cap: cudaMalloc retries, no OOM."""
    started = time.time()
    t = Trainer(kind="mlp")
    t.optimizer = torch.optim.SGD(t.model.parameters(), lr=1e-3)
    total = torch.cuda.get_device_properties(0).total_memory
    cap = {}

    def body(i):
        t.step(zero=False)
        if i == 0:
            cap["bytes"] = torch.cuda.memory_reserved() + 160 * MIB
            torch.cuda.set_per_process_memory_fraction(cap["bytes"] / total)
        if i % 2 == 0:
            scratch = [torch.empty(MIB // 4, device="cuda") for _ in range(96)]  # SMALL SCRATCH
        else:
            scratch = [torch.empty(96 * MIB // 4, device="cuda")]  # LARGE SCRATCH
        for s in scratch:
            s.fill_(1.0)
    tm = loop(out_dir, 30, body)
    done(out_dir, "retries_under_cap", tm, started,
         "MLP (grads kept); a cap 160 MiB above step 0's reserved; scratch alternates 96 x 1 MiB "
         "and 1 x 96 MiB: the allocator frees its cache and retries",
         expect={"retries": True, "oom": False})


def expandable(flag):
    name = "expandable_%s_clean" % flag

    def run(out_dir):
        started = time.time()
        t = Trainer(kind="lm", seqlen=(32, 256))
        tm = loop(out_dir, 60, lambda i: t.step())
        done(out_dir, name, tm, started,
             "LM with lengths 32-256, expandable segments %s (PYTORCH_CUDA_ALLOC_CONF as run by "
             "run_round4.sh)" % flag)
    run.__name__ = name
    return run


expandable_on_clean = expandable("on")
expandable_off_clean = expandable("off")


def reserved_growth_flat_allocated(out_dir):
    """Each step a scratch 1 MiB larger than the last: no cached block fits, reserved grows,
    allocated after the step does not."""
    started = time.time()
    t = Trainer(kind="mlp")

    def body(i):
        t.step()
        scratch = torch.empty((32 + i) * MIB // 4, device="cuda")  # GROWING SCRATCH SITE
        scratch.fill_(0.5)
        del scratch
    tm = loop(out_dir, 60, body)
    done(out_dir, "reserved_growth_flat_allocated", tm, started,
         "MLP; each step a scratch of 32+i MiB, freed: the cache keeps every older, smaller block "
         "(reserved grows ~i MiB per step) while allocated after the step stays flat",
         expect={"reserved_growth": True, "leak": False})


def leak_to_oom_fraction(out_dir):
    started = time.time()
    torch.cuda.set_per_process_memory_fraction(0.03)  # FRACTION SITE
    t = Trainer(kind="mlp")
    kept = []
    error = None
    try:
        with TorchMemProfile(out_dir=out_dir, wait=1, warmup=1, active=3, repeat=1) as tm:
            for i in range(60):
                t.step()
                kept.append(torch.empty(32 * MIB, device="cuda"))  # OOM LEAK SITE: 128 MiB per step
                tm.step()
    except torch.OutOfMemoryError as err:
        error = str(err)
    done(out_dir, "leak_to_oom_fraction", tm, started,
         "MLP under set_per_process_memory_fraction(0.03); each step keeps 128 MiB until the OOM",
         leak=leak_info("container", 128 * MIB, 0, "# OOM LEAK SITE"),
         expect={"oom": True, "oom_cause": "capacity (the leak filled the limit)"},
         oom_message=error, fraction=0.03, oom_at_step=tm.step_num)


def history_overflow(out_dir):
    """TORCHMEM_MAX_ENTRIES=3000 (set by run_round4.sh) with ~1,000 small allocations a step:
    the ring buffer drops its oldest events while a 1 MiB-per-step leak runs."""
    started = time.time()
    t = Trainer(kind="mlp")
    kept = []

    def body(i):
        t.step()
        small = [torch.empty(1024, device="cuda") for _ in range(1000)]  # CHURN SITE
        del small
        kept.append(torch.empty(MIB // 4, device="cuda"))  # OVERFLOW LEAK SITE: 1 MiB per step
    tm = loop(out_dir, 30, body, active=3)
    done(out_dir, "history_overflow", tm, started,
         "MLP; 1,000 4 KiB tensors a step under a 3,000-entry history; 1 MiB kept per step",
         leak=leak_info("container", MIB, 0, "# OVERFLOW LEAK SITE"),
         expect={"history_overflow": True}, max_entries=3000)


# ----- snapshots and host memory (#41) ------------------------------------------------------

def snapshot_series_nohistory(out_dir):
    """No allocator history, no profiler, no steps log: a snapshot every 10 steps in TorchTitan's
    layout (memory_snapshot/iteration_<N>/rank0_memory_snapshot.pickle)."""
    started = time.time()
    t = Trainer(kind="mlp")
    kept = []
    for i in range(1, 41):
        t.step()
        kept.append(torch.empty(MIB, device="cuda"))  # SERIES LEAK SITE: 4 MiB per step
        if i % 10 == 0:
            d = os.path.join(out_dir, "memory_snapshot", "iteration_%d" % i)
            os.makedirs(d, exist_ok=True)
            with open(os.path.join(d, "rank0_memory_snapshot.pickle"), "wb") as f:
                pickle.dump(torch.cuda.memory._snapshot(), f)
    write_json(os.path.join(out_dir, "truth.json"), {
        "scenario": "snapshot_series_nohistory", "torch": torch.__version__,
        "planted": "MLP; 4 MiB kept per step; snapshots (no history) at iterations 10, 20, 30, 40",
        "leak": {"kind": "container", "bytes_per_step": 4 * MIB, "bytes_per_dump": 40 * MIB,
                 "site": site("# SERIES LEAK SITE")},
        "expect": {"leak": True}, "seconds": round(time.time() - started, 3)})


def _call_first(names, *args, **kwargs):
    """Call the first of torch.cuda.memory's functions named that exists; its name or None."""
    for name in names:
        fn = getattr(torch.cuda.memory, name, None)
        if fn is not None:
            try:
                fn(*args, **kwargs)
                return name
            except Exception as err:
                print("call %s failed: %r" % (name, err), flush=True)
    return None


def snapshot_fields(out_dir):
    """A snapshot carrying the newer fields: compile_context, user metadata, annotations,
    a torch.cuda.MemPool, a CUDA graph's private pool; and one taken without traces; and the
    same as JSON."""
    started = time.time()
    import inspect
    record = torch.cuda.memory._record_memory_history
    params = inspect.signature(record).parameters
    kwargs = {"max_entries": 100000}
    for name in ("compile_context", "global_record_annotations"):
        if name in params:
            kwargs[name] = True
    record(**kwargs)
    available = sorted(n for n in dir(torch.cuda.memory) if "meta" in n.lower() or "annot" in n.lower())
    used = {"record_memory_history_kwargs": sorted(kwargs), "memory_module_names": available}
    used["metadata_call"] = _call_first(["_set_memory_metadata", "set_memory_metadata"], "phase=train")
    t = Trainer(kind="mlp", compile_mode="default")
    kept = []
    for i in range(6):
        with torch.profiler.record_function("train_step_%d" % i):
            t.step()
        kept.append(torch.empty(MIB, device="cuda"))  # FIELDS LEAK SITE
    _call_first(["_set_memory_metadata", "set_memory_metadata"], "phase=pool")
    pools = {}
    if hasattr(torch.cuda, "MemPool"):
        pool = torch.cuda.MemPool()
        with torch.cuda.use_mem_pool(pool):
            pools["mempool"] = torch.empty(16 * MIB, device="cuda")  # MEMPOOL SITE: 64 MiB
        used["mempool"] = True
    g = torch.cuda.CUDAGraph()
    static_in = torch.randn(256, 1024, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.no_grad():
        with torch.cuda.stream(s):
            for _ in range(2):
                t.model(static_in)
        torch.cuda.current_stream().wait_stream(s)
        with torch.cuda.graph(g):
            static_out = t.model(static_in)  # GRAPH SITE
        g.replay()
    torch.cuda.synchronize()
    snap = torch.cuda.memory._snapshot()
    with open(os.path.join(out_dir, "fields.snapshot.pickle"), "wb") as f:
        pickle.dump(snap, f)
    with open(os.path.join(out_dir, "fields.snapshot.json"), "w") as f:
        json.dump(snap, f, default=repr)
    try:
        bare = torch.cuda.memory._snapshot(include_traces=False)
        used["include_traces_false"] = True
    except TypeError:
        torch.cuda.memory._record_memory_history(enabled=None)
        bare = torch.cuda.memory._snapshot()
        used["include_traces_false"] = "history off instead"
    with open(os.path.join(out_dir, "notraces.snapshot.pickle"), "wb") as f:
        pickle.dump(bare, f)
    keys = sorted(snap.keys())
    entry_keys = sorted({k for tr in snap.get("device_traces", []) for e in tr for k in e})
    seg_keys = sorted({k for s in snap.get("segments", []) for k in s})
    write_json(os.path.join(out_dir, "truth.json"), {
        "scenario": "snapshot_fields", "torch": torch.__version__, "used": used,
        "snapshot_keys": keys, "trace_entry_keys": entry_keys, "segment_keys": seg_keys,
        "planted": "torch.compile(MLP) 6 steps under record_function, 1 MiB kept per step; a "
                   "MemPool holding 64 MiB; a CUDA graph capture (private pool)",
        "mempool_bytes": 64 * MIB, "sites": {"mempool": site("# MEMPOOL SITE"),
                                             "graph": site("# GRAPH SITE")},
        "seconds": round(time.time() - started, 3)})
    print(json.dumps({"keys": keys, "entry": entry_keys, "seg": seg_keys, "used": used}))


def pinned_host_leak(out_dir):
    started = time.time()
    t = Trainer(kind="mlp")
    kept = []

    def body(i):
        t.step()
        kept.append(torch.empty(16 * MIB, dtype=torch.uint8).pin_memory())  # PINNED LEAK SITE
    tm = loop(out_dir, 40, body)
    done(out_dir, "pinned_host_leak", tm, started,
         "MLP; each step keeps a 16 MiB pinned host tensor (no GPU memory)",
         leak=leak_info("pinned_host", 16 * MIB, 0, "# PINNED LEAK SITE", device="host"))


def pinned_loader_clean(out_dir):
    started = time.time()
    t = Trainer(kind="mlp")
    data = torch.utils.data.TensorDataset(torch.randn(256 * 40, 1024))
    loader = torch.utils.data.DataLoader(data, batch_size=256, pin_memory=True, num_workers=0)
    it = iter(loader)

    def body(i):
        (x,) = next(it)
        x = x.cuda(non_blocking=True)
        loss = t.model(x).square().mean()
        loss.backward()
        t.optimizer.step()
        t.optimizer.zero_grad(set_to_none=True)
    tm = loop(out_dir, 40, body)
    done(out_dir, "pinned_loader_clean", tm, started,
         "MLP fed by DataLoader(pin_memory=True): pinned host memory is cached and reused")


SCENARIOS = {f.__name__: f for f in (
    mlp_clean, cnn_clean, lm_clean, lm_dynamic_seqlen_clean, compile_default_clean,
    compile_reduce_overhead_clean, compile_dynamic_clean, amp_gradscaler_clean,
    checkpointing_clean, grad_accum_clean, eval_spikes_clean, warmup_ramp_clean,
    queue_fill_3_clean, queue_fill_10_clean, queue_fill_30_clean, lru_cache_clean,
    uneven_leak_late, compiled_keeps_logits_40, eval5_keeps_outputs, optimizer_recreated,
    late_leak_30, tiny_leak_churn, staircase_p2, staircase_p7, staircase_p25, accelerating_leak,
    loss_kept_with_graph, hook_lambda_traced,
    retries_under_cap, expandable_on_clean, expandable_off_clean, reserved_growth_flat_allocated,
    leak_to_oom_fraction, history_overflow,
    snapshot_series_nohistory, snapshot_fields, pinned_host_leak, pinned_loader_clean)}

if __name__ == "__main__":
    if sys.argv[1] == "--list":
        print("\n".join(SCENARIOS))
        sys.exit(0)
    name, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    SCENARIOS[name](out)
