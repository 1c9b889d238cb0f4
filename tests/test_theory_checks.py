"""Tests of the symbolic report checks (``reports.checks.symbolic``): every symbolic claim check runs, passes,
records kind ``symbolic`` with its seconds, fits the quick-tier budget (< 60 s on one core from a cold cache), and
turns into a ``fail`` with the failing pieces as its instance when a derivation or a verifier is planted wrong.

Negative controls: each check applies its own decision (residuals exactly 0 AND numerics within tolerance) to a
perturbed derived expression (``symbolic.CONTROLS``) and must reject it; with the perturbation removed (the control
is then the true expression) the control is accepted, so ``reports.core.settle`` must withhold the pass as
``inconclusive (not discriminating)``.
"""
from __future__ import annotations

import json

import numpy as np
import pytest
import sympy as sp

import bma_verify.reports.checks.symbolic as symbolic
from bma_verify import theory
from bma_verify.reports.builder import run_claims
from bma_verify.reports.core import NOT_DISCRIMINATING, CheckContext, settle
from bma_verify.reports.registry import CLAIMS
from bma_verify.theory.consistency import EPS, GAP, L_SYM
from bma_verify.theory.derivation import DEFAULT_TOLERANCE, Derivation

SYMBOLIC_CHECKS = [(claim, check) for claim in CLAIMS for check in claim.checks
                   if check.kind == "symbolic" and check.function.startswith("bma_verify.reports.checks.symbolic:")]
CLAIM_IDS = [claim.id for claim, _ in SYMBOLIC_CHECKS]


def _check(claim_id: str):
    return next(check for claim, check in SYMBOLIC_CHECKS if claim.id == claim_id).run


def _quick(claim_id: str):
    return _check(claim_id)(CheckContext(tier="quick", seed=0))


def _clear_caches():
    for name in theory.__all__:
        if name.startswith(("derive_", "perturb_")):
            getattr(theory, name).cache_clear()


def _unperturbed(results):
    """The perturbation removed: the control is the derived (true) expression itself."""
    return {}


def test_every_registered_symbolic_check_is_implemented_here():
    assert len(SYMBOLIC_CHECKS) == 8
    assert sorted(CLAIM_IDS) == sorted(symbolic.CONTROLS)
    for claim, check in SYMBOLIC_CHECKS:
        assert check.function.startswith("bma_verify.reports.checks.symbolic:"), check.function
        assert callable(check.run), claim.id


@pytest.mark.slow
def test_all_symbolic_checks_pass_in_the_quick_tier():
    # Cold start (every SymPy derivation rebuilt); the 60 s budget is measured in benchmarks/bench_theory.py.
    _clear_caches()
    paper = [claim for claim in CLAIMS if claim.section == "paper"]  # the ext-* symbolic checks live elsewhere
    records = run_claims(paper, CheckContext(tier="quick", seed=0), kinds=["symbolic"])
    checks = [(r["id"], c) for r in records for c in r["checks"]]
    assert len(checks) == 8
    for claim_id, check in checks:
        assert check["kind"] == "symbolic"
        # The settled verdict: a pass here also means the builder saw the control rejected.
        assert check["verdict"] == "pass", (claim_id, check["summary"], check["error"], check["reason"])
        assert check["control"]["rejected"] is True
        assert check["seconds"] > 0
        assert check["derivation"] and all(len(step) == 2 for step in check["derivation"])
        assert check["measured"]["identities_hold"] is True
        assert check["measured"]["max_abs_error"] <= check["threshold"]["max_abs_error"]
    json.dumps(records)  # results.json must be able to hold them


@pytest.mark.parametrize("claim_id", CLAIM_IDS)
def test_control_is_rejected_by_both_the_residuals_and_the_numerics(claim_id):
    # Compared against: the perturbed expression (a dropped term, an exponent x4, a transposed kernel) must make
    # at least one re-derived identity fail AND at least one numeric comparison miss by far more than rounding.
    outcome = _quick(claim_id)
    assert outcome.verdict == "pass", outcome.summary
    control = outcome.control
    assert control is not None and control.rejected, control
    assert control.measured["identities_failed"], control.measured
    missed = {**control.measured["errors_over_tolerance"], **{k: -v for k, v in
                                                               control.measured["negative_slacks"].items()}}
    assert missed and max(missed.values()) > 1e-4, control.measured
    assert settle(outcome) == ("pass", "")
    assert "Control (" in outcome.summary and "rejected" in outcome.summary
    json.dumps(control.as_dict())


@pytest.mark.parametrize("claim_id", CLAIM_IDS)
def test_unperturbed_control_is_accepted_so_the_pass_is_withheld(claim_id, monkeypatch):
    # Compared against: with the perturbation removed the control is the true derived expression, so the same
    # decision accepts it; a check whose control is accepted cannot tell the claim from its negation.
    monkeypatch.setitem(symbolic.CONTROLS, claim_id, (_unperturbed, "the unperturbed expression"))
    outcome = _quick(claim_id)
    assert outcome.verdict == "pass"
    assert not outcome.control.rejected, outcome.control
    assert outcome.control.measured["identities_failed"] == []
    assert outcome.control.measured["errors_over_tolerance"] == {}
    verdict, reason = settle(outcome)
    assert verdict == "inconclusive" and NOT_DISCRIMINATING in reason


def test_zero_by_construction_residuals_are_shown_but_not_counted():
    # Compared against: the residuals that are an expression minus itself once unfolded (L* substituted back into
    # the equation it solves; the monomials of a split put back together) are listed under "definitions" only.
    thm2 = _quick("thm2-consistency").measured
    assert "definition union_at_sufficient_L_minus_target = 0" in thm2["definitions"]
    assert not any("union_at_sufficient_L" in name for name in thm2["identities"])
    ds = _quick("prop2-ds-quadratic").measured
    assert "definition split_reassembles = 0" in ds["definitions"]
    assert not any("split_reassembles" in name for name in ds["identities"])
    # The α candidates of Lemma 3 are definitions typed in on both sides: their comparison is listed apart.
    lemma3 = _quick("lemma3-strict-dpi").measured
    assert {"alpha_dobrushin", "alpha_doeblin", "dobrushin_d2"} <= set(lemma3["definition_errors"])
    assert not {"alpha_dobrushin", "alpha_doeblin"} & set(lemma3["errors"])


def test_regression_tolerances_bound_rounding_errors_without_pinning_them():
    # Compared against: the verifier's own tolerance (the effect the regression guards) and the rounding level of
    # the errors (1.6e-14 at most): the regression bound sits between the two.
    outcome = _quick("prop2-ds-quadratic")
    bound = outcome.tolerances["errors"]["abs"]
    assert 1000 * outcome.measured["max_abs_error"] <= bound <= DEFAULT_TOLERANCE


def test_symbolic_check_is_deterministic_for_a_seed():
    a = symbolic.lemma4_loglik_gap(CheckContext(tier="quick", seed=3))
    b = symbolic.lemma4_loglik_gap(CheckContext(tier="quick", seed=3))
    assert a.measured == b.measured and a.verdict == b.verdict == "pass"
    assert a.control.measured == b.control.measured


def test_planted_wrong_bound_makes_thm2_check_fail_with_instance(monkeypatch):
    # A bound with 4 in place of 2 in the denominator: the verifier must reject it and the check must say so.
    wrong = sp.exp(-L_SYM * GAP**2 / (4 * sp.log(EPS) ** 2))
    real = symbolic.verify_thm2_consistency

    def planted(rng, perturbation=None, **kw):  # the control keeps its own perturbation
        return real(rng, perturbation=perturbation or (lambda results: {"bound": wrong}), **kw)

    monkeypatch.setattr(symbolic, "verify_thm2_consistency", planted)
    outcome = symbolic.thm2_consistency(CheckContext(tier="quick", seed=0))
    assert outcome.verdict == "fail"
    assert "bound_vs_numeric_chernoff" in outcome.instance["errors_over_tolerance"]
    assert outcome.instance["claim"] == "thm2-consistency"


def test_planted_nonzero_residual_makes_check_fail(monkeypatch):
    # A derivation whose residual did not simplify to 0 (a wrong claimed form) must fail the check.
    real = symbolic.derive_thm1_construction()
    broken = Derivation(real.claim, real.steps, real.results,
                        {**real.residuals, "leading_error_minus_claim": sp.Integer(2)})
    monkeypatch.setattr(symbolic, "derive_thm1_construction", lambda: broken)
    outcome = symbolic.thm1_construction(CheckContext(tier="quick", seed=0))
    assert outcome.verdict == "fail"
    assert "residual leading_error_minus_claim = 0" in outcome.instance["identities_failed"]


def test_lemma3_check_evaluates_a_users_kernel():
    kernel = np.array([[0.5, 0.3, 0.2], [0.1, 0.6, 0.3], [0.25, 0.25, 0.5]])
    outcome = symbolic.lemma3_strict_dpi(CheckContext(tier="quick", seed=0, options={"kernel": kernel}))
    # Independent: the definitions evaluated directly in NumPy.
    tv = max(0.5 * np.abs(kernel[i] - kernel[j]).sum() for i in range(3) for j in range(3))
    assert outcome.measured["user_kernel"]["alpha_dobrushin"] == pytest.approx(tv, abs=1e-14)
    assert outcome.measured["user_kernel"]["alpha_doeblin"] == pytest.approx(1 - 3 * kernel.min(), abs=1e-14)
    assert outcome.control.rejected


def test_copier_weights_match_the_model_class():
    # The derived copier weights against the real StructuredTransformer built by the Theorem 1 construction.
    torch = pytest.importorskip("torch")
    from bma_verify.model.construction import bma_construction
    from bma_verify.theory.construction import BETA, G_SYM, H_SYM, L_SYM as L_COPY

    derivation = theory.derive_thm1_construction()
    weight = sp.lambdify([BETA, L_COPY, H_SYM, G_SYM], derivation.results["weight_copied"], "numpy")
    kernel = np.array([[0.7, 0.3], [0.4, 0.6]])
    L, H, beta = 3, 5, 2.5
    model = bma_construction(kernel, L, beta)
    with torch.no_grad():
        attention = model.copier_attention(L, H).numpy()  # (K, H, (L+1)H)
    for head in range(attention.shape[0]):
        for g in range(H):
            assert attention[head, g].max() == pytest.approx(weight(beta, L, H, g), abs=1e-12)
