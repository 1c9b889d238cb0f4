"""Tests of ``theory``: every derivation's identities hold, every verifier passes against ``numerics``, every
verifier REJECTS a deliberately perturbed expression (so none is vacuous), and each claim's default perturbation
(the negative control of its symbolic check, ``perturb_*``) plants exactly the falsehood it names.

The independent side of each comparison is named in the verifier's docstring (``numerics``, SciPy, complex-step
derivatives, direct enumeration); here each test says what the perturbation breaks.
"""
from __future__ import annotations

import numpy as np
import pytest
import sympy as sp

from bma_verify.theory import (derive_bma_score_identity, derive_lemma3_strict_dpi, derive_lemma4_loglik_gap,
                               derive_prop1_invariance, derive_prop2_ds_quadratic, derive_thm1_construction,
                               derive_thm2_consistency, derive_thm3_init_gradient, perturb_bma_score_identity,
                               perturb_lemma3_strict_dpi, perturb_lemma4_loglik_gap, perturb_prop1_invariance,
                               perturb_prop2_ds_quadratic, perturb_thm1_construction, perturb_thm2_consistency,
                               perturb_thm3_init_gradient, verify_bma_score_identity, verify_lemma3_strict_dpi,
                               verify_lemma4_loglik_gap, verify_prop1_invariance, verify_prop2_ds_quadratic,
                               verify_thm1_construction, verify_thm2_consistency, verify_thm3_init_gradient)
from bma_verify.theory.bma import PI
from bma_verify.theory.construction import BETA, G_SYM, H_SYM, L_SYM
from bma_verify.theory.consistency import EPS, GAP
from bma_verify.theory.derivation import Derivation, ErrorTracker, complex_step_gradient, is_exactly_zero
from bma_verify.theory.dpi import P_BSC
from bma_verify.theory.ds import RHO

DERIVATIONS = {
    "bma-score-identity": derive_bma_score_identity,
    "prop1-invariance": derive_prop1_invariance,
    "thm1-construction": derive_thm1_construction,
    "lemma3-strict-dpi": derive_lemma3_strict_dpi,
    "lemma4-loglik-gap": derive_lemma4_loglik_gap,
    "thm2-consistency": derive_thm2_consistency,
    "thm3-init-gradient": derive_thm3_init_gradient,
    "prop2-ds-quadratic": derive_prop2_ds_quadratic,
}
VERIFIERS = {
    "bma-score-identity": verify_bma_score_identity,
    "prop1-invariance": verify_prop1_invariance,
    "thm1-construction": verify_thm1_construction,
    "lemma3-strict-dpi": verify_lemma3_strict_dpi,
    "lemma4-loglik-gap": verify_lemma4_loglik_gap,
    "thm2-consistency": verify_thm2_consistency,
    "thm3-init-gradient": verify_thm3_init_gradient,
    "prop2-ds-quadratic": verify_prop2_ds_quadratic,
}


def rng(seed: int = 12345) -> np.random.Generator:
    return np.random.default_rng(seed)


@pytest.mark.parametrize("claim", sorted(DERIVATIONS))
def test_derivation_identities_hold_and_render(claim):
    derivation = DERIVATIONS[claim]()
    assert derivation.claim == claim
    assert derivation.residuals, "a derivation must state at least one identity"
    failed = [name for name, ok in derivation.status().items() if not ok]
    assert not failed, f"{claim}: {failed}"
    steps = derivation.latex_steps()
    assert steps
    for caption, latex in steps:
        assert caption and isinstance(latex, str) and latex
        # A relation that SymPy evaluated (e.g. Eq(symbol, matrix)) would render as a bare truth value.
        assert latex not in (r"\text{True}", r"\text{False}"), (claim, caption)


#: Verifier sizes for the tests (the DS derivation at d = 3 takes ~8 s; it has its own slow test).
TEST_KWARGS = {"prop2-ds-quadratic": {"d_values": (2,)}}


@pytest.mark.parametrize("claim", sorted(VERIFIERS))
def test_verifier_agrees_with_independent_numerics(claim):
    verification = VERIFIERS[claim](rng(), n_points=6, **TEST_KWARGS.get(claim, {}))
    assert verification.passed, verification
    assert verification.errors, "a verifier must compare at least one quantity"
    assert verification.max_abs_error <= verification.tolerance


@pytest.mark.slow
def test_ds_derivation_and_verifier_at_d3():
    # Cayley-transform A in 3 dimensions: the same split and Hessian, verified against numerics.ds and SciPy.
    assert derive_prop2_ds_quadratic(3).identities_hold
    assert verify_prop2_ds_quadratic(rng(), n_points=4, d_values=(3,)).passed


# ----------------------------------------------------------------------------------------------------------
# Planted bugs: each perturbed expression must be rejected by its verifier.

def _rejected(claim, overrides, **kwargs):
    verification = VERIFIERS[claim](rng(), n_points=6, perturbation=lambda results: overrides, **kwargs)
    assert not verification.passed, f"{claim}: perturbed {sorted(overrides)} was accepted: {verification}"
    return verification


def test_bma_verifier_rejects_transposed_kernel_in_posterior():
    # π(parent | child) instead of π(child | parent): a posterior that is still a softmax, but of the wrong score.
    derivation = derive_bma_score_identity()
    swapped = derivation.results["posterior"].replace(PI, lambda a, b: PI(b, a))
    verification = _rejected("bma-score-identity", {"posterior": swapped})
    assert verification.errors["posterior"] > 1e-3 and verification.errors["posterior_bayes"] < 1e-12


def test_bma_verifier_rejects_transposed_bilinear_form():
    # vᵀ W u instead of uᵀ W v: the key and query copies swapped in the second-layer score.
    derivation = derive_bma_score_identity()
    expr = derivation.results["bilinear_d2"]
    us = sorted((s for s in expr.free_symbols if s.name.startswith("u_")), key=str)
    vs = sorted((s for s in expr.free_symbols if s.name.startswith("v_")), key=str)
    swapped = expr.subs({**dict(zip(us, vs)), **dict(zip(vs, us))}, simultaneous=True)
    assert us and swapped != expr
    verification = _rejected("bma-score-identity", {"bilinear_d2": swapped}, d_values=(2,))
    assert verification.errors["bilinear_score_d2"] > 1e-3


def test_bma_verifier_rejects_symbolic_kernel_posterior_without_normalisation():
    # Unnormalised Bayes numerator (the evidence forgotten): the symbolic-kernel posterior must not pass.
    derivation = derive_bma_score_identity()
    posterior = derivation.results["posterior_d2"]
    unnormalised = posterior.applyfunc(lambda e: sp.numer(sp.together(e)))
    verification = _rejected("bma-score-identity", {"posterior_d2": unnormalised}, d_values=(2,))
    assert verification.errors["posterior_d2"] > 1e-3


def test_prop1_verifier_rejects_row_shift_posing_as_column_shift():
    derivation = derive_prop1_invariance()
    verification = _rejected("prop1-invariance",
                             {"attention_column_shift": derivation.results["attention_row_shift"]})
    assert verification.errors["column_shift_equals_unshifted"] > 1e-3


def test_prop1_verifier_rejects_a_zero_row_shift_instance():
    derivation = derive_prop1_invariance()
    zero = sp.zeros(*derivation.results["row_shift_instance"].shape)
    verification = _rejected("prop1-invariance", {"row_shift_instance": zero})
    assert verification.slacks["row_shift_instance_nonzero"] < 0


def test_thm1_verifier_rejects_wrong_copier_weight():
    derivation = derive_thm1_construction()
    normaliser = derivation.results["normaliser"]
    _rejected("thm1-construction", {"weight_copied": sp.exp(BETA) / normaliser})


def test_thm1_verifier_rejects_leading_error_off_by_two():
    # L + H instead of L + H − 2: the number of logit-β keys miscounted.
    verification = _rejected("thm1-construction", {"leading_error_coefficient": L_SYM + H_SYM})
    assert verification.slacks["leading_error_remainder"] < 0


def test_lemma3_verifier_rejects_dobrushin_without_the_half():
    derivation = derive_lemma3_strict_dpi()
    verification = _rejected("lemma3-strict-dpi", {"alpha_dobrushin": 2 * derivation.results["alpha_dobrushin"]})
    assert verification.errors["alpha_dobrushin"] > 1e-3


def test_lemma3_verifier_rejects_bsc_contraction_equal_to_dobrushin():
    # η_χ² = |1 − 2p| (the Dobrushin coefficient) instead of (1 − 2p)².
    verification = _rejected("lemma3-strict-dpi", {"bsc_chi2_contraction": sp.Abs(1 - 2 * P_BSC)})
    assert verification.errors["bsc_chi2_contraction"] > 1e-3


def test_lemma4_verifier_rejects_decomposition_without_kl_term():
    derivation = derive_lemma4_loglik_gap(2)
    results = derivation.results
    verification = _rejected("lemma4-loglik-gap",
                             {"decomposition": results["mi_parent"] - results["mi_candidate"]}, d_values=(2,))
    assert verification.errors["decomposition"] > 1e-6


def test_thm2_verifier_rejects_bound_with_wrong_constant():
    # exp(−LΔ²/(4 log²(1/ε))): the range width squared miscounted.
    wrong = sp.exp(-L_SYM * GAP**2 / (4 * sp.log(EPS) ** 2))
    verification = _rejected("thm2-consistency", {"bound": wrong})
    assert verification.errors["bound_vs_numeric_chernoff"] > 1e-3


def test_thm3_verifier_rejects_gradient_without_the_minus_one():
    derivation = derive_thm3_init_gradient()
    grad = derivation.results["mixture_gradient_h3"]
    r = sp.symbols("r_0:3", positive=True)
    wrong = grad + sp.Matrix(1, 3, [sp.Rational(1, 3)] * 3)  # (1/h) r_j / r̄ without the − 1
    assert all(s in r for s in wrong.free_symbols)
    verification = _rejected("thm3-init-gradient", {"mixture_gradient_h3": wrong})
    assert verification.errors["mixture_gradient_h3"] > 1e-3


def test_thm3_verifier_rejects_shannon_mi_in_place_of_chi2_mi():
    # Replacing J(pa) by a different dependence measure (here I_χ² + 1/20) must be caught by the χ²-MI comparison.
    derivation = derive_thm3_init_gradient()
    verification = _rejected("thm3-init-gradient",
                             {"J_parent_d2": derivation.results["J_parent_d2"] + sp.Rational(1, 20)})
    assert verification.errors["J_parent_vs_chi2_mi"] > 1e-3


def test_thm3_verifier_rejects_wrong_logit_gradient():
    derivation = derive_thm3_init_gradient()
    verification = _rejected("thm3-init-gradient", {"logit_gradient": 2 * derivation.results["logit_gradient"]})
    assert verification.errors["logit_gradient"] > 1e-6


def test_ds_verifier_rejects_quadratic_term_linear_in_rho():
    derivation = derive_prop2_ds_quadratic(2)
    wrong = derivation.results["key_quadratic"] / RHO  # ρ instead of ρ²
    verification = _rejected("prop2-ds-quadratic", {"key_quadratic": wrong}, d_values=(2,))
    assert verification.errors["key_quadratic_vs_numerics"] > 1e-3


# ----------------------------------------------------------------------------------------------------------
# The derivation machinery itself

def test_identities_fail_when_a_residual_is_not_zero():
    x = sp.Symbol("x")
    assert Derivation("c", (), {}, residuals={"r": sp.Integer(0)}).identities_hold
    assert not Derivation("c", (), {}, residuals={"r": x - x**1 + 1}).identities_hold
    assert not Derivation("c", (), {}, residuals={"r": sp.Matrix([0, x])}).identities_hold
    assert not Derivation("c", (), {}, witnesses={"w": sp.zeros(2, 2)}).identities_hold
    assert not Derivation("c", (), {}, nonnegatives={"s": x}).identities_hold  # sign of x unknown
    assert Derivation("c", (), {}, nonnegatives={"s": sp.Symbol("y", nonnegative=True)}).identities_hold
    assert is_exactly_zero(sp.zeros(3, 1))


def test_tracker_counts_nan_as_failure():
    tracker = ErrorTracker()
    tracker.compare("q", np.nan, 0.0)
    assert not tracker.result("c", 1).passed


def test_bad_input_raises_value_error_naming_the_argument():
    with pytest.raises(ValueError, match="H"):
        derive_bma_score_identity(H=1)
    with pytest.raises(ValueError, match="d"):
        derive_lemma4_loglik_gap(1)
    with pytest.raises(ValueError, match="must name results"):
        verify_thm2_consistency(rng(), perturbation=lambda results: {"no_such_result": sp.Integer(1)})
    with pytest.raises(ValueError, match="n_points"):
        verify_thm2_consistency(rng(), n_points=0)
    with pytest.raises(ValueError, match="rng"):
        verify_thm2_consistency(12345)


def test_verifiers_are_deterministic_for_a_seed():
    a = verify_lemma4_loglik_gap(rng(7), n_points=4)
    b = verify_lemma4_loglik_gap(rng(7), n_points=4)
    assert a == b


def test_definitions_are_shown_but_neither_count_nor_fail():
    # A residual zero by construction is not evidence: it is reported under definitions and does not decide.
    x = sp.Symbol("x")
    derivation = Derivation("c", (), {}, residuals={"r": sp.Integer(0)}, definitions={"by_construction": x})
    assert derivation.identities_hold
    assert derivation.definition_status() == {"definition by_construction = 0": False}
    assert all("by_construction" not in name for name in derivation.status())


def test_perturbed_rederives_the_identities_that_depend_on_the_perturbed_result():
    a = sp.Symbol("a")
    base = Derivation("c", (), {"f": a, "g": 2 * a}, residuals={"f_minus_a": sp.Integer(0), "other": sp.Integer(0)})

    def recheck(results):
        return Derivation("c", (), {"g": 2 * results["f"]}, {"f_minus_a": sp.simplify(results["f"] - a)})

    wrong = base.perturbed(lambda results: {"f": a + 1}, recheck)
    assert wrong.results == {"f": a + 1, "g": 2 * a + 2}
    assert wrong.residuals == {"f_minus_a": 1, "other": 0} and not wrong.identities_hold
    same = base.perturbed(lambda results: {}, recheck)  # no perturbation: the same derivation
    assert same.results == base.results and same.residuals == base.residuals and same.identities_hold


# ----------------------------------------------------------------------------------------------------------
# The default perturbations (the symbolic checks' negative controls) plant exactly the falsehood they name.

def test_lemma4_control_is_the_decomposition_without_its_kl_term():
    true, wrong = derive_lemma4_loglik_gap(2), perturb_lemma4_loglik_gap(2)
    assert sp.expand(true.results["decomposition"] - wrong.results["decomposition"]
                     - true.results["expected_kl"]) == 0
    assert not is_exactly_zero(wrong.residuals["gap_minus_decomposition"])


def test_thm2_control_is_the_bound_with_its_exponent_times_four():
    true, wrong = derive_thm2_consistency(), perturb_thm2_consistency()
    assert isinstance(wrong.results["bound"], sp.exp) and isinstance(true.results["bound"], sp.exp)
    assert sp.simplify(wrong.results["bound"].exp / true.results["bound"].exp) == 4
    assert not is_exactly_zero(wrong.residuals["bound_minus_stated"])
    assert is_exactly_zero(wrong.residuals["union_bound_limit"])  # kept: it does not depend on the bound


def test_thm3_control_mean_equals_the_marginal_only_for_a_uniform_parent():
    # (1/d) Σ_a π(c|a) is the law of x_h exactly when x_pa is uniform: there the perturbed J is still I_χ².
    true, wrong = derive_thm3_init_gradient(), perturb_thm3_init_gradient()
    J, J_wrong = true.results["J_parent_d2"], wrong.results["J_parent_d2"]
    m0 = sp.Symbol("m_0", positive=True)
    assert sp.simplify((J - J_wrong).subs(m0, sp.Rational(1, 2))) == 0
    point = {s: sp.Rational(k + 2, 7) for k, s in enumerate(sorted(J.free_symbols, key=str))}
    assert (J - J_wrong).subs(point) != 0
    assert not is_exactly_zero(wrong.residuals["J_parent_minus_chi2_mi_d2"])


def test_ds_control_is_a_score_without_key_only_term():
    wrong = perturb_prop2_ds_quadratic(2)
    assert wrong.results["key_quadratic"] == 0
    assert is_exactly_zero(wrong.results["key_hessian"]) and not wrong.identities_hold


def test_thm1_control_drops_the_g_query_keys_from_the_normaliser():
    true, wrong = derive_thm1_construction(), perturb_thm1_construction()
    assert sp.expand(true.results["normaliser"] - wrong.results["normaliser"]) == G_SYM
    assert not is_exactly_zero(wrong.residuals["weights_sum_to_one"])
    # The leading error is blind to it (the query keys are O(e^{−2β})): the weights' sum and numerics catch it.
    assert is_exactly_zero(wrong.residuals["leading_error_minus_claim"])


def test_lemma3_control_doubles_the_bsc_dobrushin_coefficient():
    wrong = perturb_lemma3_strict_dpi()
    assert sp.simplify(wrong.results["bsc_dobrushin"] - 2 * sp.Abs(1 - 2 * P_BSC)) == 0


def test_bma_control_posterior_transposes_the_kernel_back_to_the_truth():
    true, wrong = derive_bma_score_identity(), perturb_bma_score_identity()
    assert wrong.results["posterior"] != true.results["posterior"]
    assert wrong.results["posterior"].replace(PI, lambda a, b: PI(b, a)) == true.results["posterior"]


def test_prop1_control_shift_vanishes_at_a_zero():
    true, wrong = derive_prop1_invariance(), perturb_prop1_invariance()
    a = [s for s in wrong.results["attention_column_shift"].free_symbols if s.name.startswith("a_")]
    assert a and not any(s.name.startswith("b_") for s in wrong.results["attention_column_shift"].free_symbols)
    at_zero = wrong.results["attention_column_shift"].subs({s: 0 for s in a})
    assert sp.simplify(at_zero - true.results["attention_column_shift"].subs({s: 0 for s in a})) == sp.zeros(1, 2)
    assert not is_exactly_zero(wrong.residuals["column_shift_difference"])


def test_complex_step_gradient_matches_the_softmax_gradient_of_log_sum_exp():
    # reference: ∂/∂x_j log Σ_i e^{x_i} = softmax(x)_j, written out by hand; a finite difference would be off at 1e-8
    x = np.array([0.3, -1.2, 2.0, 0.0])
    softmax = np.exp(x) / np.exp(x).sum()
    got = complex_step_gradient(lambda z: np.log(np.exp(z).sum()), x)
    np.testing.assert_allclose(got, softmax, rtol=1e-14, atol=0)
