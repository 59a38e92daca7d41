"""The snippet as a watchdog, on the GPU (issue 34): a leaking and a healthy loop, the near-OOM
alarm under a memory fraction, TORCHMEM_NOTIFY and on_alarm.

    python3 watch_proof.py leak|leak_profile|healthy|near_oom|queue9|periodic OUT_DIR
    torchrun --nproc-per-node 2 watch_proof.py ddp OUT_DIR

Each case trains a small MLP (AdamW, batch 512x1024) for 30 steps inside TorchMemProfile with the
default schedule (wait 1, warmup 1, active 5: the window's history ends after step 6) and writes
OUT_DIR/truth.json (what was planted) and OUT_DIR/alarms.json (what on_alarm was given).
  leak          from step 10 on, 4 MiB kept in a list every step (after the window);
  leak_profile  the same with TORCHMEM_ON_LEAK=profile (set by the caller);
  healthy       an evaluation every 5 steps (a 4x batch under no_grad, dropped), a bounded
                deque(maxlen=4) of 4 MiB per step, a cache keyed by a random sequence length
                (16 lengths, 64..1024 rows): fills irregularly, then stops; nothing leaks;
  near_oom      the process capped (set_per_process_memory_fraction) at its reserved memory
                after step 0 plus 1 GiB; from step 2, 64 MiB kept every step: the leak alarm,
                then the near-OOM alarm at 90% of the cap, then an OOM escapes the block
                (caught here, exit 0);
  queue9        a bounded deque(maxlen=9) of 4 MiB per step: fills for 8 steps, then holds
                (not a leak; shorter than LeakWatch counts: silent since the 9-step rule, though
                the recorded truth.json says it alarmed at step 6 under the 6-step rule);
  periodic      an evaluation every 5th step whose 8 MiB output is kept in a list (a leak at
                steps 4, 9, 14, ...);
  ddp           two ranks (gloo, one GPU), DistributedDataParallel; rank 1 keeps 4 MiB every
                step from step 10, rank 0 nothing: only rank 1 alarms and notifies.
"""

import collections
import json
import os
import random
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn

from snippet_common import TorchMemProfile

CASE, OUT = sys.argv[1], sys.argv[2]
STEPS, MiB = 30, 1 << 20


def main():
    os.makedirs(OUT, exist_ok=True)
    rank = 0
    if CASE == "ddp":
        dist.init_process_group("gloo")
        rank = dist.get_rank()
    torch.manual_seed(0)
    random.seed(0)
    model = nn.Sequential(nn.Linear(1024, 2048), nn.ReLU(), nn.Linear(2048, 1024)).cuda()
    if CASE == "ddp":
        model = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(512, 1024, device="cuda")
    kept, queue, cache = [], collections.deque(maxlen=9 if CASE == "queue9" else 4), {}
    alarms = []
    planted = {
        "leak": {"bytes_per_step": 4 * MiB, "first_leaking_step": 10},
        "leak_profile": {"bytes_per_step": 4 * MiB, "first_leaking_step": 10},
        "near_oom": {"bytes_per_step": 64 * MiB, "first_leaking_step": 2},
        "healthy": None,
        "queue9": None,
        "periodic": {"bytes_per_5_steps": 8 * MiB, "first_leaking_step": 4, "period": 5},
        "ddp": {"bytes_per_step": {"0": 0, "1": 4 * MiB}, "first_leaking_step": 10},
    }[CASE]
    started = time.time()
    cap = None
    oom = None
    try:
        with TorchMemProfile(out_dir=OUT, on_alarm=alarms.append) as tm:
            for i in range(STEPS):
                loss = model(x).square().mean()
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                if CASE == "queue9":
                    queue.append(torch.empty(MiB, device="cuda"))  # BOUNDED QUEUE: 9 x 4 MiB
                if CASE == "periodic" and i % 5 == 4:
                    kept.append(model(torch.randn(2048, 1024, device="cuda")).detach())  # EVAL KEPT: 8 MiB
                if CASE == "ddp" and rank == 1 and i >= 10:
                    kept.append(torch.empty(MiB, device="cuda"))  # LEAK SITE: rank 1 only
                if CASE in ("leak", "leak_profile") and i >= 10:
                    kept.append(torch.empty(MiB, device="cuda"))  # LEAK SITE: 4 MiB per step
                if CASE == "near_oom":
                    if i == 0:
                        torch.cuda.synchronize()
                        total = torch.cuda.get_device_properties(0).total_memory
                        cap = torch.cuda.memory_reserved() + 1024 * MiB
                        torch.cuda.set_per_process_memory_fraction(cap / total)
                    if i >= 2:
                        kept.append(torch.empty(16 * MiB, device="cuda"))  # LEAK SITE: 64 MiB per step
                if CASE == "healthy":
                    if i % 5 == 4:
                        with torch.no_grad():
                            model(torch.randn(2048, 1024, device="cuda")).sum().item()  # EVAL
                    queue.append(torch.empty(MiB, device="cuda"))  # BOUNDED QUEUE: 4 x 4 MiB
                    n = random.choice(range(64, 1025, 64))
                    if n not in cache:
                        cache[n] = torch.empty(n, 1024, device="cuda")  # CACHE BY LENGTH
                tm.step()
    except torch.OutOfMemoryError as err:
        oom = str(err).split("\n")[0][:300]
    with open(os.path.join(OUT, "alarms_rank%d.json" % rank if CASE == "ddp" else "alarms.json"), "w") as f:
        json.dump(alarms, f, indent=1)
    if CASE == "ddp":
        dist.barrier()
        dist.destroy_process_group()
        if rank != 0:
            return
    with open(os.path.join(OUT, "truth.json"), "w") as f:
        json.dump({"scenario": "watch_" + CASE, "recorded_with": "examples/record/watch_proof.py through examples/torchmem_profile.py (snippet v4: LeakWatch, history window)",
                   "torch": torch.__version__, "gpu": torch.cuda.get_device_name(), "steps": tm.step_num,
                   "seconds": round(time.time() - started, 3), "leak": planted, "cap_bytes": cap, "oom": oom,
                   "on_leak": tm.on_leak, "alarms": [{k: a[k] for k in ("kind", "step")} for a in alarms],
                   "files": sorted(os.path.basename(p) for p in tm.written)}, f, indent=1)
    print(json.dumps({"case": CASE, "alarms": [(a["kind"], a["step"]) for a in alarms], "oom": oom, "files": len(tm.written)}))


if __name__ == "__main__":
    main()
