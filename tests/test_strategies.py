"""The public strategies (numerics/strategies.py) draw, by default, what the paper's theorems speak about, and the
degenerate rest only behind ``degenerate=True``; no strategy pairs ``init=None`` with a kernel whose stationary law
is not unique (the ValueError of ``stationary_distribution`` a test would otherwise meet)."""
import random

import numpy as np
import pytest
from hypothesis import find, given, settings
from hypothesis.errors import NoSuchExample

from bma_verify import numerics as nm
from bma_verify.numerics import strategies as bst

FIND = settings(database=None, max_examples=2000)


def _first(strategy):
    """The first value the strategy draws (for the argument checks, which run when a value is drawn)."""
    return find(strategy, lambda _: True, settings=FIND)


def _stationary_law_is_unique(kernel) -> bool:
    try:
        nm.stationary_distribution(kernel)
    except ValueError:
        return False
    return True


def _mi(kernel, parents, a, b, init):
    return nm.mutual_information(nm.pairwise_joint(kernel, parents, a, b, init=init))


@given(bst.instances())
def test_default_instances_satisfy_the_hypotheses_of_the_theorems(instance):
    # Reference: the hypotheses written out: π >= ε > 0 (ε >= 0.05/d), δ(π) >= MIN_DOBRUSHIN by the public
    # dobrushin_coefficient, μ₀ >= 0.05/d everywhere, and a stationary law that least squares finds unique.
    kernel, parents, init = instance
    d = kernel.shape[0]
    assert kernel.min() >= bst.DEFAULT_FLOOR_TIMES_D / d - 1e-12
    assert nm.dobrushin_coefficient(kernel) >= bst.MIN_DOBRUSHIN
    assert _stationary_law_is_unique(kernel)
    assert init is None or init.min() >= bst.DEFAULT_FLOOR_TIMES_D / d - 1e-12


@given(bst.instances(min_H=3))
def test_lemma3_is_strict_on_every_default_instance(instance):
    # Lemma 3 (strict DPI) as a user writes it: I(x_h; x_h') < I(x_h; x_pa(h)) for every h' < h, h' != pa(h).
    # Before the defaults changed, this failed at once on a uniform kernel and on μ₀ = [0, 1] (every I was 0).
    kernel, parents, init = instance
    for h in range(2, len(parents)):
        parent = _mi(kernel, parents, h, int(parents[h]), init)
        for h_prime in range(h):
            if h_prime != parents[h]:
                assert _mi(kernel, parents, h, h_prime, init) < parent, (h, h_prime)


def test_degenerate_instances_are_behind_the_flag():
    # Reference: the instance of the issue, found by Hypothesis' minimiser: with degenerate=True a tie where every
    # mutual information is 0 (a uniform kernel, or a μ₀ without full support feeding the root) is reachable;
    # without the flag the same search finds nothing.
    def every_information_is_zero(instance):
        kernel, parents, init = instance
        return all(_mi(kernel, parents, h, k, init) <= 0.0 for h in range(1, len(parents)) for k in range(h))

    found = find(bst.instances(degenerate=True), every_information_is_zero, settings=FIND,
                 random=random.Random(0))
    assert found[0].shape == (2, 2)
    with pytest.raises(NoSuchExample):
        find(bst.instances(), every_information_is_zero, settings=settings(FIND, max_examples=300),
             random=random.Random(0))


def test_degenerate_kernels_include_reducible_ones_and_point_masses():
    # Reference: the identity kernel's stationary law is not unique (stationary_distribution refuses it), and a
    # point mass has a zero entry; the flag must reach both, or it would not draw the degenerate space.
    reducible = find(bst.kernels(degenerate=True), lambda k: not _stationary_law_is_unique(k), settings=FIND,
                     random=random.Random(0))
    assert not _stationary_law_is_unique(reducible)
    point_mass = find(bst.init_distributions(3, degenerate=True), lambda p: p.max() == 1.0, settings=FIND,
                      random=random.Random(0))
    assert point_mass.min() == 0.0


@given(bst.instances(degenerate=True, max_H=5))
def test_degenerate_instances_pair_init_none_only_with_a_unique_stationary_law(instance):
    # Reference: stationary_distribution itself (the call pairwise_joint makes for init=None): it must not raise.
    # tests/test_information.py::test_data_processing_along_a_path_of_the_tree met that ValueError under bma-dev.
    kernel, parents, init = instance
    if init is None:
        assert _stationary_law_is_unique(kernel)
        nm.pairwise_joint(kernel, parents, 0, len(parents) - 1)


@given(bst.dag_instances(max_k=2, max_H=5))
def test_default_dag_instances_satisfy_the_hypotheses(instance):
    # Reference: every table >= 0.05/d and of Dobrushin coefficient >= MIN_DOBRUSHIN (max row-pair total
    # variation, by a loop here), μ₀ >= 0.05/d.
    tables, parent_sets, init = instance
    d = tables[0].shape[1]
    for table in tables:
        assert table.min() >= bst.DEFAULT_FLOOR_TIMES_D / d - 1e-12
        tv = max(0.5 * np.abs(a - b).sum() for a in table for b in table)
        assert tv >= bst.MIN_DOBRUSHIN
    assert init is None or init.min() >= bst.DEFAULT_FLOOR_TIMES_D / d - 1e-12


@pytest.mark.parametrize("strategy, name", [
    (lambda: bst.kernels(min_eps=0.0), "min_eps"),
    (lambda: bst.instances(min_mass=0.0, stationary=False), "min_mass"),
    (lambda: bst.init_distributions(3, min_mass=0.0), "min_mass"),
    (lambda: bst.dag_instances(min_eps=0.0), "min_eps"),
    (lambda: bst.kernels(d=4, min_eps=0.24, max_eps=0.25), "min_eps"),  # δ(π) <= 1 − 4·0.24 < MIN_DOBRUSHIN
])
def test_degenerate_bounds_without_the_flag_are_refused_naming_the_argument(strategy, name):
    with pytest.raises(ValueError, match=name):
        _first(strategy())


def test_the_flag_accepts_the_degenerate_bounds():
    # Reference: the same arguments as above, with degenerate=True, draw valid laws with the floor 0.
    kernel = _first(bst.kernels(min_eps=0.0, degenerate=True))
    init = _first(bst.init_distributions(3, min_mass=0.0, degenerate=True))
    assert np.allclose(kernel.sum(axis=1), 1.0) and kernel.min() >= 0.0 and np.isclose(init.sum(), 1.0)
