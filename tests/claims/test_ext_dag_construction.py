"""ext-dag-construction at the quick tier, seed 0. Compared against: the exact set posterior and BMA predictive
(numerics.dag), the tree construction for k = 1, theory.dag_construction's residuals (exactly 0); for each control,
that its rule rejects the wrong table T and that with the plant made harmless the pass is withheld."""
import numpy as np
import pytest

import bma_verify.reports.claims.ext_dag_construction.claim as C
from bma_verify.reports.core import settle
from tests.claims.ext_dag_support import assert_json_ready, not_discriminating, quick_context


@pytest.fixture()
def ctx(tmp_path):
    return quick_context(tmp_path)


def test_construction_model_check_passes_and_rejects_the_wrong_table(ctx):
    # Reference: exact set posterior / BMA predictive (errors ≤ 1e-9 at β = 32, rate ≈ 1 per unit β); the tree
    # construction for k = 1; the wrong-T model stays O(0.1) off.
    outcome = C.ext_dag_construction_model(ctx)
    assert_json_ready(outcome)
    assert settle(outcome) == ("pass", "")
    assert outcome.measured["final_error"] < 1e-9
    assert all(0.8 < r < 1.2 for r in outcome.measured["rates"])
    assert outcome.control.rejected and min(outcome.control.measured["final_errors"]) > 0.1


def test_construction_model_is_not_discriminating_with_a_harmless_plant(ctx, monkeypatch):
    monkeypatch.setattr(C, "transposed_parent_order", lambda kernels: tuple(kernels))
    assert not_discriminating(C.ext_dag_construction_model(ctx))


def test_construction_symbolic_passes_and_rejects_the_transposed_table(ctx):
    # Reference: theory.dag_construction residuals (exactly 0) and numerics.dag_parent_posterior at random kernels.
    outcome = C.ext_dag_construction_symbolic(ctx)
    assert_json_ready(outcome)
    assert settle(outcome) == ("pass", "")
    assert outcome.measured["max_abs_error"] < 1e-12
    assert outcome.control.rejected and len(outcome.control.measured["identities_failed"]) == 3


def test_construction_rule_and_rate_fit():
    assert C.decide_construction(1e-12, 1.0) == "pass"
    assert C.decide_construction(1e-3, 1.0) == "fail"
    assert C.decide_construction(1e-12, 0.1) == "fail"
    betas = np.arange(1.0, 20.0)
    assert C.fit_rate(betas, np.exp(-0.7 * betas)) == pytest.approx(0.7, rel=1e-9)
    assert C.fit_rate(betas, np.full(betas.size, 0.3)) == 0.0  # nothing in the fit range


def test_construction_symbolic_control_path_passes_the_true_table(ctx):
    outcome = C.ext_dag_construction_symbolic(ctx)
    unplanted = outcome.control.measured["same_path_unplanted"]
    assert unplanted["passed"] and unplanted["identities_failed"] == [], unplanted
    assert unplanted["max_abs_error"] < 1e-12 and outcome.control.rejected


def test_a_control_path_that_rejects_the_true_table_cannot_reject_the_control(ctx, monkeypatch):
    # Planted: the "true" table is the transposed one, so the path rejects everything; the pass is withheld
    monkeypatch.setattr(C, "log_table", C.transposed_log_table)
    outcome = C.ext_dag_construction_symbolic(ctx)
    assert outcome.verdict == "pass" and not outcome.control.rejected
    assert settle(outcome)[0] == "inconclusive" and "not discriminating" in settle(outcome)[1]


def test_construction_model_positive_control_is_an_exact_exponential_and_passes(ctx):
    positive = C.ext_dag_construction_model(ctx).positive_control
    assert positive.passed and all(abs(r - 1.0) < 1e-9 for r in positive.measured["rates"]), positive


def test_a_rate_bar_above_the_theorys_fails_the_model_positive_control(ctx, monkeypatch):
    # Planted broken rule: a minimum rate of 2, which even the exact e^(−β) decay cannot meet.
    monkeypatch.setattr(C, "MIN_RATE", 2.0)
    outcome = C.ext_dag_construction_model(ctx)
    assert not outcome.positive_control.passed
    assert settle(outcome)[0] == "inconclusive" and "not testable" in settle(outcome)[1]
