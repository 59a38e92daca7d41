"""Slow input and a host sync every step: bf16 autocast training with loss.item() each step,
fed by a DataLoader whose dataset sleeps 20 ms per batch (num_workers=0, no pin_memory).
The trace shows a DtoH memcpy and a sync per step, pageable HtoD copies, and the GPU idle while the
loader sleeps.

    python3 amp_item_sync_slow_loader.py OUT_DIR
"""

import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

from record_common import base_truth, run_profiled, site, write_json

BATCH, WIDTH, HIDDEN = 256, 1024, 4096
SLEEP_S = 0.020
ACTIVE = 6


class SlowDataset(Dataset):
    """One whole batch per index, made on the CPU, after a 20 ms sleep (a slow decoder)."""

    def __len__(self):
        return 1 << 20

    def __getitem__(self, index):
        time.sleep(SLEEP_S)  # SLOW LOADER SITE
        generator = torch.Generator().manual_seed(index)
        x = torch.randn(BATCH, WIDTH, generator=generator)
        y = torch.randn(BATCH, WIDTH, generator=generator)
        return x, y


def main(out_dir):
    started = time.time()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(WIDTH, HIDDEN), nn.GELU(), nn.Linear(HIDDEN, WIDTH)).cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loader = DataLoader(SlowDataset(), batch_size=None, shuffle=False, num_workers=0, pin_memory=False)
    batches = iter(loader)
    running = []

    def step(i):
        x, y = next(batches)
        x, y = x.to("cuda"), y.to("cuda")  # H2D SITE: pageable, synchronous
        with torch.autocast("cuda", dtype=torch.bfloat16):
            out = model(x)
        loss = F.mse_loss(out.float(), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        running.append(loss.item())  # SYNC SITE: DtoH copy and a host wait every step

    run_profiled(out_dir, step, active=ACTIVE, snapshot=False, sync=False)
    truth = base_truth("amp_item_sync_slow_loader", started, {"wait": 1, "warmup": 1, "active": ACTIVE})
    truth.update(
        {
            "planted": "bf16 autocast training; loss.item() every step; DataLoader(num_workers=0, "
            "pin_memory=False) over a dataset that sleeps 20 ms per batch",
            "leak_bytes_per_step": 0,
            # torch 2.11 stages .item() through a pinned buffer, hence "Pinned" in the name.
            "sync_per_step": {"call": "loss.item()", "memcpy": "Memcpy DtoH (Device -> Pinned)",
                              "copies": 1, "bytes": 4, "runtime_call": "cudaStreamSynchronize",
                              "site": site("# SYNC SITE")},
            "h2d_per_step": {"copies": 2, "bytes_each": BATCH * WIDTH * 4,
                             "memcpy": "Memcpy HtoD (Pageable -> Device)", "site": site("# H2D SITE")},
            "loader": {"sleep_s_per_batch": SLEEP_S, "num_workers": 0, "pin_memory": False,
                       "site": site("# SLOW LOADER SITE")},
            "autocast_dtype": "bfloat16",
            "harness_synchronize_per_step": False,
        }
    )
    write_json(out_dir + "/truth.json", truth)


if __name__ == "__main__":
    main(sys.argv[1])
