"""Leak: loss.backward(retain_graph=True) and every loss kept in a list, so each step's autograd
graph, with all the activations it saved for backward, stays alive.

    python3 leak_retain_graph.py OUT_DIR
"""

import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from record_common import base_truth, per_step_growth, run_profiled, site, write_json

BATCH, WIDTH, HIDDEN = 256, 1024, 2048
ACTIVE = 6


def main(out_dir):
    started = time.time()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(WIDTH, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, WIDTH)).cuda()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    losses = []

    def step(i):
        x = torch.randn(BATCH, WIDTH, device="cuda")
        target = torch.randn(BATCH, WIDTH, device="cuda")
        loss = F.mse_loss(model(x), target)
        optimizer.zero_grad(set_to_none=True)
        loss.backward(retain_graph=True)  # LEAK SITE: the graph's saved tensors are not freed
        optimizer.step()
        losses.append(loss)  # KEEP SITE: the loss holds its graph, so nothing frees it

    lines = run_profiled(out_dir, step, active=ACTIVE, snapshot=True)
    fp32 = 4
    # Saved for backward and so kept per step: x (addmm 1), relu's output (relu and addmm 2),
    # the model output and the target (mse_loss), plus the 4-byte loss (one 512-byte block).
    expected = (BATCH * WIDTH + BATCH * HIDDEN + BATCH * WIDTH + BATCH * WIDTH) * fp32 + 512
    truth = base_truth("leak_retain_graph", started, {"wait": 1, "warmup": 1, "active": ACTIVE})
    truth.update(
        {
            "planted": "loss.backward(retain_graph=True) with every loss appended to a list: each "
            "step's graph and its saved activations stay alive",
            "leak_bytes_per_step": expected,
            "leak_bytes_breakdown": {
                "input x 256x1024 fp32 (saved by addmm)": BATCH * WIDTH * fp32,
                "relu output 256x2048 fp32 (saved by relu, addmm)": BATCH * HIDDEN * fp32,
                "model output 256x1024 fp32 (saved by mse_loss)": BATCH * WIDTH * fp32,
                "target 256x1024 fp32 (saved by mse_loss)": BATCH * WIDTH * fp32,
                "loss scalar (one 512 B block)": 512,
            },
            "leak_site": site("# LEAK SITE"),
            "keep_site": site("# KEEP SITE"),
            "measured_allocated_growth_per_step": per_step_growth(lines, 2, len(lines) - 1),
        }
    )
    write_json(out_dir + "/truth.json", truth)


if __name__ == "__main__":
    main(sys.argv[1])
