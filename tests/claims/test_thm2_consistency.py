"""thm2-consistency: a planted wrong bound in the symbolic check, the Monte Carlo check (error rate against L
beside the Hoeffding bound) and the model check (a trained run's parent accuracy against L', on stand-in runs),
their controls and what settle makes of an accepted control."""
from __future__ import annotations

import dataclasses

import pytest
import sympy as sp

import bma_verify.reports.claims.thm2_consistency as claim
from bma_verify.model.training import TrainRun
from bma_verify.numerics.consistency_rates import hoeffding_bound
from bma_verify.reports.core import NOT_CONVERGED, NOT_DISCRIMINATING, CheckContext, settle
from bma_verify.theory.consistency import EPS, GAP, L_SYM
from tests.trained_stand_ins import patch_runs, stand_in_run


def test_planted_wrong_bound_makes_the_symbolic_check_fail_with_instance(monkeypatch):
    # A bound with 4 in place of 2 in the denominator: the verifier must reject it and the check must say so.
    wrong = sp.exp(-L_SYM * GAP**2 / (4 * sp.log(EPS) ** 2))
    real = claim.SYMBOLIC.verify

    def planted(rng, perturbation=None, **kw):  # the control keeps its own perturbation
        return real(rng, perturbation=perturbation or (lambda results: {"bound": wrong}), **kw)

    monkeypatch.setattr(claim, "SYMBOLIC", dataclasses.replace(claim.SYMBOLIC, verify=planted))
    outcome = claim.symbolic_check(CheckContext(tier="quick", seed=0))
    assert outcome.verdict == "fail"
    assert "bound_vs_numeric_chernoff" in outcome.instance["errors_over_tolerance"]
    assert outcome.instance["claim"] == "thm2-consistency"


@pytest.mark.slow
def test_monte_carlo_control_is_visibly_violated_and_the_real_bound_is_not_within_noise(tmp_path):
    # the Hoeffding exponent ×4 is violated with whole Wilson intervals above it (not merely straddled), and the
    # real bound clears every judged interval by more than one half-width
    outcome = claim.monte_carlo_check(CheckContext(tier="quick", seed=0, figures_dir=tmp_path))
    assert outcome.control.rejected and settle(outcome) == ("pass", "")
    assert outcome.control.measured["flip"]["cells_violated"] > 0
    assert outcome.control.measured["flip"]["low"] > outcome.control.measured["flip"]["bound_x4"]
    assert min(outcome.measured[n]["min_slack_in_half_widths"] for n in ("random", "flip")) > 1


def test_monte_carlo_check_whose_x4_bound_is_the_real_one_is_not_discriminating(monkeypatch, tmp_path):
    monkeypatch.setitem(claim.THM2_BLOCKS, "quick", 6)
    monkeypatch.setattr(claim, "hoeffding_bound", lambda L, gap, eps, exponent_factor=1.0:
                        hoeffding_bound(L, gap, eps))
    outcome = claim.monte_carlo_check(CheckContext(tier="quick", seed=0, figures_dir=tmp_path))
    assert outcome.verdict == "pass" and not outcome.control.rejected
    verdict, reason = settle(outcome)
    assert verdict == "inconclusive" and NOT_DISCRIMINATING in reason


@pytest.fixture(scope="module")
def converged_fig2():
    return {"fig2": stand_in_run(L=5, test_L=(1, 2, 5), construction=True)}


@pytest.fixture(scope="module")
def untrained_fig2():
    return {"fig2": stand_in_run(L=5, test_L=(1, 2, 5))}


def test_model_check_passes_a_converged_run_and_rejects_its_control(converged_fig2, monkeypatch):
    # reference: the construction is BMA (L_pa gap 0); the control (BMA reading half the examples) must be
    # rejected by the same rule
    patch_runs(monkeypatch, {"fig2": converged_fig2})
    outcome = claim.model_check(CheckContext(tier="quick", seed=0))
    assert outcome.converged is True
    assert outcome.verdict == "pass", outcome.summary
    assert outcome.control.rejected, outcome.control
    assert settle(outcome) == ("pass", "")


def test_model_check_whose_control_is_accepted_is_not_discriminating(converged_fig2, monkeypatch):
    # a rule that accepts everything accepts the control too: the pass must be withheld
    patch_runs(monkeypatch, {"fig2": converged_fig2})
    monkeypatch.setattr(claim, "combine_sides", lambda sides: "pass")
    outcome = claim.model_check(CheckContext(tier="quick", seed=0))
    assert outcome.verdict == "pass" and not outcome.control.rejected
    verdict, reason = settle(outcome)
    assert verdict == "inconclusive" and NOT_DISCRIMINATING in reason


def test_a_run_that_has_not_converged_never_passes(untrained_fig2, converged_fig2, monkeypatch):
    # an untrained model: L_pa far above BMA's
    patch_runs(monkeypatch, {"fig2": untrained_fig2})
    outcome = claim.model_check(CheckContext(tier="quick", seed=0))
    assert outcome.converged is False and settle(outcome)[0] != "pass"
    assert outcome.verdict == "inconclusive" and "not converged" in outcome.reason
    # the construction's parameters, but a run that (by its L_pa) has not converged: even a rule that accepts
    # everything cannot make it pass
    run = converged_fig2["fig2"]
    stalled = TrainRun(run.model, run.kernel, run.config, run.metrics | {"parent_loss_gap": 0.26})
    patch_runs(monkeypatch, {"fig2": {"fig2": stalled}})
    monkeypatch.setattr(claim, "combine_sides", lambda sides: "pass")
    outcome = claim.model_check(CheckContext(tier="quick", seed=0))
    assert outcome.converged is False and settle(outcome) == ("inconclusive", NOT_CONVERGED)
