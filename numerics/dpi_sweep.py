"""Exact and Monte Carlo quantities of Lemma 3 (strict DPI) and Lemma 4 (log-likelihood gap): every (h, h') pair of an
instance, the chunkable sweep over random instances, and one pair by sampling.

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
"""

from __future__ import annotations

import numpy as np
from scipy.special import rel_entr, xlogy
from tqdm import tqdm

from bma_verify.numerics.validation import check_init, check_joint, check_kernel, check_parents
from bma_verify.numerics.claim_sweeps import (INIT_KINDS, MI_FLOOR, VIOLATION_RTOL, SweepResult, draw_instance,
                                              instance_record, item_rng, resolve_init)
from bma_verify.numerics.contraction import (chi2_contraction_unchecked, dobrushin_coefficients_unchecked,
                                             kl_contraction_batch)
from bma_verify.numerics.estimators import mean_estimate, mutual_information_estimate, mutual_information_ratio_estimate
from bma_verify.numerics.information import mutual_information, pairwise_joint
from bma_verify.numerics.task import sample_chains, stationary_distribution

#: Documented ranges of the random instances (the claims are checked over documented d, H, ε; docs/claims.md).
#: d and H uniform on the ranges; ε ~ U[0, 1/(2d)] (so π ≥ ε > 0 a.s.); Dirichlet concentration log-uniform
#: on [0.2, 5]; the non-stationary μ₀ ~ Dirichlet(1).
LEMMA3_RANGES = {"d": (2, 5), "H": (3, 10), "eps_times_d": (0.0, 0.5), "dirichlet_alpha": (0.2, 5.0)}

_LEMMA3_TAG = 3

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
    inits = np.atleast_2d(resolve_init(kernel, init) if init is None or np.ndim(init) == 1 else
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
        "eta_chi2": chi2_contraction_unchecked(parent_law, channel),
        "dobrushin_channel": dobrushin_coefficients_unchecked(channel),
        "dobrushin": dobrushin_coefficients_unchecked(kernels), "doeblin": 1.0 - d * kernels.min(axis=(1, 2)),
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
    return lemma4_terms_from_mi(kernel, joint_parent_child, joint_candidate_child,
                                mutual_information(joint_parent_child), mutual_information(joint_candidate_child))


def lemma4_terms_from_mi(kernel, joint_parent_child, joint_candidate_child, mi_parent, mi_candidate) -> dict:
    """:func:`lemma4_terms` of checked arrays (broadcasting over leading axes) with the two mutual informations
    given, so that a sweep reuses the ones it computed already; it checks nothing."""
    # xlogy: 0 · log π = 0 where the joint has no mass; π > 0 wherever the joint has mass.
    lhs = xlogy(joint_parent_child, kernel).sum((-2, -1)) - xlogy(joint_candidate_child, kernel).sum((-2, -1))
    candidate_law = joint_candidate_child.sum(-1)  # (..., d)
    kl = rel_entr(joint_candidate_child, candidate_law[..., :, None] * kernel).sum((-2, -1))
    return {"lhs": lhs, "rhs": np.asarray(mi_parent) - mi_candidate + kl, "mi_parent": mi_parent,
            "mi_candidate": mi_candidate, "kl": kl}

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
    result = SweepResult("lemma3")
    groups: dict[tuple[int, int], list] = {}  # instances of equal (d, H) are evaluated as one batch
    for index in tqdm(range(start, stop), disable=quiet, desc="lemma3 sweep"):
        instance = draw_instance(item_rng(seed, _LEMMA3_TAG, index), ranges, kernel)
        instance["index"] = index
        groups.setdefault((instance["d"], instance["H"]), []).append(instance)
    for _, members in sorted(groups.items()):
        for first in range(0, len(members), _LEMMA3_BATCH):
            score_lemma3_batch(result, members[first:first + _LEMMA3_BATCH], compute_sdpi)
    return result


#: Instances per vectorised batch (bounds memory: B·I·P·d² floats per array, ~1 MB at d = 5, H = 10).
_LEMMA3_BATCH = 64


def score_lemma3_batch(result: SweepResult, members: list, compute_sdpi: bool) -> None:
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
    terms = lemma4_terms_from_mi(kernels[:, None, None], batch["joint_parent_child"], batch["joint_candidate_child"],
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
# The batched Lemma 3 sweep: many small kernels at once (the ratio and Lemma 4 checks, without the channel's
# coefficients η_χ², δ and η_KL, which need a decomposition per pair)

_BATCHED_TAG = 34
#: Instances per batch of the batched sweep (each batch one (d, H)): ~100 MB of temporaries at d = 5, H = 10.
LEMMA3_BATCH_SIZE = 4096


def lemma3_ratio_batch(kernels, parents, inits) -> dict:
    """The ratio I(x_h; x_h')/I(x_h; x_pa) and the Lemma 4 gap of every pair h' < h, h' ≠ pa(h), of B instances of
    one (d, H) at once (``lemma3-strict-dpi``, ``lemma4-loglik-gap``).

    The values of :func:`lemma3_pairs_batch` and :func:`lemma4_terms` (tested equal) at a fraction of the cost: the
    joint P(x_h', x_h) is taken straight from π^{depth(h) − depth(c)}, the parent's terms are computed once per
    position rather than once per pair, and each mutual information is composed from entropies,
    I = H(x_h') + H(x_h) − H(x_h', x_h), so that one pass of logarithms over the joints serves every pair (the
    absolute rounding, ~1e-15 nats, is within the tolerance of the sweep's rule). Joints are formed for the
    candidates only (:func:`_candidate_terms`); at h' = pa(h) the pair's values are the parent's own
    (I(x_h; x_h') = I(x_h; x_pa), gap 0). Lemma 4's identity is left to :func:`lemma3_sweep_chunk` (composed the
    same way it would hold by construction). Inputs are not re-validated (a sweep's inner loop): kernels (B, d, d)
    row-stochastic, parents (B, H) trees, inits (B, I, d) laws.

    Returns
    -------
    dict: ``h``, ``h_prime`` (P,) all h' < h; ``candidate``, ``ancestor`` (B, P); per (B, I, P) ``mi_candidate``,
    ``mi_parent``, ``ratio`` (NaN where I(x_h; x_pa) ≤ MI_FLOOR) and ``loglik_gap``; ``dobrushin``, ``doeblin`` (B,).
    """
    blocks = [_ratio_block(kernels[first:first + _BLOCK], parents[first:first + _BLOCK], inits[first:first + _BLOCK])
              for first in range(0, kernels.shape[0], _BLOCK)]
    shared = ("h", "h_prime")
    return {key: blocks[0][key] if key in shared else np.concatenate([block[key] for block in blocks])
            for key in blocks[0]}


#: Instances evaluated together: their temporaries (a few MB) are reused from block to block, where arrays of a
#: whole batch would be fresh memory, page-faulted at every step (1.2-1.3x faster than one block of 2048 here).
_BLOCK = 512


def _ratio_block(kernels, parents, inits) -> dict:
    """:func:`lemma3_ratio_batch` of one block of instances."""
    B, d, _ = kernels.shape
    H, I = parents.shape[1], inits.shape[1]
    rows = np.arange(B)[:, None]
    depth, ancestors = _tree_tables(parents)
    powers = np.empty((B, H, d, d))
    powers[:, 0] = np.eye(d)
    for t in range(1, H):
        powers[:, t] = powers[:, t - 1] @ kernels
    laws = np.einsum("bix,bhxy->bihy", inits, powers[rows, depth])  # (B, I, H, d): the law of x_h
    entropy = -xlogy(laws, laws).sum(-1)  # (B, I, H)
    log_kernel = np.log(np.maximum(kernels, 1e-300))  # 0 · log 0 = 0 (π > 0 wherever a joint has mass)
    # the parent's terms, once per position h: P(x_pa, x_h) = diag(P(x_pa)) π
    parent_law = laws[rows, :, parents.clip(0)].transpose(0, 2, 1, 3)  # (B, I, H, d)
    loglik_parent = (parent_law * (kernels * log_kernel).sum(-1)[:, None, None]).sum(-1)  # (B, I, H)
    mi_parent_h = entropy + loglik_parent  # I(x_h; x_pa) = H(x_h) − H(x_h | x_pa) = H(x_h) + E log π(x_h | x_pa)
    h, h_prime = np.tril_indices(H, k=-1)  # (P,)
    parent = parents[:, h]  # (B, P)
    candidate = parent != h_prime[None, :]
    common = ancestors[:, h_prime] & ancestors[rows, parent]  # (B, P, H)
    lca = H - 1 - np.argmax(common[..., ::-1], axis=-1)  # (B, P): the deepest common ancestor = largest index
    # every instance has H − 1 parent pairs, hence the same number C of candidates: their pair indices, (B, C)
    pairs = np.nonzero(candidate)[1].reshape(B, -1)
    mi, loglik = _candidate_terms(powers, laws, entropy, log_kernel, depth, h[pairs], h_prime[pairs],
                                  lca[rows, pairs])  # (B, I, C) each
    at = (rows[:, None], np.arange(I)[None, :, None], pairs[:, None, :])  # the (B, I, C) entries of (B, I, P)
    mi_parent = np.maximum(mi_parent_h[..., h], 0.0)
    mi_candidate = mi_parent.copy()  # at h' = pa(h) the candidate is the parent
    mi_candidate[at] = mi
    loglik_gap = np.zeros_like(mi_candidate)
    loglik_gap[at] = loglik_parent[(*at[:2], h[pairs][:, None, :])] - loglik
    ratio = np.divide(mi_candidate, mi_parent, out=np.full_like(mi_candidate, np.nan), where=mi_parent > MI_FLOOR)
    return {"h": h, "h_prime": h_prime, "candidate": candidate, "ancestor": lca == h_prime[None, :],
            "mi_candidate": mi_candidate, "mi_parent": mi_parent, "ratio": ratio, "loglik_gap": loglik_gap,
            "dobrushin": dobrushin_coefficients_unchecked(kernels), "doeblin": 1.0 - d * kernels.min(axis=(1, 2))}


#: Instances whose pairs are evaluated together: their temporaries (~0.3 MB at d = 5, H = 10) stay in the core's
#: cache, where one array per step of the whole batch would not.
_PAIR_BLOCK = 4096


def _tree_tables(parents: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Depths (B, H) of trees (B, H), and ``ancestors`` (B, H, H): [b, k, j] when j is an ancestor of k (k included)."""
    B, H = parents.shape
    rows = np.arange(B)
    depth = np.zeros((B, H), dtype=np.int64)
    ancestors = np.zeros((B, H, H), dtype=bool)
    ancestors[:, 0, 0] = True
    for k in range(1, H):  # parents[:, k] < k: their depth and ancestors are already known
        depth[:, k] = depth[rows, parents[:, k]] + 1
        ancestors[:, k] = ancestors[rows, parents[:, k]]
        ancestors[:, k, k] = True
    return depth, ancestors


def _candidate_terms(powers, laws, entropy, log_kernel, depth, h, h_prime, lca) -> tuple[np.ndarray, np.ndarray]:
    """I(x_h; x_h') and E log π(x_h | x_h') of C pairs per instance (positions (B, C)), each (B, I, C), from the
    joint P(x_h', x_h) = (π^{k1})ᵀ diag(P(x_c)) π^{k2} through their lowest common ancestor c.

    Every operand is gathered C-contiguous with (x_h', x_h) last, so that products, logarithms and sums run over
    flat memory."""
    B, H, d, _ = powers.shape
    I, C = laws.shape[1], h.shape[1]
    rows = np.arange(B)[:, None]
    at = (rows[:, None], np.arange(I)[None, :, None])  # with positions (B, 1, C): the (B, I, C) gathers
    up = np.ascontiguousarray(np.swapaxes(powers, -1, -2))[rows, depth[rows, h_prime] - depth[rows, lca]]  # (π^{k1})ᵀ
    down = powers[rows, depth[rows, h] - depth[rows, lca]]  # (B, C, d, d): π^{k2}, x_c -> x_h
    law_c = np.ascontiguousarray(laws.transpose(0, 2, 1, 3))[rows, lca]  # (B, C, I, d): P(x_c) under each μ₀
    # both μ₀ in one product per pair, rows (μ₀, x_h'): [(π^{k1})ᵀ diag(P(x_c))]_μ₀ @ π^{k2}, (2d × d) @ (d × d)
    scaled = np.multiply(law_c[:, :, :, None, :], up[:, :, None], out=np.empty((B, C, I, d, d)))
    joint = np.matmul(scaled.reshape(B, C, I * d, d), down).reshape(B, C * I, d * d)  # (B, C·I, d²)
    log_joint = np.maximum(joint, 1e-300)
    np.log(log_joint, out=log_joint)
    log_joint *= joint
    joint_entropy = -log_joint.sum(-1).reshape(B, C, I).transpose(0, 2, 1)  # (B, I, C)
    loglik = np.matmul(joint, log_kernel.reshape(B, d * d, 1)).reshape(B, C, I).transpose(0, 2, 1)
    mi = np.maximum(entropy[(*at, h_prime[:, None, :])] + entropy[(*at, h[:, None, :])] - joint_entropy, 0.0)
    return mi, loglik


def draw_lemma3_batch(rng: np.random.Generator, size: int, d: int, H: int, ranges: dict = LEMMA3_RANGES) -> dict:
    """``size`` random instances of one (d, H), drawn as :func:`numerics.claim_sweeps.draw_instance` draws one (ε,
    Dirichlet concentration, tree, non-stationary μ₀ over ``ranges``) but with whole-batch draws from one generator.

    Returns kernels (B, d, d), parents (B, H) and inits (B, 2, d): the stationary law, then the drawn law.
    """
    eps = rng.uniform(*ranges["eps_times_d"], size=size) / d
    concentration = np.exp(rng.uniform(*np.log(ranges["dirichlet_alpha"]), size=size))
    gamma = rng.standard_gamma(np.broadcast_to(concentration[:, None, None], (size, d, d)))
    kernels = (1.0 - d * eps)[:, None, None] * gamma / gamma.sum(-1, keepdims=True) + eps[:, None, None]
    kernels /= kernels.sum(-1, keepdims=True)
    parents = np.empty((size, H), dtype=np.int64)
    parents[:, 0] = -1
    parents[:, 1:] = rng.integers(0, np.arange(1, H), size=(size, H - 1))
    drawn = rng.standard_exponential((size, d))  # Dirichlet(1): normalised exponentials
    # stationary laws: π^T μ = μ with Σ μ = 1, the last balance equation replaced by the normalisation
    system = np.swapaxes(kernels, 1, 2) - np.eye(d)
    system[:, -1] = 1.0
    stationary = np.linalg.solve(system, np.broadcast_to(np.eye(d)[-1], (size, d))[..., None])[..., 0]
    return {"kernels": kernels, "parents": parents,
            "inits": np.stack([stationary, drawn / drawn.sum(-1, keepdims=True)], axis=1)}


def lemma3_batched_sweep(seed, start: int, stop: int, *, batch_size: int = LEMMA3_BATCH_SIZE,
                         ranges: dict = LEMMA3_RANGES) -> SweepResult:
    """Lemma 3 (ratio < 1, and against δ(π) and 1 − d·min π) and Lemma 4 (gap > 0) on batches ``start..stop-1``
    of ``batch_size`` random instances each; batch i draws its (d, H) and instances from its own generator, so
    chunks merge as in :mod:`numerics.claim_sweeps`.

    Counts: ``pairs``, ``degenerate``, ``violations/one`` (ratio ≥ 1 − VIOLATION_RTOL), ``violations/dobrushin``,
    ``violations/doeblin`` (with the rounding tolerance of :func:`lemma3_sweep_chunk`), ``lemma4/nonpositive_gap``;
    maxima: ``ratio``; worst: ``ratio`` with its instance.
    """
    result = SweepResult("lemma3-batched")
    for index in range(start, stop):
        rng = item_rng(seed, _BATCHED_TAG, index)
        d, H = (int(rng.integers(low, high + 1)) for low, high in (ranges["d"], ranges["H"]))
        score_ratio_batch(result, draw_lemma3_batch(rng, batch_size, d, H, ranges), index)
    return result


def score_ratio_batch(result: SweepResult, batch: dict, index: int) -> None:
    """Add batch ``index`` of the batched Lemma 3 sweep (one (d, H), both μ₀ of INIT_KINDS) to ``result``: pair and
    violation counts per bound, Lemma 4's non-positive gaps, and the largest ratio with its instance."""
    out = lemma3_ratio_batch(batch["kernels"], batch["parents"], batch["inits"])
    B, I, P = out["ratio"].shape
    candidate = np.broadcast_to(out["candidate"][:, None, :], (B, I, P))
    defined = candidate & np.isfinite(out["ratio"])
    ratio = np.where(defined, out["ratio"], 0.0)
    tolerance = VIOLATION_RTOL + 1e-14 / np.where(defined, out["mi_parent"], 1.0)
    result.add("pairs", int(candidate.sum()))
    result.add("degenerate", int((candidate & ~defined).sum()))
    result.add("violations/one", int((defined & (ratio >= 1.0 - VIOLATION_RTOL)).sum()))
    for name in ("dobrushin", "doeblin"):
        result.add(f"violations/{name}", int((defined & (ratio > out[name][:, None, None] + tolerance)).sum()))
    result.add("lemma4/nonpositive_gap", int((candidate & (out["loglik_gap"] <= 0)).sum()))
    if defined.any():
        b, i, p = np.unravel_index(int(np.argmax(np.where(defined, ratio, -np.inf))), ratio.shape)
        result.maximum("ratio", float(ratio[b, i, p]))
        result.offer("ratio", float(ratio[b, i, p]), (index, int(b), int(i), int(p)), lambda: instance_record(
            "lemma3", batch["kernels"][b], batch["parents"][b], None if i == 0 else batch["inits"][b, i],
            h=int(out["h"][p]), h_prime=int(out["h_prime"][p]), alpha="dobrushin", ratio=float(ratio[b, i, p]),
            init_kind=INIT_KINDS[i]))
