"""The claim sweeps of numerics (claim_sweeps, dpi_sweep, init_gradient_sweep, consistency_rates, invariance) that
serve lemma3-strict-dpi, lemma4-loglik-gap, thm2-consistency, thm3-init-gradient, bma-score-identity and
prop1-invariance, against enumeration, dit and second formulas."""
import dit
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bma_verify import numerics as nm
from bma_verify.numerics import strategies as bst
from bma_verify.numerics.claim_sweeps import merge_sweeps
from bma_verify.numerics.consistency_rates import hoeffding_bound, thm2_error_rates, wilson_interval
from bma_verify.numerics.dpi_sweep import (lemma3_check_pair, lemma3_pairs, lemma3_sweep_chunk, lemma4_monte_carlo,
                                           lemma4_terms)
from bma_verify.numerics.init_gradient_sweep import thm3_check_position, thm3_sweep_chunk
from bma_verify.numerics.invariance import prop1_shift_effects
from bma_verify.numerics.enumeration import all_trees, brute_force_joint, brute_force_parent_posterior


@given(bst.instances(min_d=2, max_d=3, min_H=3, max_H=6, min_eps=0.01))
@settings(max_examples=25)
def test_batched_pair_joints_equal_enumeration(instance):
    # the LCA formula of lemma3_pairs against the full likelihood summed over all d^H sequences
    kernel, parents, init = instance
    pairs = lemma3_pairs(kernel, parents, init)
    for p in range(pairs["h"].size):
        h, hp, pa = int(pairs["h"][p]), int(pairs["h_prime"][p]), int(pairs["parent"][p])
        np.testing.assert_allclose(pairs["joint_candidate_child"][p], brute_force_joint(kernel, parents, [hp, h], init),
                                   atol=1e-14)
        np.testing.assert_allclose(pairs["joint_candidate_parent"][p],
                                   brute_force_joint(kernel, parents, [hp, pa], init), atol=1e-14)
        np.testing.assert_allclose(pairs["joint_parent_child"][p], brute_force_joint(kernel, parents, [pa, h], init),
                                   atol=1e-14)


def test_pair_informations_match_dit():
    # dit's Shannon mutual information (bits → nats) of the same exact joints
    rng = np.random.default_rng(0)
    kernel = nm.random_kernel(4, eps=0.02, rng=rng)
    parents = nm.random_parents(7, rng=rng)
    pairs = lemma3_pairs(kernel, parents, rng.dirichlet(np.ones(4)))
    for p in range(0, pairs["h"].size, 3):
        for key, joint in (("mi_candidate", "joint_candidate_child"), ("mi_parent", "joint_parent_child")):
            reference = dit.shannon.mutual_information(dit.Distribution.from_ndarray(pairs[joint][p]), [0], [1])
            assert pairs[key][p] == pytest.approx(reference * np.log(2), abs=1e-12)


def test_stacked_inits_equal_separate_calls():
    rng = np.random.default_rng(1)
    kernel = nm.random_kernel(3, eps=0.05, rng=rng)
    parents = nm.random_parents(6, rng=rng)
    inits = np.stack([nm.stationary_distribution(kernel), rng.dirichlet(np.ones(3))])
    stacked = lemma3_pairs(kernel, parents, inits)
    for i in range(2):
        alone = lemma3_pairs(kernel, parents, inits[i])
        mask = stacked["init_index"] == i
        np.testing.assert_array_equal(stacked["ratio"][mask], alone["ratio"])
        np.testing.assert_array_equal(stacked["eta_chi2"][mask], alone["eta_chi2"])


def test_ancestor_flag_matches_the_definition():
    parents = np.array([-1, 0, 1, 0, 2, 4])
    pairs = lemma3_pairs(np.array([[0.7, 0.3], [0.4, 0.6]]), parents)
    for h, hp, flag in zip(pairs["h"], pairs["h_prime"], pairs["ancestor"]):
        chain, a = [], int(parents[h])
        while a != -1:
            chain.append(a)
            a = int(parents[a])
        assert flag == (hp in chain)


def test_sweep_is_independent_of_chunking():
    whole = lemma3_sweep_chunk(11, 0, 24)
    parts = merge_sweeps([lemma3_sweep_chunk(11, 0, 7), lemma3_sweep_chunk(11, 17, 24),
                          lemma3_sweep_chunk(11, 7, 17)])
    assert whole.summary() == parts.summary()
    assert whole.counts["pairs"] > 0
    thm3_whole = thm3_sweep_chunk(5, 0, 6)
    thm3_parts = merge_sweeps([thm3_sweep_chunk(5, 3, 6), thm3_sweep_chunk(5, 0, 3)])
    assert thm3_whole.summary() == thm3_parts.summary()


def test_lemma3_theorem_candidates_hold_on_the_sweep():
    # η_KL of the channel x_pa → x_h' and its Dobrushin coefficient are theorems: zero violations
    result = lemma3_sweep_chunk(3, 0, 40)
    assert result.counts["violations/sdpi"] == 0
    assert result.counts["violations/dobrushin_channel"] == 0
    assert result.worst["ratio"].value < 1


def test_lemma3_check_pair_agrees_with_the_sweep_quantities():
    rng = np.random.default_rng(2)
    kernel = nm.random_kernel(3, eps=0.03, rng=rng)
    parents = np.array([-1, 0, 1, 2, 0])
    out = lemma3_check_pair(kernel, parents, 3, 0)
    assert out["relation"] == "ancestor"
    direct = (nm.mutual_information(nm.pairwise_joint(kernel, parents, 0, 3))
              / nm.mutual_information(nm.pairwise_joint(kernel, parents, 2, 3)))
    assert out["ratio"] == pytest.approx(direct, rel=1e-12)
    assert out["alphas"]["dobrushin"] == pytest.approx(nm.dobrushin_coefficient(kernel))
    assert out["ratio"] <= out["alphas"]["sdpi"] + 1e-12
    with pytest.raises(ValueError, match="h_prime"):
        lemma3_check_pair(kernel, parents, 3, 2)  # the parent itself is not a candidate


@given(bst.instances(min_d=2, max_d=4, min_H=3, max_H=7, min_eps=0.01))
@settings(max_examples=30)
def test_lemma4_identity_holds_exactly_and_the_gap_is_positive(instance):
    kernel, parents, init = instance
    pairs = lemma3_pairs(kernel, parents, init)
    terms = lemma4_terms(kernel, pairs["joint_parent_child"], pairs["joint_candidate_child"])
    np.testing.assert_allclose(terms["lhs"], terms["rhs"], atol=1e-13)
    # strictly positive unless x_h carries no information and every q equals π (ties at zero information)
    assert np.all(terms["lhs"] >= -1e-15)


def test_lemma4_left_side_is_the_difference_of_expected_log_likelihoods():
    # second formula: a sum over all sequences of the log-likelihood difference
    rng = np.random.default_rng(4)
    kernel = nm.random_kernel(3, eps=0.05, rng=rng)
    parents = np.array([-1, 0, 0, 1])
    from bma_verify.numerics.enumeration import sequence_distribution

    sequences, probabilities = sequence_distribution(kernel, parents)
    sequences = sequences.astype(np.int64)
    expected = probabilities @ (np.log(kernel[sequences[:, 1], sequences[:, 3]])
                                - np.log(kernel[sequences[:, 2], sequences[:, 3]]))
    terms = lemma4_terms(kernel, nm.pairwise_joint(kernel, parents, 1, 3), nm.pairwise_joint(kernel, parents, 2, 3))
    assert terms["lhs"] == pytest.approx(expected, abs=1e-14)


def test_lemma4_monte_carlo_is_within_its_stated_error():
    rng = np.random.default_rng(5)
    kernel = nm.random_kernel(3, eps=0.05, rng=rng)
    parents = np.array([-1, 0, 0, 1, 2])
    out = lemma4_monte_carlo(kernel, parents, 4, 1, 50_000, rng=rng)
    z = (out["estimate"].value - out["exact"]["lhs"]) / out["estimate"].stderr
    assert abs(z) < 4


def test_thm3_position_margins_and_identity():
    rng = np.random.default_rng(6)
    kernel = nm.random_kernel(3, eps=0.05, rng=rng)
    parents = np.array([-1, 0, 0, 1, 2])
    out = thm3_check_position(kernel, parents, 4, rng.dirichlet(np.ones(3)))
    assert out["chi2_identity_error"] < 1e-13
    assert out["margin_exact"] > 0 and out["margin_approximate"] > 0


def test_thm3_sweep_reports_zero_information_kernels_as_ties():
    result = thm3_sweep_chunk(0, 0, 60)
    # THM3_RANGES makes ~5% of kernels zero-information: every candidate's gradient is 0 there
    assert result.counts.get("ties/exact", 0) > 0
    assert result.counts.get("violations/exact", 0) == 0


def test_hoeffding_bound_formula_and_thm2_rates():
    assert hoeffding_bound(10, 0.3, 0.1) == pytest.approx(np.exp(-10 * 0.09 / (2 * np.log(10) ** 2)))
    with pytest.raises(ValueError, match="eps"):
        hoeffding_bound(1, 0.1, 0.0)
    rng = np.random.default_rng(7)
    kernel = nm.random_kernel(3, eps=0.05, rng=rng)
    parents = np.array([-1, 0, 1, 1])
    out = thm2_error_rates(3, kernel, parents, [1, 4, 16], 2)
    again = thm2_error_rates(3, kernel, parents, [1, 4, 16], 2, chunk_blocks=1)
    np.testing.assert_array_equal(out["pair_rate"], again["pair_rate"])
    assert np.all(out["pair_high"] <= out["bound"])  # the Hoeffding bound holds (it is loose)
    assert out["argmax_rate"][-1].max() < out["argmax_rate"][0].max()  # consistency: errors fall with L


def test_wilson_interval_coverage():
    rng = np.random.default_rng(8)
    hits = rng.binomial(400, 0.03, size=2000)
    low, high = wilson_interval(hits, 400)
    coverage = np.mean((low <= 0.03) & (0.03 <= high))
    assert 0.93 <= coverage <= 0.97  # nominal 95%; Monte Carlo sd of the coverage over 2000 draws ≈ 0.005


@given(st.integers(3, 5), st.integers(2, 3), st.integers(0, 4), st.integers(0, 2**32 - 1))
@settings(max_examples=15)
def test_posterior_by_enumerating_trees_equals_parent_posterior(H, d, L, seed):
    # bma-score-identity: Bayes' rule over all (H-1)! trees with the full likelihood vs the factorised softmax
    rng = np.random.default_rng(seed)
    kernel = nm.random_kernel(d, eps=0.02, rng=rng)
    context = nm.sample_chains(kernel, nm.random_parents(H, rng=rng), L, rng=rng)
    np.testing.assert_allclose(brute_force_parent_posterior(kernel, context), nm.parent_posterior(kernel, context),
                               atol=1e-12)


def test_all_trees_are_distinct_recursive_trees():
    trees = all_trees(5)
    assert trees.shape == (24, 5) and len({tuple(t) for t in trees}) == 24
    with pytest.raises(ValueError, match="H must"):
        all_trees(11)


def test_prop1_column_shift_is_invisible_and_row_shift_is_not():
    rng = np.random.default_rng(9)
    for _ in range(10):
        d = 4
        context = rng.integers(0, d, size=(3, 6))
        out = prop1_shift_effects(rng.normal(size=(d, d)), rng.normal(size=d), rng.normal(size=d), context)
        assert out["column_shift_change"] < 1e-12
        assert out["row_shift_change"] > 1e-6


def test_histogram_puts_huge_ratios_in_the_last_bin_without_warnings():
    # near-zero-information kernels give ratio/α up to ~1e290 (α ~ 1e-300); the bin index must not overflow
    from bma_verify.numerics.claim_sweeps import HISTOGRAM_EDGES, SweepResult

    result = SweepResult("lemma3")
    result.histogram("ratio", np.array([0.0, 0.5, 1.19, 1e290, -3.0]))
    counts = result.histograms["ratio"]
    assert counts.sum() == 5 and counts[-1] == 2 and counts[0] == 2
    assert counts[int(0.5 / (HISTOGRAM_EDGES[1] - HISTOGRAM_EDGES[0]))] == 1


def test_argmax_status_is_the_rule_for_the_parent_and_for_a_shuffled_label():
    from bma_verify.numerics.init_gradient_sweep import argmax_status

    assert argmax_status([0.1, 0.3, -0.4], 1) == ("holds", pytest.approx(0.2))
    assert argmax_status([0.1, 0.3, -0.4], 0)[0] == "violation"
    assert argmax_status([0.0, 0.0, 0.0], 2)[0] == "tie"  # zero-information kernel: every gradient is 0


def test_thm3_sweep_control_rejects_shuffled_labels_and_keeps_the_identities():
    # the shuffled label (a uniformly drawn other candidate) loses the argmax in every non-tie case, while the
    # true parent wins them all; E = (1/h) J by enumeration against pairwise joints holds to rounding
    result = thm3_sweep_chunk(4, 0, 12)
    counts = result.counts
    non_ties = counts["positions"] - counts.get("control/ties/approximate", 0)
    assert counts.get("violations/approximate", 0) == 0
    assert counts["control/violations/approximate"] == non_ties > 0
    assert result.worst["j_identity_error"].value < 1e-13
    assert "stationary/negative_margin/exact" in result.worst


def test_hoeffding_exponent_factor_is_the_bound_to_that_power():
    bound = hoeffding_bound(np.array([1, 4, 16]), 0.5, 0.1)
    np.testing.assert_allclose(hoeffding_bound(np.array([1, 4, 16]), 0.5, 0.1, exponent_factor=4.0), bound**4,
                               rtol=1e-12)


def test_thm3_monte_carlo_j_form_agrees_with_the_exact_j_and_a_claimed_label_moves_the_margins():
    from bma_verify.numerics.init_gradient_sweep import thm3_monte_carlo

    rng = np.random.default_rng(3)
    kernel = nm.random_kernel(3, eps=0.05, rng=rng)
    parents = np.array([-1, 0, 1, 1, 2])
    out = thm3_monte_carlo(kernel, parents, 4, 40_000, rng=rng)
    z = (out["gradient"].value - out["approximate"]) / out["gradient"].stderr
    assert np.all(np.abs(z) < 4), z  # h = 4 coordinates: a false alarm has probability < 3e-4
    other = int(np.delete(np.arange(4), parents[4])[0])
    claimed = thm3_monte_carlo(kernel, parents, 4, 40_000, rng=rng, claimed=other)
    assert claimed["claimed"] == other and parents[4] in claimed["others"]
    with pytest.raises(ValueError, match="claimed"):
        thm3_monte_carlo(kernel, parents, 4, 10, rng=rng, claimed=4)
    with pytest.raises(ValueError, match="form"):
        thm3_monte_carlo(kernel, parents, 4, 10, rng=rng, form="mixture")
