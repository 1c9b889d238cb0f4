"""Exact joints and information measures against enumeration, dit and a second formula."""
import dit
import numpy as np
import pytest
from hypothesis import given, strategies as st

from bma_verify import numerics as nm
from bma_verify.numerics import strategies as bst
from tests.enumeration import enumerated_joint


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("stationary", [True, False])
def test_pairwise_joint_equals_enumeration_of_all_sequences(seed, stationary):
    # Reference: sum of the full likelihood over all d^H sequences.
    rng = np.random.default_rng(seed)
    d, H = 3, 6
    kernel = nm.random_kernel(d, alpha=0.6, eps=0.02, rng=rng)
    parents = nm.random_parents(H, rng=rng)
    init = nm.stationary_distribution(kernel) if stationary else rng.dirichlet(np.ones(d))
    for i in range(H):
        for j in range(H):
            expected = enumerated_joint(kernel, init, parents, i, j)
            got = nm.pairwise_joint(kernel, parents, i, j, init=None if stationary else init)
            np.testing.assert_allclose(got, expected, atol=1e-13, err_msg=f"pair ({i}, {j}) of {parents}")


def test_pairwise_joint_is_not_the_product_of_marginals():
    # Guards against an independence shortcut: siblings are dependent through their common parent.
    kernel = np.array([[0.9, 0.1], [0.2, 0.8]])
    parents = np.array([-1, 0, 0])
    joint = nm.pairwise_joint(kernel, parents, 1, 2)
    assert np.abs(joint - np.outer(joint.sum(1), joint.sum(0))).max() > 0.05


def _dit(joint):
    m, n = joint.shape
    outcomes = [f"{a}{b}" for a in range(m) for b in range(n)]
    return dit.Distribution(outcomes, joint.ravel().tolist())


@given(bst.joint_distributions())
def test_mutual_information_agrees_with_dit(joint):
    # Reference: dit's mutual_information in bits, converted to nats.
    expected = dit.shannon.mutual_information(_dit(joint), [0], [1]) * np.log(2)
    assert nm.mutual_information(joint) == pytest.approx(expected, abs=1e-9)


@given(bst.joint_distributions())
def test_entropy_agrees_with_dit(joint):
    expected = dit.shannon.entropy(_dit(joint)) * np.log(2)
    assert nm.entropy(joint.ravel()) == pytest.approx(expected, abs=1e-9)


@given(bst.joint_distributions())
def test_chi2_mutual_information_is_sum_of_squared_nontrivial_singular_values(joint):
    # Reference: I_χ² = Σ_{i>=2} σ_i² of Q = P / sqrt(p_x p_y) (σ_1 = 1 belongs to the constant functions).
    px, py = joint.sum(1), joint.sum(0)
    keep_x, keep_y = px > 0, py > 0
    Q = joint[np.ix_(keep_x, keep_y)] / np.sqrt(np.outer(px[keep_x], py[keep_y]))
    sigma = np.linalg.svd(Q, compute_uv=False)
    assert nm.chi2_mutual_information(joint) == pytest.approx(np.sum(sigma[1:] ** 2), abs=1e-9)


@given(bst.joint_distributions())
def test_mutual_information_is_between_zero_and_log_one_plus_chi2(joint):
    # KL <= log(1 + χ²) (Jensen on the log), and both are non-negative.
    mi, chi2 = nm.mutual_information(joint), nm.chi2_mutual_information(joint)
    assert 0.0 <= mi <= np.log1p(chi2) + 1e-12


def test_information_of_known_laws():
    # Published values: a perfectly correlated fair bit has I = log 2 and I_χ² = 1; independence gives 0.
    assert nm.mutual_information(np.eye(2) / 2) == pytest.approx(np.log(2))
    assert nm.chi2_mutual_information(np.eye(2) / 2) == pytest.approx(1.0)
    assert nm.mutual_information(np.full((3, 4), 1 / 12)) == 0.0
    # BSC(p) with a uniform input: I = log 2 − h(p), I_χ² = (1 − 2p)²
    p = 0.2
    joint = 0.5 * np.array([[1 - p, p], [p, 1 - p]])
    assert nm.mutual_information(joint) == pytest.approx(np.log(2) + p * np.log(p) + (1 - p) * np.log(1 - p))
    assert nm.chi2_mutual_information(joint) == pytest.approx((1 - 2 * p) ** 2)


def test_information_is_batched():
    rng = np.random.default_rng(1)
    joints = rng.dirichlet(np.ones(9), size=(4, 2)).reshape(4, 2, 3, 3)
    np.testing.assert_allclose(nm.mutual_information(joints),
                               [[nm.mutual_information(j) for j in row] for row in joints])
    np.testing.assert_allclose(nm.chi2_mutual_information(joints),
                               [[nm.chi2_mutual_information(j) for j in row] for row in joints])


@given(bst.instances(max_H=7, degenerate=True), st.data())
def test_data_processing_along_a_path_of_the_tree(instance, data):
    # DPI: for an ancestor a of b of c on one root-to-leaf path, I(x_a; x_c) <= I(x_b; x_c), for I and I_χ².
    kernel, parents, init = instance
    c = data.draw(st.integers(1, len(parents) - 1))
    path = [c]
    while parents[path[-1]] != -1:
        path.append(int(parents[path[-1]]))
    b = data.draw(st.sampled_from(path[1:]))
    a = data.draw(st.sampled_from(path[path.index(b):]))
    joint_ac = nm.pairwise_joint(kernel, parents, a, c, init=init)
    joint_bc = nm.pairwise_joint(kernel, parents, b, c, init=init)
    assert nm.mutual_information(joint_ac) <= nm.mutual_information(joint_bc) + 1e-12
    assert nm.chi2_mutual_information(joint_ac) <= nm.chi2_mutual_information(joint_bc) + 1e-12


@given(bst.kernels(degenerate=True))
def test_dobrushin_coefficient_against_pairwise_loop_and_doeblin_bound(kernel):
    # Reference: max over row pairs of total variation, by a Python loop; and δ <= 1 − d·min π (Doeblin).
    d = kernel.shape[0]
    loop = max(0.5 * np.abs(kernel[y] - kernel[z]).sum() for y in range(d) for z in range(d))
    assert nm.dobrushin_coefficient(kernel) == pytest.approx(loop, abs=1e-12)
    assert nm.dobrushin_coefficient(kernel) <= 1 - d * kernel.min() + 1e-12


def test_marginal_and_depths():
    kernel = np.array([[0.7, 0.3], [0.4, 0.6]])
    parents = np.array([-1, 0, 1, 1, 3])
    np.testing.assert_array_equal(nm.depths(parents), [0, 1, 2, 2, 3])
    assert nm.lowest_common_ancestor(parents, 2, 4) == 1
    init = np.array([1.0, 0.0])
    np.testing.assert_allclose(nm.marginal(kernel, parents, 4, init=init), init @ kernel @ kernel @ kernel)


@given(bst.instances(min_eps=0.01, max_H=8))
def test_parent_is_most_informative_readme_example(instance):
    # The README's example property (DPI: x_h ⊥ x_h' | x_pa(h) for every earlier h'), kept so the README runs.
    kernel, parents, init = instance
    h = len(parents) - 1
    mi = [nm.mutual_information(nm.pairwise_joint(kernel, parents, h, k, init=init)) for k in range(h)]
    assert max(mi) <= mi[parents[h]] + 1e-12
