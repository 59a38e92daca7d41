"""Real multi-rank recordings on ONE GPU: DistributedDataParallel over gloo, every rank a process
of its own on cuda:0, each rank recorded with the snippet (examples/torchmem_profile.py) exactly
as a user would: one trace, one allocator snapshot and one steps log per rank.

    torchrun --standalone --nproc_per_node=4 ddp_gloo_ranks.py OUT_DIR --leaky-rank 2
    torchrun --standalone --nproc_per_node=8 ddp_gloo_ranks.py OUT_DIR
    torchrun --standalone --nproc_per_node=4 ddp_gloo_ranks.py OUT_DIR --fsdp2 --leaky-rank 1

--leaky-rank R: rank R keeps a clone of its hidden activation (BATCH x HIDDEN fp32 = 1 MiB) every
step; every other rank is clean. Without it every rank is clean.
--fsdp2: the model is sharded with torch.distributed.fsdp.fully_shard instead of DDP (FSDP2).
On torch 2.11.0+cu130 it runs on gloo (2 and 4 ranks on one H200, recorded 2026-12-01).

The process group is gloo, so the ranks can share the one GPU (NCCL refuses two ranks on one
device); gloo all-reduces CUDA tensors through host copies. The model is small and the window
short (wait 1, warmup 1, active 3) so the traces stay small.
"""

import argparse
import json
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel

from snippet_common import TorchMemProfile, site, write_json

BATCH, WIDTH, HIDDEN = 256, 256, 1024  # hidden activation: 256 x 1024 fp32 = 1 MiB
STEPS, WAIT, WARMUP, ACTIVE = 7, 1, 1, 3


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
            self.cache.append(h.detach().clone())  # LEAK SITE: the leaky rank only, 1 MiB per step
        return self.fc2(h)


def wrap(net, fsdp2):
    if not fsdp2:
        return DistributedDataParallel(net, device_ids=[0])
    try:
        from torch.distributed.fsdp import fully_shard  # torch >= 2.6
    except ImportError:
        from torch.distributed._composable.fsdp import fully_shard  # torch 2.4, 2.5
    fully_shard(net.fc1)
    fully_shard(net.fc2)
    fully_shard(net)
    return net


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out_dir")
    parser.add_argument("--leaky-rank", type=int, default=-1)
    parser.add_argument("--fsdp2", action="store_true")
    parser.add_argument("--steps", type=int, default=STEPS)
    args = parser.parse_args()
    started = time.time()
    torch.cuda.set_device(0)  # every rank on the one GPU
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    leaks = rank == args.leaky_rank
    model = wrap(Net(leak=leaks).cuda(), args.fsdp2)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    torch.manual_seed(1 + rank)  # each rank its own batch, as a sampler would give

    def step():
        x = torch.randn(BATCH, WIDTH, device="cuda")
        loss = model(x).square().mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    with TorchMemProfile(out_dir=args.out_dir, wait=WAIT, warmup=WARMUP, active=ACTIVE,
                         repeat=1, ranks="all") as tm:
        for _ in range(args.steps):
            step()
            tm.step()
    files = sorted(os.path.basename(p) for p in tm.written)
    print("rank %d wrote %s" % (rank, files), flush=True)
    gathered = [None] * world
    dist.all_gather_object(gathered, {"rank": rank, "files": files,
                                      "cached_bytes": sum(t.numel() * t.element_size()
                                                          for t in getattr(model, "module", model).cache)})
    if rank == 0:
        write_json(
            os.path.join(args.out_dir, "truth.json"),
            {
                "scenario": os.path.basename(os.path.normpath(args.out_dir)),
                "recorded_with": "examples/record/ddp_gloo_ranks.py with examples/torchmem_profile.py",
                "wrapper": "fully_shard (FSDP2)" if args.fsdp2 else "DistributedDataParallel",
                "backend": "gloo",
                "world_size": world,
                "all_ranks_on": "cuda:0 (one GPU, one process per rank)",
                "leaky_rank": args.leaky_rank if args.leaky_rank >= 0 else None,
                "leak_bytes_per_step": {str(r): BATCH * HIDDEN * 4 if r == args.leaky_rank else 0
                                        for r in range(world)},
                "leak_site": site("# LEAK SITE") if args.leaky_rank >= 0 else None,
                "schedule": {"wait": WAIT, "warmup": WARMUP, "active": ACTIVE, "steps": args.steps},
                "run_id_env": {k: os.environ.get(k) for k in ("TORCHMEM_RUN_ID",
                                                              "TORCHELASTIC_RUN_ID")},
                "ranks": gathered,
                "torch": torch.__version__,
                "gpu": torch.cuda.get_device_name(),
                "seconds": round(time.time() - started, 3),
            },
        )
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
