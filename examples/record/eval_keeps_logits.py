"""Evaluation without torch.no_grad(), outputs kept: after each training step a validation loop
runs `logits = model(vx)` and appends logits to a list. Each logits tensor requires grad, so it
keeps its autograd graph and the activations saved for backward (autograd_graph leak). The
allocation happens inside the model's forward; the loop line that holds it is `logits = model(vx)`.

    python3 eval_keeps_logits.py OUT_DIR
"""

import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from snippet_common import finish, run_snippet, site

BATCH, VAL_BATCH, VAL_BATCHES, WIDTH, HIDDEN = 256, 64, 2, 1024, 4096
STEPS, ACTIVE = 12, 8


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(WIDTH, HIDDEN)
        self.fc2 = nn.Linear(HIDDEN, WIDTH)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))  # ALLOC SITE


def main(out_dir):
    started = time.time()
    torch.manual_seed(0)
    model = MLP().cuda()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    kept = []

    def step(i):
        model.train()
        x = torch.randn(BATCH, WIDTH, device="cuda")
        loss = F.mse_loss(model(x), torch.randn(BATCH, WIDTH, device="cuda"))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        model.eval()
        val_batches = [torch.randn(VAL_BATCH, WIDTH, device="cuda") for _ in range(VAL_BATCHES)]
        for vx in val_batches:
            logits = model(vx)  # HOLDING LINE: no torch.no_grad(), so logits carry their graph
            kept.append(logits)  # KEEP SITE

    tm = run_snippet(out_dir, step, STEPS, ACTIVE)
    fp32 = 4
    per_val = {"vx (saved by fc1's addmm)": VAL_BATCH * WIDTH * fp32,
               "relu output (saved by relu and fc2's addmm)": VAL_BATCH * HIDDEN * fp32,
               "logits (kept)": VAL_BATCH * WIDTH * fp32}
    finish(out_dir, "eval_keeps_logits", tm, started,
           planted="validation loop without torch.no_grad(): logits = model(vx); kept.append(logits)",
           leak={"kind": "autograd_graph", "bytes_per_step": VAL_BATCHES * sum(per_val.values()),
                 "bytes_breakdown_per_val_batch": per_val, "first_leaking_step": 0,
                 "holding_line": site("# HOLDING LINE"), "keep_site": site("# KEEP SITE"),
                 "alloc_site": site("# ALLOC SITE")},
           expect={"leak": True, "kind": "autograd_graph"})


if __name__ == "__main__":
    main(sys.argv[1])
