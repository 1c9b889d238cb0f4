"""Kernel claims at any size (numerics.large_kernels) and the batched Lemma 3 sweep (numerics.dpi_sweep): each fast
path against the existing exact computation or brute-force enumeration on small random instances."""
import numpy as np
import pytest

from bma_verify import numerics as nm
from bma_verify.numerics import large_kernels as lk
from bma_verify.numerics.claim_sweeps import SweepResult, merge_sweeps
from bma_verify.numerics.dpi_sweep import (LEMMA3_RANGES, draw_lemma3_batch, lemma3_batched_sweep, lemma3_pairs,
                                           lemma3_pairs_batch, lemma3_ratio_batch, lemma4_terms, lemma4_terms_from_mi,
                                           score_lemma3_batch, score_ratio_batch)
from bma_verify.numerics.enumeration import all_trees


def _instances(seed: int, count: int):
    """Random (kernel, trees, init) with d in 2..5, H in 3..8, stationary or drawn μ₀, some zero entries."""
    rng = np.random.default_rng(seed)
    for i in range(count):
        d, H = int(rng.integers(2, 6)), int(rng.integers(3, 9))
        kernel = nm.random_kernel(d, alpha=float(rng.uniform(0.3, 3)), eps=0.0 if i % 3 == 0 else 0.01, rng=rng)
        yield kernel, [nm.random_parents(H, rng=rng) for _ in range(3)], (None if i % 2 else rng.dirichlet(np.ones(d)))


@pytest.mark.parametrize("seed", [0, 1])
def test_pair_table_equals_lemma3_pairs_and_lemma4_terms(seed):
    # reference: numerics.dpi_sweep.lemma3_pairs (joints through the LCA, then · π) and lemma4_terms, pair by pair
    for kernel, trees, init in _instances(seed, 12):
        if kernel.min() == 0:
            continue  # log π = −∞: compared below in test_zero_entries_give_infinite_gaps_as_before
        table = lk.tree_pair_table(kernel, trees, init)
        ref = {k: [] for k in ("h", "h_prime", "ancestor", "mi_parent", "mi_candidate", "gap", "error")}
        for parents in trees:
            pairs = lemma3_pairs(kernel, parents, init)
            terms = lemma4_terms(kernel, pairs["joint_parent_child"], pairs["joint_candidate_child"])
            for key, value in (("h", pairs["h"]), ("h_prime", pairs["h_prime"]), ("ancestor", pairs["ancestor"]),
                               ("mi_parent", pairs["mi_parent"]), ("mi_candidate", pairs["mi_candidate"]),
                               ("gap", terms["lhs"]), ("error", np.abs(terms["lhs"] - terms["rhs"]))):
                ref[key] += list(value)
        assert table["h"].tolist() == ref["h"] and table["h_prime"].tolist() == ref["h_prime"]
        assert table["ancestor"].tolist() == ref["ancestor"]
        for mine, theirs in (("mi_parent", "mi_parent"), ("mi_candidate", "mi_candidate"), ("loglik_gap", "gap")):
            np.testing.assert_allclose(table[mine], ref[theirs], rtol=1e-9, atol=1e-14)
        assert table["loglik_identity_error"].max() < 1e-12


@pytest.mark.parametrize("d", [2, 7, 30, 50])
def test_a_stationary_law_shares_products_across_depths_with_the_same_values(d):
    # reference: the same table and J form with the law of every depth computed as μ π^t (stationary=False, the
    # computation before patterns were shared), μ the stationary law
    rng = np.random.default_rng(d)
    kernel = nm.random_kernel(d, alpha=0.5, eps=0.1 / d, rng=rng)
    trees = [nm.random_parents(7, rng=rng) for _ in range(4)]
    mu = nm.stationary_distribution(kernel)
    shared, per_depth = lk.kernel_powers(kernel, 6), lk.kernel_powers(kernel, 6, mu)
    assert shared["law_depth"].max() == 0 and per_depth["law_depth"].tolist() == list(range(7))
    new, old = (lk.tree_pair_table(kernel, trees, laws=laws) for laws in (shared, per_depth))
    assert new["products"] < old["products"]
    for key in ("h", "h_prime", "ancestor"):
        np.testing.assert_array_equal(new[key], old[key])
    for key in ("mi_parent", "mi_candidate", "ratio", "loglik_gap"):
        np.testing.assert_allclose(new[key], old[key], rtol=1e-10, atol=1e-15)
    for parents in trees:
        for h in range(1, 7):
            np.testing.assert_allclose(lk.j_form_gradients(kernel, parents, h, laws=shared),
                                       lk.j_form_gradients(kernel, parents, h, laws=per_depth), rtol=1e-10, atol=1e-15)


def test_zero_entries_give_infinite_gaps_as_before():
    # reference: lemma3_pairs + lemma4_terms under errstate, the kernel report's former path
    kernel = np.array([[0.5, 0.5, 0.0], [0.2, 0.3, 0.5], [0.1, 0.1, 0.8]])
    parents = np.array([-1, 0, 1, 1, 2])
    with np.errstate(divide="ignore", invalid="ignore"):
        pairs = lemma3_pairs(kernel, parents)
        terms = lemma4_terms(kernel, pairs["joint_parent_child"], pairs["joint_candidate_child"])
    table = lk.tree_pair_table(kernel, [parents])
    np.testing.assert_array_equal(np.isfinite(table["loglik_gap"]), np.isfinite(terms["lhs"]))
    np.testing.assert_allclose(table["mi_candidate"], pairs["mi_candidate"], rtol=1e-9, atol=1e-14)


@pytest.mark.parametrize("stationary", [True, False])
def test_product_patterns_bounds_the_products_of_every_tree(stationary):
    # brute force: every recursive tree of H positions, the products the table actually used (the bound is reached)
    for H in range(3, 8):
        rng = np.random.default_rng(H)
        kernel = nm.random_kernel(2, eps=0.1, rng=rng)
        used = lk.tree_pair_table(kernel, list(all_trees(H)), None if stationary else rng.dirichlet(np.ones(2)))
        assert used["products"] == lk.product_patterns(H, stationary=stationary)


def test_powers_needed_are_enough_for_every_tree():
    # brute force: every recursive tree of H = 3..6, the table and the J form from π^0..π^top, top = powers_needed,
    # against the same from every power up to H − 1 (the former top); one power fewer is refused by the table
    kernel = nm.random_kernel(3, alpha=0.7, eps=0.02, rng=np.random.default_rng(12))
    full = lk.kernel_powers(kernel, 5)
    for H in range(3, 7):
        for parents in all_trees(H):
            table_top, j_top = lk.powers_needed([parents], j_form=False), lk.powers_needed([parents], j_form=True)
            table = lk.tree_pair_table(kernel, [parents], laws=lk.kernel_powers(kernel, table_top))
            np.testing.assert_array_equal(table["mi_candidate"], lk.tree_pair_table(kernel, [parents],
                                                                                     laws=full)["mi_candidate"])
            with pytest.raises(ValueError, match="top >="):
                lk.tree_pair_table(kernel, [parents], laws=lk.kernel_powers(kernel, table_top - 1))
            laws = lk.kernel_powers(kernel, j_top)
            for h in range(1, H):
                np.testing.assert_array_equal(lk.j_form_gradients(kernel, parents, h, laws=laws),
                                              lk.j_form_gradients(kernel, parents, h, laws=full))


@pytest.mark.parametrize("seed", [2, 3])
def test_j_form_equals_pairwise_joints_and_enumeration(seed):
    # references: numerics.approximate_init_gradient (one joint per candidate) and the approximate form by
    # enumeration over sequences (init_gradient with denominator="marginal")
    for kernel, trees, init in _instances(seed, 8):
        parents = trees[0]
        for h in range(1, len(parents)):
            mine = lk.j_form_gradients(kernel, parents, h, init)
            np.testing.assert_allclose(mine, nm.approximate_init_gradient(kernel, parents, h, init), atol=1e-13)
            if kernel.shape[0] ** (h + 1) <= 50_000:
                enumerated = nm.init_gradient(kernel, parents, h, init, denominator="marginal")
                np.testing.assert_allclose(mine, enumerated, atol=1e-12)


def test_blocked_dobrushin_equals_the_full_array_version(monkeypatch):
    # reference: numerics.dobrushin_coefficient (a (d, d, d) array); several blocks forced by a small block size
    rng = np.random.default_rng(4)
    monkeypatch.setattr(lk, "BLOCK_BYTES", 8 * 7 * 3)  # 3 rows per block at d = 7
    for d in (2, 3, 7, 40):
        kernel = nm.random_kernel(d, alpha=0.5, rng=rng)
        assert lk.dobrushin_coefficient_blocked(kernel) == pytest.approx(nm.dobrushin_coefficient(kernel), abs=1e-15)


def test_exact_form_by_monte_carlo_falls_within_its_interval_around_enumeration(monkeypatch):
    # reference: the enumerated exact π̄ gradients; the estimate must lie within 4.5 standard errors of them
    kernel = nm.random_kernel(3, alpha=0.7, eps=0.02, rng=np.random.default_rng(5))
    parents = np.array([-1, 0, 1, 0, 2, 3])
    enumerated = lk.exact_form_gradients(kernel, parents, 5)
    assert enumerated["method"] == "enumeration"
    np.testing.assert_allclose(enumerated["gradient"], nm.init_gradient(kernel, parents, 5), atol=1e-15)
    monkeypatch.setattr(lk, "MAX_SEQUENCES", 1)  # beyond enumeration
    sampled = lk.exact_form_gradients(kernel, parents, 5, n=40_000, rng=np.random.default_rng(6))
    assert sampled["method"] == "monte-carlo" and sampled["n"] == 40_000
    assert np.all(np.abs(sampled["gradient"] - enumerated["gradient"]) <= 4.5 * sampled["stderr"])
    assert np.all(np.abs(sampled["margins"] - enumerated["margins"]) <= 4.5 * sampled["margins_stderr"])
    chains = nm.sample_chains(kernel, parents, 1000, rng=np.random.default_rng(7))
    shared = lk.exact_form_gradients(kernel, parents, 3, tokens=chains)  # a prefix of chains drawn on the tree
    assert shared["n"] == 1000 and shared["gradient"].shape == (3,)


@pytest.mark.parametrize("enumerate_", [True, False])
def test_thm3_position_rows_equal_the_per_position_functions(monkeypatch, enumerate_):
    # reference: j_form_gradients, sample_chains (one draw per tree, same generator) and exact_form_gradients called
    # position by position, as the kernel report did before
    if not enumerate_:
        monkeypatch.setattr(lk, "MAX_SEQUENCES", 1)
    rng = np.random.default_rng(8)
    kernel = nm.random_kernel(4, alpha=0.5, eps=0.01, rng=rng)
    trees = [nm.random_parents(6, rng=rng) for _ in range(3)]
    mu = nm.stationary_distribution(kernel)
    laws = lk.kernel_powers(kernel, 5, mu, stationary=True)
    rows = lk.thm3_position_rows(kernel, trees, laws, mu, np.random.default_rng(9))
    draws, n = np.random.default_rng(9), lk.monte_carlo_samples(4, [h for _ in trees for h in range(2, 6)])
    expected = []
    for t, parents in enumerate(trees):
        chains = None if enumerate_ else nm.sample_chains(kernel, parents, n, rng=draws, init=mu)
        for h in range(2, 6):
            exact = lk.exact_form_gradients(kernel, parents, h, mu, tokens=chains)
            expected.append((lk.j_form_gradients(kernel, parents, h, laws=laws).tolist(), exact["gradient"].tolist(),
                             lk.exact_form_decision(exact, int(parents[h]))))
    assert len(rows) == len(expected)
    for row, (j_form, gradient, decision) in zip(rows, expected):
        assert row["J_gradient"] == j_form and row["exact_gradient"] == gradient
        assert {k: row[k] for k in decision} == decision


def test_cost_grows_with_d_and_monte_carlo_samples_share_a_budget():
    small, large = lk.check_cost(300, 6, 20, pairs=True), lk.check_cost(3000, 6, 20, pairs=True)
    assert large["operations"] == pytest.approx(1000 * small["operations"])  # O(d³)
    assert large["operations"] > lk.MAX_OPERATIONS > small["operations"]
    assert lk.monte_carlo_samples(3, [2, 3]) == lk.MONTE_CARLO_SAMPLES[1]  # everything enumerable
    assert lk.monte_carlo_samples(300, list(range(2, 1000))) == lk.MONTE_CARLO_SAMPLES[0]


@pytest.mark.parametrize("stationary", [True, False])
def test_a_d2000_kernel_at_the_default_sweep_is_within_the_limits(stationary):
    # issue 42: Lemmas 3 and 4 were refused at d = 2000 (1.1e12 operations over MAX_OPERATIONS); through the lowest
    # common ancestor the pairs cost O(d³) kernel powers, so the default sweep (20 trees, H = 6) is checked
    cost = lk.check_cost(2000, 6, 20, pairs=True, stationary=stationary)
    assert cost["operations"] <= lk.MAX_OPERATIONS and cost["bytes"] <= lk.MAX_BYTES, cost


def _old_path(batch):
    old = lemma3_pairs_batch(batch["kernels"], batch["parents"], batch["inits"])
    terms = lemma4_terms_from_mi(batch["kernels"][:, None, None], old["joint_parent_child"],
                                 old["joint_candidate_child"], old["mi_parent"], old["mi_candidate"])
    return old, terms


@pytest.mark.parametrize("d, H, n", [(2, 3, 300), (3, 6, 300), (4, 8, 300), (5, 10, 300), (3, 3, 1300), (4, 7, 1300)])
def test_batched_lemma3_equals_the_current_batch(d, H, n):
    # reference: lemma3_pairs_batch (joints (π^k1)ᵀ diag(P(x_c)) π^k2 for every pair, I by rel_entr) and the Lemma 4
    # terms of the current sweep on the same instances; 1300 instances span several of the blocks in which
    # lemma3_ratio_batch evaluates them. At h' = pa(h) the batched values are the parent's own (I(x_h; x_h') =
    # I(x_h; x_pa) exactly, gap 0), the reference's within rounding
    batch = draw_lemma3_batch(np.random.default_rng(d * 10 + H if n == 300 else d * 100 + H), n, d, H)
    new = lemma3_ratio_batch(batch["kernels"], batch["parents"], batch["inits"])
    old, terms = _old_path(batch)
    for key in ("candidate", "ancestor"):
        np.testing.assert_array_equal(new[key], old[key])
    for key in ("mi_candidate", "mi_parent"):
        np.testing.assert_allclose(new[key], old[key], rtol=0, atol=1e-14)
    np.testing.assert_allclose(new["loglik_gap"], terms["lhs"], rtol=0, atol=1e-14)
    np.testing.assert_allclose(new["dobrushin"], old["dobrushin"], rtol=0, atol=1e-15)
    defined = np.isfinite(old["ratio"])
    np.testing.assert_array_equal(np.isfinite(new["ratio"]), defined)
    # the sweep's rounding allowance for a ratio: 1e-14 / I(x_h; x_pa)
    assert np.all(np.abs(new["ratio"] - old["ratio"])[defined] <= 1e-14 / old["mi_parent"][defined])
    parent_pairs = np.broadcast_to(~new["candidate"][:, None, :], new["ratio"].shape)
    assert np.array_equal(new["mi_candidate"][parent_pairs], new["mi_parent"][parent_pairs])
    assert np.all(new["loglik_gap"][parent_pairs] == 0.0)


def test_batched_sweep_counts_equal_the_current_sweep_on_the_same_instances():
    # reference: score_lemma3_batch (the current sweep's scoring, stationary law by least squares) on the instances
    # the batched path drew
    for d, H in ((3, 5), (5, 9)):
        batch = draw_lemma3_batch(np.random.default_rng(d), 400, d, H)
        current, batched = SweepResult("lemma3"), SweepResult("lemma3-batched")
        members = [{"kernel": batch["kernels"][b], "parents": batch["parents"][b], "init": batch["inits"][b, 1],
                    "index": b} for b in range(400)]
        score_lemma3_batch(current, members, compute_sdpi=False)
        score_ratio_batch(batched, batch, 0)
        for key in ("pairs", "degenerate", "violations/dobrushin", "violations/doeblin", "lemma4/nonpositive_gap"):
            assert batched.counts.get(key, 0) == current.counts.get(key, 0), key
        assert batched.maxima["ratio"] == pytest.approx(current.worst["ratio"].value, abs=1e-12)


def test_batched_draws_are_instances_of_the_documented_ranges():
    # references: the stationary law by least squares (numerics.stationary_distribution); tree constraints
    batch = draw_lemma3_batch(np.random.default_rng(9), 50, 4, 7)
    kernels, inits = batch["kernels"], batch["inits"]
    np.testing.assert_allclose(kernels.sum(-1), 1.0, atol=1e-12)
    assert np.all(kernels >= 0)
    for b in range(50):
        np.testing.assert_allclose(inits[b, 0], nm.stationary_distribution(kernels[b]), atol=1e-12)
    assert np.all((batch["parents"][:, 1:] >= 0) & (batch["parents"][:, 1:] < np.arange(1, 7)))


def test_batched_sweep_does_not_depend_on_chunking():
    # reference: the same sweep in one piece (every batch draws from its own generator)
    ranges = dict(LEMMA3_RANGES, d=(3, 5))
    whole = lemma3_batched_sweep(0, 0, 4, batch_size=64, ranges=ranges)
    parts = merge_sweeps([lemma3_batched_sweep(0, 0, 1, batch_size=64, ranges=ranges),
                          lemma3_batched_sweep(0, 1, 4, batch_size=64, ranges=ranges)])
    assert parts.counts == whole.counts and parts.maxima == whole.maxima
    assert parts.worst["ratio"].instance == whole.worst["ratio"].instance
