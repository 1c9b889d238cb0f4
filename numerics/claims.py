"""Exact and Monte Carlo sweeps for the information-theoretic claims (``lemma3-strict-dpi``,
``lemma4-loglik-gap``, ``thm2-consistency``, ``thm3-init-gradient``) and the numeric ``prop1-invariance``.

Every sweep is a function of a seed and a range of work items (instances, or blocks of sampled contexts). Item
i draws all of its randomness from its own ``SeedSequence(seed, spawn_key=(..., i))``, and partial results
merge associatively, so a sweep cut into chunks (e.g. mapped by the report's executor) gives the same result
for a given seed however it is chunked::

    parts = [lemma3_sweep_chunk(seed, start, min(start + 500, n)) for start in range(0, n, 500)]
    result = merge_sweeps(parts)          # == lemma3_sweep_chunk(seed, 0, n)

Why the Lemma 3 candidates are (or are not) theorems
----------------------------------------------------
Let h' < h, h' ≠ pa(h). Positions after h are never ancestors of anything before them, so h' is not a
descendant of h and the tree path from h' to h passes through pa(h): x_h − x_pa(h) − x_{h'} is a Markov chain.
The strong data-processing inequality for the channel T: x_pa(h) → x_{h'} (the conditional law
P(x_{h'} | x_pa(h)), computed from the exact joint) under the input law P(x_pa(h)) gives the theorem

    I(x_h; x_{h'}) ≤ η_KL(P(x_pa), T) · I(x_h; x_pa(h)).

T is not π: it climbs from pa(h) to the lowest common ancestor c of (h', pa(h)) by the reversed chain, then
descends to h' by π^{depth(h') − depth(c)}. When h' is not an ancestor of pa(h) (c ≠ h') T ends with at least
one forward step of π, so η_KL(P, T) ≤ δ(π) ≤ 1 − d·min π and the Dobrushin and Doeblin candidates are
theorems too. When h' is an ancestor of pa(h) (c = h') T is purely a reversed chain, whose Dobrushin
coefficient is not controlled by δ(π); for those pairs the Dobrushin and Doeblin candidates are conjectures,
and the sweep counts them separately (relation "ancestor"). The δ(π) conjecture is false: the counterexample
search found π = [[1/2, 1/2], [1/64, 63/64]], μ₀ uniform (not stationary), x_1 → x_3 → x_4 with
I(x_4; x_1)/I(x_4; x_3) = 0.48485 > δ(π) = 0.48438, and on the chain x_0 → x_1 → x_2 with
π = [[0.22, 0.78], [0.0005, 0.9995]], μ₀ = (0.032, 0.968): 0.584 > δ(π) = 0.2195
(``reports.search.KNOWN_COUNTEREXAMPLES``). All violations seen need a non-stationary μ₀; none was found with
the stationary law, and no counterexample to the Doeblin candidate 1 − d·min π has been found.

Theorem 3 (exact π̄ form) also needs stationarity: on the chain x_0 → x_1 → x_2 → x_3 with μ₀ = (0.9, 0.05, 0.05)
the expected init gradient of x_0 exceeds that of the true parent x_2 (``reports.search.KNOWN_COUNTEREXAMPLES``),
while the approximate J form ranks the parent first there and in every search so far.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.special import rel_entr, xlogy

from bma_verify.numerics._validate import check_init, check_joint, check_kernel, check_parents, check_positive_int
from bma_verify.numerics.contraction import _dobrushin, _eta_chi2, kl_contraction_batch
from bma_verify.numerics.estimators import mean_estimate, mutual_information_estimate, mutual_information_ratio_estimate
from bma_verify.numerics.gradient import chi2_gain, init_gradient
from bma_verify.numerics.information import chi2_mutual_information, mutual_information
from bma_verify.numerics.task import random_kernel, random_parents, sample_chains, stationary_distribution

#: Documented ranges of the random instances (SPEC §4 asks for d, H, ε over documented ranges).
#: d and H uniform on the ranges; ε ~ U[0, 1/(2d)] (so π ≥ ε > 0 a.s.); Dirichlet concentration log-uniform
#: on [0.2, 5]; the non-stationary μ₀ ~ Dirichlet(1).
LEMMA3_RANGES = {"d": (2, 5), "H": (3, 10), "eps_times_d": (0.0, 0.5), "dirichlet_alpha": (0.2, 5.0)}
#: Theorem 3 enumerates d^(h+1) configurations, so it uses smaller ranges; 5% of its kernels are
#: zero-information (identical rows) so that the tie bookkeeping is exercised.
THM3_RANGES = {"d": (2, 4), "H": (3, 7), "eps_times_d": (0.0, 0.5), "dirichlet_alpha": (0.2, 5.0),
               "max_configurations": 20_000, "zero_information_fraction": 0.05}
INIT_KINDS = ("stationary", "non-stationary")
#: Relative tolerance for "ratio > α" and for gradient ties (float64 rounding on sums of ≤ 2e6 terms).
VIOLATION_RTOL = 1e-9
TIE_ATOL = 1e-12
#: I(x_h; x_pa) at or below this (nats) makes the Lemma 3 ratio undefined ("degenerate"): rounding dominates.
MI_FLOOR = 1e-12

_LEMMA3_TAG, _THM3_TAG, _THM2_TAG = 3, 33, 2


def _item_rng(seed, tag: int, *index: int) -> np.random.Generator:
    """The generator of work item ``index`` of sweep ``tag``: independent of how items are chunked."""
    if isinstance(seed, np.random.SeedSequence):
        entropy, prefix = seed.entropy, tuple(seed.spawn_key)
    else:
        entropy, prefix = int(seed), ()
    return np.random.default_rng(np.random.SeedSequence(entropy, spawn_key=prefix + (tag, *index)))


def draw_instance(rng: np.random.Generator, ranges: dict, kernel=None) -> dict:
    """One random (kernel, tree, non-stationary μ₀) over ``ranges`` (see ``LEMMA3_RANGES``).

    With ``kernel`` given (a user's kernel) only the tree, H and μ₀ are drawn.
    """
    if kernel is not None:
        kernel = check_kernel(kernel)
        H = int(rng.integers(ranges["H"][0], ranges["H"][1] + 1))
        return {"d": kernel.shape[0], "H": H, "eps": float(kernel.min()), "dirichlet_alpha": None,
                "zero_information": False, "kernel": kernel, "parents": random_parents(H, rng=rng),
                "init": rng.dirichlet(np.ones(kernel.shape[0]))}
    d = int(rng.integers(ranges["d"][0], ranges["d"][1] + 1))
    H = int(rng.integers(ranges["H"][0], ranges["H"][1] + 1))
    if "max_configurations" in ranges:
        while d**H > ranges["max_configurations"]:
            H -= 1
    eps = float(rng.uniform(*ranges["eps_times_d"]) / d)
    low, high = np.log(ranges["dirichlet_alpha"])
    concentration = float(np.exp(rng.uniform(low, high)))
    kernel = random_kernel(d, alpha=concentration, eps=eps, rng=rng)
    zero_information = bool(rng.random() < ranges.get("zero_information_fraction", 0.0))
    if zero_information:
        kernel = np.repeat(kernel[:1], d, axis=0)  # identical rows: x_h is independent of everything
    parents = random_parents(H, rng=rng)
    init = rng.dirichlet(np.ones(d))
    return {"d": d, "H": H, "eps": eps, "dirichlet_alpha": concentration, "zero_information": zero_information,
            "kernel": kernel, "parents": parents, "init": init}


def _resolve_init(kernel: np.ndarray, init) -> np.ndarray:
    return stationary_distribution(kernel) if init is None else check_init(init, kernel.shape[0])


# ----------------------------------------------------------------------------------------------------------
# Exact quantities for every (h, h') pair of one instance


def lemma3_pairs(kernel, parents, init=None) -> dict:
    """Exact Lemma 3 quantities for every pair h' < h, h' ≠ pa(h), of one tree (``lemma3-strict-dpi``).

    Joints are computed through the lowest common ancestor c of (h', pa(h)):
    P(x_{h'}, x_pa) = (π^{k1})ᵀ diag(P(x_c)) π^{k2}, k1 = depth(h') − depth(c), k2 = depth(pa) − depth(c);
    then P(x_{h'}, x_h) = P(x_{h'}, x_pa) π and P(x_pa, x_h) = diag(P(x_pa)) π (see :func:`lemma3_pairs_batch`).

    Parameters
    ----------
    kernel : (d, d); parents : (H,); init : (d,), a stack (I, d) of laws, or None (stationary).

    Returns
    -------
    dict of arrays over the pairs (for a stack, I·P entries, init-major, with ``init_index``): ``h``,
    ``h_prime``, ``parent``, ``ancestor`` (h' is an ancestor of pa(h)), ``joint_candidate_child`` (·, d, d)
    = P(x_{h'}, x_h), ``joint_parent_child``, ``joint_candidate_parent``, ``parent_law``, ``channel``
    (x_pa → x_{h'}), ``mi_candidate``, ``mi_parent``, ``ratio`` (NaN where I(x_h; x_pa) ≤ MI_FLOOR), ``eta_chi2``
    and ``dobrushin_channel`` of the channel, and the scalars ``dobrushin`` δ(π) and ``doeblin`` 1 − d·min π.
    """
    kernel = check_kernel(kernel)
    parents = check_parents(parents)
    d = kernel.shape[0]
    inits = np.atleast_2d(_resolve_init(kernel, init) if init is None or np.ndim(init) == 1 else
                          np.stack([check_init(i, d) for i in init]))  # (I, d)
    batch = lemma3_pairs_batch(kernel[None], parents[None], inits[None])
    keep = batch["candidate"][0]  # (P_all,)
    I = inits.shape[0]
    out = {key: batch[key][0][:, keep].reshape((-1,) + batch[key].shape[3:])
           for key in ("joint_candidate_child", "joint_parent_child", "joint_candidate_parent", "parent_law",
                       "channel", "mi_candidate", "mi_parent", "ratio", "eta_chi2", "dobrushin_channel")}
    P = int(keep.sum())
    out.update({"h": np.tile(batch["h"][keep], I), "h_prime": np.tile(batch["h_prime"][keep], I),
                "parent": np.tile(batch["parent"][0][keep], I), "ancestor": np.tile(batch["ancestor"][0][keep], I),
                "init_index": np.repeat(np.arange(I), P), "dobrushin": float(batch["dobrushin"][0]),
                "doeblin": float(batch["doeblin"][0])})
    return out


def lemma3_pairs_batch(kernels, parents, inits) -> dict:
    """The Lemma 3 quantities of :func:`lemma3_pairs` for B instances of the same d and H at once.

    Every pair h' < h of the H(H−1)/2 is computed (vectorised over instances, laws of x_0 and pairs); the
    ``candidate`` mask marks h' ≠ pa(h). Inputs are not re-validated here (the sweep's inner loop): kernels
    (B, d, d) row-stochastic, parents (B, H) trees, inits (B, I, d) laws.

    Returns
    -------
    dict: ``h``, ``h_prime`` (P,); ``parent``, ``ancestor``, ``candidate`` (B, P); per (B, I, P):
    ``mi_candidate``, ``mi_parent``, ``ratio``, ``eta_chi2``, ``dobrushin_channel``, ``parent_law`` (·, d),
    ``channel``, ``joint_candidate_parent``, ``joint_candidate_child``, ``joint_parent_child`` (·, d, d);
    ``dobrushin``, ``doeblin`` (B,).
    """
    B, d, _ = kernels.shape
    H = parents.shape[1]
    rows = np.arange(B)
    depth = np.zeros((B, H), dtype=np.int64)
    ancestors = np.zeros((B, H, H), dtype=bool)  # ancestors[b, k, j]: j is an ancestor of k (k included)
    ancestors[:, 0, 0] = True
    for k in range(1, H):  # parents[:, k] < k: their depth and ancestors are already known
        depth[:, k] = depth[rows, parents[:, k]] + 1
        ancestors[:, k] = ancestors[rows, parents[:, k]]
        ancestors[:, k, k] = True
    powers = np.empty((B, H, d, d))  # powers[b, t] = π_b^t
    powers[:, 0] = np.eye(d)
    for t in range(1, H):
        powers[:, t] = powers[:, t - 1] @ kernels
    laws = np.einsum("bix,bhxy->bihy", inits, powers[rows[:, None], depth])  # (B, I, H, d)

    h, h_prime = np.tril_indices(H, k=-1)  # (P,) all h' < h
    parent = parents[:, h]  # (B, P)
    common = ancestors[:, h_prime] & ancestors[rows[:, None], parent]  # (B, P, H)
    lca = H - 1 - np.argmax(common[..., ::-1], axis=-1)  # (B, P): the deepest common ancestor = largest index
    r = rows[:, None]
    up = powers[r, depth[:, h_prime] - depth[r, lca]]  # (B, P, d, d): x_c -> x_{h'}
    down = powers[r, depth[r, parent] - depth[r, lca]]  # (B, P, d, d): x_c -> x_pa
    law_c = laws[r, :, lca]  # (B, P, I, d)
    joint_candidate_parent = np.einsum("bpza,bpiz,bpzc->bipac", up, law_c, down)  # (B, I, P, d, d)
    joint_candidate_child = joint_candidate_parent @ kernels[:, None, None]  # (B, I, P, d, d)
    parent_law = np.swapaxes(laws[r, :, parent], 1, 2)  # (B, I, P, d)
    joint_parent_child = parent_law[..., :, None] * kernels[:, None, None]  # (B, I, P, d, d)

    mi_candidate = _mutual_information(joint_candidate_child)  # (B, I, P)
    mi_parent = _mutual_information(joint_parent_child)
    # below MI_FLOOR the rounding of I (absolute ~1e-17 per cell) would dominate the ratio: undefined there
    ratio = np.divide(mi_candidate, mi_parent, out=np.full_like(mi_candidate, np.nan), where=mi_parent > MI_FLOOR)
    channel = np.swapaxes(joint_candidate_parent, -1, -2)  # (B, I, P, d_pa, d_h'): P(x_pa = b, x_h' = a)
    channel = np.divide(channel, parent_law[..., :, None], out=np.full_like(channel, 1.0 / d),
                        where=parent_law[..., :, None] > 0)  # rows of unreachable parent states: uniform
    return {
        "h": h, "h_prime": h_prime, "parent": parent, "ancestor": lca == h_prime[None, :],
        "candidate": parent != h_prime[None, :],
        "joint_candidate_child": joint_candidate_child, "joint_parent_child": joint_parent_child,
        "joint_candidate_parent": joint_candidate_parent, "parent_law": parent_law, "channel": channel,
        "mi_candidate": mi_candidate, "mi_parent": mi_parent, "ratio": ratio,
        "eta_chi2": _eta_chi2(parent_law, channel), "dobrushin_channel": _dobrushin(channel),
        "dobrushin": _dobrushin(kernels), "doeblin": 1.0 - d * kernels.min(axis=(1, 2)),
    }


def _mutual_information(joint: np.ndarray) -> np.ndarray:
    """I of validated joints (..., d, d) in nats; the unvalidated twin of ``numerics.mutual_information``."""
    outer = joint.sum(-1)[..., :, None] * joint.sum(-2)[..., None, :]
    return np.maximum(rel_entr(joint, outer).sum((-2, -1)), 0.0)


def sdpi_coefficients(pairs: dict, indices, *, steps: int = 100) -> np.ndarray:
    """η_KL of the channel x_pa(h) → x_{h'} under P(x_pa(h)) for pairs ``indices`` of :func:`lemma3_pairs`.

    Computed by :func:`numerics.contraction.kl_contraction_batch`, seeded with the conditional laws
    P(x_pa | x_h = u) of the pair's own chain x_h − x_pa − x_{h'}, so each value is at least that pair's
    ratio I(x_h; x_{h'})/I(x_h; x_pa) (the content of the SDPI theorem) up to rounding. (len(indices),)
    """
    indices = np.asarray(indices, dtype=np.int64)
    if indices.size == 0:
        return np.zeros(0)
    joint = pairs["joint_parent_child"][indices]  # (N, d_pa, d_h)
    child_law = joint.sum(-2, keepdims=True)  # (N, 1, d_h)
    conditional = np.divide(joint, child_law, out=np.zeros_like(joint), where=child_law > 0)
    seeds = np.swapaxes(conditional, -1, -2)  # (N, d_h, d_pa): row u = P(x_pa | x_h = u)
    seeds = np.where(seeds.sum(-1, keepdims=True) > 0, seeds, pairs["parent_law"][indices][:, None, :])
    return kl_contraction_batch(pairs["parent_law"][indices], pairs["channel"][indices], seeds, steps=steps)


def lemma4_terms(kernel, joint_parent_child, joint_candidate_child) -> dict:
    """Both sides of the Lemma 4 identity for batched pairs (``lemma4-loglik-gap``).

    lhs = E log π(x_h | x_pa) − E log π(x_h | x_{h'}), from the joints and log π directly;
    rhs = [I(x_h; x_pa) − I(x_h; x_{h'})] + E_{x_{h'}} KL(q(·|x_{h'}) ‖ π(·|x_{h'})), q the true conditional.

    Parameters
    ----------
    kernel : (d, d); joint_parent_child, joint_candidate_child : (..., d, d) joints with x_h on the columns.

    Returns
    -------
    dict of (...,) arrays: ``lhs``, ``rhs``, ``mi_parent``, ``mi_candidate``, ``kl``.
    """
    kernel = check_kernel(kernel)
    joint_parent_child = check_joint(joint_parent_child, "joint_parent_child")
    joint_candidate_child = check_joint(joint_candidate_child, "joint_candidate_child")
    return _lemma4_terms(kernel, joint_parent_child, joint_candidate_child, mutual_information(joint_parent_child),
                         mutual_information(joint_candidate_child))


def _lemma4_terms(kernel, joint_parent_child, joint_candidate_child, mi_parent, mi_candidate) -> dict:
    # xlogy: 0 · log π = 0 where the joint has no mass; π > 0 wherever the joint has mass.
    lhs = xlogy(joint_parent_child, kernel).sum((-2, -1)) - xlogy(joint_candidate_child, kernel).sum((-2, -1))
    candidate_law = joint_candidate_child.sum(-1)  # (..., d)
    kl = rel_entr(joint_candidate_child, candidate_law[..., :, None] * kernel).sum((-2, -1))
    return {"lhs": lhs, "rhs": np.asarray(mi_parent) - mi_candidate + kl, "mi_parent": mi_parent,
            "mi_candidate": mi_candidate, "kl": kl}


# ----------------------------------------------------------------------------------------------------------
# Mergeable sweep results


#: Bins of the ratio / α histograms kept by the Lemma 3 sweep (the last bin collects everything ≥ 1.18).
HISTOGRAM_EDGES = np.linspace(0.0, 1.2, 61)


@dataclass
class Worst:
    """The extreme value of a quantity over a sweep and the instance where it occurred (ties: lowest key)."""

    value: float = -np.inf
    key: tuple = ()
    instance: dict | None = None

    def offer(self, value: float, key: tuple, make_instance) -> None:
        if value > self.value or (value == self.value and (not self.key or key < self.key)):
            self.value, self.key, self.instance = float(value), key, make_instance()

    def merged(self, other: "Worst") -> "Worst":
        out = Worst(self.value, self.key, self.instance)
        if other.key:
            out.offer(other.value, other.key, lambda: other.instance)
        return out


@dataclass
class SweepResult:
    """Counts and extremes of a sweep; ``merge_sweeps`` combines chunks (sums counts, keeps worst values)."""

    name: str
    counts: dict = field(default_factory=dict)
    worst: dict = field(default_factory=dict)
    maxima: dict = field(default_factory=dict)
    histograms: dict = field(default_factory=dict)

    def add(self, key: str, amount: int = 1) -> None:
        self.counts[key] = self.counts.get(key, 0) + int(amount)

    def histogram(self, key: str, values: np.ndarray, edges: np.ndarray = None) -> None:
        """Add ``values`` to the integer histogram ``key`` (default bins: 60 on [0, 1.2], overflow last)."""
        edges = HISTOGRAM_EDGES if edges is None else edges
        bins = edges.size - 1
        # equal-width bins: the index by arithmetic (np.histogram's generality costs more than the sweep itself)
        position = (np.asarray(values, dtype=np.float64) - edges[0]) / (edges[-1] - edges[0]) * bins
        index = np.clip(position, 0, bins - 1).astype(np.int64)  # clip before the cast: ratios/α reach 1e290
        counts = np.bincount(index, minlength=bins)
        self.histograms[key] = self.histograms.get(key, np.zeros(bins, dtype=np.int64)) + counts

    def offer(self, key: str, value: float, item_key: tuple, make_instance) -> None:
        self.worst.setdefault(key, Worst()).offer(value, item_key, make_instance)

    def maximum(self, key: str, value: float) -> None:
        self.maxima[key] = max(self.maxima.get(key, -np.inf), float(value))

    def summary(self) -> dict:
        """JSON-ready: counts, maxima, and for each worst quantity its value and instance."""
        return {"name": self.name, "counts": dict(sorted(self.counts.items())),
                "maxima": dict(sorted(self.maxima.items())),
                "histograms": {k: v.tolist() for k, v in sorted(self.histograms.items())},
                "worst": {k: {"value": w.value, "instance": w.instance} for k, w in sorted(self.worst.items())}}


def merge_sweeps(parts) -> SweepResult:
    """Combine chunk results of one sweep; the result does not depend on the chunking or the order."""
    parts = list(parts)
    if not parts:
        raise ValueError("parts must contain at least one SweepResult")
    out = SweepResult(parts[0].name)
    for part in parts:
        if part.name != out.name:
            raise ValueError(f"parts must come from one sweep; got {out.name!r} and {part.name!r}")
        for key, value in part.counts.items():
            out.add(key, value)
        for key, value in part.maxima.items():
            out.maximum(key, value)
        for key, worst in part.worst.items():
            out.worst[key] = out.worst.get(key, Worst()).merged(worst)
        for key, counts in part.histograms.items():
            out.histograms[key] = out.histograms.get(key, np.zeros_like(counts)) + counts
    return out


def instance_record(target: str, kernel, parents, init, **extra) -> dict:
    """A JSON-ready instance (the format of ``reports.search``): lists, with ``init`` None for stationary."""
    record = {"target": target, "kernel": np.asarray(kernel).tolist(), "parents": np.asarray(parents).tolist(),
              "init": None if init is None else np.asarray(init).tolist()}
    record.update({k: (v.item() if isinstance(v, np.generic) else v) for k, v in extra.items()})
    return record


# ----------------------------------------------------------------------------------------------------------
# Lemma 3 and Lemma 4 sweeps

LEMMA3_CANDIDATES = ("sdpi", "dobrushin_channel", "dobrushin", "doeblin", "eta_chi2")


def lemma3_sweep_chunk(seed, start: int, stop: int, *, ranges: dict = LEMMA3_RANGES, compute_sdpi: bool = True,
                       kernel=None, quiet: bool = True) -> SweepResult:
    """Exact Lemma 3 and Lemma 4 check of instances ``start..stop-1`` of the sweep with ``seed``.

    Each instance is a random (kernel, tree) over ``ranges`` evaluated under both μ₀ (stationary and a drawn
    non-stationary law); every pair h' < h, h' ≠ pa(h) is checked against each candidate α of
    ``LEMMA3_CANDIDATES``: ``sdpi`` η_KL of the channel x_pa → x_{h'} (computed numerically only where the
    ratio exceeds η_χ², since η_KL ≥ η_χ²), ``dobrushin_channel`` δ of that channel, ``dobrushin`` δ(π),
    ``doeblin`` 1 − d·min π, and ``eta_chi2`` (η_χ² of the channel, not a valid bound for I in general).
    Lemma 4: max |lhs − rhs| of the identity and the smallest gap. ``kernel``: check one given kernel on
    random trees and μ₀ instead of random kernels.

    Counts (keys of ``counts``): ``pairs``, ``degenerate`` (I(x_h; x_pa) ≤ MI_FLOOR), ``violations/<candidate>``,
    ``violations/<candidate>/ancestor``, ``pairs/ancestor``, ``lemma4/nonpositive_gap``; per init kind the
    same with a ``<kind>/`` prefix. Worst values: ``ratio``, ``excess/<candidate>`` (ratio − α),
    ``lemma4/identity_error``, ``lemma4/negative_gap`` (minus the smallest gap), and
    ``lemma4/identity_error_without_kl`` (the same comparison with the E KL term dropped: a negative control).
    """
    from tqdm import tqdm

    result = SweepResult("lemma3")
    groups: dict[tuple[int, int], list] = {}  # instances of equal (d, H) are evaluated as one batch
    for index in tqdm(range(start, stop), disable=quiet, desc="lemma3 sweep"):
        instance = draw_instance(_item_rng(seed, _LEMMA3_TAG, index), ranges, kernel)
        instance["index"] = index
        groups.setdefault((instance["d"], instance["H"]), []).append(instance)
    for _, members in sorted(groups.items()):
        for first in range(0, len(members), _LEMMA3_BATCH):
            _score_lemma3_batch(result, members[first:first + _LEMMA3_BATCH], compute_sdpi)
    return result


#: Instances per vectorised batch (bounds memory: B·I·P·d² floats per array, ~1 MB at d = 5, H = 10).
_LEMMA3_BATCH = 64


def _score_lemma3_batch(result: SweepResult, members: list, compute_sdpi: bool) -> None:
    """Add a batch of instances of one (d, H), each under both μ₀ of INIT_KINDS (stationary, drawn)."""
    kernels = np.stack([m["kernel"] for m in members])  # (B, d, d)
    inits = np.stack([np.stack([stationary_distribution(m["kernel"]), m["init"]]) for m in members])  # (B, 2, d)
    batch = lemma3_pairs_batch(kernels, np.stack([m["parents"] for m in members]), inits)
    B, I, P = batch["ratio"].shape
    candidate = np.broadcast_to(batch["candidate"][:, None, :], (B, I, P))
    ancestor = np.broadcast_to(batch["ancestor"][:, None, :], (B, I, P))
    defined = candidate & np.isfinite(batch["ratio"])
    ratio = np.where(defined, batch["ratio"], 0.0)
    # rounding of I(x_h; x_pa) (absolute ~1e-16 per term) moves the ratio by ~1e-15 / I(x_h; x_pa)
    tolerance = VIOLATION_RTOL + 1e-14 / np.where(defined, batch["mi_parent"], 1.0)
    alphas = {"dobrushin_channel": batch["dobrushin_channel"], "eta_chi2": batch["eta_chi2"],
              "dobrushin": np.broadcast_to(batch["dobrushin"][:, None, None], (B, I, P)),
              "doeblin": np.broadcast_to(batch["doeblin"][:, None, None], (B, I, P))}
    if compute_sdpi:  # η_KL ≥ η_χ², so the numerical η_KL is only needed where the ratio is above η_χ²
        sdpi = batch["eta_chi2"].copy()
        needed = defined & (ratio > batch["eta_chi2"])
        flat = {k: batch[k][needed] for k in ("joint_parent_child", "parent_law", "channel")}
        sdpi[needed] = sdpi_coefficients(flat, np.arange(int(needed.sum())))
        result.add("sdpi_computed", int(needed.sum()))
        alphas["sdpi"] = sdpi
    result.add("pairs", int(candidate.sum()))
    result.add("pairs/ancestor", int((candidate & ancestor).sum()))
    result.add("degenerate", int((candidate & ~defined).sum()))
    for i, kind in enumerate(INIT_KINDS):
        result.add(f"{kind}/pairs", int(candidate[:, i].sum()))
    indices = np.array([m["index"] for m in members])

    def offer_largest(key: str, values: np.ndarray, valid: np.ndarray, alpha_name=None) -> None:
        # the batch's best entry (ties: the smallest (instance, μ₀ name, pair) key, as Worst.offer orders them)
        masked = np.where(valid, values, -np.inf)
        best = masked.max() if masked.size else -np.inf
        if not np.isfinite(best):
            return
        ties = np.argwhere(masked == best)
        b, i, p = min(ties, key=lambda t: (indices[t[0]], INIT_KINDS[t[1]], t[2]))
        member = members[b]

        def make():
            return instance_record(
                "lemma3", member["kernel"], member["parents"], None if i == 0 else member["init"],
                h=int(batch["h"][p]), h_prime=int(batch["h_prime"][p]), alpha=alpha_name or "dobrushin",
                ratio=float(ratio[b, i, p]), relation="ancestor" if ancestor[b, i, p] else "non-ancestor",
                instance_index=int(member["index"]), init_kind=INIT_KINDS[i])

        result.offer(key, best, (int(member["index"]), INIT_KINDS[i], int(p)), make)

    offer_largest("ratio", ratio, defined)
    result.histogram("ratio", ratio[defined])
    for name, alpha in alphas.items():
        violated = defined & (ratio > alpha + tolerance)
        result.add(f"violations/{name}", int(violated.sum()))
        result.add(f"violations/{name}/ancestor", int((violated & ancestor).sum()))
        for i, kind in enumerate(INIT_KINDS):
            result.add(f"{kind}/violations/{name}", int(violated[:, i].sum()))
        offer_largest(f"excess/{name}", ratio - alpha, defined, name)
        result.histogram(f"ratio_over_alpha/{name}", ratio[defined] / np.maximum(alpha[defined], 1e-300))
        if defined.any():
            result.maximum(f"alpha_max/{name}", float(alpha[defined].max()))
    # the MIs here are the foundation-independent ones of lemma3_pairs_batch; tests compare them with dit
    terms = _lemma4_terms(kernels[:, None, None], batch["joint_parent_child"], batch["joint_candidate_child"],
                          batch["mi_parent"], batch["mi_candidate"])
    gap = terms["lhs"]
    error = np.abs(gap - terms["rhs"])
    result.add("lemma4/nonpositive_gap", int((candidate & (gap <= 0)).sum()))
    offer_largest("lemma4/identity_error", error, candidate)
    offer_largest("lemma4/negative_gap", -gap, candidate)
    # the negative control of lemma4-loglik-gap: the identity with its E KL term dropped (a planted wrong
    # formula), compared with the same left side; the check must find it wrong
    offer_largest("lemma4/identity_error_without_kl", np.abs(gap - (terms["mi_parent"] - terms["mi_candidate"])),
                  candidate)


def _relation(pairs: dict, p: int) -> str:
    return "ancestor" if pairs["ancestor"][p] else "non-ancestor"


def lemma3_check_pair(kernel, parents, h: int, h_prime: int, init=None) -> dict:
    """Every Lemma 3 quantity for one pair (h, h'): ratio, each candidate α, relation (``lemma3-strict-dpi``)."""
    pairs = lemma3_pairs(kernel, parents, init)
    match = np.flatnonzero((pairs["h"] == h) & (pairs["h_prime"] == h_prime))
    if match.size != 1:
        raise ValueError(f"h_prime must satisfy 0 <= h_prime < h and h_prime != parents[h]; got h={h}, "
                         f"h_prime={h_prime}, parents[h]={check_parents(parents)[h] if 0 <= h < len(parents) else '?'}")
    p = int(match[0])
    return {"h": h, "h_prime": h_prime, "ratio": float(pairs["ratio"][p]),
            "mi_candidate": float(pairs["mi_candidate"][p]), "mi_parent": float(pairs["mi_parent"][p]),
            "relation": _relation(pairs, p),
            "alphas": {"sdpi": float(sdpi_coefficients(pairs, [p])[0]),
                       "dobrushin_channel": float(pairs["dobrushin_channel"][p]),
                       "dobrushin": pairs["dobrushin"], "doeblin": pairs["doeblin"],
                       "eta_chi2": float(pairs["eta_chi2"][p])}}


# ----------------------------------------------------------------------------------------------------------
# Theorem 3 sweep


THM3_FORMS = ("exact", "approximate")


def argmax_status(values, label: int) -> tuple[str, float]:
    """The Theorem 3 decision rule: is candidate ``label`` the strict argmax of ``values``?

    Returns ``(status, margin)``: margin = values[label] − the largest other value; status ``"tie"`` when
    |margin| ≤ TIE_ATOL·max(1, max|values|) (zero-information kernels make every gradient zero), ``"violation"``
    when the margin is below that, else ``"holds"``. The sweep applies it to the true parent and, as the negative
    control, to a shuffled label (``thm3-init-gradient``).
    """
    values = np.asarray(values, dtype=np.float64)
    margin = float(values[label] - np.delete(values, label).max())
    if abs(margin) <= TIE_ATOL * max(1.0, float(np.abs(values).max())):
        return "tie", margin
    return ("violation" if margin < 0 else "holds"), margin


def thm3_check_position(kernel, parents, h: int, init=None) -> dict:
    """Exact and approximate init gradients at position h and whether the true parent is the largest.

    ``exact`` is the expectation with π̄ (enumerated), ``approximate`` = (1/h) J from pairwise joints
    (:func:`numerics.gradient.chi2_gain`), ``enumerated_approximate`` the same approximate form by enumeration
    over sequences (P(x_h) in place of π̄). ``margin_*`` = gradient of pa(h) − the largest other candidate's (see
    :func:`argmax_status`). Identities (``thm3-init-gradient``): ``chi2_identity_error`` = |J(pa) − I_χ²(x_pa; x_h)|
    and ``j_identity_error`` = max |enumerated_approximate − (1/h) J|.
    """
    from bma_verify.numerics.information import pairwise_joint

    kernel = check_kernel(kernel, single=True)
    parents = check_parents(parents)
    if not 2 <= h < parents.shape[-1]:
        raise ValueError(f"h must be a position in 2..{parents.shape[-1] - 1} (at least two candidates); got {h}")
    init = _resolve_init(kernel, init)  # once: the stationary law is otherwise recomputed by every call below
    exact = init_gradient(kernel, parents, h, init)  # (h,)
    enumerated_approximate = init_gradient(kernel, parents, h, init, denominator="marginal")  # (h,)
    gain = chi2_gain(kernel, parents, h, init)  # (h,)
    parent = int(parents[h])
    chi2 = chi2_mutual_information(pairwise_joint(kernel, parents, parent, h, init))
    return {"h": h, "parent": parent, "exact": exact, "approximate": gain / h,
            "enumerated_approximate": enumerated_approximate,
            "margin_exact": argmax_status(exact, parent)[1], "margin_approximate": argmax_status(gain / h, parent)[1],
            "chi2_identity_error": float(abs(gain[parent] - chi2)),
            "j_identity_error": float(np.abs(enumerated_approximate - gain / h).max()), "i_chi2": float(chi2)}


def thm3_sweep_chunk(seed, start: int, stop: int, *, ranges: dict = THM3_RANGES, quiet: bool = True) -> SweepResult:
    """Theorem 3 on instances ``start..stop-1``: for every position h >= 2 (h = 1 has one candidate) and both
    μ₀, is the true parent's expected init gradient the largest, exactly and in the approximate J form?

    The negative control applies the same rule (:func:`argmax_status`) to a shuffled label: for each position a
    candidate other than pa(h), drawn uniformly from the item's own generator, is claimed to be the parent.

    Counts: ``positions``, ``ties/<form>``, ``violations/<form>`` (and with a ``<kind>/`` prefix); the control's
    ``control/ties/<form>``, ``control/violations/<form>`` (and per kind); worst: ``negative_margin/<form>`` (minus
    the smallest margin among non-ties; also per kind, ``<kind>/negative_margin/<form>``), ``chi2_identity_error``,
    ``j_identity_error``.
    """
    from tqdm import tqdm

    result = SweepResult("thm3")
    for index in tqdm(range(start, stop), disable=quiet, desc="thm3 sweep"):
        instance = draw_instance(_item_rng(seed, _THM3_TAG, index), ranges)
        shuffle = _item_rng(seed, _THM3_TAG, index, 1)  # the control's claimed parents, one per (μ₀, h)
        kernel, parents = instance["kernel"], instance["parents"]
        for kind in INIT_KINDS:
            init = None if kind == "stationary" else instance["init"]
            for h in range(2, instance["H"]):
                out = thm3_check_position(kernel, parents, h, init)
                claimed = int(shuffle.choice(np.delete(np.arange(h), out["parent"])))
                result.add("positions")
                result.add(f"{kind}/positions")
                for identity in ("chi2_identity_error", "j_identity_error"):
                    result.offer(identity, out[identity], (index, kind, h),
                                 lambda: instance_record("thm3", kernel, parents, init, h=h, instance_index=index))
                for form in THM3_FORMS:
                    for prefix, label in (("", out["parent"]), ("control/", claimed)):
                        status, margin = argmax_status(out[form], label)
                        if status == "tie":
                            result.add(f"{prefix}ties/{form}")
                            result.add(f"{prefix}{kind}/ties/{form}")
                            continue
                        if status == "violation":
                            result.add(f"{prefix}violations/{form}")
                            result.add(f"{prefix}{kind}/violations/{form}")
                        if not prefix:
                            for key in (f"negative_margin/{form}", f"{kind}/negative_margin/{form}"):
                                result.offer(key, -margin, (index, kind, h),
                                             lambda: instance_record("thm3", kernel, parents, init, h=h, form=form,
                                                                     margin=margin, instance_index=index,
                                                                     init_kind=kind))
    return result


def thm3_monte_carlo(kernel, parents, h: int, n: int, *, rng, init=None, form: str = "approximate",
                     claimed: int | None = None) -> dict:
    """Monte Carlo init gradients at position h beyond the reach of enumeration (``thm3-init-gradient``).

    From n sampled prefixes x_0..x_h: the gradient estimate per candidate, and the paired estimate of
    margin(h') = E[g_claimed − g_{h'}] for every other candidate (one sample gives both terms, so the difference
    has a smaller error than the two estimates separately). ``form="approximate"`` (the paper's J form) divides by
    the exact law P(x_h), so its expectation (1/h) J(h') is known exactly from pairwise joints at any size and each
    estimate can be judged against it; ``form="exact"`` divides by π̄(x_h) (no exact value beyond enumeration).
    ``claimed``: the candidate claimed to be the parent (default pa(h); another value is a negative control).

    Returns
    -------
    dict: ``gradient`` and ``margins`` :class:`Estimate` ((h,) and (h-1,)), ``others`` (the h' of each margin),
    ``approximate`` (h,) the exact (1/h) J, ``parent``, ``claimed``.
    """
    from bma_verify.numerics.gradient import approximate_init_gradient, init_gradient_samples
    from bma_verify.numerics.information import marginal

    kernel = check_kernel(kernel)
    parents = check_parents(parents)
    n = check_positive_int(n, "n", 2)
    if form not in THM3_FORMS:
        raise ValueError(f"form must be one of {THM3_FORMS}; got {form!r}")
    parent = int(parents[h])
    claimed = parent if claimed is None else int(claimed)
    if not 0 <= claimed < h:
        raise ValueError(f"claimed must be a candidate in 0..{h - 1}; got {claimed}")
    law = marginal(kernel, parents, h, init) if form == "approximate" else None  # (d,) P(x_h)
    tokens = sample_chains(kernel, parents[: h + 1], n, rng=rng, init=init)  # (n, h+1)
    samples = init_gradient_samples(kernel, tokens, law)  # (n, h)
    others = np.delete(np.arange(h), claimed)
    return {"gradient": mean_estimate(samples), "margins": mean_estimate(samples[:, [claimed]] - samples[:, others]),
            "others": others, "parent": parent, "claimed": claimed,
            "approximate": approximate_init_gradient(kernel, parents, h, init)}


# ----------------------------------------------------------------------------------------------------------
# Theorem 2: error rate of the posterior's argmax against L


#: Contexts per block: the unit of randomness of the Theorem 2 sweep (chunks are whole blocks).
THM2_BLOCK = 500


def hoeffding_bound(L, gap, eps, exponent_factor: float = 1.0) -> np.ndarray:
    """exp(−L Δ² / (2 log²(1/ε))): Hoeffding's bound on P(score(pa) ≤ score(h')) (``thm2-consistency``).

    Each example contributes log π(x_h|x_pa) − log π(x_h|x_{h'}) ∈ [log ε, log(1/ε)], an interval of width
    2 log(1/ε), with mean Δ (the Lemma 4 gap). Broadcasts over L and gap. ``exponent_factor`` multiplies the
    exponent: a factor > 1 is a bound that does not follow from Hoeffding (the negative control of
    ``thm2-consistency`` uses 4, i.e. the bound to the fourth power).
    """
    if not 0.0 < eps < 1.0:
        raise ValueError(f"eps must be in (0, 1) (the kernel's smallest entry); got {eps}")
    gap = np.asarray(gap, dtype=np.float64)
    exponent = np.asarray(L, dtype=np.float64) * np.maximum(gap, 0.0) ** 2 / (2.0 * np.log(1.0 / eps) ** 2)
    return np.exp(-exponent_factor * exponent)


def thm2_counts_chunk(seed, kernel, parents, Ls, block_start: int, block_stop: int, init=None) -> dict:
    """Counts for context blocks ``block_start..block_stop-1`` (THM2_BLOCK contexts each) at every L in ``Ls``.

    For each L and each sampled context of L examples on the fixed tree, the BMA scores
    score(h, h') = Σ_l log π(x^l_h | x^l_{h'}) decide: ``pair_errors[i, p]`` counts score(pa) ≤ score(h') for
    pair p; ``argmax_errors[i, h]`` counts positions where some h' ≠ pa(h) scores at least score(pa) (the
    posterior's argmax is not uniquely the true parent).

    Returns
    -------
    dict with ``contexts`` (int), ``pair_errors`` (len(Ls), P) and ``argmax_errors`` (len(Ls), H) int arrays.
    """
    kernel = check_kernel(kernel)
    parents = check_parents(parents)
    H = parents.shape[0]
    log_kernel = np.log(kernel)
    h_idx, hp_idx = _candidate_pairs(parents)
    pair_errors = np.zeros((len(Ls), h_idx.size), dtype=np.int64)
    argmax_errors = np.zeros((len(Ls), H), dtype=np.int64)
    for i, L in enumerate(Ls):
        L = check_positive_int(int(L), "L", 1)
        for block in range(block_start, block_stop):
            rng = _item_rng(seed, _THM2_TAG, i, block)
            x = sample_chains(kernel, parents, THM2_BLOCK * L, rng=rng, init=init).reshape(THM2_BLOCK, L, H)
            # scores[b, h, h'] = Σ_l log π(x^l_h | x^l_h')
            scores = log_kernel[x[:, :, None, :], x[:, :, :, None]].sum(1)  # (B, H, H)
            parent_score = scores[:, np.arange(1, H), parents[1:]]  # (B, H-1)
            lose = scores[:, h_idx, hp_idx] >= scores[:, h_idx, parents[h_idx]]  # (B, P)
            pair_errors[i] += lose.sum(0)
            masked = np.where(np.tril(np.ones((H, H), dtype=bool), -1), scores, -np.inf)  # (B, H, H)
            masked[:, np.arange(1, H), parents[1:]] = -np.inf
            argmax_errors[i, 1:] += (masked[:, 1:].max(-1) >= parent_score).sum(0)
    return {"contexts": (block_stop - block_start) * THM2_BLOCK, "pair_errors": pair_errors,
            "argmax_errors": argmax_errors}


def _candidate_pairs(parents: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    h, h_prime = np.tril_indices(parents.shape[0], k=-1)
    keep = h_prime != parents[h]
    return h[keep], h_prime[keep]


def thm2_error_rates(seed, kernel, parents, Ls, n_blocks: int, init=None, chunk_blocks: int | None = None) -> dict:
    """Empirical P(score(pa) ≤ score(h')) per pair and argmax error per position against L, with Wilson
    intervals and the Hoeffding bound with the exact Lemma 4 gap Δ (``thm2-consistency``).

    The ``chunk_blocks`` argument only splits the work; the result is the same for any value.

    Returns
    -------
    dict: ``L`` (list), ``pairs`` (list of (h, h')), ``gap`` (P,), ``eps``, ``pair_rate`` / ``pair_low`` /
    ``pair_high`` / ``bound`` (len(L), P), ``argmax_rate`` (len(L), H), ``contexts``.
    """
    from bma_verify.numerics.information import pairwise_joint

    kernel = check_kernel(kernel)
    parents = check_parents(parents)
    n_blocks = check_positive_int(n_blocks, "n_blocks", 1)
    chunk_blocks = n_blocks if chunk_blocks is None else check_positive_int(chunk_blocks, "chunk_blocks", 1)
    parts = [thm2_counts_chunk(seed, kernel, parents, Ls, b, min(b + chunk_blocks, n_blocks), init)
             for b in range(0, n_blocks, chunk_blocks)]
    contexts = sum(p["contexts"] for p in parts)
    pair_errors = sum(p["pair_errors"] for p in parts)
    argmax_errors = sum(p["argmax_errors"] for p in parts)
    h_idx, hp_idx = _candidate_pairs(parents)
    gap = np.array([
        lemma4_terms(kernel, pairwise_joint(kernel, parents, int(parents[h]), int(h), init),
                     pairwise_joint(kernel, parents, int(hp), int(h), init))["lhs"]
        for h, hp in zip(h_idx, hp_idx)])
    eps = float(kernel.min())
    low, high = wilson_interval(pair_errors, contexts)
    return {"L": [int(L) for L in Ls], "pairs": [(int(a), int(b)) for a, b in zip(h_idx, hp_idx)], "gap": gap,
            "eps": eps, "pair_rate": pair_errors / contexts, "pair_low": low, "pair_high": high,
            "bound": hoeffding_bound(np.asarray(Ls)[:, None], gap[None, :], eps),
            "argmax_rate": argmax_errors / contexts, "contexts": contexts}


def wilson_interval(successes, trials: int, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Wilson score interval for a binomial proportion (valid near 0, unlike the normal interval)."""
    from scipy.special import ndtri

    z = float(ndtri(0.5 + level / 2.0))
    p = np.asarray(successes, dtype=np.float64) / trials
    centre = (p + z * z / (2 * trials)) / (1 + z * z / trials)
    half = z * np.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / (1 + z * z / trials)
    return np.clip(centre - half, 0.0, 1.0), np.clip(centre + half, 0.0, 1.0)


# ----------------------------------------------------------------------------------------------------------
# Monte Carlo versions of Lemma 3 / Lemma 4 for one instance


def lemma3_monte_carlo(kernel, parents, h: int, h_prime: int, n: int, *, rng, init=None) -> dict:
    """Plug-in and Miller–Madow estimates of I(x_h; x_{h'}), I(x_h; x_pa) and their ratio from n chains,
    beside the exact values (``lemma3-strict-dpi``). Values are :class:`Estimate` objects."""
    kernel = check_kernel(kernel)
    parents = check_parents(parents)
    d = kernel.shape[0]
    x = sample_chains(kernel, parents, n, rng=rng, init=init)  # (n, H)
    parent = int(parents[h])
    out = {"exact": lemma3_check_pair(kernel, parents, h, h_prime, init)}
    for method in ("plug-in", "miller-madow"):
        out[method] = {
            "mi_candidate": mutual_information_estimate(x[:, h_prime], x[:, h], d, method=method),
            "mi_parent": mutual_information_estimate(x[:, parent], x[:, h], d, method=method),
            "ratio": mutual_information_ratio_estimate(x[:, h_prime], x[:, parent], x[:, h], d, method=method),
        }
    return out


def lemma4_monte_carlo(kernel, parents, h: int, h_prime: int, n: int, *, rng, init=None) -> dict:
    """Sample mean of log π(x_h|x_pa) − log π(x_h|x_{h'}) over n chains with its error, beside the exact gap
    (``lemma4-loglik-gap``)."""
    from bma_verify.numerics.information import pairwise_joint

    kernel = check_kernel(kernel)
    parents = check_parents(parents)
    x = sample_chains(kernel, parents, n, rng=rng, init=init)  # (n, H)
    parent = int(parents[h])
    with np.errstate(divide="ignore"):
        log_kernel = np.log(kernel)
    samples = log_kernel[x[:, parent], x[:, h]] - log_kernel[x[:, h_prime], x[:, h]]  # (n,)
    exact = lemma4_terms(kernel, pairwise_joint(kernel, parents, parent, h, init),
                         pairwise_joint(kernel, parents, h_prime, h, init))
    return {"estimate": mean_estimate(samples), "exact": {k: float(v) for k, v in exact.items()}}


# ----------------------------------------------------------------------------------------------------------
# Proposition 1, numerically


def prop1_shift_effects(W, a, b, context) -> dict:
    """How A = selector_attention(W, context) moves under W + 1aᵀ (column shift) and W + b1ᵀ (row shift).

    Returns the max absolute change of A for each (``prop1-invariance``: the first is 0 up to rounding; the
    second is not 0 in general, since Σ_l b[x^l_{h'}] depends on the key h').
    """
    from bma_verify.numerics.bma import selector_attention

    W = np.asarray(W, dtype=np.float64)
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    base = selector_attention(W, context)
    column = selector_attention(W + a[None, :], context)  # (1 aᵀ)[i, j] = a_j
    row = selector_attention(W + b[:, None], context)  # (b 1ᵀ)[i, j] = b_i
    return {"column_shift_change": float(np.abs(column - base).max()),
            "row_shift_change": float(np.abs(row - base).max())}
