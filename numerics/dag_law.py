"""Exact laws and instances of the k-parent DAG task, shared by the set versions of Lemmas 3, 4 and Theorem 3.

Exact laws come from the joint tensor P(x_0, ..., x_{n−1}) of the DAG, built by the product formula
μ₀(x_0) Π_h π(x_h | x_{S_h}) (:func:`dag_joint_tensor`) and marginalised; :mod:`numerics.dag_enumeration` is the
independent sequence-by-sequence reference. T = S_h denotes the true parent set of position h and S another
k-subset of {0..h−1}; "π(· | x_S)" is π_k applied to the values of S (in position order) as if they were the
parents. The instances are the random DAGs of the sweeps (:func:`draw_dag_instance`) and the planted instance
where an overlapping set carries all the information (:func:`overlap_ratio_one_instance`).
Our extension, not the paper's (``ext-dag-*`` claims).
"""
from __future__ import annotations

import numpy as np

from bma_verify.numerics.validation import check_positive_int, check_rng
from bma_verify.numerics.dag import (check_dag_kernels, check_parent_sets, encode_parent_values, random_dag_kernels,
                                     random_parent_sets, resolve_dag_init, sample_dag_chains)
from bma_verify.numerics.dag_enumeration import check_enumerable
from bma_verify.numerics.task import random_kernel

INIT_KINDS = ("stationary", "non-stationary")

#: Documented ranges of the random DAG instances of the sweeps. d, k, H uniform on the ranges (H at least
#: k + 2 so that some position has >= 2 candidates, and reduced until d**H <= max_configurations); ε ~ U[0,
#: 1/(2d)]·(eps_times_d range); Dirichlet concentration log-uniform; the non-stationary μ₀ ~ Dirichlet(1).
DAG_RANGES = {"d": (2, 3), "k": (2, 3), "H": (4, 6), "eps_times_d": (0.0, 0.5), "dirichlet_alpha": (0.2, 5.0),
              "max_configurations": 5_000}


# ----------------------------------------------------------------------------------------------------------
# Exact joints


def dag_joint_tensor(kernels, parent_sets, init=None, n_positions: int | None = None) -> np.ndarray:
    """P(x_0, ..., x_{n−1}) as a tensor with one axis of length d per position (n = H by default).

    Built by the product formula: start from μ₀ and multiply in π_m(x_h | x_{S_h}) broadcast over the axes S_h and
    h, position by position. Refuses d**n > ``numerics.enumeration.MAX_SEQUENCES``.
    """
    kernels = check_dag_kernels(kernels)
    k, d = len(kernels), kernels[0].shape[1]
    parent_sets = check_parent_sets(parent_sets, k=k)
    if parent_sets.ndim != 2:
        raise ValueError(f"parent_sets must be one DAG of shape (H, k); got {parent_sets.shape}")
    H = parent_sets.shape[0]
    n = H if n_positions is None else check_positive_int(n_positions, "n_positions", 1)
    if n > H:
        raise ValueError(f"n_positions must be at most H = {H}, got {n}")
    check_enumerable(d, n)
    joint = resolve_dag_init(kernels, init).copy()
    for h in range(1, n):
        m = min(k, h)
        shape = [1] * (h + 1)
        for s in parent_sets[h, :m]:
            shape[s] = d
        shape[h] = d
        # parents are increasing and h is after them: the table's axes are already in position order
        joint = joint[..., None] * kernels[m - 1].reshape(shape)
    return joint


class DagLaw:
    """Exact marginal and set-joint laws of one DAG instance, from one joint tensor (cached).

    Parameters
    ----------
    kernels, parent_sets, init : as :func:`dag_joint_tensor`; the tensor covers positions 0..H−1.
    """

    def __init__(self, kernels, parent_sets, init=None):
        self.kernels = check_dag_kernels(kernels)
        self.k, self.d = len(self.kernels), self.kernels[0].shape[1]
        self.parent_sets = check_parent_sets(parent_sets, k=self.k)
        self.init = init
        self.tensor = dag_joint_tensor(self.kernels, self.parent_sets, init)
        self.H = self.parent_sets.shape[0]
        self._marginals: dict[tuple, np.ndarray] = {}

    def marginal(self, positions) -> np.ndarray:
        """Joint tensor of x at the sorted distinct ``positions`` (axes in increasing position order)."""
        positions = tuple(sorted({int(p) for p in positions}))
        if not positions or positions[0] < 0 or positions[-1] >= self.H:
            raise ValueError(f"positions must be a non-empty subset of 0..{self.H - 1}, got {positions}")
        if positions not in self._marginals:
            others = tuple(a for a in range(self.H) if a not in positions)
            self._marginals[positions] = self.tensor.sum(axis=others)
        return self._marginals[positions]

    def joint(self, A, B) -> np.ndarray:
        """P(x_A = a, x_B = b) as a (d**|A|, d**|B|) matrix, rows/columns encoded in position order (A, B sorted
        sets; they may overlap)."""
        A = tuple(sorted(int(a) for a in A))
        B = tuple(sorted(int(b) for b in B))
        union = tuple(sorted(set(A) | set(B)))
        table = self.marginal(union)
        if set(A).isdisjoint(B) and A and B and max(A) < min(B):
            return table.reshape(self.d ** len(A), self.d ** len(B))
        configs = np.indices(table.shape).reshape(len(union), -1).T  # (d**|U|, |U|)
        where = {p: i for i, p in enumerate(union)}
        rows = encode_parent_values(configs[:, [where[a] for a in A]], self.d)
        cols = encode_parent_values(configs[:, [where[b] for b in B]], self.d)
        out = np.zeros((self.d ** len(A), self.d ** len(B)))
        np.add.at(out, (rows, cols), table.reshape(-1))
        return out

    def true_set(self, h: int) -> tuple:
        m = min(self.k, h)
        return tuple(int(s) for s in self.parent_sets[h, :m])


def dag_set_joint(kernels, parent_sets, A, B, init=None) -> np.ndarray:
    """Exact P(x_A = a, x_B = b), (d**|A|, d**|B|), sets encoded first-position-most-significant (may overlap)."""
    return DagLaw(kernels, parent_sets, init).joint(A, B)


def check_position_and_set(law: DagLaw, h: int, S) -> tuple[int, tuple]:
    """(h, S) checked against ``law``: a position k <= h < H and k distinct earlier positions S, sorted; else
    ``ValueError``."""
    h = check_positive_int(h, "h", 1)
    if not law.k <= h < law.H:
        raise ValueError(f"h must be a position in {law.k}..{law.H - 1} (h >= k chooses among C(h, k) sets), got {h}")
    S = tuple(sorted(int(s) for s in S))
    if len(S) != law.k or len(set(S)) != law.k or S[0] < 0 or S[-1] >= h:
        raise ValueError(f"S must be {law.k} distinct positions in 0..{h - 1} (a candidate parent set of h), got {S}")
    return h, S



def sample_for_set(kernels, parent_sets, h, S, n, rng, init):
    """The Monte Carlo checks' common start: validated (law, h, S), the true set T, n sampled sequences x of shape
    (n, h + 1), and the encoded values a = x_T, b = x_S (each (n,), symbols in 0..d**k − 1)."""
    law = DagLaw(kernels, parent_sets, init)
    h, S = check_position_and_set(law, h, S)
    n = check_positive_int(n, "n", 2)
    rng = check_rng(rng)
    T = law.true_set(h)
    x = sample_dag_chains(law.kernels, law.parent_sets[:h + 1], n, rng=rng, init=init)
    return law, h, S, T, x, encode_parent_values(x[:, list(T)], law.d), encode_parent_values(x[:, list(S)], law.d)


# ----------------------------------------------------------------------------------------------------------
# Instances: random (the sweeps) and planted


def overlap_ratio_one_instance(d: int = 2, eps: float = 0.05, *, rng=None) -> dict:
    """A planted instance where an overlapping candidate set carries all the information: ratio = 1.

    k = 2, H = 4, S_2 = S_3 = {0, 1}; π_2(· | a, b) = f(a) ignores its second parent (f = ``random_kernel(d,
    eps=eps)``, or a fixed informative kernel when ``rng`` is None). For h = 3 and S = {0, 2} (sharing position
    0 at the same rank), x_3 depends on (x_0, x_1) only through x_0, so I(x_3; x_S) = I(x_3; x_0) = I(x_3; x_T):
    the ratio is 1 (no α < 1 bounds overlapping sets) and the Lemma 4 gap is 0 (not strict).

    Returns
    -------
    dict: ``kernels``, ``parent_sets``, ``h`` (3), ``S`` ((0, 2)), ``T`` ((0, 1)).
    """
    d = check_positive_int(d, "d", 2)
    if rng is None:
        f = np.full((d, d), eps) + np.eye(d) * (1.0 - d * eps)  # a noisy copy: informative, entries >= eps
    else:
        f = random_kernel(d, eps=eps, rng=check_rng(rng))
    order1 = np.full((d, d), eps) + np.eye(d) * (1.0 - d * eps)
    order2 = np.repeat(f, d, axis=0)  # row (a, b) = f(a)
    parent_sets = np.array([[-1, -1], [0, -1], [0, 1], [0, 1]])
    return {"kernels": (order1, order2), "parent_sets": parent_sets, "h": 3, "S": (0, 2), "T": (0, 1)}


def instance_rng(seed: int, tag: int, index: int) -> np.random.Generator:
    """The generator of instance ``index`` of a sweep: ``SeedSequence(seed, spawn_key=(tag, index))``, so a sweep
    cut into ranges repeats its instances."""
    return np.random.default_rng(np.random.SeedSequence(int(seed), spawn_key=(tag, int(index))))


def draw_dag_instance(rng: np.random.Generator, ranges: dict = DAG_RANGES) -> dict:
    """One random (kernel family, DAG, non-stationary μ₀) over ``ranges`` (see :data:`DAG_RANGES`)."""
    d = int(rng.integers(ranges["d"][0], ranges["d"][1] + 1))
    k = int(rng.integers(ranges["k"][0], ranges["k"][1] + 1))
    H = int(rng.integers(max(ranges["H"][0], k + 2), max(ranges["H"][1], k + 2) + 1))
    while d**H > ranges["max_configurations"] and H > k + 2:
        H -= 1
    eps = float(rng.uniform(*ranges["eps_times_d"]) / d)
    low, high = np.log(ranges["dirichlet_alpha"])
    concentration = float(np.exp(rng.uniform(low, high)))
    kernels = random_dag_kernels(d, k, alpha=concentration, eps=eps, rng=rng)
    return {"d": d, "k": k, "H": H, "eps": eps, "dirichlet_alpha": concentration, "kernels": kernels,
            "parent_sets": random_parent_sets(H, k, rng=rng), "init": rng.dirichlet(np.ones(d))}


def dag_instance_record(kernels, parent_sets, init, **extra) -> dict:
    """A JSON-ready instance: lists, ``init`` None for the stationary law of π_1."""
    record = {"kernels": [np.asarray(t).tolist() for t in kernels], "parent_sets": np.asarray(parent_sets).tolist(),
              "init": None if init is None else np.asarray(init).tolist()}
    for key, value in extra.items():
        if isinstance(value, np.generic):
            value = value.item()
        elif isinstance(value, tuple):
            value = list(value)
        record[key] = value
    return record


def instance_size_key(instance: dict, index: int) -> tuple:
    """The order in which a sweep keeps its smallest counterexample: (H, d, k, instance index)."""
    return (instance["H"], instance["d"], instance["k"], index)

