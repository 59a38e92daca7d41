"""A small, perfectly regular leak in a model that churns GBs per step: 32 rows of a
8192x4096 fp32 activation (512 KiB) kept in a list every step.

    python3 small_leak_big_model.py OUT_DIR
"""

import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from snippet_common import finish, run_snippet, site

BATCH, WIDTH, LAYERS, KEEP_ROWS = 8192, 4096, 6, 32
STEPS, ACTIVE = 12, 8


class Deep(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(WIDTH, WIDTH) for _ in range(LAYERS))

    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x))
        return x


def main(out_dir):
    started = time.time()
    torch.manual_seed(0)
    model = Deep().cuda()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    kept = []

    def step(i):
        x = torch.randn(BATCH, WIDTH, device="cuda")
        target = torch.randn(BATCH, WIDTH, device="cuda")
        out = model(x)
        loss = F.mse_loss(out, target)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        kept.append(out[:KEEP_ROWS].detach().clone())  # LEAK SITE: 32x4096 fp32 = 512 KiB per step

    tm = run_snippet(out_dir, step, STEPS, ACTIVE)
    finish(out_dir, "small_leak_big_model", tm, started,
           planted="out[:32].detach().clone() appended to a list every step (512 KiB) in a 6-layer "
           "4096-wide MLP at batch 8192 (each activation 128 MiB)",
           leak={"kind": "container", "bytes_per_step": KEEP_ROWS * WIDTH * 4, "first_leaking_step": 0,
                 "op": "aten::clone", "site": site("# LEAK SITE")},
           expect={"leak": True, "severity_below_default_threshold": True})


if __name__ == "__main__":
    main(sys.argv[1])
