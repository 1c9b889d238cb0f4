"""model.analysis and training against BMA: the construction's rate fit, fig5's selector-only reading R3, and a
short seeded training run that moves toward BMA (slow).

References: ``numerics`` BMA on the same contexts (an independent NumPy implementation of the posterior).
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import bma_verify.model.analysis as analysis_module
from bma_verify import numerics
from bma_verify.model.analysis import chance_parent_accuracy
from bma_verify.model.training import TrainConfig, train

# ---------------------------------------------------------------------------------------------------------------
# The construction's error rate

def test_the_rate_fit_ignores_errors_at_rounding_level():
    # reference: a pure e^{−x} curve with rounding-level values appended; only points in (1e-10, 1e-2] count
    x = np.arange(1.0, 41.0)
    errors = np.exp(-x)
    errors[errors < 1e-14] = 1e-15 * (1 + (x[errors < 1e-14] % 3))  # rounding noise, not e^{−x}
    fit = analysis_module.exponential_rate(x, errors)
    assert fit["rate"] == pytest.approx(1.0, abs=1e-12)
    assert all(1e-10 < math.exp(-b) <= 1e-2 for b in fit["x_fitted"])


# ---------------------------------------------------------------------------------------------------------------
# fig5

def test_fig5_reading_r3_is_bma_for_log_pi_and_its_column_shifts():
    # Reference: numerics.parent_posterior (BMA). R3 applies W_tf to exact copies, so W_tf = log π, or log π + 1aᵀ
    # (Prop. 1), gives BMA's L_pa at every L'; a row shift does not.
    rng = np.random.default_rng(0)
    kernel = numerics.random_kernel(4, eps=0.02, rng=rng)
    for L in (1, 3, 8):
        batch = numerics.sample_task(kernel, 50, L, 6, rng=rng)
        for W in (np.log(kernel), np.log(kernel) + rng.normal(size=4)[None, :]):
            assert abs(analysis_module.selector_only_parent_loss(W, kernel, batch)["parent_loss_gap"]) < 1e-12
        shifted = np.log(kernel) + rng.normal(size=4)[:, None]
        assert analysis_module.selector_only_parent_loss(shifted, kernel, batch)["parent_loss_gap"] > 1e-3


@pytest.mark.slow
def test_short_seeded_training_lowers_the_loss_toward_bma():
    # BMA loss from numerics on the same held-out contexts is the floor; the gap must shrink severalfold and the
    # attention must beat chance parent selection clearly
    config = TrainConfig(d=4, H=6, L=4, K=8, steps=300, batch_size=64, eval_every=50, eval_contexts=512, seed=1)
    metrics = train(config).metrics
    gaps = np.asarray(metrics["curves"]["query_loss"]) - metrics["bma_loss"]
    assert gaps[-1] < gaps[0] / 3, gaps
    assert gaps[-1] < 0.05
    assert metrics["parent_accuracy"] > chance_parent_accuracy(6) + 0.2
    assert metrics["query_loss"] >= metrics["bma_loss"] - 0.02  # nobody beats BMA beyond sampling noise

