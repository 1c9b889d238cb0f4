"""Probe (not part of the package): seconds a training step of each exp-robustness run costs at the fig2 setting, on
development seed 1000, from which the full tier's budget was set (docs/notes/exp-robustness.md). Times 30 steps (40
for the disentangled runs) with one final evaluation on 64 contexts; prints no loss or KL.

    PYTHONPATH=. OMP_NUM_THREADS=1 .venv/bin/python docs/probes/robustness_step_times.py 1   # torch threads
"""
from __future__ import annotations

import sys
import time
from dataclasses import replace

import torch

from bma_verify.model.gpt_training import train_gpt
from bma_verify.model.seeds import require_dev_seeds
from bma_verify.model.training import train
from bma_verify.reports.plans import preset_configs
from bma_verify.reports.claims.exp_robustness.plan import tier_grid_config

torch.set_num_threads(int(sys.argv[1]) if len(sys.argv) > 1 else 1)
SEED = require_dev_seeds([1000])[0]
for width, heads, batch in [(64, 4, 64), (128, 8, 64), (128, 4, 64), (64, 4, 256), (128, 8, 256)]:
    setting = {"width": width, "heads": heads, "lr": 1e-3, "batch_size": batch}
    config = replace(tier_grid_config("gpt-d2-absolute", setting, tier="full", seed=SEED, contexts=batch * 30),
                     eval_every=10**6, eval_contexts=64)
    start = time.perf_counter()
    train_gpt(config, quiet=True)
    print(f"GPT depth 2 width {width} heads {heads} batch {batch}: {(time.perf_counter() - start) / 30:.3f} s a step")
configs = preset_configs("robustness", tier="full", seed=SEED, device="cpu")
for label in ("absolute", "task-shaped-copy-init"):
    start = time.perf_counter()
    train(replace(configs[label], steps=40, eval_every=10**6, eval_contexts=64), quiet=True)
    print(f"{label}: {(time.perf_counter() - start) / 40:.3f} s a step")
