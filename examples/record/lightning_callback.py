"""Lightning with the snippet's TorchMemLightningCallback: a small MLP LightningModule whose
training_step keeps each batch's 2 MiB hidden activation in a list.

    python3 lightning_callback.py OUT_DIR
"""

import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

from snippet_common import finish, site
from torchmem_profile import TorchMemLightningCallback

try:
    import lightning as L
except ImportError:
    import pytorch_lightning as L

BATCH, WIDTH, HIDDEN, STEPS, ACTIVE = 128, 1024, 4096, 12, 6


class Model(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(WIDTH, HIDDEN)
        self.fc2 = nn.Linear(HIDDEN, WIDTH)
        self.kept = []

    def training_step(self, batch, batch_idx):
        x, y = batch
        h = self.fc1(x)
        self.kept.append(h.detach().clone())  # LEAK SITE: 128x4096 fp32 = 2 MiB per step
        return F.mse_loss(self.fc2(torch.relu(h)), y)

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=1e-3)


def main(out_dir):
    started = time.time()
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(BATCH * STEPS, WIDTH), torch.randn(BATCH * STEPS, WIDTH))
    callback = TorchMemLightningCallback(out_dir=out_dir, wait=1, warmup=1, active=ACTIVE)
    trainer = L.Trainer(max_steps=STEPS, accelerator="gpu", devices=1, logger=False,
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                        callbacks=[callback])
    trainer.fit(Model(), DataLoader(data, batch_size=BATCH))

    class Done:
        pass

    done = Done()
    done.wait, done.warmup, done.active, done.repeat, done.skip_first = 1, 1, ACTIVE, 1, 0
    done.step_num = STEPS
    done.written = sorted(os.path.join(out_dir, n) for n in os.listdir(out_dir))
    finish(out_dir, "lightning_leak", done, started,
           planted="training_step appends h.detach().clone() (2 MiB) every batch",
           leak={"kind": "container", "bytes_per_step": BATCH * HIDDEN * 4, "first_leaking_step": 0,
                 "op": "aten::clone", "site": site("# LEAK SITE")},
           expect={"leak": True}, lightning=L.__version__)


if __name__ == "__main__":
    main(sys.argv[1])
