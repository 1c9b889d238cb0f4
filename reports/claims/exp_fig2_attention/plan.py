"""fig2's runs per tier (``exp-fig2-attention``; fig3 and thm2's model check decide on the same runs, and fig3's
plan is this one). How the values were found (runs tried, numbers on seeds): docs/notes/presets.md."""
from __future__ import annotations

from dataclasses import replace

from bma_verify.model.train_config import StructuredOptions, TrainConfig

#: fig2's recipe, which keeps every example covered on the seeds measured: K = 32 heads, w_L held for the first
#: 100 steps while the rest learns, W_KQ weight decay 0.1, and a 0.99 moving average of the weights evaluated.
FIG2_RECIPE = dict(K=32, ema=0.99, model=StructuredOptions(w_L_delay=100, selector_weight_decay=0.1))
FIG2 = TrainConfig(d=5, H=10, L=10, batch_size=256, eval_every=100, test_L=(1, 2, 5, 10), **FIG2_RECIPE)

#: The runs per tier, with seed 0, device "auto" and the mixture output rule (``reports.plans.preset_configs`` sets
#: those). quick: 1500 steps, where development seed 1002 had not plateaued at 1000 (docs/notes/presets.md)
RUNS: dict[str, dict[str, TrainConfig]] = {"quick": {"fig2": replace(FIG2, steps=1500, eval_contexts=1024)},
                                           "full": {"fig2": replace(FIG2, steps=2000, eval_contexts=4096)}}
