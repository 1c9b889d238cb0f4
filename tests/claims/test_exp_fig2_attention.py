"""exp-fig2-attention on stand-in runs: the Theorem 1 construction is a converged run (it is BMA, its held-out
curve flat), an untrained model one still improving, and the construction with its selector frozen at another
kernel a converged run that cannot represent BMA. The check must pass the first, reject its near-miss control (BMA
reading L − 1 of the L examples), never pass the second and fail the third; over seeds, the count rule decides.

Reference: ``numerics`` BMA on the same contexts (an independent NumPy implementation of the posterior).
"""
from __future__ import annotations

import pytest

import bma_verify.reports.claims.exp_fig2_attention.claim as fig2
from bma_verify import numerics
from bma_verify.model.training import eval_batch
from bma_verify.reports.checks.trained import THRESHOLDS
from bma_verify.reports.core import NOT_DISCRIMINATING, CheckContext, settle
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
    assert outcome.converged["plateaued"] is True and outcome.converged["seeds"][0]["window"]["points"] == 5
    assert outcome.verdict == "pass", outcome.summary
    assert outcome.seeds["n"] == 3 and outcome.seeds["counts"]["meet"] == 3
    assert outcome.control.rejected, outcome.control
    assert settle(outcome) == ("pass", "")


def test_fig2_control_is_bma_reading_one_example_fewer(converged_fig2, monkeypatch):
    # reference: numerics.parent_posterior on the last 4 of the 5 examples of the same held-out contexts
    patch_runs(monkeypatch, {"fig2": converged_fig2})
    outcome = fig2.exp_fig2_attention(CheckContext(tier="quick", seed=0))
    run = converged_fig2["fig2"]
    batch = eval_batch(run.config, run.kernel, 5)
    near = numerics.parent_posterior(run.kernel, batch.context[:, 1:])
    assert outcome.control.measured["examples"] == 4
    assert outcome.control.measured["parent_accuracy"] == pytest.approx(numerics.parent_accuracy(near, batch.parents))
    assert outcome.control.measured["parent_loss_gap"] > THRESHOLDS["quick"]["parent_loss_gap"]
    assert outcome.control.rejected


def test_fig2_power_curve_rejects_fewer_examples_and_accepts_bma(converged_fig2, monkeypatch):
    # the rule over m = 1 .. L examples read: BMA itself (m = L) passes, every m < L is rejected, and the L_pa gap
    # falls as m grows (reference: more evidence never raises BMA's expected parent loss)
    patch_runs(monkeypatch, {"fig2": converged_fig2})
    power = fig2.exp_fig2_attention(CheckContext(tier="quick", seed=0)).control.power
    assert [p["x"] for p in power] == [1, 2, 3, 4, 5]
    assert [p["rejected"] for p in power] == [True, True, True, True, False]
    assert power[-1]["value"] == pytest.approx(0.0, abs=1e-12)
    assert all(a["value"] > b["value"] for a, b in zip(power, power[1:]))


def test_fig2_count_rule_over_seeds(converged_fig2, monkeypatch):
    # two seeds reproduce, one converges to a selector frozen at another kernel (its continuation, a stand-in, does
    # not move it: a confirmed miss): 2 of 3 is short of the count rule (3 of 3), and 1 miss is short of failing it,
    # so the check is inconclusive with the counts as its reason
    wrong = {"fig2": stand_in_run(L=5, test_L=(1, 2, 5), construction=True, wrong_selector=True)}
    patch_runs(monkeypatch, {"fig2": [converged_fig2, wrong, converged_fig2]})
    outcome = fig2.exp_fig2_attention(CheckContext(tier="quick", seed=0))
    assert outcome.seeds["counts"] == {"meet": 2, "miss": 1, "unconfirmed_miss": 0, "still_learning": 0,
                                       "undecided": 0, "not_converged": 0}
    assert [c and c["confirmed"] for c in outcome.converged["continuations"]] == [None, True, None]
    assert outcome.verdict == "inconclusive" and outcome.reason.startswith("count rule undecided: 2 of 3 seeds meet")
    gaps = outcome.seeds["metrics"]["parent_loss_gap"]
    assert gaps["max"] == pytest.approx(wrong["fig2"].metrics["parent_loss_gap"])
    assert gaps["median"] == pytest.approx(converged_fig2["fig2"].metrics["parent_loss_gap"])


def test_fig2_a_miss_whose_continuation_reaches_bma_was_still_learning(converged_fig2, monkeypatch):
    # reference: the miss rule by hand: three converged misses whose continuations (stand-ins) reach BMA moved all
    # the way to the threshold, so each seed was still learning: not converged, and the claim is not failed
    wrong = {"fig2": stand_in_run(L=5, test_L=(1, 2, 5), construction=True, wrong_selector=True)}
    patch_runs(monkeypatch, {"fig2": [wrong] * 3}, continued=lambda run: converged_fig2["fig2"])
    outcome = fig2.exp_fig2_attention(CheckContext(tier="quick", seed=0))
    assert outcome.seeds["counts"]["still_learning"] == 3 and outcome.verdict == "inconclusive"
    record = outcome.converged["continuations"][0]
    assert record["status_after"] == "pass" and record["values"]["parent_loss_gap"]["moved_fraction"] > 1


def test_fig2_whose_control_is_accepted_is_not_discriminating(converged_fig2, monkeypatch):
    # a rule that accepts everything accepts the control too: the pass must be withheld
    patch_runs(monkeypatch, {"fig2": converged_fig2})
    monkeypatch.setattr(fig2, "fig2_sides", lambda ctx, metrics: {"gap_to_bma": "pass"})
    outcome = fig2.exp_fig2_attention(CheckContext(tier="quick", seed=0))
    assert outcome.verdict == "pass" and not outcome.control.rejected
    verdict, reason = settle(outcome)
    assert verdict == "inconclusive" and NOT_DISCRIMINATING in reason


def test_fig2_never_passes_a_run_that_has_not_converged(untrained_fig2, converged_fig2, monkeypatch):
    # an untrained model whose held-out curve still falls: L_pa far above BMA's, but not evidence against the paper
    patch_runs(monkeypatch, {"fig2": untrained_fig2})
    outcome = fig2.exp_fig2_attention(CheckContext(tier="quick", seed=0))
    assert outcome.converged["plateaued"] is False and settle(outcome)[0] != "pass"
    assert outcome.verdict == "inconclusive" and outcome.reason.endswith("3 not converged (needs 3 of 3)")
    # the construction's parameters on a curve still falling: even a rule that accepts everything cannot pass it
    falling = with_curve(converged_fig2["fig2"], "falling")
    patch_runs(monkeypatch, {"fig2": {"fig2": falling}})
    monkeypatch.setattr(fig2, "combine_sides", lambda sides: "pass")
    outcome = fig2.exp_fig2_attention(CheckContext(tier="quick", seed=0))
    assert outcome.converged["plateaued"] is False and settle(outcome)[0] == "inconclusive"
    assert "3 not converged" in settle(outcome)[1]


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
