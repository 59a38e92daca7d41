"""A healthy training loop under PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, with a batch
size that changes every step: the allocator keeps one segment per pool and stream and grows it in
place (it maps more pages) instead of cudaMalloc-ing new segments. Nothing is kept between steps.
Not a leak, not fragmented.

    PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True python3 expandable_segments.py OUT_DIR
"""

import os
import sys
import time

# Must be set before torch initialises CUDA; the recording script sets it in the shell too.
os.environ.setdefault("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from snippet_common import finish, run_snippet, site  # noqa: E402

WIDTH, HIDDEN = 1024, 4096
BATCHES = [256, 1024, 512, 2048, 384, 1536, 768, 2048, 256, 1280, 640, 1792]
STEPS, ACTIVE = 12, 8


def main(out_dir):
    started = time.time()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(WIDTH, HIDDEN), nn.GELU(), nn.Linear(HIDDEN, HIDDEN), nn.GELU(),
                          nn.Linear(HIDDEN, WIDTH)).cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)

    def step(i):
        batch = BATCHES[i % len(BATCHES)]  # VARYING BATCH SITE
        x = torch.randn(batch, WIDTH, device="cuda")
        target = torch.randn(batch, WIDTH, device="cuda")
        loss = F.mse_loss(model(x), target)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    tm = run_snippet(out_dir, step, STEPS, ACTIVE)
    stats = torch.cuda.memory_stats()
    finish(out_dir, "expandable_segments", tm, started,
           planted="clean training under expandable_segments:True; the batch size changes every "
           "step (%s), so the segments grow in place; nothing kept" % BATCHES[:STEPS],
           leak=None, expect={"leak": False, "fragmented": False, "alloc_retries": 0},
           alloc_conf=os.environ.get("PYTORCH_CUDA_ALLOC_CONF"),
           batches=BATCHES[:STEPS], site=site("# VARYING BATCH SITE"),
           segments_at_end={"all": stats.get("segment.all.current"),
                            "small_pool": stats.get("segment.small_pool.current"),
                            "large_pool": stats.get("segment.large_pool.current")},
           num_device_alloc=stats.get("num_device_alloc"))


if __name__ == "__main__":
    main(sys.argv[1])
