"""A loop that never calls optimizer.zero_grad(): gradients accumulate in place (AccumulateGrad
adds into the existing .grad), memory stays flat, training is silently wrong.

    python3 no_zero_grad.py OUT_DIR
"""

import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from snippet_common import finish, run_snippet, site

BATCH, WIDTH, HIDDEN = 256, 1024, 4096
STEPS, ACTIVE = 12, 8


def main(out_dir):
    started = time.time()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(WIDTH, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, WIDTH)).cuda()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

    def step(i):
        x = torch.randn(BATCH, WIDTH, device="cuda")
        target = torch.randn(BATCH, WIDTH, device="cuda")
        loss = F.mse_loss(model(x), target)
        loss.backward()  # BACKWARD SITE: accumulates into last step's gradients
        optimizer.step()  # STEP SITE: no optimizer.zero_grad() anywhere in the loop

    tm = run_snippet(out_dir, step, STEPS, ACTIVE)
    finish(out_dir, "no_zero_grad", tm, started,
           planted="optimizer.step() every step, optimizer.zero_grad() never called",
           leak=None, expect={"leak": False, "missing_zero_grad": True},
           sites={"backward": site("# BACKWARD SITE"), "optimizer_step": site("# STEP SITE")})


if __name__ == "__main__":
    main(sys.argv[1])
