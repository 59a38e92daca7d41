"""A clean run whose peak is far above its steady state: small weights, big transient
activations, and one step (5) with a 4x larger batch. Nothing is kept between steps.

    python3 peak_above_steady.py OUT_DIR
"""

import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from snippet_common import finish, run_snippet, site

BATCH, BIG_BATCH, BIG_AT, WIDTH, HIDDEN = 2048, 8192, 5, 1024, 8192
STEPS, ACTIVE = 12, 8


def main(out_dir):
    started = time.time()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(WIDTH, HIDDEN), nn.GELU(), nn.Linear(HIDDEN, HIDDEN), nn.GELU(),
                          nn.Linear(HIDDEN, WIDTH)).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)

    def step(i):
        batch = BIG_BATCH if i == BIG_AT else BATCH  # PEAK SITE: one long batch
        x = torch.randn(batch, WIDTH, device="cuda")
        target = torch.randn(batch, WIDTH, device="cuda")
        loss = F.mse_loss(model(x), target)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    tm = run_snippet(out_dir, step, STEPS, ACTIVE)
    finish(out_dir, "peak_above_steady", tm, started,
           planted="clean training; activations (64 MiB each at batch 2048) dwarf the weights; "
           "step 5 uses batch 8192, so the peak is far above the steady state; nothing kept",
           leak=None, expect={"leak": False, "fragmented": False},
           big_batch_step=BIG_AT, site=site("# PEAK SITE"))


if __name__ == "__main__":
    main(sys.argv[1])
