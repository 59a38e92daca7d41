"""Leak on one rank only: DDP on 2 GPUs (NCCL); rank 1 keeps a clone of its hidden activation
(1024 x 2048 fp32 = 8 MiB) every step, rank 0 is clean. One trace per rank.

    torchrun --standalone --nproc_per_node=2 ddp_one_rank_leaks.py OUT_DIR
"""

import json
import os
import sys
import time

# NVLink multicast stays off on shared hosts (it can take the GPUs out of service).
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
os.environ.setdefault("NVSHMEM_DISABLE_NVLS", "1")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn as nn  # noqa: E402
from torch.nn.parallel import DistributedDataParallel  # noqa: E402

from record_common import base_truth, per_step_growth, run_profiled, site, write_json  # noqa: E402

BATCH, WIDTH, HIDDEN = 1024, 1024, 2048  # hidden activation: 1024 x 2048 fp32 = 8 MiB
ACTIVE = 6
LEAKY_RANK = 1


class Net(nn.Module):
    def __init__(self, leak):
        super().__init__()
        self.fc1 = nn.Linear(WIDTH, HIDDEN)
        self.fc2 = nn.Linear(HIDDEN, WIDTH)
        self.leak = leak
        self.cache = []

    def forward(self, x):
        h = torch.relu(self.fc1(x))
        if self.leak:
            self.cache.append(h.detach().clone())  # LEAK SITE: rank 1 only, 8 MiB per step
        return self.fc2(h)


def main(out_dir):
    started = time.time()
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = DistributedDataParallel(Net(leak=rank == LEAKY_RANK).cuda(), device_ids=[local_rank])
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)

    def step(i):
        x = torch.randn(BATCH, WIDTH, device="cuda")
        loss = model(x).square().mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    rank_dir = os.path.join(out_dir, "rank%d" % rank)
    lines = run_profiled(rank_dir, step, active=ACTIVE, snapshot=False, device_index=local_rank)
    leak = BATCH * HIDDEN * 4 if rank == LEAKY_RANK else 0
    truth = base_truth("ddp_one_rank_leaks", started, {"wait": 1, "warmup": 1, "active": ACTIVE})
    truth.update(
        {
            "rank": rank,
            "world_size": world,
            "backend": "nccl",
            "planted": "rank 1 appends a clone of its hidden activation (1024x2048 fp32) to a list "
            "every step; rank 0 is clean",
            "leak_bytes_per_step": leak,
            "leak_site": site("# LEAK SITE") if leak else None,
            "measured_allocated_growth_per_step": per_step_growth(lines, 2, len(lines) - 1),
        }
    )
    write_json(os.path.join(rank_dir, "truth.json"), truth)
    dist.barrier()
    if rank == 0:
        per_rank = []
        for r in range(world):
            with open(os.path.join(out_dir, "rank%d" % r, "truth.json")) as f:
                per_rank.append(json.load(f))
        write_json(
            os.path.join(out_dir, "truth.json"),
            {
                "scenario": "ddp_one_rank_leaks",
                "world_size": world,
                "leaky_rank": LEAKY_RANK,
                "leak_bytes_per_step": {str(t["rank"]): t["leak_bytes_per_step"] for t in per_rank},
                "leak_site": site("# LEAK SITE"),
                "traces": ["rank%d/trace.json.gz" % r for r in range(world)],
                "torch": torch.__version__,
                "gpu": torch.cuda.get_device_name(),
            },
        )
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
