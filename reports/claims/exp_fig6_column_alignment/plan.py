"""fig6's run per tier (``exp-fig6-column-alignment``; prop1's model check cites it). How the values were found:
docs/notes/presets.md."""
from __future__ import annotations

from dataclasses import replace

from bma_verify.model.train_config import TrainConfig

FIG6 = TrainConfig(d=20, H=50, L=3, K=12, batch_size=256, eval_every=100)  # K = 12: four heads per example

#: The run per tier, with seed 0, device "auto" and the mixture output rule (``reports.plans.preset_configs``).
#: quick: 600 full-size steps (fewer, or a smaller batch, left an example uncovered)
RUNS: dict[str, dict[str, TrainConfig]] = {"quick": {"fig6": replace(FIG6, steps=600, eval_contexts=512)},
                                           "full": {"fig6": replace(FIG6, steps=2048, eval_contexts=2048)}}
