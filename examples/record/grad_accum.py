"""Healthy gradient accumulation: 4 micro-batches per optimizer step, optimizer.step() and
zero_grad() after every 4th; tm.step() once per micro-batch. The run ends two micro-batches
into an accumulation, so gradients made at step 12 are alive at the end, like AdamW's state
made at step 3. Not a leak, not fragmented.

    python3 grad_accum.py OUT_DIR
"""

import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from snippet_common import finish, run_snippet, site

BATCH, WIDTH, HIDDEN, ACCUM = 256, 1024, 4096, 4
STEPS, ACTIVE = 14, 12


def block():
    return nn.Sequential(nn.Linear(WIDTH, HIDDEN), nn.GELU(), nn.Linear(HIDDEN, WIDTH), nn.LayerNorm(WIDTH))


def main(out_dir):
    started = time.time()
    torch.manual_seed(0)
    model = nn.Sequential(block(), block()).cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)

    def step(i):
        x = torch.randn(BATCH, WIDTH, device="cuda")
        target = torch.randn(BATCH, WIDTH, device="cuda")
        loss = F.mse_loss(model(x), target) / ACCUM
        loss.backward()  # ACCUMULATE SITE
        if (i + 1) % ACCUM == 0:
            optimizer.step()  # OPTIMIZER SITE
            optimizer.zero_grad(set_to_none=True)  # ZERO_GRAD SITE

    tm = run_snippet(out_dir, step, STEPS, ACTIVE)
    finish(out_dir, "grad_accum", tm, started,
           planted="gradient accumulation over 4 micro-batches (tm.step() per micro-batch); "
           "optimizer.step() + zero_grad(set_to_none=True) after micro-batches 3, 7, 11",
           leak=None,
           expect={"leak": False, "fragmented": False, "missing_zero_grad": False},
           optimizer_steps_at=[i for i in range(STEPS) if (i + 1) % ACCUM == 0],
           sites={"backward": site("# ACCUMULATE SITE"), "optimizer_step": site("# OPTIMIZER SITE"),
                  "zero_grad": site("# ZERO_GRAD SITE")},
           one_time={"optimizer_state": "AdamW exp_avg/exp_avg_sq made at step 3",
                     "gradients": "made at step 12 (after the zero_grad at step 11), alive at the end"})


if __name__ == "__main__":
    main(sys.argv[1])
