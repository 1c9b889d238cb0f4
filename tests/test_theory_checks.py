"""Tests of the symbolic report checks (``reports.checks.symbolic``): every symbolic claim check runs, passes,
records kind ``symbolic`` with its seconds, fits the quick-tier budget (< 60 s on one core from a cold cache), and
turns into a ``fail`` with the failing pieces as its instance when a derivation or a verifier is planted wrong.
"""
from __future__ import annotations

import json

import numpy as np
import pytest
import sympy as sp

import reports.checks.symbolic as symbolic
import theory
from reports.builder import run_claims
from reports.core import CheckContext
from reports.registry import CLAIMS
from theory.consistency import EPS, GAP, L_SYM
from theory.derivation import Derivation

SYMBOLIC_CHECKS = [(claim, check) for claim in CLAIMS for check in claim.checks if check.kind == "symbolic"]


def _clear_caches():
    for name in theory.__all__:
        if name.startswith("derive_"):
            getattr(theory, name).cache_clear()


def test_every_registered_symbolic_check_is_implemented_here():
    assert len(SYMBOLIC_CHECKS) == 8
    for claim, check in SYMBOLIC_CHECKS:
        assert check.function.startswith("reports.checks.symbolic:"), check.function
        assert callable(check.resolve()), claim.id


@pytest.mark.slow
def test_all_symbolic_checks_pass_in_the_quick_tier():
    # Cold start (every SymPy derivation rebuilt); the 60 s budget is measured in benchmarks/bench_theory.py.
    _clear_caches()
    records = run_claims(CLAIMS, CheckContext(tier="quick", seed=0), kinds=["symbolic"])
    checks = [(r["id"], c) for r in records for c in r["checks"]]
    assert len(checks) == 8
    for claim_id, check in checks:
        assert check["kind"] == "symbolic"
        assert check["verdict"] == "pass", (claim_id, check["summary"], check["error"])
        assert check["seconds"] > 0
        assert check["derivation"] and all(len(step) == 2 for step in check["derivation"])
        assert check["measured"]["identities_hold"] is True
        assert check["measured"]["max_abs_error"] <= check["threshold"]["max_abs_error"]
    json.dumps(records)  # results.json must be able to hold them


def test_symbolic_check_is_deterministic_for_a_seed():
    a = symbolic.lemma4_loglik_gap(CheckContext(tier="quick", seed=3))
    b = symbolic.lemma4_loglik_gap(CheckContext(tier="quick", seed=3))
    assert a.measured == b.measured and a.verdict == b.verdict == "pass"


def test_planted_wrong_bound_makes_thm2_check_fail_with_instance(monkeypatch):
    # A bound with 4 in place of 2 in the denominator: the verifier must reject it and the check must say so.
    wrong = sp.exp(-L_SYM * GAP**2 / (4 * sp.log(EPS) ** 2))
    real = symbolic.verify_thm2_consistency
    monkeypatch.setattr(symbolic, "verify_thm2_consistency",
                        lambda rng, **kw: real(rng, overrides={"bound": wrong}, **kw))
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


def test_copier_weights_match_the_model_class():
    # The derived copier weights against the real StructuredTransformer built by the Theorem 1 construction.
    torch = pytest.importorskip("torch")
    from model.construction import bma_construction
    from theory.construction import BETA, G_SYM, H_SYM, L_SYM as L_COPY

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
