"""init_gradient (thm3-init-gradient) against a brute-force finite-difference derivative of the real loss."""
import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bma_verify import numerics as nm
import bma_verify.numerics.gradient as gradient_module
from bma_verify.numerics import strategies as bst
from bma_verify.numerics.claim_sweeps import draw_instance, item_rng
from bma_verify.numerics.enumeration import sequence_distribution
from bma_verify.numerics.gradient import approximate_init_gradient, chi2_gain, init_gradient, init_gradient_samples
from bma_verify.numerics.init_gradient_sweep import THM3_RANGES


def brute_force_init_gradient(kernel, parents, h, init=None, step=1e-5):
    """E[−∂ℓ/∂p̂] at p̂ = 0, with no closed form: a Python loop over all sequences x_0..x_h, the probability
    as a product of kernel entries, and a central finite difference of ℓ(p̂) = −log Σ_k softmax(p̂)_k π(x_h|x_k).
    """
    d = kernel.shape[0]
    init = nm.stationary_distribution(kernel) if init is None else init
    total = np.zeros(h)
    for x in itertools.product(range(d), repeat=h + 1):
        prob = init[x[0]]
        for k in range(1, h + 1):
            prob *= kernel[x[parents[k]], x[k]]
        likelihood = np.array([kernel[x[k], x[h]] for k in range(h)])

        def loss(scores):
            weights = np.exp(scores - scores.max())
            return -np.log(weights @ likelihood / weights.sum())

        for k in range(h):
            bump = np.zeros(h)
            bump[k] = step
            total[k] -= prob * (loss(bump) - loss(-bump)) / (2 * step)
    return total


def _matches_brute_force(kernel, parents, h, init):
    exact = init_gradient(kernel, parents, h, init)
    # central differences are accurate to O(step²) ~ 1e-10 relative to the O(1) terms
    return np.allclose(exact, brute_force_init_gradient(kernel, parents, h, init), atol=1e-8, rtol=0)


CASES = [  # (seed, d, H, h, stationary)
    (0, 2, 4, 3, True), (1, 3, 5, 4, False), (2, 3, 4, 2, True), (3, 2, 6, 5, False), (4, 4, 4, 3, False),
]


def _case(seed, d, H, h, stationary):
    rng = np.random.default_rng(seed)
    kernel = nm.random_kernel(d, eps=0.02, rng=rng)
    parents = nm.random_parents(H, rng=rng)
    init = None if stationary else rng.dirichlet(np.ones(d))
    return kernel, parents, h, init


@pytest.mark.parametrize("case", CASES)
def test_exact_init_gradient_equals_brute_force_derivative(case):
    assert _matches_brute_force(*_case(*case))


def _reversed_order(kernel, tokens, law=None):
    # planted bug: π(x_{h'} | x_h) instead of π(x_h | x_{h'})
    tokens = np.asarray(tokens)
    h = tokens.shape[-1] - 1
    likelihood = kernel[tokens[:, h:], tokens[:, :h]]
    return (likelihood / likelihood.mean(axis=1, keepdims=True) - 1.0) / h


def _dropped_one_over_h(kernel, tokens, law=None):
    # planted bug: the 1/h factor of the uniform attention's derivative is missing
    h = np.asarray(tokens).shape[-1] - 1
    return h * init_gradient_samples(kernel, tokens, law)


def _mean_with_marginal(kernel, tokens, law=None):
    # planted bug: the mean over candidates replaced by a column mean of π (not the mixture at uniform A)
    tokens = np.asarray(tokens)
    h = tokens.shape[-1] - 1
    likelihood = kernel[tokens[:, :h], tokens[:, h:]]
    return (likelihood / kernel.mean(0)[tokens[:, h:]] - 1.0) / h


@pytest.mark.parametrize("bug", [_reversed_order, _dropped_one_over_h, _mean_with_marginal])
def test_planted_bugs_in_init_gradient_are_caught(monkeypatch, bug):
    monkeypatch.setattr(gradient_module, "init_gradient_samples", bug)
    assert not all(_matches_brute_force(*_case(*case)) for case in CASES[:2])


@pytest.mark.parametrize("case", CASES)
def test_monte_carlo_init_gradient_is_within_its_stated_error(case):
    kernel, parents, h, init = _case(*case)
    exact = init_gradient(kernel, parents, h, init)
    mc = init_gradient(kernel, parents, h, init, method="monte-carlo", n=40_000, rng=np.random.default_rng(9))
    z = (mc.estimate - exact) / mc.stderr
    # h coordinates of one run: |z| < 4 for all of them fails with probability < h·6e-5
    assert np.all(np.abs(z) < 4), z


@given(bst.instances(min_d=2, max_d=3, min_H=3, max_H=5, min_eps=0.01), st.data())
@settings(max_examples=20)
def test_enumerated_marginal_form_equals_j_from_pairwise_joints(instance, data):
    # thm3-init-gradient as the paper writes it: with P(x_h) in place of π̄, the expectation by enumeration over
    # every sequence (numerics.gradient.init_gradient) equals (1/h) J from pairwise joints (chi2_gain), two
    # independent computations
    kernel, parents, init = instance
    h = data.draw(st.integers(1, parents.shape[0] - 1))
    enumerated = init_gradient(kernel, parents, h, init, denominator="marginal")
    np.testing.assert_allclose(enumerated, chi2_gain(kernel, parents, h, init) / h, atol=1e-13)


def test_marginal_form_monte_carlo_is_within_its_stated_error_and_bad_denominators_are_refused():
    kernel, parents, h, init = _case(*CASES[1])
    mc = init_gradient(kernel, parents, h, init, method="monte-carlo", n=40_000, rng=np.random.default_rng(10),
                       denominator="marginal")
    z = (mc.estimate - approximate_init_gradient(kernel, parents, h, init)) / mc.stderr
    assert np.all(np.abs(z) < 4), z  # h = 4 coordinates: a false alarm has probability < 3e-4
    with pytest.raises(ValueError, match="denominator"):
        init_gradient(kernel, parents, h, init, denominator="uniform")


@given(bst.instances(min_d=2, max_d=3, min_H=3, max_H=5, min_eps=0.01), st.data())
@settings(max_examples=20)
def test_expected_gradients_sum_to_zero_and_chi2_gain_is_chi2_information(instance, data):
    kernel, parents, init = instance
    h = data.draw(st.integers(1, parents.shape[0] - 1))
    exact = init_gradient(kernel, parents, h, init)
    assert exact.sum() == pytest.approx(0.0, abs=1e-12)  # Σ_{h'} π(x_h|x_{h'}) = h π̄ in every sample
    gain = chi2_gain(kernel, parents, h, init)
    parent = parents[h]
    # J(pa) = I_χ²(x_pa; x_h): the foundation's χ² information of the exact joint
    joint = nm.pairwise_joint(kernel, parents, parent, h, init)
    assert gain[parent] == pytest.approx(nm.chi2_mutual_information(joint), abs=1e-12)
    np.testing.assert_allclose(approximate_init_gradient(kernel, parents, h, init), gain / h, atol=1e-15)


@pytest.mark.parametrize("case", CASES[:3])
def test_chi2_gain_equals_its_definition_by_enumeration(case):
    # J(h') = E[π(x_h|x_{h'}) / P(x_h)] − 1 with the expectation over all sequences (no pairwise joints)
    kernel, parents, h, init = _case(*case)
    sequences, probabilities = sequence_distribution(kernel, parents[: h + 1], init)
    sequences = sequences.astype(np.int64)
    law_h = np.bincount(sequences[:, h], weights=probabilities, minlength=kernel.shape[0])
    expected = [probabilities @ (kernel[sequences[:, k], sequences[:, h]] / law_h[sequences[:, h]]) - 1.0
                for k in range(h)]
    np.testing.assert_allclose(chi2_gain(kernel, parents, h, init), expected, atol=1e-13)


def test_true_parent_has_largest_init_gradient():
    # thm3-init-gradient on a fixed seeded set of sweep instances (non-zero-information kernels), both μ₀
    checked = 0
    ranges = dict(THM3_RANGES, zero_information_fraction=0.0)
    for index in range(25):
        instance = draw_instance(item_rng(2026, 33, index), ranges)
        kernel, parents = instance["kernel"], instance["parents"]
        for init in (None, instance["init"]):
            for h in range(2, instance["H"]):
                exact = init_gradient(kernel, parents, h, init)
                others = np.delete(exact, parents[h])
                assert exact[parents[h]] > others.max(), (kernel.tolist(), parents.tolist(), h, init)
                checked += 1
    assert checked > 100


def test_large_sizes_are_refused_with_a_pointer_to_monte_carlo():
    # (the d = 3, h = 8 speed target is measured in benchmarks/bench_claims.py, not here)
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="monte-carlo"):
        init_gradient(nm.random_kernel(5, rng=rng), nm.random_parents(10, rng=rng), 9)


def test_bad_arguments_are_rejected():
    kernel = np.array([[0.9, 0.1], [0.2, 0.8]])
    parents = np.array([-1, 0, 1])
    with pytest.raises(ValueError, match="h must"):
        init_gradient(kernel, parents, 3)
    with pytest.raises(ValueError, match="h must"):
        init_gradient(kernel, parents, 0)
    with pytest.raises(ValueError, match="method"):
        init_gradient(kernel, parents, 2, method="autograd")
    with pytest.raises(ValueError, match="rng"):
        init_gradient(kernel, parents, 2, method="monte-carlo", n=10)
    with pytest.raises(ValueError, match="init"):
        init_gradient(kernel, parents, 2, init=[0.5, 0.6])
