"""exp-fig2-attention on stand-in runs: the Theorem 1 construction is a converged run (it is BMA, its held-out
curve flat), an untrained model one still improving, and the construction with its selector frozen at another
kernel a converged run that cannot represent BMA. The check must pass the first, reject its control (BMA reading
half the examples), never pass the second and fail the third.

Reference: ``numerics`` BMA on the same contexts (an independent NumPy implementation of the posterior).
"""
from __future__ import annotations

import pytest

import bma_verify.reports.claims.exp_fig2_attention as fig2
from bma_verify import numerics
from bma_verify.model.training import eval_batch
from bma_verify.reports.checks.trained import THRESHOLDS
from bma_verify.reports.core import NOT_CONVERGED, NOT_DISCRIMINATING, CheckContext, settle
from tests.trained_stand_ins import patch_runs, stand_in_run, with_curve


@pytest.fixture(scope="module")
def converged_fig2():
    return {"fig2": stand_in_run(L=5, test_L=(1, 2, 5), construction=True)}


@pytest.fixture(scope="module")
def untrained_fig2():
    return {"fig2": stand_in_run(L=5, test_L=(1, 2, 5))}


def test_fig2_passes_a_converged_run_and_rejects_its_control(converged_fig2, monkeypatch):
    # reference: the construction is BMA (L_pa gap 0); BMA reading half the examples must be rejected by the same rule
    patch_runs(monkeypatch, {"fig2": converged_fig2})
    outcome = fig2.exp_fig2_attention(CheckContext(tier="quick", seed=0))
    assert outcome.converged["plateaued"] is True and outcome.converged["window"]["points"] == 5
    assert outcome.verdict == "pass", outcome.summary
    assert outcome.control.rejected, outcome.control
    assert settle(outcome) == ("pass", "")


def test_fig2_control_is_bma_reading_half_the_examples(converged_fig2, monkeypatch):
    # reference: numerics.parent_posterior on the last ceil(5/2) = 3 examples of the same held-out contexts
    patch_runs(monkeypatch, {"fig2": converged_fig2})
    outcome = fig2.exp_fig2_attention(CheckContext(tier="quick", seed=0))
    run = converged_fig2["fig2"]
    batch = eval_batch(run.config, run.kernel, 5)
    half = numerics.parent_posterior(run.kernel, batch.context[:, 2:])
    assert outcome.control.measured["examples"] == 3
    assert outcome.control.measured["parent_accuracy"] == pytest.approx(numerics.parent_accuracy(half, batch.parents))
    assert outcome.control.measured["parent_loss_gap"] > THRESHOLDS["quick"]["parent_loss_gap"]


def test_fig2_whose_control_is_accepted_is_not_discriminating(converged_fig2, monkeypatch):
    # a rule that accepts everything accepts the control too: the pass must be withheld
    patch_runs(monkeypatch, {"fig2": converged_fig2})
    monkeypatch.setattr(fig2, "combine_sides", lambda sides: "pass")
    outcome = fig2.exp_fig2_attention(CheckContext(tier="quick", seed=0))
    assert outcome.verdict == "pass" and not outcome.control.rejected
    verdict, reason = settle(outcome)
    assert verdict == "inconclusive" and NOT_DISCRIMINATING in reason


def test_fig2_never_passes_a_run_that_has_not_converged(untrained_fig2, converged_fig2, monkeypatch):
    # an untrained model whose held-out curve still falls: L_pa far above BMA's, but not evidence against the paper
    patch_runs(monkeypatch, {"fig2": untrained_fig2})
    outcome = fig2.exp_fig2_attention(CheckContext(tier="quick", seed=0))
    assert outcome.converged["plateaued"] is False and settle(outcome)[0] != "pass"
    assert outcome.verdict == "inconclusive" and outcome.reason.startswith("not converged: held-out loss still")
    # the construction's parameters on a curve still falling: even a rule that accepts everything cannot pass it
    falling = with_curve(converged_fig2["fig2"], "falling")
    patch_runs(monkeypatch, {"fig2": {"fig2": falling}})
    monkeypatch.setattr(fig2, "combine_sides", lambda sides: "pass")
    outcome = fig2.exp_fig2_attention(CheckContext(tier="quick", seed=0))
    assert outcome.converged["plateaued"] is False and settle(outcome) == ("inconclusive", NOT_CONVERGED)


@pytest.mark.parametrize("stand_in", [dict(construction=True, wrong_selector=True), dict(curve="flat")])
def test_fig2_fails_a_converged_run_that_cannot_represent_bma(stand_in, monkeypatch):
    # reference: a plateaued curve, and a selector frozen at another kernel's log π (or no training at all):
    # L_pa far above BMA's, so the claim is NOT REPRODUCED, not inconclusive
    run = stand_in_run(L=5, test_L=(1, 2, 5), **stand_in)
    patch_runs(monkeypatch, {"fig2": {"fig2": run}})
    outcome = fig2.exp_fig2_attention(CheckContext(tier="quick", seed=0))
    assert outcome.converged["plateaued"] is True
    assert run.metrics["parent_loss_gap"] > 2 * THRESHOLDS["quick"]["parent_loss_gap"]
    assert outcome.verdict == "fail" and settle(outcome) == ("fail", "")
