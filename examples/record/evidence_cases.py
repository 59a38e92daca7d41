"""Recordings for issue #30 (evidence: the right line, a kind only where the data tells, sources
weighed on one measure). Every scenario runs its loop INLINE under TorchMemProfile, as a user's
script does, so the loop's frame is already running when the profiler starts (Kineto then
records the line it was on at that moment, not the allocating line).

    python3 evidence_cases.py SCENARIO OUT_DIR

Scenarios: compiled_keeps_logits, inference_kv_cache, bounded_queue_cap, seqlen_cache,
trace_off_leak (run with TORCHMEM_TRACE=0), hook_every_step, hook_once, periodic_eval,
frag_fraction (run twice: plain, and with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True),
oom_fraction, slow_loader.
"""

import collections
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from snippet_common import TorchMemProfile, finish, read_steps, site

MIB = 1 << 20
BATCH, WIDTH, HIDDEN = 256, 1024, 4096


def mlp(width=WIDTH, hidden=HIDDEN, out=WIDTH):
    return nn.Sequential(nn.Linear(width, hidden), nn.GELU(), nn.Linear(hidden, out)).cuda()


def compiled_keeps_logits(out_dir):
    started = time.time()
    torch.manual_seed(0)
    model = torch.compile(mlp(out=HIDDEN))  # default mode
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    kept = []
    steps = 12
    with TorchMemProfile(out_dir=out_dir, wait=1, warmup=1, active=6, repeat=1) as tm:
        for i in range(steps):
            x = torch.randn(BATCH, WIDTH, device="cuda")
            logits = model(x)  # FORWARD SITE
            loss = logits.float().square().mean()
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            kept.append(logits.detach())  # LOGITS LEAK SITE: 256 x 4096 fp32 = 4 MiB per step
            tm.step()
    finish(out_dir, "compiled_keeps_logits", tm, started,
           planted="torch.compile(model) (default mode); the loop keeps each step's logits "
           "(detached) in a list",
           leak={"kind": "container", "bytes_per_step": BATCH * HIDDEN * 4, "first_leaking_step": 0,
                 "site": site("# LOGITS LEAK SITE"), "allocating_user_line": site("# FORWARD SITE"),
                 "note": "the logits are allocated inside the compiled region (inductor's "
                 "generated code); the first user frame is the forward call"},
           expect={"leak": True})


class KVLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.k = nn.Linear(WIDTH, WIDTH)
        self.v = nn.Linear(WIDTH, WIDTH)
        self.o = nn.Linear(WIDTH, WIDTH)

    def forward(self, x, cache):
        k = self.k(x)  # K SITE
        v = self.v(x)  # V SITE
        cache.append((k, v))  # KV KEEP SITE: the request's KV cache is never dropped
        att = torch.softmax(x @ k.t() / 32.0, dim=-1)
        return self.o(att @ v)


def inference_kv_cache(out_dir):
    started = time.time()
    torch.manual_seed(0)
    layers = nn.ModuleList([KVLayer(), KVLayer()]).cuda().eval()
    caches = []
    steps = 12
    with torch.inference_mode():
        with TorchMemProfile(out_dir=out_dir, wait=1, warmup=1, active=6, repeat=1) as tm:
            for i in range(steps):
                x = torch.randn(BATCH, WIDTH, device="cuda")
                cache = []
                for layer in layers:
                    x = layer(x, cache)
                caches.append(cache)  # REQUEST SITE: each request's cache list kept
                y = x.sum()
                tm.step()
    finish(out_dir, "inference_kv_cache", tm, started,
           planted="inference service under torch.inference_mode(): every request's KV cache "
           "(2 layers x k,v of 256x1024 fp32) is kept in a list; no autograd graph exists",
           leak={"kind": "container", "bytes_per_step": 4 * BATCH * WIDTH * 4, "first_leaking_step": 0,
                 "sites": [site("# K SITE"), site("# V SITE")], "keeper": site("# KV KEEP SITE"),
                 "not_kind": "autograd_graph (inference_mode: no graph)"},
           expect={"leak": True, "autograd": False})


def bounded_queue_cap(out_dir):
    started = time.time()
    torch.manual_seed(0)
    model = mlp()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    queue = collections.deque(maxlen=10)  # bounded: holds the last 10 batches' outputs
    steps = 30
    cap = {}
    with TorchMemProfile(out_dir=out_dir, wait=1, warmup=1, active=5, repeat=1) as tm:
        for i in range(steps):
            x = torch.randn(BATCH, WIDTH, device="cuda")
            h = model(x)
            loss = h.square().mean()
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            queue.append(torch.cat([h.detach()] * 4))  # QUEUE SITE: 4 MiB, bounded by maxlen
            if i == 0:
                total = torch.cuda.get_device_properties(0).total_memory
                cap["bytes"] = torch.cuda.memory_reserved() + 512 * MIB
                torch.cuda.set_per_process_memory_fraction(cap["bytes"] / total)
            tm.step()
    finish(out_dir, "bounded_queue_cap", tm, started,
           planted="memory fraction capped at step 0's reserved + 512 MiB; a deque(maxlen=10) "
           "gets a 4 MiB tensor every step: grows steps 0-9 (the profiled window is steps 2-6), "
           "then flat for 20 steps",
           leak=None, expect={"leak": False, "why": "bounded: the 30-step log shows the plateau"},
           queue_site=site("# QUEUE SITE"), cap_bytes=cap.get("bytes"))


def seqlen_cache(out_dir):
    started = time.time()
    torch.manual_seed(0)
    model = mlp()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    cache = {}
    lengths = [64 + 8 * k for k in range(15)]
    steps = 40
    with TorchMemProfile(out_dir=out_dir, wait=1, warmup=1, active=7, repeat=1) as tm:
        for i in range(steps):
            seq = lengths[i % len(lengths)]
            if seq not in cache:
                cache[seq] = torch.randn(seq, 9216, device="cuda")  # CACHE SITE: one table per length
            x = torch.randn(BATCH, WIDTH, device="cuda")
            loss = model(x).square().mean() + cache[seq].mean()
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            tm.step()
    finish(out_dir, "seqlen_cache", tm, started,
           planted="a per-sequence-length cache: 15 distinct lengths in steps 0-14 each add one "
           "table (~2.25-6.3 MB), steps 15-39 reuse them: flat for 25 steps",
           leak=None, expect={"leak": False, "why": "the cache stops growing after 15 steps"},
           cache_site=site("# CACHE SITE"))


def trace_off_leak(out_dir):
    started = time.time()
    torch.manual_seed(0)
    model = mlp(hidden=8192)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    kept = []
    steps = 40
    with TorchMemProfile(out_dir=out_dir, wait=1, warmup=1, active=5, repeat=1) as tm:
        for i in range(steps):
            x = torch.randn(4 * BATCH, WIDTH, device="cuda")
            churn = torch.empty(1024 * MIB, dtype=torch.uint8, device="cuda")  # CHURN SITE
            churn.fill_(1)
            loss = model(x).square().mean()
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            del churn
            kept.append(x[:64].clone())  # TRACE-OFF LEAK SITE: 64 x 1024 fp32 = 256 KiB per step
            tm.step()
    finish(out_dir, "trace_off_leak", tm, started,
           planted="TORCHMEM_TRACE=0 (history and steps log only); 256 KiB kept per step for 40 "
           "steps under ~1.3 GB/step of churn",
           leak={"kind": "container", "bytes_per_step": 64 * WIDTH * 4, "first_leaking_step": 0,
                 "site": site("# TRACE-OFF LEAK SITE")},
           expect={"leak": True}, trace_env=os.environ.get("TORCHMEM_TRACE"))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(WIDTH, WIDTH)
        self.fc2 = nn.Linear(WIDTH, WIDTH)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def hook_every_step(out_dir):
    started = time.time()
    torch.manual_seed(0)
    model = Net().cuda()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    seen = []

    def keep_output(mod, inputs, output):
        seen.append(output.detach())  # HOOK KEEP SITE: every call keeps fc1's 1 MiB output

    steps = 10
    with TorchMemProfile(out_dir=out_dir, wait=1, warmup=1, active=6, repeat=1) as tm:
        for i in range(steps):
            model.fc1.register_forward_hook(keep_output)  # REGISTRATION SITE: every step
            x = torch.randn(BATCH, WIDTH, device="cuda")
            loss = model(x).square().mean()
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            tm.step()
    finish(out_dir, "hook_every_step", tm, started,
           planted="a forward hook registered on fc1 in every step, never removed; each call "
           "appends fc1's output (detached, allocated by the module) to a list: step k keeps "
           "k+1 outputs (the same tensor k+1 times: 1 MiB per step)",
           leak={"kind": "hook", "bytes_per_step": BATCH * WIDTH * 4, "first_leaking_step": 0,
                 "keeper": site("# HOOK KEEP SITE"), "registration": site("# REGISTRATION SITE")},
           expect={"leak": True})


def hook_once(out_dir):
    started = time.time()
    torch.manual_seed(0)
    model = Net().cuda()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    seen = []

    def keep_output(mod, inputs, output):
        seen.append(output.detach())  # HOOK-ONCE KEEP SITE: every call keeps fc1's 1 MiB output

    model.fc1.register_forward_hook(keep_output)  # ONCE REGISTRATION SITE
    steps = 10
    with TorchMemProfile(out_dir=out_dir, wait=1, warmup=1, active=6, repeat=1) as tm:
        for i in range(steps):
            x = torch.randn(BATCH, WIDTH, device="cuda")
            loss = model(x).square().mean()
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            tm.step()
    finish(out_dir, "hook_once", tm, started,
           planted="one forward hook registered once; it appends fc1's output to a list every "
           "call: a container kept by the hook",
           leak={"kind": "container", "keeper_function": "keep_output",
                 "bytes_per_step": BATCH * WIDTH * 4, "first_leaking_step": 0,
                 "keeper": site("# HOOK-ONCE KEEP SITE"), "registration": site("# ONCE REGISTRATION SITE")},
           expect={"leak": True})


def periodic_eval(out_dir):
    started = time.time()
    torch.manual_seed(0)
    model = mlp(out=HIDDEN)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    val_x = torch.randn(2 * BATCH, WIDTH, device="cuda")
    eval_outputs = []
    steps = 30
    with TorchMemProfile(out_dir=out_dir, wait=1, warmup=1, active=12, repeat=1) as tm:
        for i in range(steps):
            x = torch.randn(BATCH, WIDTH, device="cuda")
            loss = model(x).square().mean()
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            if i % 5 == 4:
                with torch.no_grad():
                    out = model(val_x)  # EVAL SITE: 512 x 4096 fp32 = 8 MiB
                eval_outputs.append(out)  # KEEP SITE: never cleared
            tm.step()
    finish(out_dir, "periodic_eval", tm, started,
           planted="evaluation every 5th step (steps 4, 9, 14, ...) appends its 8 MiB output to a "
           "list never cleared; 0 growth between",
           leak={"kind": "container", "bytes_per_jump": 2 * BATCH * HIDDEN * 4, "period_steps": 5,
                 "jump_steps": [k for k in range(steps) if k % 5 == 4],
                 "site": site("# EVAL SITE"), "keeper": site("# KEEP SITE")},
           expect={"leak": True, "periodic": True})


def frag_fraction(out_dir):
    started = time.time()
    torch.manual_seed(0)
    model = mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    held = []
    cap = {}
    ooms = []
    steps = 30
    with TorchMemProfile(out_dir=out_dir, wait=1, warmup=1, active=5, repeat=1) as tm:
        for i in range(steps):
            held.clear()
            x = torch.randn(BATCH, WIDTH, device="cuda")
            loss = model(x).square().mean()
            optimizer.zero_grad(set_to_none=False)
            loss.backward()
            optimizer.step()
            del x, loss
            if i == 0:
                total = torch.cuda.get_device_properties(0).total_memory
                cap["bytes"] = torch.cuda.memory_reserved() + 700 * MIB
                torch.cuda.set_per_process_memory_fraction(cap["bytes"] / total)
            if 5 <= i < 15:
                try:
                    tmp = torch.empty(200 * MIB, dtype=torch.uint8, device="cuda")
                    del tmp  # a cached unsplit segment the retry can free
                    big = torch.empty(400 * MIB, dtype=torch.uint8, device="cuda")
                    del big
                    pieces = [torch.empty((12 + (k % 3)) * MIB, dtype=torch.uint8, device="cuda")
                              for k in range(28)]  # SPLIT SITE: carved from the freed 400 MiB
                    held.extend(pieces[::2])  # every other piece stays: split holes
                    del pieces
                    extra = torch.empty(256 * MIB, dtype=torch.uint8, device="cuda")  # RETRY SITE
                    extra.fill_(0)
                    del extra
                except torch.OutOfMemoryError as err:
                    ooms.append((i, str(err).splitlines()[0]))
            tm.step()
    lines = read_steps(tm)
    split = [l.get("inactive_split_bytes.all.current", 0) for l in lines]
    stats = torch.cuda.memory_stats()
    finish(out_dir, "frag_fraction", tm, started,
           planted="memory fraction capped at step 0's reserved + 700 MiB; steps 5-14 carve 28 "
           "pieces out of a freed 400 MiB block and keep every other one until the next step "
           "(split holes), then ask for 256 MiB more: the allocator frees its cache and retries; "
           "steps 15-29 clean",
           leak=None,
           expect={"leak": False, "fragmented_mid_run": True},
           alloc_conf=os.environ.get("PYTORCH_CUDA_ALLOC_CONF"), cap_bytes=cap.get("bytes"),
           inactive_split_per_step=split, inactive_split_max=max(split, default=0),
           num_alloc_retries=stats.get("num_alloc_retries", 0), num_ooms=stats.get("num_ooms", 0),
           caught_ooms=ooms, sites={"split": site("# SPLIT SITE"), "retry": site("# RETRY SITE")})


def oom_fraction(out_dir):
    started = time.time()
    torch.manual_seed(0)
    torch.cuda.set_per_process_memory_fraction(0.02)  # CAP SITE
    model = mlp()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    kept = []
    total = torch.cuda.get_device_properties(0).total_memory
    truth = {"total_memory": total, "fraction": 0.02, "cap_bytes": int(total * 0.02)}
    import json
    with open(os.path.join(out_dir, "truth_pre.json"), "w") as f:
        json.dump(truth, f)
    with TorchMemProfile(out_dir=out_dir, wait=1, warmup=1, active=5, repeat=1) as tm:
        for i in range(20):
            x = torch.randn(BATCH, WIDTH, device="cuda")
            loss = model(x).square().mean()
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            kept.append(torch.empty(256 * MIB, dtype=torch.uint8, device="cuda"))  # OOM SITE
            tm.step()


class SlowData(torch.utils.data.Dataset):
    def __len__(self):
        return 10 ** 6

    def __getitem__(self, i):
        time.sleep(0.0008)  # LOADER SITE: 32 samples x 0.8 ms ~ 26 ms per batch
        return torch.randn(WIDTH), torch.randn(WIDTH)


def slow_loader(out_dir):
    started = time.time()
    torch.manual_seed(0)
    model = mlp(hidden=8192)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    loader = torch.utils.data.DataLoader(SlowData(), batch_size=32, num_workers=0)
    steps = 12
    losses = []
    with TorchMemProfile(out_dir=out_dir, wait=1, warmup=1, active=6, repeat=1) as tm:
        for i, (x, y) in enumerate(loader):
            x, y = x.cuda(), y.cuda()
            for _ in range(9):
                loss = F.mse_loss(model(x.repeat(64, 1)), y.repeat(64, 1))
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
            losses.append(loss.item())  # SYNC SITE: one .item() per step
            if i + 1 == steps:
                break
            tm.step()
    finish(out_dir, "slow_loader", tm, started,
           planted="DataLoader(num_workers=0) over a dataset sleeping 0.8 ms per sample (batch 32: "
           "~26 ms per step) while the GPU waits; loss.item() every step",
           leak=None, expect={"leak": False, "idle_cause": "data loading"},
           loader_site=site("# LOADER SITE"), sync_site=site("# SYNC SITE"))


SCENARIOS = {f.__name__: f for f in (
    compiled_keeps_logits, inference_kv_cache, bounded_queue_cap, seqlen_cache, trace_off_leak,
    hook_every_step, hook_once, periodic_eval, frag_fraction, oom_fraction, slow_loader)}

if __name__ == "__main__":
    name, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    SCENARIOS[name](out)
