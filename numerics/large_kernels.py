"""The kernel claims on one kernel of any size d: exact where affordable, Monte Carlo with its error beyond, and the
cost of a check known before anything is allocated (``lemma3-strict-dpi``, ``lemma4-loglik-gap``,
``thm2-consistency``, ``thm3-init-gradient``).

Every pairwise law on a tree is P(x_i = a, x_j = b) = Σ_c P(x_c = c) π^{k1}[c, a] π^{k2}[c, b], with c the lowest
common ancestor of i and j and k1, k2 their depths below it. It depends on the tree only through
(depth(c), k1, k2), so the powers π^0..π^{H−1} (H − 2 products of d × d matrices) and one product per distinct
depth pattern give every (tree, pair) of a sweep: O(d³) per pattern and O(H d²) memory, never a (d, d, d) array.
A pattern and its mirror (depth(c), k2, k1) share one product (transposed joints), k1 = 0 needs none, and under
a stationary μ₀ depth(c) drops out of the pattern (every depth has the same law).
Theorem 3's J form needs no product at all once the powers are known:

    J(h') + 1 = Σ_{a,b} P(x_h' = a, x_h = b) π(b | a) / P(x_h = b)
              = Σ_c P(x_c = c) Σ_b π^{k1+1}[c, b] π^{k2}[c, b] / P(x_h = b),

O(d²) per candidate. The exact π̄ form of Theorem 3 is enumerated over the d^(h+1) prefixes where that is
affordable and estimated from sampled prefixes, with its standard error, beyond.
"""
from __future__ import annotations

import numpy as np
from scipy.spatial.distance import cdist
from scipy.special import rel_entr

from bma_verify.numerics.validation import check_init, check_kernel, check_parents, check_positive_int, check_rng
from bma_verify.numerics.claim_sweeps import MI_FLOOR
from bma_verify.numerics.enumeration import MAX_SEQUENCES
from bma_verify.numerics.estimators import mean_estimate
from bma_verify.numerics.gradient import init_gradient, init_gradient_samples
from bma_verify.numerics.information import depths_unchecked
from bma_verify.numerics.init_gradient_sweep import argmax_status
from bma_verify.numerics.task import sample_chains_unchecked, stationary_distribution_unchecked

#: Refuse a check whose arrays would need more than this many bytes at once.
MAX_BYTES = 4 * 2**30
#: Refuse a check of more than this many operations (flops of a BLAS product; about 10 s on one core at the
#: 50 GFLOP/s of a float64 matmul measured on the development machine, 2026-12-07).
MAX_OPERATIONS = 5e11
#: Flops of a BLAS product that one |a − b| of δ(π) costs (scipy's cdist, d = 2000 on one core: 4·10⁹ differences in
#: ~3 s, a d × d product, 1.6·10¹⁰ flops, in 0.32 s).
DISTANCE_OPERATION_COST = 40
#: Bytes of the (rows, d) block of row distances held at once by :func:`dobrushin_coefficient_blocked`.
BLOCK_BYTES = 2**20  # 65 rows at d = 2000; blocks of 8 MiB or more ran slower (cache)
#: Standard errors a Monte Carlo margin must clear to decide the exact π̄ form at a position.
MONTE_CARLO_Z = 4.0
#: Sampled gradient entries (samples × candidates) shared by the Monte Carlo positions of one check, and the fewest
#: and most samples one position gets.
MONTE_CARLO_BUDGET = 20_000_000
MONTE_CARLO_SAMPLES = (200, 20_000)


def dobrushin_coefficient_blocked(kernel) -> float:
    """δ(π) = max_{i,j} ½ Σ_z |π(z|i) − π(z|j)| of one (d, d) kernel in O(d²) memory (blocks of rows).

    The same value as ``numerics.dobrushin_coefficient``, which holds a (d, d, d) array (201 GiB at d = 3000): each
    block of rows i against the rows j >= its first is one ``scipy.spatial.distance.cdist`` (cityblock), a compiled
    loop with no (rows, d, d) temporary (d = 2000, one core: 3 s against 6 s for NumPy's subtract-abs-sum blocks).
    """
    kernel = check_kernel(kernel, single=True)
    d = kernel.shape[0]
    rows = max(1, BLOCK_BYTES // (8 * d))
    best = 0.0
    for start in range(0, d, rows):  # rows i in [start, start + rows) against j >= start (the pairs j < i are done)
        best = max(best, float(cdist(kernel[start:start + rows], kernel[start:], "cityblock").max()))
    return 0.5 * best


def kernel_powers(kernel, top: int, init=None, *, stationary: bool = False) -> dict:
    """π^0..π^top (``powers``, (top+1, d, d)) and the laws μ₀ π^t of a node at depth t (``laws``, (top+1, d)).

    ``init`` None: the stationary law, computed here. ``stationary``: ``init`` is π's stationary law (as computed by
    ``numerics.stationary_distribution``). In both cases every ``laws[t]`` is that law itself (μπ^t = μ, taken as
    exact rather than re-rounded at each step), and ``law_depth`` (top+1,) maps every depth to 0, so that the depth
    patterns of :func:`tree_pair_table` and :func:`j_form_gradients` which differ only in the depth of the common
    ancestor share one product; otherwise ``law_depth[t] = t``.
    """
    kernel = check_kernel(kernel, single=True)
    top = check_positive_int(top, "top", 0)
    if init is None:
        init, stationary = stationary_distribution_unchecked(kernel), True
    else:
        init = check_init(init, kernel.shape[0])
    return _kernel_powers(kernel, top, init, bool(stationary))


def _kernel_powers(kernel: np.ndarray, top: int, init: np.ndarray, stationary: bool) -> dict:
    d = kernel.shape[0]
    powers = np.empty((top + 1, d, d))
    laws = np.empty((top + 1, d))
    powers[0], laws[0] = np.eye(d), init
    for t in range(1, top + 1):
        powers[t] = powers[t - 1] @ kernel if t > 1 else kernel  # π¹ = π itself: no product with the identity
        laws[t] = init if stationary else laws[t - 1] @ kernel
    law_depth = np.zeros(top + 1, dtype=np.int64) if stationary else np.arange(top + 1)
    return {"powers": powers, "laws": laws, "init": init, "law_depth": law_depth}


def _patterns(parents: np.ndarray, depth: np.ndarray, i: np.ndarray, j: np.ndarray) -> np.ndarray:
    """(depth(c), depth(i) − depth(c), depth(j) − depth(c)) for arrays of positions i, j, c their lowest common
    ancestor (found by moving the deeper of the two up, all pairs at once). (N, 3) int64."""
    a, b = i.copy(), j.copy()
    while np.any(differ := a != b):
        up_a, up_b = differ & (depth[a] >= depth[b]), differ & (depth[b] >= depth[a])
        a[up_a], b[up_b] = parents[a[up_a]], parents[b[up_b]]
    return np.stack([depth[a], depth[i] - depth[a], depth[j] - depth[a]], axis=1)


def _law_patterns(laws: dict, patterns: np.ndarray) -> np.ndarray:
    """``patterns`` with depth(c) replaced by the first depth of the same law (0 for every depth under a stationary
    μ₀: the patterns then differ by (k1, k2) only)."""
    return np.column_stack([laws["law_depth"][patterns[:, 0]], patterns[:, 1:]])


def _cached(cache: dict, keys: np.ndarray, compute) -> np.ndarray:
    """compute(key) for every row of ``keys`` (N, k), once per distinct key (kept in ``cache``). (N, ...)"""
    unique, inverse = np.unique(keys, axis=0, return_inverse=True)
    for key in map(tuple, unique.tolist()):
        if key not in cache:
            cache[key] = compute(key)
    return np.array([cache[key] for key in map(tuple, unique.tolist())])[inverse.reshape(-1)]


def _trees(trees) -> list[np.ndarray]:
    trees = [check_parents(p, name="trees[{}]".format(t), single=True) for t, p in enumerate(trees)]
    if not trees:
        raise ValueError("trees must hold at least one parent array")
    return trees


def powers_needed(trees, *, j_form: bool) -> int:
    """The highest power of π that :func:`tree_pair_table` (``j_form`` False) or also :func:`j_form_gradients`
    (``j_form`` True) reads on ``trees``: the depth D of the deepest position (k1, k2 ≤ D), and for the J form
    π^{k1+1} with h' at depth ≤ D − 1 when D = H − 1 (only position H − 1 can be that deep, and it is no h'), so
    min(D + 1, H − 1)."""
    trees = _trees(trees)
    return max(min(int(depths_unchecked(p).max()) + j_form, len(p) - 1) for p in trees)


def tree_pair_table(kernel, trees, init=None, *, laws: dict | None = None) -> dict:
    """Exact Lemma 3 and Lemma 4 quantities of every pair h' < h, h' ≠ pa(h), of every tree, at any d.

    The values of ``numerics.dpi_sweep.lemma3_pairs`` and ``lemma4_terms`` (the same joints, computed through the
    powers of π, one d × d product per distinct depth pattern). ``laws``: :func:`kernel_powers` computed before
    (with ``top`` at least :func:`powers_needed`), else computed here.

    Returns
    -------
    dict of (N,) arrays over the pairs, tree-major: ``tree``, ``h``, ``h_prime``, ``parent``, ``ancestor`` (h' is
    an ancestor of pa(h)), ``mi_parent``, ``mi_candidate`` (nats), ``ratio`` (NaN where I(x_h; x_pa) ≤ MI_FLOOR),
    ``loglik_gap`` = E log π(x_h|x_pa) − E log π(x_h|x_h') and ``loglik_identity_error`` = |gap − (I(x_h; x_pa)
    − I(x_h; x_h') + E KL)|; and ``patterns``, the number of distinct depth patterns used, ``products`` those of
    them that needed a d × d product (k1 ≥ 1).
    """
    kernel = check_kernel(kernel, single=True)
    trees = _trees(trees)
    top = powers_needed(trees, j_form=False)
    if laws is None:
        laws = kernel_powers(kernel, top, init)
    elif len(laws["powers"]) <= top:
        raise ValueError(f"laws must hold the powers up to the depth of the deepest position (top >= {top}); got "
                         f"top = {len(laws['powers']) - 1}")
    log_kernel = _log_kernel(kernel)
    pairs = [_tree_pairs(t, parents, laws) for t, parents in enumerate(trees)]
    pairs = [p for p in pairs if len(p["h"])]  # H = 2: the only earlier position is the parent
    names = ("tree", "h", "h_prime", "parent", "ancestor", "mi_parent", "mi_candidate", "loglik_gap",
             "loglik_identity_error")
    if not pairs:
        out = {key: np.zeros(0) for key in names}
        out.update(ratio=np.zeros(0), patterns=0, products=0)
        return out
    out = {key: np.concatenate([p[key] for p in pairs]) for key in ("tree", "h", "h_prime", "parent")}
    keys, parent_depths = (np.concatenate([p[key] for p in pairs]) for key in ("keys", "parent_depth"))
    with np.errstate(divide="ignore", invalid="ignore"):
        parent_cache: dict[tuple, tuple] = {}
        mi_p, loglik_p = _cached(parent_cache, parent_depths[:, None], lambda key: _parent_terms(
            kernel, log_kernel, laws["laws"][key[0]])).T
        candidate_cache, products = _candidate_table(kernel, log_kernel, laws, keys)
        mi_c, loglik_c, kl = _cached(candidate_cache, keys, candidate_cache.__getitem__).T
        gap = loglik_p - loglik_c
        # lca(h', h) = lca(h', pa): k1 = 0 means h' is an ancestor of h, hence of pa(h)
        out.update(ancestor=keys[:, 1] == 0, mi_parent=mi_p, mi_candidate=mi_c, loglik_gap=gap,
                   loglik_identity_error=np.abs(gap - (mi_p - mi_c + kl)))
    out["ratio"] = np.divide(out["mi_candidate"], out["mi_parent"], out=np.full(len(out["h"]), np.nan),
                             where=out["mi_parent"] > MI_FLOOR)
    out["patterns"], out["products"] = len(candidate_cache), products
    return out


def _tree_pairs(t: int, parents: np.ndarray, laws: dict) -> dict:
    """The pairs h' < h, h' ≠ pa(h) of tree ``t`` (h ascending, then h'), their parents, the depth pattern of each
    (:func:`_law_patterns`) and the law depth of each parent."""
    depth = depths_unchecked(parents)
    h, k = np.tril_indices(len(parents), k=-1)  # every h' = k < h, h ascending, then k
    keep = k != parents[h]
    h, k = h[keep], k[keep]
    return {"tree": np.full(len(h), t), "h": h, "h_prime": k, "parent": parents[h],
            "keys": _law_patterns(laws, _patterns(parents, depth, k, h)),
            "parent_depth": laws["law_depth"][depth[parents[h]]]}


def _candidate_table(kernel, log_kernel: dict, laws: dict, keys: np.ndarray) -> tuple[dict, int]:
    """(I(x_h; x_h'), :func:`_candidate_terms`) of every distinct pattern in ``keys``, and the number of d × d
    products used.

    A pattern and its mirror (depth(c), k2, k1) have transposed joints (the same law of x_c, the two paths swapped),
    so each unordered pair {k1, k2} costs one product at most."""
    needed = set(map(tuple, np.unique(keys, axis=0).tolist()))
    cache, products = {}, 0
    for key in sorted(needed):
        if key in cache:
            continue
        depth_c, k1, k2 = key
        joint = _pattern_joint(laws, depth_c, min(k1, k2), max(k1, k2))
        products += min(k1, k2) > 0
        mi = _mutual_information(joint)  # symmetric: the mirror's too
        for oriented, pattern in ((joint, (depth_c, min(k1, k2), max(k1, k2))),
                                  (joint.T, (depth_c, max(k1, k2), min(k1, k2)))):
            if pattern in needed and pattern not in cache:
                cache[pattern] = (mi, *_candidate_terms(kernel, log_kernel, oriented))
    return cache, products


def _mutual_information(joint: np.ndarray) -> float:
    outer = joint.sum(-1)[:, None] * joint.sum(-2)[None, :]
    return max(float(rel_entr(joint, outer).sum()), 0.0)


def _log_kernel(kernel: np.ndarray) -> dict:
    """log π with 0 at its zero entries (``log``) and where those are (``zeros``, None when π > 0)."""
    zeros = kernel == 0
    with np.errstate(divide="ignore"):
        log = np.log(np.where(zeros, 1.0, kernel))
    return {"log": log, "zeros": zeros if zeros.any() else None}


def _expected_log_kernel(joint, log_kernel: dict) -> float:
    """E log π(x_h | x_k) = Σ P(a, b) log π(b | a) with 0·log 0 = 0 (−∞ where the joint has mass on a zero of π:
    the hypothesis π > 0 is violated there)."""
    if log_kernel["zeros"] is not None and np.any(joint[log_kernel["zeros"]] > 0):
        return -np.inf
    return float((joint * log_kernel["log"]).sum())


def _parent_terms(kernel, log_kernel: dict, parent_law) -> tuple[float, float]:
    """I(x_h; x_pa) and E log π(x_h | x_pa) for a parent of law ``parent_law``."""
    joint = parent_law[:, None] * kernel  # (d, d): P(x_pa = a, x_h = b)
    return _mutual_information(joint), _expected_log_kernel(joint, log_kernel)


def _pattern_joint(laws: dict, depth_c: int, k1: int, k2: int) -> np.ndarray:
    """P(x_h' = a, x_h = b) for h', h at k1, k2 below a common ancestor c at depth(c) (a product when k1 > 0)."""
    powers = laws["powers"]
    joint = laws["laws"][depth_c][:, None] * powers[k2]  # (d, d): P(x_c = c, x_h = b)
    if k1 > 0:  # h' below c: P(x_h' = a, x_h = b) = Σ_c π^{k1}[c, a] P(x_c = c, x_h = b)
        joint = powers[k1].T @ joint
    return np.maximum(joint, 0.0)  # rounding of the product can leave −1e-20 where the law is 0


def _candidate_terms(kernel, log_kernel: dict, joint: np.ndarray) -> tuple[float, float]:
    """E log π(x_h | x_h') and E KL(q(·|x_h') ‖ π(·|x_h')) from their joint P(x_h' = a, x_h = b).

    E KL is summed on its own (not as I − H(x_h) − E log π), so that Lemma 4's identity compares independent sums."""
    kl = float(rel_entr(joint, joint.sum(-1)[:, None] * kernel).sum())
    return _expected_log_kernel(joint, log_kernel), kl


def j_form_gradients(kernel, parents, h: int, init=None, *, laws: dict | None = None,
                     cache: dict | None = None) -> np.ndarray:
    """(1/h) J(h') for h' = 0..h-1 by the O(d²)-per-candidate formula of the module docstring
    (``thm3-init-gradient``); equals ``numerics.approximate_init_gradient``. ``cache``: a dict kept between calls
    with the same ``laws`` (J depends on the candidate only through its depth pattern). (h,)"""
    kernel = check_kernel(kernel, single=True)
    parents = check_parents(parents, single=True)
    if not 1 <= h < parents.shape[0]:
        raise ValueError(f"h must be a position in 1..{parents.shape[0] - 1} (it needs h candidates), got {h}")
    if laws is None:
        laws = kernel_powers(kernel, parents.shape[0] - 1, init)
    return _j_form_gradients(parents, h, laws, {} if cache is None else cache)


def _j_form_gradients(parents: np.ndarray, h: int, laws: dict, cache: dict) -> np.ndarray:
    """:func:`j_form_gradients` on validated arguments."""
    keys = _law_patterns(laws, _patterns(parents, depths_unchecked(parents), np.arange(h), np.full(h, h)))
    return _cached(cache, keys, lambda key: _j_gain(key, laws)) / h


def _j_gain(key: tuple, laws: dict) -> float:
    """J(h') + 1 = Σ_c P(x_c) Σ_b π^{k1+1}[c, b] π^{k2}[c, b] / P(x_h = b) − 1 for the pattern (depth(c), k1, k2)."""
    depth_c, k1, k2 = key
    law_h = laws["laws"][depth_c + k2]
    weight = np.divide(1.0, law_h, out=np.zeros_like(law_h), where=law_h > 0)  # (d,) 1/P(x_h), 0 off its support
    powers = laws["powers"]
    return float(laws["laws"][depth_c] @ ((powers[k1 + 1] * powers[k2]) @ weight) - 1.0)  # k1 + 1 <= depth(h') + 1


def exact_form_gradients(kernel, parents, h: int, init=None, *, n: int = 20_000, rng=None, tokens=None) -> dict:
    """Theorem 3's exact π̄ form at position h: enumerated when d^(h+1) ≤ MAX_SEQUENCES, else Monte Carlo from n
    chains drawn with ``rng``, or from ``tokens`` (n, ≥ h+1), chains already drawn on this tree (one draw can serve
    every position of a tree).

    Returns
    -------
    dict: ``method`` ("enumeration" or "monte-carlo"), ``gradient`` (h,), ``stderr`` (h,) (zeros when
    enumerated), ``margins`` (h−1,) E[g_pa − g_h'] for each other candidate ``others`` and ``margins_stderr``
    (paired: one sample gives both terms), ``n`` (samples; 0 when enumerated).
    """
    kernel = check_kernel(kernel, single=True)
    parents = check_parents(parents, single=True)
    d = kernel.shape[0]
    init = stationary_distribution_unchecked(kernel) if init is None else check_init(init, d)
    if d ** (h + 1) > MAX_SEQUENCES and tokens is None:
        n = check_positive_int(n, "n", 2)
        tokens = sample_chains_unchecked(kernel, parents[: h + 1], n, check_rng(rng), init)  # (n, h+1)
    return _exact_form_gradients(kernel, parents, h, init, tokens)


def _exact_form_gradients(kernel: np.ndarray, parents: np.ndarray, h: int, init: np.ndarray, tokens) -> dict:
    """:func:`exact_form_gradients` on validated arguments, with ``tokens`` drawn already beyond enumeration."""
    d = kernel.shape[0]
    parent = int(parents[h])
    others = np.delete(np.arange(h), parent)
    if d ** (h + 1) <= MAX_SEQUENCES:
        gradient = init_gradient(kernel, parents, h, init)
        return {"method": "enumeration", "gradient": gradient, "stderr": np.zeros(h), "others": others,
                "margins": gradient[parent] - gradient[others], "margins_stderr": np.zeros(h - 1), "n": 0}
    tokens = np.asarray(tokens)
    if tokens.ndim != 2 or tokens.shape[1] <= h or tokens.shape[0] < 2:
        raise ValueError(f"tokens must be sampled chains of shape (n >= 2, H > h = {h}); got {tokens.shape}")
    n = tokens.shape[0]
    samples = init_gradient_samples(kernel, tokens[:, : h + 1])  # (n, h)
    gradient, margins = mean_estimate(samples), mean_estimate(samples[:, [parent]] - samples[:, others])
    return {"method": "monte-carlo", "gradient": gradient.estimate, "stderr": gradient.stderr, "others": others,
            "margins": margins.estimate, "margins_stderr": margins.stderr, "n": n}


def monte_carlo_status(margins, stderr, z: float = MONTE_CARLO_Z) -> str:
    """The decision of margins estimated by Monte Carlo: "violation" when some margin lies below 0 by more than z
    standard errors, "holds" when every one lies above 0 by more than that, else "undecided"."""
    margins, stderr = np.asarray(margins, dtype=np.float64), np.asarray(stderr, dtype=np.float64)
    if (margins + z * stderr < 0).any():
        return "violation"
    return "holds" if (margins - z * stderr > 0).all() else "undecided"


def exact_form_decision(exact: dict, parent: int) -> dict:
    """Theorem 3's exact π̄ form at one position from :func:`exact_form_gradients`: the argmax rule when it was
    enumerated; by Monte Carlo :func:`monte_carlo_status` over the margins, reported at the worst one.
    Returns ``exact_form`` (status), ``exact_margin``, ``exact_margin_stderr`` and, for Monte Carlo,
    ``exact_samples``."""
    if exact["method"] == "enumeration":
        status, margin = argmax_status(exact["gradient"], parent)
        return {"exact_form": status, "exact_margin": margin, "exact_margin_stderr": 0.0}
    worst = int(np.argmin(exact["margins"]))
    return {"exact_form": monte_carlo_status(exact["margins"], exact["margins_stderr"]),
            "exact_margin": float(exact["margins"][worst]),
            "exact_margin_stderr": float(exact["margins_stderr"][worst]), "exact_samples": exact["n"]}


def monte_carlo_samples(d: int, positions) -> int:
    """Samples per position for the exact π̄ form beyond enumeration: :data:`MONTE_CARLO_BUDGET` shared over the
    positions h (h candidates each) with d^(h+1) > MAX_SEQUENCES, within :data:`MONTE_CARLO_SAMPLES`."""
    beyond = sum(h for h in positions if d ** (h + 1) > MAX_SEQUENCES)
    return MONTE_CARLO_SAMPLES[1] if not beyond else int(np.clip(MONTE_CARLO_BUDGET // beyond, *MONTE_CARLO_SAMPLES))


def thm3_position_rows(kernel, trees, laws: dict, init, rng) -> list[dict]:
    """Per (tree, position h >= 2), Theorem 3's J-form gradients (:func:`j_form_gradients`) with their argmax
    decision and the exact π̄ form's (:func:`exact_form_gradients`, :func:`exact_form_decision`), the kernel and
    trees validated once (``thm3-init-gradient``). ``laws``: :func:`kernel_powers` of the deepest position with law
    ``init`` at the root; beyond enumeration one draw of :func:`monte_carlo_samples` chains per tree (from ``rng``)
    serves every position of it.

    Returns
    -------
    list of dicts: ``tree``, ``h``, ``parent``, ``J_form`` (status), ``J_margin``, ``J_gradient`` (list),
    ``exact_method``, the fields of :func:`exact_form_decision` and ``exact_gradient`` (list).
    """
    kernel = check_kernel(kernel, single=True)
    trees, init, rng = _trees(trees), check_init(init, kernel.shape[0]), check_rng(rng)
    positions = [(t, h) for t, parents in enumerate(trees) for h in range(2, len(parents))]
    n = monte_carlo_samples(kernel.shape[0], [h for _, h in positions])
    rows, chains, gains = [], {}, {}
    for t, h in positions:
        parents = trees[t]
        parent = int(parents[h])
        gradient = _j_form_gradients(parents, h, laws, gains)
        status, margin = argmax_status(gradient, parent)
        if t not in chains and kernel.shape[0] ** (h + 1) > MAX_SEQUENCES:  # one draw serves every position of t
            chains[t] = sample_chains_unchecked(kernel, parents, n, rng, init)
        exact = _exact_form_gradients(kernel, parents, h, init, chains.get(t))
        rows.append({"tree": t, "h": h, "parent": parent, "J_form": status, "J_margin": margin,
                     "J_gradient": gradient.tolist(), "exact_method": exact["method"],
                     **exact_form_decision(exact, parent), "exact_gradient": exact["gradient"].tolist()})
    return rows


def product_patterns(H: int, *, stationary: bool) -> int:
    """The most d × d products :func:`tree_pair_table` needs on a tree of H positions: one per depth pattern
    (depth(c), {k1, k2}) with both k1, k2 ≥ 1 (k1 = 0 needs none, and a pattern shares its product with its mirror).
    c, a path of k1 and a path of k2 below it take 1 + k1 + k2 ≤ H − depth(c) positions. Under a stationary μ₀
    depth(c) does not enter the pattern (the count at depth(c) = 0); else the counts over depth(c) add up."""
    per_depth = [sum(s // 2 for s in range(2, H - depth_c)) for depth_c in range(max(H - 2, 0))]
    return per_depth[0] if stationary else sum(per_depth)


def check_cost(d: int, H: int, trees: int, *, pairs: bool, stationary: bool = True) -> dict:
    """Bytes and operations of the kernel checks, estimated from d and the sweep before any array is allocated:
    the one place where the size of a check is judged (``reports.kernel_report`` refuses above :data:`MAX_BYTES`
    or :data:`MAX_OPERATIONS`). Operations are counted as flops of a BLAS product on one core: the stationary law
    (an LU solve, ⅔ d³), δ(π) (d³/2 differences |a − b|, each :data:`DISTANCE_OPERATION_COST` flops), the powers
    π²..π^{H−1} (2 d³ each) and, for the pair table, one product per depth pattern with k1, k2 ≥ 1 (2 d³ each, at most
    ``product_patterns(H)`` and at most one per swept pair). The O(d²) work per pattern, position and tree (the J
    form, sampling) is left out. Returns ``bytes``, ``operations``."""
    pair_count = trees * (H - 1) * (H - 2) // 2
    products = (H - 2) + (min(product_patterns(H, stationary=stationary), pair_count) if pairs else 0)
    operations = (2 / 3 + DISTANCE_OPERATION_COST / 2) * d ** 3 + 2.0 * d ** 3 * products
    nbytes = 8 * d * d * (H + 8) + BLOCK_BYTES  # the powers, the kernel, a few d × d temporaries, δ(π)'s block
    return {"bytes": nbytes, "operations": operations}
