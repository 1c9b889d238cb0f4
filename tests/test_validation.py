"""Bad input raises ValueError naming the argument (every public function of numerics)."""
import re

import numpy as np
import pytest

from bma_verify import numerics as nm
from bma_verify.numerics.validation import check_parents

RNG = np.random.default_rng(0)
K = np.array([[0.7, 0.3], [0.4, 0.6]])
PARENTS = np.array([-1, 0, 1])
CTX = np.array([[0, 1, 1], [1, 1, 0]])
Q = np.array([0, 1, 0])

BAD = [
    ("kernel", lambda: nm.stationary_distribution(np.array([[0.5, 0.5, 0.0], [0.2, 0.8, 0.0]]))),  # not square
    ("kernel", lambda: nm.stationary_distribution(np.array([[0.5, 0.6], [0.5, 0.5]]))),  # not row-stochastic
    ("kernel", lambda: nm.stationary_distribution(np.array([[1.5, -0.5], [0.5, 0.5]]))),  # negative
    ("kernel", lambda: nm.parent_posterior(np.array([[np.nan, 1], [0.5, 0.5]]), CTX)),  # NaN
    ("kernel", lambda: nm.parent_posterior(np.array([[1.0]]), CTX)),  # d < 2
    ("d", lambda: nm.random_kernel(1, rng=RNG)),
    ("eps", lambda: nm.random_kernel(4, eps=0.3, rng=RNG)),  # d*eps > 1
    ("eps", lambda: nm.random_kernel(4, eps=-0.1, rng=RNG)),
    ("alpha", lambda: nm.random_kernel(4, alpha=0.0, rng=RNG)),
    ("rng", lambda: nm.random_kernel(3, rng=0)),
    ("H", lambda: nm.random_parents(1, rng=RNG)),
    ("parents", lambda: nm.sample_chains(K, np.array([0, 0, 1]), 5, rng=RNG)),  # root not -1
    ("parents", lambda: nm.sample_chains(K, np.array([-1, 0, 2]), 5, rng=RNG)),  # parent not earlier
    ("parents", lambda: nm.pairwise_joint(K, np.array([-1.5, 0.0]), 0, 1)),  # not integers
    ("n", lambda: nm.sample_chains(K, PARENTS, -1, rng=RNG)),  # negative count
    ("L", lambda: nm.sample_task(K, 2, -1, 3, rng=RNG)),
    ("n_contexts", lambda: nm.sample_task(K, 0, 2, 3, rng=RNG)),
    ("init", lambda: nm.sample_chains(K, PARENTS, 5, rng=RNG, init=np.array([0.2, 0.3, 0.5]))),  # wrong length
    ("init", lambda: nm.sample_chains(K, PARENTS, 5, rng=RNG, init=np.array([0.2, 0.3]))),  # not a law
    ("context", lambda: nm.parent_posterior(K, np.array([[0, 2, 1]]))),  # token out of range
    ("context", lambda: nm.parent_posterior(K, np.array([0, 1, 1]))),  # wrong rank
    ("context", lambda: nm.parent_posterior(K, np.array([[0.0, 1.0]]))),  # not integers
    ("query", lambda: nm.bma_predictive(K, CTX, np.array([0, 1]))),  # wrong length
    ("joint", lambda: nm.mutual_information(np.array([[0.5, 0.6], [0.0, 0.0]]))),  # does not sum to one
    ("joint", lambda: nm.chi2_mutual_information(np.array([0.5, 0.5]))),  # wrong rank
    ("joint", lambda: nm.mutual_information(np.array([[1.2, -0.2], [0.0, 0.0]]))),  # negative
    ("i", lambda: nm.pairwise_joint(K, PARENTS, 5, 0)),  # position out of range
    ("attention", lambda: nm.parent_loss(np.ones((3, 2)), PARENTS)),
    ("parents", lambda: nm.oracle_loss(K, np.array([-1, 0]), Q)),  # length mismatch
    ("p", lambda: nm.entropy(np.array([0.5, 0.2]))),
]


@pytest.mark.parametrize("argument, call", BAD, ids=[f"{a}-{i}" for i, (a, _) in enumerate(BAD)])
def test_bad_input_raises_value_error_naming_the_argument(argument, call):
    with pytest.raises(ValueError, match=rf"\b{argument}\b"):
        call()


@pytest.mark.parametrize("parents, message", [
    ([-1, 5], "parents[1] = 5 must be < 1"),
    ([-1, 0, -3], "parents[2] = -3 must be >= 0"),
    ([2, 0, 1], "parents[0] = 2 must be -1"),
    ([[-1, 0, 1], [-1, 0, 2]], "parents[1, 2] = 2 must be < 2"),  # a batch of trees: the tree, then the position
])
def test_a_bad_tree_is_refused_naming_the_first_wrong_position_and_its_value(parents, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        check_parents(np.array(parents))
