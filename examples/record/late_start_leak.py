"""Late-starting leak: 6 clean steps (4 of them profiled), then every step keeps its 4 MiB
fc1 activation in a list.

    python3 late_start_leak.py OUT_DIR
"""

import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from snippet_common import finish, run_snippet, site

BATCH, WIDTH, HIDDEN = 256, 1024, 4096
STEPS, ACTIVE, LEAK_FROM = 12, 10, 6


def main(out_dir):
    started = time.time()
    torch.manual_seed(0)
    fc1, fc2 = nn.Linear(WIDTH, HIDDEN).cuda(), nn.Linear(HIDDEN, WIDTH).cuda()
    optimizer = torch.optim.Adam(list(fc1.parameters()) + list(fc2.parameters()), lr=1e-3)
    kept = []

    def step(i):
        x = torch.randn(BATCH, WIDTH, device="cuda")
        target = torch.randn(BATCH, WIDTH, device="cuda")
        h = fc1(x)
        loss = F.mse_loss(fc2(torch.relu(h)), target)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if i >= LEAK_FROM:
            kept.append(h.detach().clone())  # LEAK SITE: 256x4096 fp32 = 4 MiB per step

    tm = run_snippet(out_dir, step, STEPS, ACTIVE)
    finish(out_dir, "late_start_leak", tm, started,
           planted="no growth for steps 0-5, then h.detach().clone() appended to a list in "
           "every step from step 6 on",
           leak={"kind": "container", "bytes_per_step": BATCH * HIDDEN * 4,
                 "first_leaking_step": LEAK_FROM, "leaking_steps": STEPS - LEAK_FROM,
                 "op": "aten::clone", "site": site("# LEAK SITE")},
           expect={"leak": True, "clean_profiled_steps_before_leak": LEAK_FROM - 2})


if __name__ == "__main__":
    main(sys.argv[1])
