"""The checks of ``ext-selective-claim1`` (D'Angelo et al.'s Claim 1): their rules, their near-miss control (the
closest pair exchanged on a kernel moved towards rows = μ: false by a small stated margin, strictly below the bar 0;
rows = μ itself, every gap 0, is the power curve's end at the bar) and planted failures."""
import numpy as np

import bma_verify.reports.claims.ext_selective_claim1.claim as C
from bma_verify.reports.core import CheckContext, settle


def test_exact_check_passes_and_rejects_its_near_miss_strictly_below_the_bar():
    ctx = CheckContext(tier="quick", seed=0)
    out = C.claim1_exact(ctx)
    assert settle(out) == ("pass", "")
    assert out.measured["min_gap"] > 0.01 and out.measured["formula_error"] < 1e-12
    # reference: the smallest enumerated gap on the kernels moved 0.9 towards μ, recomputed here
    smallest = min(r["min_gap"] for r in C.exact_records(ctx, C.CONTROL_WEIGHT))
    assert 0 < smallest < out.measured["min_gap"]
    assert out.control.rejected and out.control.measured["exchanged_gap"] == -smallest < -C.EXACT_ATOL
    # the power curve: every weight below 1 is rejected with a margin; at 1 (rows = μ) the gap is 0, the bar
    values = [p["value"] for p in out.control.power]
    assert all(p["rejected"] for p in out.control.power) and values[-1] == 0.0 and max(values[:-1]) < 0


def test_exact_rule_fails_a_wrong_closed_form():
    assert C.decide_exact(0.5, 1e-3) == "fail" and C.decide_exact(0.0, 0.0) == "fail"
    assert C.decide_exact(0.5, 1e-14) == "pass"


def test_monte_carlo_check_passes_at_their_sizes_and_rejects_the_control(monkeypatch):
    monkeypatch.setitem(C.MC_SIZES, "quick", {**C.MC_SIZES["quick"], "T": 200, "per_lag": 5})
    out = C.claim1_monte_carlo(CheckContext(tier="quick", seed=1))
    assert settle(out) == ("pass", "")
    assert len(out.measured["lags"]) == 12 and max(out.measured["lags"]) <= 30
    assert out.control.rejected and out.control.measured["min_lower"] < 0.0  # strictly below the bar
    assert out.control.power[-1]["value"] == 0.0  # rows = μ: the bar itself, only the curve's end


def test_monte_carlo_rule_on_planted_gaps():
    exact = np.array([[0.0, 5.0], [5.0, 0.0]])
    assert C.decide_monte_carlo({"mean": exact, "se": np.ones((2, 2)), "exact": exact})["verdict"] == "pass"
    straddles = {"mean": np.array([[0.0, 2.0], [5.0, 0.0]]), "se": np.ones((2, 2)), "exact": exact}
    decided = C.decide_monte_carlo(straddles)
    assert decided["verdict"] == "fail" and decided["max_abs_z"] == 3.0


def test_monte_carlo_positive_control_is_the_closed_form_and_passes(monkeypatch):
    monkeypatch.setitem(C.MC_SIZES, "quick", {**C.MC_SIZES["quick"], "T": 200, "per_lag": 5})
    positive = C.claim1_monte_carlo(CheckContext(tier="quick", seed=1)).positive_control
    assert positive.passed and positive.measured["max_abs_z"] == 0.0 and positive.measured["min_lower"] > 0


def test_monte_carlo_positive_control_fails_when_the_closed_form_is_planted_negative(monkeypatch):
    # Planted wrong ideal: the closed form's gaps with their sign flipped; the check is then not testable.
    monkeypatch.setitem(C.MC_SIZES, "quick", {**C.MC_SIZES["quick"], "T": 200, "per_lag": 5})
    right = C.expected_loglik_gap
    monkeypatch.setattr(C, "expected_loglik_gap", lambda *a: -right(*a))
    outcome = C.claim1_monte_carlo(CheckContext(tier="quick", seed=1))
    assert not outcome.positive_control.passed
    verdict, reason = settle(outcome)
    assert verdict == "inconclusive" and "not testable" in reason
