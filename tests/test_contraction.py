"""Contraction coefficients (lemma3-strict-dpi) against dit, closed forms and brute force."""
import dit
import numpy as np
import pytest
from dit.divergences import maximum_correlation
from hypothesis import given
from hypothesis import strategies as st
from scipy.special import rel_entr

from bma_verify import numerics as nm
from bma_verify.numerics import strategies as bst
from bma_verify.numerics.contraction import (chi2_contraction, dobrushin_coefficients, doeblin_bound, kl_contraction,
                                             kl_contraction_batch)


def _channel_from_joint(joint):
    px = joint.sum(1)
    return px, joint / px[:, None]


@given(bst.joint_distributions(min_d=2, max_d=4))
def test_eta_chi2_is_the_squared_maximal_correlation_of_dit(joint):
    # independent reference: dit's maximum (Rényi) correlation of the same joint
    joint = 0.98 * joint + 0.02 / joint.size  # full support: dit's estimator needs positive marginals
    px, channel = _channel_from_joint(joint)
    rho = maximum_correlation(dit.Distribution.from_ndarray(joint), [[0], [1]])
    assert chi2_contraction(px, channel) == pytest.approx(rho**2, abs=1e-8)


@pytest.mark.parametrize("p", [0.0, 0.05, 0.2, 0.37, 0.5])
def test_binary_symmetric_channel_closed_forms(p):
    # published closed forms for BSC(p) with uniform input: η_χ² = η_KL = (1 − 2p)², δ = |1 − 2p|
    channel = np.array([[1 - p, p], [p, 1 - p]])
    uniform = np.array([0.5, 0.5])
    assert chi2_contraction(uniform, channel) == pytest.approx((1 - 2 * p) ** 2, abs=1e-12)
    assert kl_contraction(uniform, channel) == pytest.approx((1 - 2 * p) ** 2, abs=1e-9)
    assert dobrushin_coefficients(channel) == pytest.approx(abs(1 - 2 * p), abs=1e-15)
    assert doeblin_bound(channel) == pytest.approx(1 - 2 * min(p, 1 - p), abs=1e-15)


@pytest.mark.parametrize("seed", range(6))
def test_eta_kl_matches_a_dense_grid_for_binary_inputs(seed):
    # brute force: for a binary input the supremum over Q is a one-dimensional search on a fine grid
    rng = np.random.default_rng(seed)
    law = rng.dirichlet(np.ones(2))
    channel = rng.dirichlet(np.full(3, 0.7), size=2)
    q = np.linspace(0, 1, 400_001)
    Q = np.stack([q, 1 - q], axis=1)
    divergence = rel_entr(Q, law).sum(1)
    keep = divergence > 1e-7
    grid_sup = (rel_entr(Q @ channel, law @ channel).sum(1)[keep] / divergence[keep]).max()
    # tolerance: the grid step (2.5e-6 in q) and the excluded neighbourhood of P where D < 1e-7
    assert kl_contraction(law, channel) == pytest.approx(grid_sup, abs=2e-5)


@given(bst.kernels(min_d=2, max_d=4, min_eps=0.01), st.integers(0, 2**32 - 1))
def test_contraction_coefficients_are_ordered(kernel, seed):
    # η_χ² ≤ η_KL ≤ δ ≤ 1 − d·min K (textbook ordering; each computed by a different route)
    law = np.random.default_rng(seed).dirichlet(np.ones(kernel.shape[0]))
    eta_chi2 = chi2_contraction(law, kernel)
    eta_kl = kl_contraction(law, kernel, steps=150)
    assert eta_chi2 <= eta_kl + 1e-9
    assert eta_kl <= dobrushin_coefficients(kernel) + 1e-9
    assert dobrushin_coefficients(kernel) <= doeblin_bound(kernel) + 1e-12
    assert dobrushin_coefficients(kernel) == pytest.approx(nm.dobrushin_coefficient(kernel), abs=1e-15)


@pytest.mark.parametrize("seed", range(5))
def test_eta_kl_bounds_every_markov_chain_ratio(seed):
    # SDPI: for any U − X − Y, I(U; Y) ≤ η_KL(P_X, K) I(U; X); draw random U and check the computed sup
    rng = np.random.default_rng(seed)
    d = 3
    law = rng.dirichlet(np.ones(d))
    channel = rng.dirichlet(np.ones(d), size=d)
    eta = kl_contraction(law, channel)
    for _ in range(50):
        u_given_x = rng.dirichlet(np.full(4, 0.3), size=d)  # (x, u)
        joint_ux = (law[:, None] * u_given_x).T  # (u, x)
        joint_uy = joint_ux @ channel
        ratio = nm.mutual_information(joint_uy) / nm.mutual_information(joint_ux)
        assert ratio <= eta + 1e-9


def test_batch_values_do_not_depend_on_the_batch():
    rng = np.random.default_rng(3)
    laws = rng.dirichlet(np.ones(4), size=6)
    channels = rng.dirichlet(np.ones(4), size=(6, 4))
    together = kl_contraction_batch(laws, channels, steps=50)
    alone = np.array([kl_contraction_batch(laws[i:i + 1], channels[i:i + 1], steps=50)[0] for i in range(6)])
    np.testing.assert_array_equal(together, alone)


def test_point_mass_input_has_zero_contraction():
    assert kl_contraction(np.array([1.0, 0.0]), np.array([[0.9, 0.1], [0.2, 0.8]])) == 0.0


@pytest.mark.parametrize("bad", [np.array([[0.5, 0.6], [0.5, 0.5]]), np.array([[np.nan, 1.0], [0.5, 0.5]]),
                                 np.array([[-0.1, 1.1], [0.5, 0.5]])])
def test_bad_channels_are_rejected(bad):
    with pytest.raises(ValueError, match="channel"):
        chi2_contraction(np.array([0.5, 0.5]), bad)
    with pytest.raises(ValueError, match="channel"):
        dobrushin_coefficients(bad)


def test_bad_input_law_is_rejected():
    with pytest.raises(ValueError, match="input_law"):
        chi2_contraction(np.array([0.7, 0.7]), np.eye(2))
