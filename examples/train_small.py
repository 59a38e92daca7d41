"""A tiny training loop that uses torchmem_profile.py exactly as a user would.

    python train_small.py --out torchmem_out                    # one GPU (or the CPU)
    torchrun --nproc_per_node=2 train_small.py --ddp --out dir  # DDP, one file set per rank
    TORCHMEM=0 python train_small.py                            # profiling off: writes nothing
    python train_small.py --oom-at 8                            # a real OOM escapes the loop

It proves the snippet: the files it writes are what torchmem reads (testdata/gpu/snippet_proof).
"""

import argparse
import os

import torch
import torch.nn as nn

from torchmem_profile import TorchMemProfile


class MLP(nn.Module):
    def __init__(self, width=1024, hidden=4096):
        super().__init__()
        self.fc1 = nn.Linear(width, hidden)
        self.fc2 = nn.Linear(hidden, width)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None, help="output directory (TORCHMEM_DIR wins)")
    parser.add_argument("--steps", type=int, default=14)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--ddp", action="store_true", help="wrap the model in DDP (torchrun)")
    parser.add_argument("--oom-at", type=int, default=-1, help="ask for 300 GiB at this step")
    parser.add_argument("--repeat", type=int, default=2, help="profiler cycles")
    args = parser.parse_args()

    device = torch.device("cpu")
    if args.ddp:
        import torch.distributed as dist

        backend = "nccl" if torch.cuda.is_available() else "gloo"
        dist.init_process_group(backend)
    if torch.cuda.is_available():
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
        torch.cuda.set_device(device)

    torch.manual_seed(0)
    model = MLP().to(device)
    if args.ddp:
        from torch.nn.parallel import DistributedDataParallel

        model = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

    # wait=1, warmup=1, active=3, repeat=2: two traces, at steps 5 and 10.
    with TorchMemProfile(out_dir=args.out, wait=1, warmup=1, active=3, repeat=args.repeat) as tm:
        for step in range(args.steps):
            x = torch.randn(args.batch, 1024, device=device)
            target = torch.randn(args.batch, 1024, device=device)
            loss = nn.functional.mse_loss(model(x), target)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            if step == args.oom_at:
                # 300 GiB is more than any GPU has: a real torch.OutOfMemoryError escapes.
                torch.empty(300 * 2**30, dtype=torch.uint8, device=device)
            tm.step()
    print("train_small: done, %d steps, loss %.4f, files: %s" % (args.steps, loss.item(), tm.written))
    if args.ddp:
        import torch.distributed as dist

        dist.destroy_process_group()


if __name__ == "__main__":
    main()
