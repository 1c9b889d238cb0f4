"""fig5's runs per tier (``exp-fig5-generalization``): reading R1 at every training L, and at the full tier reading R2.
How the values were found: docs/notes/exp-fig5-generalization.md."""
from __future__ import annotations

from bma_verify.model.presets import FIG5_R2_PREFIX
from bma_verify.model.train_config import StructuredOptions, TrainConfig

#: fig5's training and test context sizes (paper: d=10, H=15, train L in {1, 2, 5, 10, 20}, test L' in 1..30).
FIG5_TRAIN_L = (1, 2, 5, 10, 20)
FIG5_TEST_L = tuple(range(1, 31))
#: Three training L at the quick tier: over two, Spearman ρ (smaller L generalizes better?) is ±1 whatever the
#: runs do.
FIG5_QUICK_TRAIN_L = (1, 3, 5)
FIG5_QUICK_TEST_L = (1, 2, 5, 10, 20)


def fig5_heads(L: int) -> int:
    """Copier heads for training L in fig5: two per example plus four spares (fig2's 24 heads at L = 10); with
    fewer an example was left uncovered."""
    return 2 * L + 4


def fig5_runs(train_L: tuple[int, ...], test_L: tuple[int, ...], *, full: bool) -> dict[str, TrainConfig]:
    """fig5's runs (d = 10, H = 15): reading R1 at every training L (K = 2L + 4 heads, example offsets beyond L
    share w_L[L]); at the full tier also reading R2 (one head budget, an offset table covering every test L')."""
    sizes = dict(d=10, H=15, eval_every=100, test_L=test_L)
    if not full:  # 1000 steps: every run plateaued on development seeds 1000-1002 (at 600, L = 5 had not on
        # 768186251683195741); evaluated every 50, so the plateau window (last 20%, at least 5 evaluations) is 800-1000
        return {f"L{L}": TrainConfig(L=L, K=fig5_heads(L), steps=1000, batch_size=128, eval_contexts=512,
                                     **(sizes | {"eval_every": 50})) for L in train_L}
    recipe = dict(w_L_delay=100, selector_weight_decay=0.1)  # fig2's recipe, its weight average below
    full_sizes = dict(sizes, batch_size=256, eval_contexts=2048, ema=0.99)
    steps = {L: 4000 if L >= 10 else 2000 for L in train_L}  # L >= 10 was still far from BMA at 2000
    runs = {f"L{L}": TrainConfig(L=L, K=fig5_heads(L), steps=steps[L], model=StructuredOptions(**recipe),
                                 **full_sizes) for L in train_L}
    # R2: W_KQ at 0.1x the learning rate, as 44 heads summing copies of few examples saturate the selector at 0.3x;
    # L = 20 trains 6000 steps (it was still 0.058 above BMA's L_pa at 4000)
    r2 = StructuredOptions(offset_range=max(test_L), selector_lr_scale=0.1, **recipe)
    runs.update({f"{FIG5_R2_PREFIX}L{L}": TrainConfig(L=L, K=fig5_heads(max(train_L)), model=r2,
                                                      steps=6000 if L >= 20 else steps[L], **full_sizes)
                 for L in train_L})
    return runs


#: The runs per tier, with seed 0, device "auto" and the mixture output rule (``reports.plans.preset_configs``).
RUNS: dict[str, dict[str, TrainConfig]] = {"quick": fig5_runs(FIG5_QUICK_TRAIN_L, FIG5_QUICK_TEST_L, full=False),
                                           "full": fig5_runs(FIG5_TRAIN_L, FIG5_TEST_L, full=True)}
