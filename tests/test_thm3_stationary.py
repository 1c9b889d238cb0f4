"""Theorem 3's J form under a stationary μ₀ (ours, "what holds instead" of ``thm3-init-gradient``): the proof
chain in ``numerics.thm3_stationary`` against brute-force enumeration, its symbolic twin in
``theory.thm3_stationary``, the negative controls of each step, and where the stored counterexamples break it."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from bma_verify import numerics
from bma_verify.numerics.thm3_stationary import (perturbed_slacks, proof_chain, stationary_chain_sweep,
                                                 stationary_law_identity_error)
from bma_verify.reports.search import KNOWN_COUNTEREXAMPLES
from bma_verify.theory.thm3_stationary import (candidate_law_for_parent_law, derive_thm3_stationary,
                                               perturb_thm3_stationary, verify_thm3_stationary)
from tests.enumeration import enumerated_joint, sequence_likelihood

J_FORM = next(k for k in KNOWN_COUNTEREXAMPLES if k["target"] == "thm3" and k["form"] == "approximate")
PIBAR_FORM = next(k for k in KNOWN_COUNTEREXAMPLES if k["target"] == "thm3" and k["form"] == "exact")


def enumerated_J(kernel, init, parents, h) -> np.ndarray:
    """J(h') = E[π(x_h | x_h') / P(x_h)] − 1 by summing over all d^(h+1) prefixes (naive reference)."""
    d = kernel.shape[0]
    prefix = list(parents[: h + 1])
    weights = {x: sequence_likelihood(kernel, init, prefix, x) for x in itertools.product(range(d), repeat=h + 1)}
    law = np.zeros(d)
    for x, w in weights.items():
        law[x[h]] += w
    return np.array([sum(w * kernel[x[g], x[h]] / law[x[h]] for x, w in weights.items()) - 1 for g in range(h)])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_step_of_the_chain_holds_under_a_stationary_init(seed):
    # reference: J by enumeration over all prefixes, I_χ² from enumerated joints, η from numerics.chi2_contraction
    rng = np.random.default_rng(seed)
    d = 2 + seed % 2
    kernel = numerics.random_kernel(d, eps=0.1 / d, rng=rng)
    parents = numerics.random_parents(6, rng=rng)
    mu = numerics.stationary_distribution(kernel)
    for h in range(2, 6):
        chain = proof_chain(kernel, parents, h)
        J = enumerated_J(kernel, mu, parents, h)
        pa = int(parents[h])
        chi2_parent = numerics.chi2_mutual_information(enumerated_joint(kernel, mu, parents, pa, h))
        np.testing.assert_allclose(chain["frobenius"], J[chain["candidates"]], atol=1e-12)
        np.testing.assert_allclose(chain["J_parent"], J[pa], atol=1e-12)
        np.testing.assert_allclose(chain["chi2_parent"], chi2_parent, atol=1e-12)
        for k, g in enumerate(chain["candidates"]):
            joint = enumerated_joint(kernel, mu, parents, g, h)
            np.testing.assert_allclose(chain["chi2_candidate"][k], numerics.chi2_mutual_information(joint), atol=1e-12)
        np.testing.assert_allclose(chain["pi_side_gap"], 0.0, atol=1e-12)  # step 2 under stationarity
        np.testing.assert_allclose(chain["left_singular_residual"], 0.0, atol=1e-12)
        np.testing.assert_allclose(chain["top_singular_value"], 1.0, atol=1e-12)
        assert chain["eta"].max() < 1
        for key in ("cauchy_schwarz_slack", "sdpi_slack", "bound_slack"):
            assert chain[key].min() >= -1e-12, key
        assert np.all(J[pa] > np.delete(J, pa))  # the conclusion, on the enumerated J


def test_the_binary_grandparent_makes_every_bound_tight_and_each_perturbed_step_is_rejected():
    # reference: for d = 2 every deviation matrix has rank one, so Cauchy–Schwarz and the χ² SDPI are equalities and
    # J(h') = √η·J(pa) exactly: a 5% smaller bound, or η in place of √η, is violated
    kernel = np.array([[0.8, 0.2], [0.3, 0.7]])
    chain = proof_chain(kernel, np.array([-1, 0, 1]), 2)
    for key in ("cauchy_schwarz_slack", "sdpi_slack", "bound_slack"):
        assert abs(chain[key][0]) < 1e-12, key
    lam = 1 - 0.2 - 0.3  # the second eigenvalue of a 2x2 kernel: J(pa) = λ², J(x_0) = λ³, η = λ²
    np.testing.assert_allclose([chain["J_parent"], chain["J"][0], chain["eta"][0]], [lam ** 2, lam ** 3, lam ** 2])
    perturbed = perturbed_slacks(chain)
    assert all(perturbed[key][0] < -1e-4 for key in ("cauchy_schwarz", "sdpi", "bound_eta")), perturbed


def test_the_sweep_holds_and_rejects_every_control():
    out = stationary_chain_sweep(np.random.default_rng(7), 40)
    assert max(out["max_residual"].values()) < 1e-12 and min(out["min_slack"].values()) > -1e-12
    assert out["min_slack"]["margin"] > 0 and out["max_eta"] < 1
    assert all(v < -1e-4 for v in out["min_control_slack"].values()), out["min_control_slack"]
    assert out["control_identity"]["rejected_instances"] > 0 and out["control_left_singular"]["rejected_instances"] > 0
    # steps 1, 3, 4 need no stationarity (same instances, Dirichlet μ₀)
    moved = out["non_stationary"]
    assert moved["max_identity_error"] < 1e-12 and moved["min_cauchy_schwarz_slack"] > -1e-12
    assert moved["min_sdpi_slack"] > -1e-12 and moved["condition_violations"] == 0


def test_the_j_form_counterexample_breaks_only_the_stationarity_step():
    # reference: J by enumeration over the 27 prefixes of the stored chain x_0 -> x_1 -> x_2
    kernel, mu0 = np.array(J_FORM["kernel"]), np.array(J_FORM["init"])
    chain = proof_chain(kernel, np.array(J_FORM["parents"]), J_FORM["h"], mu0)
    J = enumerated_J(kernel, mu0, J_FORM["parents"], J_FORM["h"])
    np.testing.assert_allclose([chain["J"][0], chain["J_parent"]], [J[0], J[1]], atol=1e-12)
    assert chain["identity_error"][0] < 1e-12  # step 1 holds
    assert chain["cauchy_schwarz_slack"][0] > 0 and chain["sdpi_slack"][0] > 0  # steps 3, 4 hold
    assert chain["left_singular_residual"][0] > 0.9  # step 2 fails: √pᵀM_π ≠ √P_hᵀ
    assert chain["pi_side_gap"][0] > chain["gap_allowance"][0] > 0  # ‖B‖² far above I_χ²(x_pa; x_h)
    assert chain["margin"][0] < 0


def test_the_identity_with_the_stationary_law_misses_j_under_the_stored_init():
    kernel, mu0 = np.array(J_FORM["kernel"]), np.array(J_FORM["init"])
    assert stationary_law_identity_error(kernel, np.array(J_FORM["parents"]), 2, mu0)[0] > 1e-2
    # and is the identity itself under the stationary law
    assert stationary_law_identity_error(kernel, np.array(J_FORM["parents"]), 2,
                                         numerics.stationary_distribution(kernel))[0] < 1e-12


def test_the_pibar_form_fails_at_a_candidate_where_the_j_forms_weaker_condition_holds():
    # chain x_0 -> x_1 -> x_2 -> x_3, h = 3: at x_0 the π-side gap is below J(pa)(1 − η)/η, so the J form is proved
    # there without stationarity, yet the exact π̄ form ranks x_0 above the parent x_2 (reference: enumeration in
    # numerics.init_gradient): the π̄ form needs more than the J form's condition
    kernel, mu0, parents = np.array(PIBAR_FORM["kernel"]), np.array(PIBAR_FORM["init"]), np.array(PIBAR_FORM["parents"])
    chain = proof_chain(kernel, parents, PIBAR_FORM["h"], mu0)
    condition = chain["pi_side_gap"] < chain["gap_allowance"]
    assert chain["candidates"].tolist() == [0, 1] and condition.tolist() == [True, False]
    assert np.all(chain["margin"] > 0)
    exact = numerics.init_gradient(kernel, parents, PIBAR_FORM["h"], init=mu0)
    assert exact[0] > exact[2]


def test_proof_chain_rejects_a_kernel_with_a_zero():
    with pytest.raises(ValueError, match="positive entries"):
        proof_chain(np.array([[1.0, 0.0], [0.5, 0.5]]), np.array([-1, 0, 1]), 2)


def test_the_symbolic_steps_hold_and_agree_with_numerics():
    derivation = derive_thm3_stationary()
    assert derivation.identities_hold, {k: v for k, v in derivation.status().items() if not v}
    verification = verify_thm3_stationary(np.random.default_rng(3), n_points=8)
    assert verification.passed, (verification.errors_over_tolerance, verification.negative_slacks)
    assert set(verification.errors) >= {"frobenius_vs_chi2_gain", "pi_side_gap_vs_proof_chain", "sdpi_equality"}


def test_the_symbolic_control_is_rejected():
    perturbed = perturb_thm3_stationary()
    assert not perturbed.identities_hold
    verification = verify_thm3_stationary(np.random.default_rng(3), n_points=8,
                                          perturbation=candidate_law_for_parent_law)
    assert "pi_side_gap_vs_proof_chain" in verification.errors_over_tolerance


def test_the_depth_sweep_counts_add_up_and_its_hardest_margin_is_a_chi2_gain_difference():
    # reference: numerics.gradient.chi2_gain (J from the pairwise joints, not the proof chain's own bookkeeping)
    from bma_verify.numerics.gradient import chi2_gain
    from bma_verify.numerics.thm3_stationary import depth_sweep
    out = depth_sweep(np.random.default_rng(0), 200)
    for key in ("by_parent_depth", "by_candidate_depth"):
        assert sum(r["cases"] for r in out[key].values()) == out["cases"]
        assert sum(r["violations"] for r in out[key].values()) == out["violations"]
    assert out["violations"] > 0 and out["condition_violations"] == 0
    hardest = out["hardest"]
    gains = chi2_gain(np.array(hardest["kernel"]), np.array(hardest["parents"]), hardest["h"], np.array(hardest["init"]))
    parent = hardest["parents"][hardest["h"]]
    assert hardest["margin"] == pytest.approx(gains[parent] - gains[hardest["candidate"]], abs=1e-12)
    assert hardest["margin"] < 0 and hardest["pi_side_gap"] >= hardest["gap_allowance"]
    assert min(r["smallest_margin"] for r in out["by_parent_depth"].values()) == hardest["margin"]


def test_depth_sweep_rejects_bad_arguments():
    from bma_verify.numerics.thm3_stationary import depth_sweep
    with pytest.raises(ValueError, match="n_instances"):
        depth_sweep(np.random.default_rng(0), 0)
    with pytest.raises(ValueError, match="rng"):
        depth_sweep(0, 5)
