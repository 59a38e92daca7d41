"""One small training script in three variants, for diffing two runs:
  base       fc1 is 1024 -> 2048
  head       fc1 is 1024 -> 4096: its output activation (and relu's) doubles in size
  head_leak  base plus a cache that keeps a clone of fc1's activation every step
The variants share this file, so every line number is the same in all three traces.

    python3 diff_train.py OUT_DIR VARIANT
    python3 diff_train.py --summary DIFF_DIR    (after all three: writes DIFF_DIR/truth.json)
"""

import json
import os
import sys
import time

import torch
import torch.nn as nn

from record_common import base_truth, per_step_growth, run_profiled, site, write_json

BATCH, WIDTH = 512, 1024
HIDDEN = {"base": 2048, "head": 4096, "head_leak": 2048}  # WIDTH SITE: head doubles fc1
ACTIVE = 5
VARIANTS = ("base", "head", "head_leak")


class Net(nn.Module):
    def __init__(self, hidden, leak):
        super().__init__()
        self.fc1 = nn.Linear(WIDTH, hidden)
        self.fc2 = nn.Linear(hidden, WIDTH)
        self.leak = leak
        self.cache = []

    def forward(self, x):
        h = torch.relu(self.fc1(x))  # ACTIVATION SITE: BATCH x hidden fp32 (addmm, then relu)
        if self.leak:
            self.cache.append(h.detach().clone())  # LEAK SITE: head_leak only
        return self.fc2(h)


def main(out_dir, variant):
    started = time.time()
    torch.manual_seed(0)
    hidden = HIDDEN[variant]
    model = Net(hidden, leak=variant == "head_leak").cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)  # no optimizer state

    def step(i):
        x = torch.randn(BATCH, WIDTH, device="cuda")
        loss = model(x).square().mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    lines = run_profiled(out_dir, step, active=ACTIVE, snapshot=False)
    activation = BATCH * hidden * 4
    truth = base_truth("diff_pair/" + variant, started, {"wait": 1, "warmup": 1, "active": ACTIVE})
    truth.update(
        {
            "variant": variant,
            "hidden": hidden,
            "fc1_output_bytes": activation,
            "relu_output_bytes": activation,
            "fc1_weight_grad_bytes": WIDTH * hidden * 4,
            "fc2_weight_grad_bytes": hidden * WIDTH * 4,
            "leak_bytes_per_step": activation if variant == "head_leak" else 0,
            "activation_site": site("# ACTIVATION SITE"),
            "leak_site": site("# LEAK SITE") if variant == "head_leak" else None,
            "measured_allocated_growth_per_step": per_step_growth(lines, 2, len(lines) - 1),
        }
    )
    write_json(os.path.join(out_dir, "truth.json"), truth)


def summary(diff_dir):
    per_variant = {}
    for variant in VARIANTS:
        with open(os.path.join(diff_dir, variant, "truth.json")) as f:
            per_variant[variant] = json.load(f)
    base, head = per_variant["base"], per_variant["head"]
    write_json(
        os.path.join(diff_dir, "truth.json"),
        {
            "scenario": "diff_pair",
            "script": "diff_train.py (one file, so line numbers match across variants)",
            "torch": base["torch"],
            "gpu": base["gpu"],
            "head_vs_base": {
                "change": "fc1 width 2048 -> 4096",
                "change_site": site("# WIDTH SITE"),
                "activation_site": base["activation_site"],
                "ops_whose_output_doubles": ["aten::addmm (under aten::linear, fc1)", "aten::relu (allocates in its child aten::clamp_min)"],
                "fc1_output_bytes": {"base": base["fc1_output_bytes"], "head": head["fc1_output_bytes"]},
                "relu_output_bytes": {"base": base["relu_output_bytes"], "head": head["relu_output_bytes"]},
                "weight_grad_bytes_fc1": {"base": base["fc1_weight_grad_bytes"],
                                          "head": head["fc1_weight_grad_bytes"]},
                "weight_grad_bytes_fc2": {"base": base["fc2_weight_grad_bytes"],
                                          "head": head["fc2_weight_grad_bytes"]},
                "leak_bytes_per_step": 0,
            },
            "head_leak_vs_base": {
                "change": "a cache keeps h.detach().clone() every forward",
                "leak_op": "aten::clone",
                "leak_site": per_variant["head_leak"]["leak_site"],
                "leak_bytes_per_step": per_variant["head_leak"]["leak_bytes_per_step"],
            },
            "key_averages": {v: "%s/key_averages.json" % v for v in VARIANTS},
        },
    )


if __name__ == "__main__":
    if sys.argv[1] == "--summary":
        summary(sys.argv[2])
    else:
        main(sys.argv[1], sys.argv[2])
