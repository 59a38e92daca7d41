"""transformers.Trainer with the snippet's TorchMemCallback: a tiny GPT-2 built from a config
(no download), bf16, gradient accumulation 2, 24 optimizer steps. Variant "leak" overrides
compute_loss and keeps every micro-batch's logits in a list; "clean" does not ("oom": below).

    python3 hf_trainer.py OUT_DIR leak|clean|oom
"""

import os
import sys
import tempfile
import time

import torch
from torch.utils.data import Dataset

from snippet_common import finish, site
from torchmem_profile import TorchMemCallback

from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

VOCAB, SEQ, BATCH, ACCUM, STEPS = 4096, 128, 8, 2, 24
ACTIVE = 6


class RandomTokens(Dataset):
    def __len__(self):
        return 100000

    def __getitem__(self, index):
        g = torch.Generator().manual_seed(index)
        ids = torch.randint(0, VOCAB, (SEQ,), generator=g)
        return {"input_ids": ids, "labels": ids.clone()}


class LeakyTrainer(Trainer):
    kept = []

    def compute_loss(self, model, inputs, return_outputs=False, **kwargs):
        loss, outputs = super().compute_loss(model, inputs, return_outputs=True, **kwargs)  # CALL SITE
        self.kept.append(outputs.logits.detach())  # LEAK SITE: each micro-batch's logits
        return (loss, outputs) if return_outputs else loss


class OOMTrainer(Trainer):
    """Variant "oom": 300 GiB asked for at optimizer step 5, so a torch.OutOfMemoryError ends
    trainer.train() and the callback writes its files at interpreter exit."""

    def compute_loss(self, model, inputs, return_outputs=False, **kwargs):
        if self.state.global_step == 5:
            torch.empty(300 << 30, dtype=torch.uint8, device="cuda")  # OOM SITE
        return super().compute_loss(model, inputs, return_outputs=return_outputs, **kwargs)


def main(out_dir, variant):
    started = time.time()
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=VOCAB, n_positions=SEQ, n_embd=256, n_layer=2, n_head=4, use_cache=False)
    model = GPT2LMHeadModel(config)
    args = TrainingArguments(
        output_dir=tempfile.mkdtemp(prefix="hf_trainer_"),
        per_device_train_batch_size=BATCH,
        gradient_accumulation_steps=ACCUM,
        max_steps=STEPS,
        learning_rate=1e-4,
        bf16=True,
        logging_steps=8,
        save_strategy="no",
        report_to="none",
        dataloader_num_workers=0,
        disable_tqdm=True,
        seed=0,
    )
    callback = TorchMemCallback(out_dir=out_dir, wait=1, warmup=1, active=ACTIVE)
    trainer_class = {"leak": LeakyTrainer, "oom": OOMTrainer}.get(variant, Trainer)
    trainer = trainer_class(model=model, args=args, train_dataset=RandomTokens(), callbacks=[callback])

    class Done:  # what finish() reads from a TorchMemProfile
        pass

    def files_written(steps):
        done = Done()
        done.wait, done.warmup, done.active, done.repeat, done.skip_first = 1, 1, ACTIVE, 1, 0
        done.step_num = steps
        done.written = sorted(os.path.join(out_dir, n) for n in os.listdir(out_dir))
        return done

    if variant == "oom":
        import atexit

        # The OOM ends the script; this runs at exit after the callback (registered later) wrote.
        atexit.register(lambda: finish(
            out_dir, "hf_trainer_oom", files_written(5), started,
            planted="compute_loss asks for 300 GiB at optimizer step 5: torch.OutOfMemoryError ends "
            "trainer.train(); TorchMemCallback's atexit hook writes its files",
            leak=None, expect={"leak": False, "oom": True},
            oom={"bytes": 300 << 30, "at_optimizer_step": 5, "site": oom_site}))
        oom_site = site("# OOM SITE")
    trainer.train()
    done = files_written(STEPS)
    leak = None
    if variant == "leak":
        # outputs.logits is GPT-2's fp32 copy (aten::to, logits.float()), not the bf16 lm_head output:
        # measure what was kept instead of guessing the dtype.
        kept = LeakyTrainer.kept
        per_micro = kept[0].numel() * kept[0].element_size()
        leak = {"kind": "container", "bytes_per_step": ACCUM * per_micro, "op": "aten::to",
                "bytes_note": "%d micro-batches per optimizer step x %s %s logits" % (
                    ACCUM, "x".join(map(str, kept[0].shape)), kept[0].dtype),
                "first_leaking_step": 0, "site": site("# LEAK SITE"), "call_site": site("# CALL SITE"),
                "alloc": "GPT2LMHeadModel.forward (transformers/models/gpt2/modeling_gpt2.py)"}
    finish(out_dir, "hf_trainer_" + variant, done, started,
           planted=("compute_loss override appends outputs.logits.detach() every micro-batch"
                    if variant == "leak" else "plain Trainer, nothing kept"),
           leak=leak, expect={"leak": variant == "leak",
                              "trainer_nan_inf_filter_sync": "logging_nan_inf_filter=True (default)"},
           trainer={"transformers": __import__("transformers").__version__, "model": "GPT2LMHeadModel "
                    "n_layer=2 n_embd=256 n_head=4 vocab 4096 seq 128", "per_device_train_batch_size": BATCH,
                    "gradient_accumulation_steps": ACCUM, "max_steps": STEPS, "bf16": True,
                    "callback": "TorchMemCallback(out_dir, wait=1, warmup=1, active=6): one step() per "
                    "optimizer step"})


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
