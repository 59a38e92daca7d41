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
    # Kept alive per step by the retained graph (the allocating op in brackets): x and target
    # [aten::randn], saved by addmm 1 and mse_loss; relu's output [aten::relu], saved by relu and
    # addmm 2; the model output [aten::addmm, fc2], saved by mse_loss; and, on CUDA in torch 2.11,
    # a full-size elementwise buffer inside [aten::mse_loss] that the returned loss keeps (the
    # first estimate here missed it and counted a 512-byte loss block that torch never makes;
    # memory_stats() growth and the snapshot showed 6 MiB per step, block by block).
    breakdown = {
        "aten::randn x 256x1024 fp32 (saved by addmm)": BATCH * WIDTH * fp32,
        "aten::randn target 256x1024 fp32 (saved by mse_loss)": BATCH * WIDTH * fp32,
        "aten::relu (in aten::clamp_min) output 256x2048 fp32 (saved by relu and addmm)": BATCH * HIDDEN * fp32,
        "aten::addmm fc2 output 256x1024 fp32 (saved by mse_loss)": BATCH * WIDTH * fp32,
        "aten::mse_loss elementwise buffer 256x1024 fp32 (held by the loss)": BATCH * WIDTH * fp32,
    }
    truth = base_truth("leak_retain_graph", started, {"wait": 1, "warmup": 1, "active": ACTIVE})
    truth.update(
        {
            "planted": "loss.backward(retain_graph=True) with every loss appended to a list: each "
            "step's graph and its saved activations stay alive",
            "leak_bytes_per_step": sum(breakdown.values()),
            "leak_bytes_breakdown": breakdown,
            "leak_site": site("# LEAK SITE"),
            "keep_site": site("# KEEP SITE"),
            "measured_allocated_growth_per_step": per_step_growth(lines, 2, len(lines) - 1),
        }
    )
    write_json(out_dir + "/truth.json", truth)


if __name__ == "__main__":
    main(sys.argv[1])
