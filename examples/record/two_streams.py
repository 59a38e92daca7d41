"""A healthy loop on two CUDA streams: a side stream prepares the next batch (random input,
normalisation, a noise tensor of its own) while the default stream trains on the current one;
the default stream waits on the side stream and the batch is handed over with record_stream.
The caching allocator keeps separate blocks per stream, so each stream has its own segments.
Nothing is kept between steps. Not a leak, not fragmented.

    python3 two_streams.py OUT_DIR
"""

import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from snippet_common import finish, run_snippet, site

BATCH, WIDTH, HIDDEN = 512, 1024, 4096
STEPS, ACTIVE = 12, 8


def main(out_dir):
    started = time.time()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(WIDTH, HIDDEN), nn.GELU(), nn.Linear(HIDDEN, WIDTH)).cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    side = torch.cuda.Stream()
    main_stream = torch.cuda.current_stream()

    def prepare():
        side.wait_stream(main_stream)
        with torch.cuda.stream(side):  # SIDE STREAM SITE
            raw = torch.randn(BATCH, WIDTH, device="cuda")
            noise = torch.randn(BATCH, 4 * WIDTH, device="cuda")  # side-stream-only scratch
            x = (raw - raw.mean(dim=1, keepdim=True)) / (raw.std(dim=1, keepdim=True) + 1e-5)
            x = x + 0.01 * noise[:, :WIDTH]
            target = torch.randn(BATCH, WIDTH, device="cuda")
        return x, target

    batch = {"next": prepare()}

    def step(i):
        main_stream.wait_stream(side)
        x, target = batch["next"]
        x.record_stream(main_stream)
        target.record_stream(main_stream)
        batch["next"] = prepare()  # the side stream works on the next batch meanwhile
        loss = F.mse_loss(model(x), target)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    tm = run_snippet(out_dir, step, STEPS, ACTIVE)
    batch.clear()
    torch.cuda.synchronize()
    finish(out_dir, "two_streams", tm, started,
           planted="clean training on the default stream; a side stream (torch.cuda.Stream) makes "
           "the next batch each step (randn, normalise, a 8 MiB noise scratch), handed over with "
           "wait_stream + record_stream; nothing kept",
           leak=None, expect={"leak": False, "fragmented": False, "alloc_retries": 0},
           streams={"default": main_stream.cuda_stream, "side": side.cuda_stream},
           site=site("# SIDE STREAM SITE"))


if __name__ == "__main__":
    main(sys.argv[1])
