"""DataLoader(pin_memory=True) batches copied to the GPU every step, blocking (`.to("cuda")`)
or not (`.to("cuda", non_blocking=True)`).

    python3 pinned_copies.py OUT_DIR blocking|nonblocking
"""

import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

from snippet_common import TorchMemProfile, finish, site

BATCH, WIDTH, HIDDEN, OUT = 256, 4096, 4096, 1024
STEPS, ACTIVE = 12, 8


def main(out_dir, mode):
    started = time.time()
    torch.manual_seed(0)
    blocking = mode == "blocking"
    data = TensorDataset(torch.randn(BATCH * STEPS, WIDTH), torch.randn(BATCH * STEPS, OUT))
    loader = DataLoader(data, batch_size=BATCH, shuffle=False, num_workers=2, pin_memory=True)
    model = nn.Sequential(nn.Linear(WIDTH, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, OUT)).cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    with TorchMemProfile(out_dir=out_dir, wait=1, warmup=1, active=ACTIVE, repeat=1) as tm:
        for x, y in loader:
            if blocking:
                x, y = x.to("cuda"), y.to("cuda")  # COPY SITE blocking: the host waits for each copy
            else:
                x, y = x.to("cuda", non_blocking=True), y.to("cuda", non_blocking=True)  # COPY SITE nonblocking
            loss = F.mse_loss(model(x), y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            tm.step()
    finish(out_dir, "pinned_" + mode, tm, started,
           planted="DataLoader(pin_memory=True, num_workers=2); each batch copied with "
           + ('.to("cuda")' if blocking else '.to("cuda", non_blocking=True)'),
           leak=None, expect={"leak": False, "blocking_pinned_copies": blocking},
           copies_per_step={"count": 2, "bytes": [BATCH * WIDTH * 4, BATCH * OUT * 4],
                            "memcpy": "Memcpy HtoD (Pinned -> Device)", "blocking": blocking,
                            "site": site("# COPY SITE " + mode)})


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
