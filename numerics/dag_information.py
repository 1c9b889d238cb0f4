"""Information theory for parent sets on the k-parent DAG task (issue 15 §2; our extension, not the paper's).

Claim ids served (proposed for the registry): ``ext-dag-lemma4-sets``, ``ext-dag-lemma3-sets``,
``ext-dag-thm3-sets``.

Exact laws come from the joint tensor P(x_0, ..., x_{n−1}) of the DAG, built by the product formula
μ₀(x_0) Π_h π(x_h | x_{S_h}) (:func:`dag_joint_tensor`) and marginalised; :mod:`numerics.dag_enumeration` is the
independent sequence-by-sequence reference. T = S_h denotes the true parent set of position h and S another
k-subset of {0..h−1}; "π(· | x_S)" is π_k applied to the values of S (in position order) as if they were the
parents.

Lemma 4 for sets
----------------
Every S ⊂ {0..h−1} is a set of non-descendants of h, so x_h ⊥ x_S | x_T (local Markov property) and the true
conditional of x_h given x_T is π(· | x_T). Hence, with q(· | x_S) = P(x_h | x_S),

    Δ = E log π(x_h | x_T) − E log π(x_h | x_S) = [I(x_h; x_T) − I(x_h; x_S)] + E_{x_S} KL(q(·|x_S) ‖ π(·|x_S))
      = E_{(x_T, x_S)} KL(π(· | x_T) ‖ π(· | x_S)).

Both brackets are >= 0 (the first by the DPI on x_h − x_T − x_S). By the last form Δ > 0 **iff** some pair of
values (a, b) with P(x_T = a, x_S = b) > 0 has π(·|a) ≠ π(·|b). When π > 0 and μ₀ > 0 every pair consistent on
the shared positions S ∩ T has positive probability, so: for S disjoint from T (or overlapping at different
ranks) Δ > 0 iff π_k is not constant (some two rows differ); for S sharing positions at the same ranks Δ > 0 iff
π_k depends on the coordinates outside those shared ranks. A kernel that ignores its non-shared parent gives
Δ = 0 and I(x_h; x_S) = I(x_h; x_T) (see :func:`overlap_ratio_one_instance`).

Lemma 3 for sets
----------------
ratio(S) = I(x_h; x_S) / I(x_h; x_T) <= 1 always (DPI). For overlapping S the channel x_T → x_S copies the shared
parents and the ratio can reach 1 (the instance above), so no α < 1 that depends on (d, ε) only can bound it;
the overlap-dependent candidate bounds the *excess* (I(x_h; x_S) − I(x_h; x_{S∩T})) / (I(x_h; x_T) −
I(x_h; x_{S∩T})), a ratio of conditional informations given x_{S∩T}. :func:`dag_lemma3_sweep` measures both.

Theorem 3 for sets
------------------
Mixture output over the C = C(h, k) candidate sets, f(x_h) = Σ_c A_c π(x_h | x_{S_c}), A = softmax(p̂), ℓ = −log f.
At p̂ = 0, −∂ℓ/∂p̂_c = (1/C)(π(x_h | x_{S_c}) / π̄(x_h) − 1), π̄ the mean over candidates; :func:`dag_init_gradient`
is its exact expectation (enumeration) or a Monte Carlo estimate; :func:`dag_chi2_gain` the J form with the
marginal P(x_h) in place of π̄: J(S) = E[π(x_h | x_S) / P(x_h)] − 1, and J(T) = I_χ²(x_T; x_h).
"""
from __future__ import annotations

import itertools
import math

import numpy as np
from scipy.special import rel_entr, xlogy

from bma_verify.numerics._validate import check_positive_int, check_rng
from bma_verify.numerics.dag import (_choice_counts, _resolve_init, check_dag_kernels, check_parent_sets, dag_candidate_sets,
                          encode_parent_values, random_dag_kernels, random_parent_sets, sample_dag_chains)
from bma_verify.numerics.dag_enumeration import check_enumerable, dag_sequence_log_likelihood
from bma_verify.numerics.enumeration import MAX_SEQUENCES, all_sequences
from bma_verify.numerics.estimators import mean_estimate
from bma_verify.numerics.information import chi2_mutual_information, mutual_information

#: Configurations x_0..x_h per block when summing the exact expected gradient (as ``numerics.gradient``).
_BLOCK = 1 << 17
#: I(x_h; x_T) at or below this (nats) makes a ratio undefined (rounding dominates).
MI_FLOOR = 1e-12
#: Relative tolerance for "ratio > α" (float64 rounding of sums of at most d**H terms).
VIOLATION_RTOL = 1e-9
#: Relative tolerance for gradient ties.
TIE_ATOL = 1e-12
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
    joint = _resolve_init(kernels, init).copy()
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


def _check_position_and_set(law: DagLaw, h: int, S) -> tuple[int, tuple]:
    h = check_positive_int(h, "h", 1)
    if not law.k <= h < law.H:
        raise ValueError(f"h must be a position in {law.k}..{law.H - 1} (h >= k chooses among C(h, k) sets), got {h}")
    S = tuple(sorted(int(s) for s in S))
    if len(S) != law.k or len(set(S)) != law.k or S[0] < 0 or S[-1] >= h:
        raise ValueError(f"S must be {law.k} distinct positions in 0..{h - 1} (a candidate parent set of h), got {S}")
    return h, S


# ----------------------------------------------------------------------------------------------------------
# Lemma 4 for sets


def dag_lemma4_terms(kernels, parent_sets, h: int, S, init=None) -> dict:
    """Exact terms of Lemma 4 for a candidate set S of position h (S may equal the true set T).

    Returns
    -------
    dict of floats: ``lhs`` E log π(x_h|x_T) − E log π(x_h|x_S) (from P(x_T, x_h), P(x_S, x_h) and log π_k),
    ``rhs`` [I(x_h; x_T) − I(x_h; x_S)] + E KL(q ‖ π), ``mi_true``, ``mi_candidate``, ``kl`` E_{x_S} KL(q(·|x_S) ‖
    π(·|x_S)), ``kl_true_vs_candidate`` E_{(x_T, x_S)} KL(π(·|x_T) ‖ π(·|x_S)) (from P(x_T, x_S)), ``overlap``
    |S ∩ T|; and ``T``, ``S`` as tuples.
    """
    law = DagLaw(kernels, parent_sets, init)
    return _lemma4_terms(law, *_check_position_and_set(law, h, S))


def _lemma4_terms(law: DagLaw, h: int, S: tuple) -> dict:
    T = law.true_set(h)
    pi = law.kernels[-1]  # (D, d)
    joint_T, joint_S = law.joint(T, (h,)), law.joint(S, (h,))  # (D, d) with x_h on the columns
    lhs = float(xlogy(joint_T, pi).sum() - xlogy(joint_S, pi).sum())
    mi_true, mi_candidate = mutual_information(joint_T), mutual_information(joint_S)
    law_S = joint_S.sum(axis=1)
    kl = float(rel_entr(joint_S, law_S[:, None] * pi).sum())
    r = law.joint(T, S)  # (D, D): P(x_T = a, x_S = b)
    pair_kl = rel_entr(pi[:, None, :], pi[None, :, :]).sum(-1)  # (D, D): KL(π(·|a) ‖ π(·|b))
    kl_pairs = float(np.sum(np.where(r > 0, r * pair_kl, 0.0)))
    return {"lhs": lhs, "rhs": mi_true - mi_candidate + kl, "mi_true": mi_true, "mi_candidate": mi_candidate,
            "kl": kl, "kl_true_vs_candidate": kl_pairs, "overlap": len(set(S) & set(T)), "T": T, "S": S}


def _sample_for_set(kernels, parent_sets, h, S, n, rng, init):
    """The Monte Carlo checks' common start: validated (law, h, S), the true set T, n sampled sequences x of shape
    (n, h + 1), and the encoded values a = x_T, b = x_S (each (n,), symbols in 0..d**k − 1)."""
    law = DagLaw(kernels, parent_sets, init)
    h, S = _check_position_and_set(law, h, S)
    n = check_positive_int(n, "n", 2)
    rng = check_rng(rng)
    T = law.true_set(h)
    x = sample_dag_chains(law.kernels, law.parent_sets[:h + 1], n, rng=rng, init=init)
    return law, h, S, T, x, encode_parent_values(x[:, list(T)], law.d), encode_parent_values(x[:, list(S)], law.d)


def dag_lemma4_monte_carlo(kernels, parent_sets, h: int, S, n: int, *, rng, init=None) -> dict:
    """Monte Carlo Lemma 4 for one (h, S) beside its exact terms.

    From n sampled sequences: ``estimate`` = mean of log π(x_h|x_T) − log π(x_h|x_S) (an unbiased estimate of
    Δ) and ``kl_estimate`` = mean of KL(π(·|x_T) ‖ π(·|x_S)) (the same Δ, Rao–Blackwellised over x_h), each an
    :class:`numerics.estimators.Estimate` with its standard error; ``exact`` = :func:`dag_lemma4_terms`.
    """
    law, h, S, T, x, a, b = _sample_for_set(kernels, parent_sets, h, S, n, rng, init)
    pi = law.kernels[-1]
    with np.errstate(divide="ignore"):
        log_pi = np.log(pi)
    samples = log_pi[a, x[:, h]] - log_pi[b, x[:, h]]
    pair_kl = rel_entr(pi[a], pi[b]).sum(-1)
    return {"estimate": mean_estimate(samples), "kl_estimate": mean_estimate(pair_kl),
            "exact": _lemma4_terms(law, h, S)}


# ----------------------------------------------------------------------------------------------------------
# Lemma 3 for sets


def _mi(joint: np.ndarray) -> float:
    outer = joint.sum(-1)[:, None] * joint.sum(-2)[None, :]
    return float(max(rel_entr(joint, outer).sum(), 0.0))


def kernel_constants(kernels) -> dict:
    """ε = the smallest entry over all orders, δ(π_k) the Dobrushin coefficient of the top kernel (max TV between
    two of its rows), and the candidate α's of Lemma 3 for sets built from them:

    ``doeblin`` 1 − d·ε (the tree's candidate), ``doeblin_dk`` 1 − d**k·ε, ``doeblin_product`` 1 − (d·ε)**k
    (Doeblin for k independent noisy looks), ``dobrushin`` δ(π_k).
    """
    kernels = check_dag_kernels(kernels)
    k, d = len(kernels), kernels[0].shape[1]
    eps = float(min(t.min() for t in kernels))
    top = kernels[-1]
    dobrushin = float(0.5 * np.abs(top[:, None, :] - top[None, :, :]).sum(-1).max())
    return {"eps": eps, "dobrushin": dobrushin, "alphas": {
        "doeblin": 1.0 - d * eps, "doeblin_dk": 1.0 - d**k * eps, "doeblin_product": 1.0 - (d * eps) ** k,
        "dobrushin": dobrushin}}


#: Candidate bounds of Lemma 3 for sets: name -> (which ratio it bounds, which α of :func:`kernel_constants`).
#: ``ratio`` is I(x_h; x_S)/I(x_h; x_T); ``excess`` the overlap-dependent (I_S − I_∩)/(I_T − I_∩) (= ratio when
#: S ∩ T = ∅).
LEMMA3_SET_CANDIDATES = {
    "doeblin": ("ratio", "doeblin"), "doeblin_dk": ("ratio", "doeblin_dk"),
    "doeblin_product": ("ratio", "doeblin_product"), "dobrushin": ("ratio", "dobrushin"),
    "excess_doeblin": ("excess", "doeblin"), "excess_doeblin_product": ("excess", "doeblin_product"),
    "excess_dobrushin": ("excess", "dobrushin"),
}


def dag_lemma3_sets(kernels, parent_sets, init=None) -> dict:
    """Exact Lemma 3 quantities for every position h >= k and every candidate set S ≠ S_h of one DAG.

    Returns
    -------
    dict: per (h, S) lists ``h``, ``S``, ``T``, ``overlap`` |S ∩ T|, ``mi_true`` I(x_h; x_T), ``mi_candidate``
    I(x_h; x_S), ``mi_shared`` I(x_h; x_{S∩T}) (0 when disjoint), ``ratio`` (NaN where I(x_h; x_T) <= MI_FLOOR),
    ``excess`` (I_S − I_∩)/(I_T − I_∩) (NaN where I_T − I_∩ <= MI_FLOOR); as arrays; plus ``constants``
    (:func:`kernel_constants`).
    """
    law = DagLaw(kernels, parent_sets, init)
    return _lemma3_sets(law)


def _lemma3_sets(law: DagLaw) -> dict:
    out = {key: [] for key in ("h", "S", "T", "overlap", "mi_true", "mi_candidate", "mi_shared")}
    sets = dag_candidate_sets(law.H, law.k)
    counts = _choice_counts(law.H, law.k)
    for h in range(law.k, law.H):
        T = law.true_set(h)
        mi_true = _mi(law.joint(T, (h,)))
        for S in sets[:counts[h]]:
            S = tuple(int(s) for s in S)
            if S == T:
                continue
            shared = tuple(sorted(set(S) & set(T)))
            out["h"].append(h)
            out["S"].append(S)
            out["T"].append(T)
            out["overlap"].append(len(shared))
            out["mi_true"].append(mi_true)
            out["mi_candidate"].append(_mi(law.joint(S, (h,))))
            out["mi_shared"].append(_mi(law.joint(shared, (h,))) if shared else 0.0)
    arrays = {key: np.asarray(out[key], dtype=np.float64) for key in ("mi_true", "mi_candidate", "mi_shared")}
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.where(arrays["mi_true"] > MI_FLOOR, arrays["mi_candidate"] / arrays["mi_true"], np.nan)
        room = arrays["mi_true"] - arrays["mi_shared"]
        excess = np.where(room > MI_FLOOR, (arrays["mi_candidate"] - arrays["mi_shared"]) / room, np.nan)
    return {"h": np.asarray(out["h"], dtype=np.int64), "S": out["S"], "T": out["T"],
            "overlap": np.asarray(out["overlap"], dtype=np.int64), **arrays, "ratio": ratio, "excess": excess,
            "constants": kernel_constants(law.kernels)}


def dag_lemma3_monte_carlo(kernels, parent_sets, h: int, S, n: int, *, rng, init=None,
                           method: str = "miller-madow") -> dict:
    """Monte Carlo I(x_h; x_S), I(x_h; x_T) and their ratio from n sampled sequences, beside the exact values.

    Set values are encoded as one symbol in 0..d**k − 1 (:func:`numerics.dag.encode_parent_values`), so the
    estimators of :mod:`numerics.estimators` (plug-in or Miller–Madow, delta-method standard errors) apply with an
    alphabet of d**k symbols. Returns ``mi_candidate``, ``mi_true``, ``ratio`` (:class:`Estimate`) and ``exact``
    (dict of floats: ``mi_candidate``, ``mi_true``, ``ratio``).
    """
    from bma_verify.numerics.estimators import mutual_information_estimate, mutual_information_ratio_estimate

    law, h, S, T, x, a, b = _sample_for_set(kernels, parent_sets, h, S, n, rng, init)
    D = law.d**law.k
    y = np.ascontiguousarray(x[:, h])
    mi_true, mi_candidate = _mi(law.joint(T, (h,))), _mi(law.joint(S, (h,)))
    return {"mi_candidate": mutual_information_estimate(b, y, D, method=method),
            "mi_true": mutual_information_estimate(a, y, D, method=method),
            "ratio": mutual_information_ratio_estimate(b, a, y, D, method=method),
            "exact": {"mi_candidate": mi_candidate, "mi_true": mi_true, "ratio": mi_candidate / mi_true}}


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
    from bma_verify.numerics.task import random_kernel

    d = check_positive_int(d, "d", 2)
    if rng is None:
        f = np.full((d, d), eps) + np.eye(d) * (1.0 - d * eps)  # a noisy copy: informative, entries >= eps
    else:
        f = random_kernel(d, eps=eps, rng=check_rng(rng))
    order1 = np.full((d, d), eps) + np.eye(d) * (1.0 - d * eps)
    order2 = np.repeat(f, d, axis=0)  # row (a, b) = f(a)
    parent_sets = np.array([[-1, -1], [0, -1], [0, 1], [0, 1]])
    return {"kernels": (order1, order2), "parent_sets": parent_sets, "h": 3, "S": (0, 2), "T": (0, 1)}


def _item_rng(seed: int, tag: int, index: int) -> np.random.Generator:
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


def _size_key(instance: dict, index: int) -> tuple:
    return (instance["H"], instance["d"], instance["k"], index)


#: Bins of the ratio histograms of :func:`dag_lemma3_sweep`: 50 on [0, 1] (a ratio of exactly 1 goes in the last).
RATIO_EDGES = np.linspace(0.0, 1.0, 51)


def dag_lemma3_sweep(seed: int, n_instances: int, *, ranges: dict = DAG_RANGES, start: int = 0,
                     keep_ratios: bool = False) -> dict:
    """Exact Lemma 3 for sets over random instances ``start..start+n_instances−1``, both μ₀ kinds.

    For every position h >= k and candidate set S ≠ S_h: the ratio I(x_h; x_S)/I(x_h; x_T), split by disjoint
    (S ∩ T = ∅) and overlapping S, and every candidate of :data:`LEMMA3_SET_CANDIDATES` (violated when the
    bounded ratio exceeds α by more than VIOLATION_RTOL + 1e-14/I_T, rounding).

    Returns
    -------
    JSON-ready dict: ``counts`` (``sets``, ``disjoint``, ``overlapping``, ``degenerate``, ``dpi_violations``
    (ratio > 1), and ``violations/<candidate>/<disjoint|overlapping>``, also per μ₀ kind with a ``<kind>/``
    prefix), ``largest_ratio`` {disjoint, overlapping: {value, instance}}, ``candidates`` {name: {bounds, alpha,
    disjoint / overlapping: {checked, violations, largest_excess {value, instance}, smallest_instance}}} (the
    smallest instance orders violators by (H, d, k, instance index)), ``histograms`` {disjoint, overlapping:
    counts over :data:`RATIO_EDGES`}, ``ratio_quantiles`` {relation: the 0.5, 0.9, 0.99 quantiles and the max},
    ``ranges``; with ``keep_ratios`` also ``ratios`` {relation: every defined ratio}. Instance i draws from its
    own ``SeedSequence(seed, spawn_key=(153, i))``, so a sweep cut into ``start`` ranges repeats its instances.
    """
    n_instances = check_positive_int(n_instances, "n_instances", 1)
    counts: dict[str, int] = {}
    largest = {"disjoint": {"value": -np.inf, "instance": None}, "overlapping": {"value": -np.inf, "instance": None}}
    candidates = {name: {"bounds": bound, "alpha": alpha, **{
        relation: {"violations": 0, "checked": 0, "largest_excess": {"value": -np.inf, "instance": None},
                   "smallest_instance": None, "_key": None} for relation in ("disjoint", "overlapping")}}
                  for name, (bound, alpha) in LEMMA3_SET_CANDIDATES.items()}
    ratios = {"disjoint": [], "overlapping": []}

    def add(key, amount=1):
        counts[key] = counts.get(key, 0) + int(amount)

    for index in range(start, start + n_instances):
        instance = draw_dag_instance(_item_rng(seed, 153, index), ranges)
        for kind in INIT_KINDS:
            init = None if kind == "stationary" else instance["init"]
            law = DagLaw(instance["kernels"], instance["parent_sets"], init)
            out = _lemma3_sets(law)
            alphas = out["constants"]["alphas"]
            for p in range(out["h"].size):
                relation = "overlapping" if out["overlap"][p] else "disjoint"
                add("sets")
                add(relation)
                add(f"{kind}/{relation}")
                ratio = out["ratio"][p]
                if not np.isfinite(ratio):
                    add("degenerate")
                    continue
                ratios[relation].append(float(ratio))
                tolerance = VIOLATION_RTOL + 1e-14 / out["mi_true"][p]

                def record(**extra):
                    return dag_instance_record(instance["kernels"], instance["parent_sets"], init, h=int(out["h"][p]),
                                               S=out["S"][p], T=out["T"][p], ratio=float(ratio),
                                               excess_ratio=float(out["excess"][p]), init_kind=kind,
                                               instance_index=index, d=instance["d"], k=instance["k"],
                                               H=instance["H"], eps=out["constants"]["eps"], **extra)

                if ratio > 1.0 + tolerance:
                    add("dpi_violations")
                if ratio > largest[relation]["value"]:
                    largest[relation] = {"value": float(ratio), "instance": record()}
                for name, candidate in candidates.items():
                    value = ratio if candidate["bounds"] == "ratio" else out["excess"][p]
                    if not np.isfinite(value):
                        continue
                    entry = candidate[relation]
                    entry["checked"] += 1
                    alpha = alphas[candidate["alpha"]]
                    excess = value - alpha
                    if excess > tolerance * max(1.0, abs(alpha)):
                        entry["violations"] += 1
                        add(f"violations/{name}/{relation}")
                        add(f"{kind}/violations/{name}/{relation}")
                        key = _size_key(instance, index)
                        if entry["_key"] is None or key < entry["_key"]:
                            entry["_key"] = key
                            entry["smallest_instance"] = record(alpha=float(alpha), candidate=name)
                    if excess > entry["largest_excess"]["value"]:
                        entry["largest_excess"] = {"value": float(excess),
                                                   "instance": record(alpha=float(alpha), candidate=name)}
    for candidate in candidates.values():
        for relation in ("disjoint", "overlapping"):
            candidate[relation].pop("_key")
    bins = RATIO_EDGES.size - 1
    histograms = {relation: np.bincount(np.clip((np.asarray(values) * bins).astype(np.int64), 0, bins - 1),
                                        minlength=bins).tolist() for relation, values in ratios.items()}
    quantiles = {relation: (np.quantile(values, [0.5, 0.9, 0.99, 1.0]).tolist() if values else None)
                 for relation, values in ratios.items()}
    out = {"counts": dict(sorted(counts.items())), "largest_ratio": largest, "candidates": candidates,
           "histograms": histograms, "ratio_quantiles": quantiles,
           "ranges": {k: list(v) if isinstance(v, tuple) else v for k, v in ranges.items()},
           "seed": int(seed), "instances": [start, start + n_instances]}
    if keep_ratios:
        out["ratios"] = ratios
    return out


# ----------------------------------------------------------------------------------------------------------
# Theorem 3 for sets


def _check_gradient_inputs(kernels, parent_sets, h, init):
    kernels = check_dag_kernels(kernels)
    k = len(kernels)
    parent_sets = check_parent_sets(parent_sets, k=k)
    if parent_sets.ndim != 2:
        raise ValueError(f"parent_sets must be one DAG of shape (H, k); got {parent_sets.shape}")
    h = check_positive_int(h, "h", 1)
    H = parent_sets.shape[0]
    if not k <= h < H:
        raise ValueError(f"h must be a position in {k}..{H - 1} (h >= k has C(h, k) candidate sets), got {h}")
    return kernels, parent_sets, h, init


def dag_init_gradient_samples(kernels, tokens) -> np.ndarray:
    """−∂ℓ/∂p̂_c at p̂ = 0 for each sampled prefix x_0..x_h, over the C(h, k) candidate sets (colex).

    Parameters
    ----------
    kernels : (π_1, ..., π_k) (only π_k enters); tokens : (n, h+1) int, h >= k.

    Returns
    -------
    (n, C(h, k)): (1/C)(π(x_h | x_{S_c}) / π̄(x_h) − 1); each row sums to 0. k = 1: exactly
    ``numerics.gradient.init_gradient_samples``.
    """
    kernels = check_dag_kernels(kernels)
    tokens = np.asarray(tokens)
    k, d = len(kernels), kernels[0].shape[1]
    h = tokens.shape[-1] - 1
    if h < k:
        raise ValueError(f"tokens must hold x_0..x_h with h >= k = {k}; got {tokens.shape[-1]} columns")
    sets = dag_candidate_sets(h + 1, k)[:math.comb(h, k)]  # the candidates of h: max element < h
    code = encode_parent_values(tokens[:, sets], d)  # (n, C)
    if tokens.flags.f_contiguous and not tokens.flags.c_contiguous:
        code = np.asfortranarray(code)  # laid out like the tokens, as the tree code's indexing is (same sums)
    likelihood = kernels[-1][code, tokens[:, h:]]  # (n, C)
    mean_likelihood = likelihood.mean(axis=1, keepdims=True)  # (n, 1): π̄(x_h)
    return (likelihood / mean_likelihood - 1.0) / sets.shape[0]


def dag_init_gradient(kernels, parent_sets, h: int, init=None, method: str = "exact", n: int = 100_000, rng=None):
    """Expected −∂ℓ/∂p̂_c at initialisation over the C(h, k) candidate sets of position h (colex order).

    Parameters
    ----------
    kernels : (π_1, ..., π_k), generating the DAG data and used as the output rows of the mixture.
    parent_sets : (H, k) DAG with H > h; only rows 0..h matter.
    h : position with k <= h < H.
    init : (d,) μ₀, default the stationary law of π_1.
    method : "exact" sums over the d**(h+1) configurations of x_0..x_h with their full-likelihood probabilities
        (refuses more than ``numerics.enumeration.MAX_SEQUENCES``); "monte-carlo" averages n sampled prefixes.
    rng : numpy Generator (required for "monte-carlo").

    Returns
    -------
    "exact": (C,) float64 summing to 0 (k = 1: exactly ``numerics.init_gradient``); "monte-carlo": an
    :class:`numerics.estimators.Estimate` of (C,) arrays.
    """
    kernels, parent_sets, h, init = _check_gradient_inputs(kernels, parent_sets, h, init)
    prefix = parent_sets[: h + 1]
    if method == "exact":
        d = kernels[0].shape[1]
        if d ** (h + 1) > MAX_SEQUENCES:
            raise ValueError(f"method='exact' enumerates d**(h+1) = {d ** (h + 1)} configurations and refuses more "
                             f"than {MAX_SEQUENCES}; use method='monte-carlo'")
        tokens = all_sequences(d, h + 1)
        total = np.zeros(math.comb(h, len(kernels)))
        for start in range(0, tokens.shape[0], _BLOCK):
            block = tokens[start:start + _BLOCK].astype(np.int64)
            weights = np.exp(dag_sequence_log_likelihood(kernels, prefix, block, init))
            possible = weights > 0
            total += weights[possible] @ dag_init_gradient_samples(kernels, block[possible])
        return total
    if method == "monte-carlo":
        n = check_positive_int(n, "n", 2)
        rng = check_rng(rng)
        tokens = sample_dag_chains(kernels, prefix, n, rng=rng, init=init)
        return mean_estimate(dag_init_gradient_samples(kernels, tokens))
    raise ValueError(f"method must be 'exact' or 'monte-carlo'; got {method!r}")


def dag_chi2_gain(kernels, parent_sets, h: int, init=None) -> np.ndarray:
    """J(S_c) = E[π(x_h | x_{S_c}) / P(x_h)] − 1 for the C(h, k) candidates, from exact set joints.

    J(S_h) = I_χ²(x_{S_h}; x_h); the approximate expected init gradient is J / C. (C,) float64.
    """
    kernels, parent_sets, h, init = _check_gradient_inputs(kernels, parent_sets, h, init)
    law = DagLaw(kernels, parent_sets, init)
    return _chi2_gain(law, h)


def _chi2_gain(law: DagLaw, h: int) -> np.ndarray:
    pi = law.kernels[-1]
    law_h = law.marginal((h,))
    inv = np.divide(1.0, law_h, out=np.zeros_like(law_h), where=law_h > 0)
    sets = dag_candidate_sets(law.H, law.k)[:math.comb(h, law.k)]
    return np.array([(law.joint(tuple(S), (h,)) * pi * inv[None, :]).sum() - 1.0 for S in sets])


def dag_approximate_init_gradient(kernels, parent_sets, h: int, init=None) -> np.ndarray:
    """(1/C) J(S_c): the expected init gradient with P(x_h) in place of π̄. (C,)"""
    gain = dag_chi2_gain(kernels, parent_sets, h, init)
    return gain / gain.size


def dag_thm3_check_position(kernels, parent_sets, h: int, init=None) -> dict:
    """Exact and J-form init gradients at position h and whether the true set's entry is the largest.

    ``margin_<form>`` = entry of S_h − the largest other entry (a tie when |margin| <= TIE_ATOL·scale);
    ``chi2_identity_error`` = |J(S_h) − I_χ²(x_{S_h}; x_h)|. Needs C(h, k) >= 2 (h > k).
    """
    kernels, parent_sets, h, init = _check_gradient_inputs(kernels, parent_sets, h, init)
    k = len(kernels)
    C = math.comb(h, k)
    if C < 2:
        raise ValueError(f"h must exceed k = {k} so that there are at least two candidate sets; got h = {h}")
    law = DagLaw(kernels, parent_sets, init)
    exact = dag_init_gradient(kernels, parent_sets, h, init)
    gain = _chi2_gain(law, h)
    T = law.true_set(h)
    sets = [tuple(s) for s in dag_candidate_sets(law.H, k)[:C].tolist()]
    true_index = sets.index(T)
    others = np.delete(np.arange(C), true_index)
    chi2 = chi2_mutual_information(law.joint(T, (h,)))
    return {"h": h, "T": T, "true_index": true_index, "exact": exact, "approximate": gain / C,
            "margin_exact": float(exact[true_index] - exact[others].max()),
            "margin_approximate": float((gain[true_index] - gain[others].max()) / C),
            "argmax_exact": sets[int(np.argmax(exact))], "argmax_approximate": sets[int(np.argmax(gain))],
            "chi2_identity_error": float(abs(gain[true_index] - chi2)), "i_chi2": float(chi2)}


def dag_thm3_sweep(seed: int, n_instances: int, *, ranges: dict = DAG_RANGES, start: int = 0) -> dict:
    """Theorem 3 for sets on random instances: for every position h > k and both μ₀ kinds, is the true set's
    expected init gradient the largest, exactly and in the J form?

    Returns
    -------
    JSON-ready dict: ``counts`` (``positions``, ``ties/<form>``, ``violations/<form>``, each also with a
    ``<kind>/`` prefix), ``worst`` {form: {value (minus the smallest margin), instance}}, ``smallest_violation``
    {form: {μ₀ kind: instance or None}} (ordered by (H, d, k, instance index, h)), ``max_chi2_identity_error``.
    """
    n_instances = check_positive_int(n_instances, "n_instances", 1)
    counts: dict[str, int] = {}
    worst = {form: {"value": -np.inf, "instance": None} for form in ("exact", "approximate")}
    smallest = {form: {kind: None for kind in INIT_KINDS} for form in ("exact", "approximate")}
    keys = {form: {kind: None for kind in INIT_KINDS} for form in ("exact", "approximate")}
    max_identity_error = 0.0

    def add(key):
        counts[key] = counts.get(key, 0) + 1

    for index in range(start, start + n_instances):
        instance = draw_dag_instance(_item_rng(seed, 1533, index), ranges)
        for kind in INIT_KINDS:
            init = None if kind == "stationary" else instance["init"]
            for h in range(instance["k"] + 1, instance["H"]):
                out = dag_thm3_check_position(instance["kernels"], instance["parent_sets"], h, init)
                add("positions")
                add(f"{kind}/positions")
                max_identity_error = max(max_identity_error, out["chi2_identity_error"])
                for form in ("exact", "approximate"):
                    margin = out[f"margin_{form}"]
                    scale = max(1.0, float(np.abs(out[form]).max()))
                    if abs(margin) <= TIE_ATOL * scale:
                        add(f"ties/{form}")
                        add(f"{kind}/ties/{form}")
                        continue

                    def record():
                        return dag_instance_record(instance["kernels"], instance["parent_sets"], init, h=h,
                                                   T=out["T"], argmax=out[f"argmax_{form}"], margin=margin,
                                                   form=form, init_kind=kind, instance_index=index,
                                                   d=instance["d"], k=instance["k"], H=instance["H"])

                    if margin < 0:
                        add(f"violations/{form}")
                        add(f"{kind}/violations/{form}")
                        key = _size_key(instance, index) + (h,)
                        if keys[form][kind] is None or key < keys[form][kind]:
                            keys[form][kind], smallest[form][kind] = key, record()
                    if -margin > worst[form]["value"]:
                        worst[form] = {"value": float(-margin), "instance": record()}
    return {"counts": dict(sorted(counts.items())), "worst": worst, "smallest_violation": smallest,
            "max_chi2_identity_error": float(max_identity_error), "seed": int(seed),
            "instances": [start, start + n_instances],
            "ranges": {k: list(v) if isinstance(v, tuple) else v for k, v in ranges.items()}}
