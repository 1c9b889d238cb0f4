"""The model checks of the report: verdicts on the construction and Theorem 3, planted bugs they must catch, and a
short seeded training run that moves toward BMA (slow).

References: ``numerics`` BMA on the same contexts (an independent NumPy implementation of the posterior).
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

import model.analysis
import reports.checks.model as checks
from model.analysis import chance_parent_accuracy
from model.construction import bma_construction
from model.training import TrainConfig, train
from reports.core import CheckContext



@pytest.mark.parametrize("name", ["bma_score_identity", "thm1_construction", "thm1_construction_curves",
                                  "thm3_init_gradient"])
def test_construction_and_gradient_checks_pass(name, tmp_path):
    outcome = getattr(checks, name)(CheckContext(tier="quick", seed=0, figures_dir=tmp_path))
    assert outcome.verdict == "pass", outcome.summary
    for figure in outcome.figures:
        assert (tmp_path / figure).stat().st_size < 300_000


def _transposed_construction(kernel, L, beta, output="mixture", **kw):
    """Planted bug: W_KQ = (log π)ᵀ per block, i.e. the likelihood read child → parent."""
    built = bma_construction(kernel, L, beta, output, **kw)
    with torch.no_grad():
        d = built.d
        for k in range(L):
            block = built.W_KQ[k * d:(k + 1) * d, k * d:(k + 1) * d]
            block.copy_(block.T.clone())
    return built


def test_construction_checks_catch_a_transposed_selector(monkeypatch):
    monkeypatch.setattr(model.analysis, "bma_construction", _transposed_construction)
    ctx = CheckContext(tier="quick", seed=0)
    assert checks.bma_score_identity(ctx).verdict == "fail"
    outcome = checks.thm1_construction(ctx)
    assert outcome.verdict == "fail" and outcome.instance is not None


def test_two_runs_of_a_check_agree():
    a = checks.thm1_construction_curves(CheckContext(tier="quick", seed=3))
    b = checks.thm1_construction_curves(CheckContext(tier="quick", seed=3))
    assert a.measured == b.measured


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
