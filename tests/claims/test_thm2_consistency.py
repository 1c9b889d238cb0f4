"""thm2-consistency: a planted wrong bound in the symbolic check, the Monte Carlo check (error rate against L
beside the Hoeffding bound) and the model check (a trained run's parent accuracy against L', on stand-in runs),
their controls and what settle makes of an accepted control."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import sympy as sp

import bma_verify.reports.claims.thm2_consistency.claim as claim
from bma_verify import numerics
from bma_verify.model.training import eval_batch
from bma_verify.numerics.consistency_rates import hoeffding_bound
from bma_verify.reports.core import NOT_DISCRIMINATING, CheckContext, settle
from bma_verify.theory.consistency import EPS, GAP, L_SYM
from tests.trained_stand_ins import patch_runs, stand_in_run, with_curve


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


def test_rate_checks_read_stronger_and_the_limit_decides():
    # the paper states the limit (L → ∞); the Hoeffding rate is our reconstruction
    readings = {check.run.__name__: check.reading for check in claim.CLAIM.checks}
    assert readings == {"limit_check": "as-stated", "symbolic_check": "stronger", "monte_carlo_check": "stronger",
                        "model_check": "reproduction"}


def test_limit_rule_passes_a_vanishing_error_and_rejects_a_floor_and_a_rise():
    L = [1, 2, 4, 8, 16]
    falling = np.array([0.9, 0.6, 0.4, 0.2, 0.05])
    assert claim.decide_limit(L, falling - 0.01, falling + 0.01) == "pass"
    floor = claim.capped_error(falling, L)  # a posterior that stops reading at L = 4
    assert claim.decide_limit(L, floor - 0.01, floor + 0.01) == "inconclusive"
    rising = falling[::-1]
    assert claim.decide_limit(L, rising - 0.01, rising + 0.01) == "fail"


def test_limit_check_passes_and_rejects_its_capped_reader():
    outcome = claim.limit_check(CheckContext(tier="quick", seed=0))
    assert settle(outcome) == ("pass", ""), outcome.summary
    assert all(c["verdict"] != "pass" for c in outcome.control.measured.values())


@pytest.mark.slow
def test_monte_carlo_power_curve_shows_what_the_rule_can_reject(tmp_path):
    # planted exponent factors: ×1.5 and ×2 pass (they are true bounds on the flip grid: the exact P(S_L ≤ 0)
    # first exceeds the ×2.25 bound), ×3 and ×4 are rejected; the check says it cannot reject ×2
    outcome = claim.monte_carlo_check(CheckContext(tier="quick", seed=0, figures_dir=tmp_path))
    power = outcome.control.measured["power"]
    assert power["outcomes"] == {"x1.5": "pass", "x2": "pass", "x2.5": "inconclusive", "x3": "fail", "x4": "fail"}
    assert power["smallest_factor_rejected"] == 3.0 and power["factor_2"] == "inconclusive"
    floor = outcome.control.measured["flip"]["smallest_false_factor_exact"]
    assert 2.0 < floor["factor"] < 2.5 and floor["L"] == 24
    assert "cannot reject a ×2 exponent" in outcome.summary


def test_smallest_false_factor_matches_the_exact_two_point_law():
    # flip kernel ε = 0.1, pair (h, h') = (3, 2), pa = 1, siblings: Z = 0 w.p. 0.1, ±log 9 w.p. 0.9·(0.9, 0.1);
    # at L = 1, P(Z ≤ 0) = 0.1 + 0.09 = 0.19 and the factor is −log 0.19 / (Δ²/(2 log² 10))
    kernel = np.array([[0.1, 0.9], [0.9, 0.1]])
    parents = np.array([-1, 0, 1, 1])
    gap = 0.9 * 0.8 * np.log(9)
    out = {"pairs": [(3, 2)], "gap": np.array([gap]), "eps": 0.1}
    floor = claim.smallest_false_factor(kernel, parents, [1], out)
    assert floor["exact_rate"] == pytest.approx(0.19)
    assert floor["factor"] == pytest.approx(-np.log(0.19) / (gap**2 / (2 * np.log(10) ** 2)))


@pytest.fixture(scope="module")
def converged_fig2():
    return {"fig2": stand_in_run(L=5, test_L=(1, 2, 5), construction=True)}


@pytest.fixture(scope="module")
def untrained_fig2():
    return {"fig2": stand_in_run(L=5, test_L=(1, 2, 5))}


def test_model_check_passes_a_converged_run_and_rejects_its_control(converged_fig2, monkeypatch):
    # reference: the construction is BMA (L_pa gap 0); the near-miss control (BMA ignoring the earliest example at
    # every L') must be rejected by the same rule
    patch_runs(monkeypatch, {"fig2": converged_fig2})
    outcome = claim.model_check(CheckContext(tier="quick", seed=0))
    assert outcome.converged["plateaued"] is True
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
    # an untrained model whose held-out curve still falls: L_pa far above BMA's, but still improving
    patch_runs(monkeypatch, {"fig2": untrained_fig2})
    outcome = claim.model_check(CheckContext(tier="quick", seed=0))
    assert outcome.converged["plateaued"] is False and settle(outcome)[0] != "pass"
    assert outcome.verdict == "inconclusive" and "not converged" in outcome.reason
    # the construction's parameters on a curve still falling: even a rule that accepts everything cannot pass it
    patch_runs(monkeypatch, {"fig2": {"fig2": with_curve(converged_fig2["fig2"], "falling")}})
    monkeypatch.setattr(claim, "combine_sides", lambda sides: "pass")
    outcome = claim.model_check(CheckContext(tier="quick", seed=0))
    assert outcome.converged["plateaued"] is False and settle(outcome)[0] == "inconclusive"
    assert "3 not converged" in settle(outcome)[1]


def test_model_check_power_curve_over_examples_ignored(converged_fig2, monkeypatch):
    # reference: numerics BMA on the last L' − 1 examples (the near-miss) and the rule over k = L − 1 .. 0
    # examples ignored: BMA itself (k = 0) passes, k >= 1 is rejected, and L_pa's gap shrinks as fewer are ignored
    patch_runs(monkeypatch, {"fig2": converged_fig2})
    control = claim.model_check(CheckContext(tier="quick", seed=0)).control
    run = converged_fig2["fig2"]
    batch = eval_batch(run.config, run.kernel, 5)
    near = numerics.parent_posterior(run.kernel, batch.context[:, 1:])
    assert control.measured["parent_accuracy"][-1] == pytest.approx(numerics.parent_accuracy(near, batch.parents))
    assert [p["x"] for p in control.power] == [1, 2, 3, 4, 5]
    assert [p["rejected"] for p in control.power] == [True, True, True, True, False]
    assert all(a["value"] > b["value"] for a, b in zip(control.power, control.power[1:]))


def test_model_check_count_rule_fails_when_every_seed_misses(monkeypatch):
    # three converged seeds whose selectors are frozen at another kernel: 3 of 3 miss, NOT REPRODUCED on the count
    wrong = [{"fig2": stand_in_run(L=5, test_L=(1, 2, 5), construction=True, wrong_selector=True, seed=s)}
             for s in (2, 3, 4, 5, 6)]
    patch_runs(monkeypatch, {"fig2": wrong})
    outcome = claim.model_check(CheckContext(tier="quick", seed=0))
    assert outcome.seeds["counts"]["miss"] == 3 and outcome.verdict == "fail"
    assert len(set(outcome.seeds["metrics"]["parent_loss_gap"]["values"])) == 3


def test_model_check_fails_a_converged_run_that_cannot_represent_bma(monkeypatch):
    # reference: a selector frozen at another kernel's log π on a plateaued curve: its parent accuracy falls
    # short of BMA's and its L_pa is far above BMA's, so the reproduction reads NOT REPRODUCED
    run = stand_in_run(L=5, test_L=(1, 2, 5), construction=True, wrong_selector=True)
    patch_runs(monkeypatch, {"fig2": {"fig2": run}})
    outcome = claim.model_check(CheckContext(tier="quick", seed=0))
    assert outcome.converged["plateaued"] is True and outcome.verdict == "fail", outcome.summary
    assert settle(outcome) == ("fail", "")



def test_monte_carlo_positive_control_is_the_exact_rate_and_passes(tmp_path):
    positive = claim.monte_carlo_check(CheckContext(tier="quick", seed=0, figures_dir=tmp_path)).positive_control
    assert positive.passed and positive.measured["cells_judged"] > 0 and positive.measured["cells_failed"] == 0


def test_an_exact_rate_above_the_bound_fails_the_monte_carlo_positive_control(monkeypatch, tmp_path):
    # Planted wrong ideal: the "exact" P(S_L ≤ 0) replaced by 1 (every comparison lost), far above every bound.
    monkeypatch.setattr(claim, "exact_error_probability", lambda kernel, joint, L: 1.0)
    outcome = claim.monte_carlo_check(CheckContext(tier="quick", seed=0, figures_dir=tmp_path))
    assert not outcome.positive_control.passed and outcome.positive_control.measured["cells_failed"] > 0
    assert settle(outcome)[0] == "inconclusive" and "not testable" in settle(outcome)[1]
