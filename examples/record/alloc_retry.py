"""Meant as "the allocator frees its cache and retries, without an OOM"; recorded as an OOM.

A per-process memory fraction caps the process at (what step 0 reserved) + 192 MiB (348 MiB).
Each step trains a small MLP, then holds 128 MiB of scratch: 128 x 1 MiB (small pool) on even
steps, 1 x 128 MiB (large pool) on odd ones. Step 1 retried once (num_alloc_retries 1: the free
small segments were released). But the release also freed the MLP's cached segments, so in
step 2 the new gradients (zero_grad(set_to_none=True)) were carved from the free 128 MiB
block: split, it could not be released, and 112 MiB of it sat free in the large pool while
the small-pool scratch hit the cap: torch.OutOfMemoryError "348.00 MiB allowed; 112.96 MiB
reserved but unallocated", a real fragmentation OOM (testdata/gpu/alloc_retry_oom/).

    python3 alloc_retry.py OUT_DIR               # as recorded in testdata/gpu/alloc_retry_oom
    python3 alloc_retry.py OUT_DIR --keep-grads  # zero_grad(set_to_none=False): the gradients
                                                 # stay where step 0 put them, so no new
                                                 # persistent block splits the freed cache:
                                                 # retries every step, no OOM
                                                 # (testdata/gpu/alloc_retry)
"""

import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from snippet_common import finish, read_steps, run_snippet, site

BATCH, WIDTH, HIDDEN = 256, 1024, 4096
MIB = 1 << 20
SCRATCH, SMALL, HEADROOM = 128 * MIB, 1 * MIB, 192 * MIB
STEPS, ACTIVE = 12, 8


def main(out_dir, keep_grads=False):
    started = time.time()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(WIDTH, HIDDEN), nn.GELU(), nn.Linear(HIDDEN, WIDTH)).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    total = torch.cuda.get_device_properties(0).total_memory
    cap = {}

    def step(i):
        x = torch.randn(BATCH, WIDTH, device="cuda")
        target = torch.randn(BATCH, WIDTH, device="cuda")
        loss = F.mse_loss(model(x), target)
        optimizer.zero_grad(set_to_none=not keep_grads)
        loss.backward()
        optimizer.step()
        del x, target, loss
        if i == 0:
            cap["bytes"] = torch.cuda.memory_reserved() + HEADROOM
            cap["fraction"] = cap["bytes"] / total
            torch.cuda.set_per_process_memory_fraction(cap["fraction"])  # CAP SITE
        if i % 2 == 0:
            scratch = [torch.empty(SMALL // 4, device="cuda") for _ in range(SCRATCH // SMALL)]  # SMALL SCRATCH SITE
        else:
            scratch = [torch.empty(SCRATCH // 4, device="cuda")]  # LARGE SCRATCH SITE
        for t in scratch:
            t.fill_(1.0)
        del scratch

    tm = run_snippet(out_dir, step, STEPS, ACTIVE)
    lines = read_steps(tm)
    retries = [lines[k]["num_alloc_retries"] - (lines[k - 1]["num_alloc_retries"] if k else 0)
               for k in range(len(lines))]
    split = [l.get("inactive_split_bytes.all.current", 0) for l in lines]
    stats = torch.cuda.memory_stats()
    finish(out_dir, "alloc_retry_keep_grads" if keep_grads else "alloc_retry", tm, started,
           planted="memory fraction capped at step 0's reserved + 192 MiB; 128 MiB of scratch per "
           "step, alternating 128 x 1 MiB (small pool) and 1 x 128 MiB (large pool): each step's "
           "requests find the cache full of the other pool's free segments, the cap refuses a new "
           "segment, the allocator frees its cache and retries; no OOM"
           + ("; zero_grad(set_to_none=False)" if keep_grads else ""),
           leak=None,
           expect={"leak": False, "fragmented": False, "alloc_retries": stats.get("num_alloc_retries", 0),
                   "ooms": stats.get("num_ooms", 0),
                   "why": "the retries free whole unsplit segments of the other pool (idle cache, "
                   "not split blocks); inactive split stays small"},
           cap_bytes=cap.get("bytes"), cap_fraction=cap.get("fraction"), total_memory=total,
           retries_per_step=retries, inactive_split_per_step=split,
           inactive_split_max=max(split, default=0),
           num_alloc_retries=stats.get("num_alloc_retries", 0), num_ooms=stats.get("num_ooms", 0),
           sites={"cap": site("# CAP SITE"), "small": site("# SMALL SCRATCH SITE"),
                  "large": site("# LARGE SCRATCH SITE")})


if __name__ == "__main__":
    main(sys.argv[1], keep_grads="--keep-grads" in sys.argv[2:])
