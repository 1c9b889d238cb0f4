"""thm1-construction: the symbolic check (copier weights vs β), the exact check (error against β and against L) and
the model check (the construction in StructuredTransformer vs BMA), their controls and planted failures."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import sympy as sp
import torch

import bma_verify.model.analysis as analysis_module
import bma_verify.reports.claims.thm1_construction.claim as claim
from bma_verify import theory
from bma_verify.model.construction import bma_construction
from bma_verify.reports.core import NOT_DISCRIMINATING, NOT_TESTABLE, CheckContext, settle
from bma_verify.theory.construction import BETA, G_SYM, H_SYM, L_SYM
from bma_verify.theory.derivation import Derivation


def _not_discriminating(outcome) -> None:
    assert outcome.verdict == "pass" and not outcome.control.rejected
    verdict, reason = settle(outcome)
    assert verdict == "inconclusive" and NOT_DISCRIMINATING in reason


def _identity_shift(W, b):
    return np.asarray(W, float)


def test_planted_nonzero_residual_makes_the_symbolic_check_fail(monkeypatch):
    # A derivation whose residual did not simplify to 0 (a wrong claimed form) must fail the check.
    real = theory.derive_thm1_construction()
    broken = Derivation(real.claim, real.steps, real.results,
                        {**real.residuals, "leading_error_minus_claim": sp.Integer(2)})
    monkeypatch.setattr(claim, "SYMBOLIC", dataclasses.replace(claim.SYMBOLIC, derive=lambda: broken))
    outcome = claim.symbolic_check(CheckContext(tier="quick", seed=0))
    assert outcome.verdict == "fail"
    assert "residual leading_error_minus_claim = 0" in outcome.instance["identities_failed"]


def test_copier_weights_match_the_model_class():
    # The derived copier weights against the real StructuredTransformer built by the Theorem 1 construction.
    derivation = theory.derive_thm1_construction()
    weight = sp.lambdify([BETA, L_SYM, H_SYM, G_SYM], derivation.results["weight_copied"], "numpy")
    kernel = np.array([[0.7, 0.3], [0.4, 0.6]])
    L, H, beta = 3, 5, 2.5
    model = bma_construction(kernel, L, beta)
    with torch.no_grad():
        attention = model.copier_attention(L, H).numpy()  # (K, H, (L+1)H)
    for head in range(attention.shape[0]):
        for g in range(H):
            assert attention[head, g].max() == pytest.approx(weight(beta, L, H, g), abs=1e-12)


@pytest.mark.parametrize("check", ["exact_check", "rate_check", "model_check"])
def test_check_passes_and_rejects_its_control(check, tmp_path):
    # reference: numerics.parent_posterior / bma_predictive; the control is a planted wrong construction
    outcome = getattr(claim, check)(CheckContext(tier="quick", seed=0, figures_dir=tmp_path))
    assert outcome.verdict == "pass", outcome.summary
    assert outcome.control.rejected and settle(outcome) == ("pass", "")
    for figure in outcome.figures:
        assert (tmp_path / figure).stat().st_size < 300_000


def test_controls_are_far_from_the_threshold():
    # the planted selectors are O(1) wrong, against a 1e-6 tolerance: the rule rejects them by a wide margin
    ctx = CheckContext(tier="quick", seed=0)
    assert claim.model_check(ctx).control.measured["max_attention_l1_error"] > 0.1
    assert claim.exact_check(ctx).measured["attention_error"][-1] < 1e-10
    rate = claim.rate_check(ctx)
    assert rate.measured["fitted_rate"] == pytest.approx(1.0, abs=1e-3)  # theory: e^{−β}
    assert min(rate.measured["fitted_beta"]) >= 8
    assert rate.control.measured["fitted_rate"] == pytest.approx(0.5, abs=1e-3)  # β halved: e^{−β/2}


def test_model_check_whose_planted_row_shift_shifts_nothing_is_not_discriminating(monkeypatch):
    monkeypatch.setattr(analysis_module, "row_shift", _identity_shift)
    _not_discriminating(claim.model_check(CheckContext(tier="quick", seed=0)))


def test_exact_check_with_a_rule_accepting_all_is_not_discriminating(monkeypatch):
    monkeypatch.setattr(claim, "decide_curves", lambda *a: {"beta": True, "L": True})
    _not_discriminating(claim.exact_check(CheckContext(tier="quick", seed=0)))


def test_the_rate_reads_stronger_and_the_limits_decide():
    # the paper states the limits (β → ∞ with "≈", L → ∞); the exponential rate is our reading
    readings = {check.run.__name__: check.reading for check in claim.CLAIM.checks}
    assert readings == {"symbolic_check": "as-stated", "exact_check": "as-stated", "rate_check": "stronger",
                        "model_check": "as-stated"}


def test_exact_check_does_not_decide_on_the_rate(monkeypatch, tmp_path):
    # a wrong rate alone (RATE_TOL at 0) leaves the limit check passing and makes the rate check fail
    monkeypatch.setattr(claim, "RATE_TOL", 0.0)
    ctx = CheckContext(tier="quick", seed=0, figures_dir=tmp_path)
    assert claim.exact_check(ctx).verdict == "pass"
    assert claim.rate_check(ctx).verdict == "fail"


def _transposed_construction(kernel, L, beta, output="mixture", **kw):
    """Planted bug: W_KQ = (log π)ᵀ per block, i.e. the likelihood read child → parent."""
    built = bma_construction(kernel, L, beta, output, **kw)
    with torch.no_grad():
        d = built.d
        for k in range(L):
            block = built.W_KQ[k * d:(k + 1) * d, k * d:(k + 1) * d]
            block.copy_(block.T.clone())
    return built


def test_model_check_catches_a_transposed_selector(monkeypatch):
    monkeypatch.setattr(analysis_module, "bma_construction", _transposed_construction)
    outcome = claim.model_check(CheckContext(tier="quick", seed=0))
    assert outcome.verdict == "fail" and outcome.instance is not None


def test_two_runs_of_the_exact_check_agree():
    a = claim.exact_check(CheckContext(tier="quick", seed=3))
    b = claim.exact_check(CheckContext(tier="quick", seed=3))
    assert a.measured == b.measured



def test_model_check_positive_control_is_the_beta_limit_and_passes():
    outcome = claim.model_check(CheckContext(tier="quick", seed=0))
    positive = outcome.positive_control
    assert positive.passed and set(positive.measured) == {"attention", "predictive"}, positive


def test_a_rule_that_rejects_everything_fails_the_positive_control(monkeypatch):
    # Planted broken rule: a negative tolerance rejects even the exact β → ∞ limit; the check is not testable.
    import bma_verify.reports.checks.construction as construction

    monkeypatch.setattr(construction, "CONSTRUCTION_TOL", -1.0)
    outcome = claim.model_check(CheckContext(tier="quick", seed=0))
    assert not outcome.positive_control.passed
    verdict, reason = settle(outcome)
    assert verdict == "inconclusive" and NOT_TESTABLE in reason



def test_rate_check_positive_control_fits_rate_one_and_passes():
    positive = claim.rate_check(CheckContext(tier="quick", seed=0)).positive_control
    assert positive.passed and abs(positive.measured["fitted_rate"] - 1.0) < 1e-9, positive
    assert len(positive.measured["fitted_beta"]) >= 2


def test_a_rule_with_no_tolerance_left_fails_the_rate_checks_positive_control(monkeypatch):
    # Planted broken rule: a negative tolerance rejects even the exact e^{−β} curve.
    monkeypatch.setattr(claim, "RATE_TOL", -1.0)
    outcome = claim.rate_check(CheckContext(tier="quick", seed=0))
    assert not outcome.positive_control.passed
    assert settle(outcome)[0] == "inconclusive" and NOT_TESTABLE in settle(outcome)[1]
