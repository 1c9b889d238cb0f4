"""Mutation checks: a bug planted in a foundation function makes the test that guards it fail.

Each case replaces one public function of ``numerics`` with a plausible wrong version and runs the real test that
should catch it; the test must raise. This shows the reference comparisons have power (no vacuous tests).
"""
import numpy as np
import pytest
from scipy.special import rel_entr

from bma_verify import numerics as nm
from tests import test_bma, test_information, test_task

_posterior, _joint, _chi2, _sample = nm.parent_posterior, nm.pairwise_joint, nm.chi2_mutual_information, nm.sample_chains


def transposed_posterior(kernel, context):
    kernel = np.asarray(kernel)
    return _posterior(kernel.T / kernel.T.sum(1, keepdims=True), context)


def log2_mutual_information(joint):
    joint = np.asarray(joint, dtype=float)
    px, py = joint.sum(-1), joint.sum(-2)
    return float(rel_entr(joint, np.outer(px, py)).sum() / np.log(2))


def independent_joint(kernel, parents, i, j, init=None):
    joint = _joint(kernel, parents, i, j, init=init)
    return np.outer(joint.sum(1), joint.sum(0))


def halved_chi2(joint):
    return 0.5 * _chi2(joint)


def shuffled_root_sampler(kernel, parents, n, *, rng, init=None):
    d = np.asarray(kernel).shape[0]
    law = nm.stationary_distribution(kernel) if init is None else np.asarray(init)
    return _sample(kernel, parents, n, rng=rng, init=np.roll(law, 1) if d > 1 else law)


CASES = [
    ("parent_posterior", transposed_posterior, test_bma.test_parent_posterior_equals_enumeration_over_all_trees,
     {"seed": 0}),
    ("mutual_information", log2_mutual_information, test_information.test_mutual_information_agrees_with_dit, {}),
    ("pairwise_joint", independent_joint, test_information.test_pairwise_joint_equals_enumeration_of_all_sequences,
     {"seed": 0, "stationary": True}),
    ("chi2_mutual_information", halved_chi2,
     test_information.test_chi2_mutual_information_is_sum_of_squared_nontrivial_singular_values, {}),
    ("sample_chains", shuffled_root_sampler, test_task.test_sample_chains_reproduce_exact_pairwise_joints,
     {"stationary": False}),
]


@pytest.mark.parametrize("name, bug, guard, kwargs", CASES, ids=[c[0] for c in CASES])
def test_planted_bug_is_caught(monkeypatch, name, bug, guard, kwargs):
    guard(**kwargs)  # the guard passes on the real code ...
    monkeypatch.setattr(nm, name, bug)
    with pytest.raises(AssertionError):  # ... and fails on the planted bug
        guard(**kwargs)
