"""A training log written with Python logging (timestamp, level, "rank0:" prefix) that prints
torch.cuda.memory_summary() every 2 steps, while every step keeps an 8 MiB tensor in a dict.
Two log files from the same run: train.log logs the summary line by line (every line carries
the prefix), train_block.log logs it as one message (only its first line does).

    python3 logged_memory_summary.py OUT_DIR
"""

import logging
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from snippet_common import finish, run_snippet, site

BATCH, WIDTH, HIDDEN = 512, 1024, 4096
STEPS, ACTIVE, EVERY = 12, 8, 2
FORMAT = "%(asctime)s %(levelname)s rank0: %(message)s"


def logger_to(path, name):
    logger = logging.getLogger(name)
    logger.setLevel(logging.INFO)
    handler = logging.FileHandler(path, mode="w")
    handler.setFormatter(logging.Formatter(FORMAT))
    logger.addHandler(handler)
    logger.propagate = False
    return logger


def main(out_dir):
    started = time.time()
    os.makedirs(out_dir, exist_ok=True)
    per_line = logger_to(os.path.join(out_dir, "train.log"), "train")
    block = logger_to(os.path.join(out_dir, "train_block.log"), "train_block")
    torch.manual_seed(0)
    fc1, fc2 = nn.Linear(WIDTH, HIDDEN).cuda(), nn.Linear(HIDDEN, WIDTH).cuda()
    optimizer = torch.optim.Adam(list(fc1.parameters()) + list(fc2.parameters()), lr=1e-3)
    cache = {}

    def step(i):
        x = torch.randn(BATCH, WIDTH, device="cuda")
        h = fc1(x)
        loss = F.mse_loss(fc2(torch.relu(h)), x)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        cache[i] = h.detach().clone()  # LEAK SITE: 512x4096 fp32 = 8 MiB per step
        for logger in (per_line, block):
            logger.info("step %d loss %.4f", i, loss.item())
        if i % EVERY == EVERY - 1:
            summary = torch.cuda.memory_summary()  # SUMMARY SITE
            for line in summary.splitlines():
                per_line.info(line)
            block.info("memory at step %d\n%s", i, summary)

    tm = run_snippet(out_dir, step, STEPS, ACTIVE)
    finish(out_dir, "logged_memory_summary", tm, started,
           planted="h.detach().clone() stored in a dict every step; logging prints "
           "torch.cuda.memory_summary() every 2 steps (after steps 1, 3, ..., 11)",
           leak={"kind": "container", "bytes_per_step": BATCH * HIDDEN * 4, "first_leaking_step": 0,
                 "op": "aten::clone", "site": site("# LEAK SITE")},
           expect={"leak": True, "summaries_per_log": STEPS // EVERY},
           logs={"train.log": "every line of each summary is one log record: '<asctime> INFO rank0: |...|'",
                 "train_block.log": "each summary is one record: only its first line carries the prefix"},
           summary_every_steps=EVERY, summary_bytes_per_interval=EVERY * BATCH * HIDDEN * 4,
           log_format=FORMAT, summary_site=site("# SUMMARY SITE"))


if __name__ == "__main__":
    main(sys.argv[1])
