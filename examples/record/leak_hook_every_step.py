"""Leak: a forward hook is registered on fc1 every step and never removed; each registration
clones the activation it first sees (512 x 1024 fp32 = 2 MiB) and keeps it for good.

    python3 leak_hook_every_step.py OUT_DIR
"""

import sys
import time

import torch
import torch.nn as nn

from record_common import base_truth, function_frame, per_step_growth, run_profiled, site, write_json

BATCH, WIDTH = 512, 1024  # fc1's output: 512 x 1024 fp32 = exactly 2 MiB
ACTIVE = 6


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(WIDTH, WIDTH)
        self.fc2 = nn.Linear(WIDTH, WIDTH)
        self.fc3 = nn.Linear(WIDTH, WIDTH)

    def forward(self, x):
        return self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(x)))))


def register_debug_hook(module):
    saved = []

    def hook(mod, inputs, output):
        if not saved:
            saved.append(output.detach().clone())  # LEAK SITE: 2 MiB kept per registration

    handle = module.register_forward_hook(hook)  # never removed: hooks pile up
    return handle, hook


def main(out_dir):
    started = time.time()
    torch.manual_seed(0)
    model = Net().cuda()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    hooks = []

    def step(i):
        hooks.append(register_debug_hook(model.fc1))  # REGISTRATION SITE: once per step
        x = torch.randn(BATCH, WIDTH, device="cuda")
        loss = model(x).square().mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    lines = run_profiled(out_dir, step, active=ACTIVE, snapshot=True)
    truth = base_truth("leak_hook_every_step", started, {"wait": 1, "warmup": 1, "active": ACTIVE})
    truth.update(
        {
            "planted": "a forward hook registered on fc1 every step (never removed); each "
            "registration clones fc1's output (512x1024 fp32) once and keeps it",
            "leak_bytes_per_step": BATCH * WIDTH * 4,
            "leak_op": "aten::clone",
            "leak_site": site("# LEAK SITE"),
            "leak_frame": function_frame(hooks[0][1]),
            "registration_site": site("# REGISTRATION SITE"),
            "hooks_registered": len(hooks),
            "measured_allocated_growth_per_step": per_step_growth(lines, 2, len(lines) - 1),
        }
    )
    write_json(out_dir + "/truth.json", truth)


if __name__ == "__main__":
    main(sys.argv[1])
