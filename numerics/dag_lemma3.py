"""Lemma 3 (strict DPI) for parent sets on the k-parent DAG task (claim ``ext-dag-lemma3-sets``; ours).

ratio(S) = I(x_h; x_S) / I(x_h; x_T) <= 1 always (DPI). For overlapping S the channel x_T → x_S copies the shared
parents and the ratio can reach 1 (:func:`numerics.dag_law.overlap_ratio_one_instance`), so no α < 1 that depends
on (d, ε) only can bound it; the overlap-dependent candidate bounds the *excess* (I(x_h; x_S) − I(x_h; x_{S∩T})) /
(I(x_h; x_T) − I(x_h; x_{S∩T})), a ratio of conditional informations given x_{S∩T}. :func:`dag_lemma3_sweep`
measures both.
"""
from __future__ import annotations

import numpy as np
from scipy.special import rel_entr

from bma_verify.numerics.validation import check_positive_int
from bma_verify.numerics.dag import check_dag_kernels, choice_counts, dag_candidate_sets
from bma_verify.numerics.dag_law import (DAG_RANGES, INIT_KINDS, DagLaw, dag_instance_record, draw_dag_instance,
                                         instance_rng, instance_size_key, overlap_ratio_one_instance, sample_for_set)
from bma_verify.numerics.estimators import mutual_information_estimate, mutual_information_ratio_estimate

#: I(x_h; x_T) at or below this (nats) makes a ratio undefined (rounding dominates).
MI_FLOOR = 1e-12
#: Relative tolerance for "ratio > α" (float64 rounding of sums of at most d**H terms).
VIOLATION_RTOL = 1e-9


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
    counts = choice_counts(law.H, law.k)
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
    law, h, S, T, x, a, b = sample_for_set(kernels, parent_sets, h, S, n, rng, init)
    D = law.d**law.k
    y = np.ascontiguousarray(x[:, h])
    mi_true, mi_candidate = _mi(law.joint(T, (h,))), _mi(law.joint(S, (h,)))
    return {"mi_candidate": mutual_information_estimate(b, y, D, method=method),
            "mi_true": mutual_information_estimate(a, y, D, method=method),
            "ratio": mutual_information_ratio_estimate(b, a, y, D, method=method),
            "exact": {"mi_candidate": mi_candidate, "mi_true": mi_true, "ratio": mi_candidate / mi_true}}


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
        instance = draw_dag_instance(instance_rng(seed, 153, index), ranges)
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
                        key = instance_size_key(instance, index)
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



def violation_tolerance(alpha: float, mi_true: float) -> float:
    """How far above α a value may lie and still not violate it: rounding, VIOLATION_RTOL + 1e-14/I_T, relative to
    max(1, |α|)."""
    return (VIOLATION_RTOL + 1e-14 / mi_true) * max(1.0, abs(alpha))


def violates(value: float, alpha: float, mi_true: float) -> bool:
    """The sweep's violation rule: value > α beyond rounding (:func:`violation_tolerance`)."""
    return bool(value - alpha > violation_tolerance(alpha, mi_true))


def pair_index(out: dict, h: int, S) -> int:
    """Index of the pair (h, S) in the lists of :func:`dag_lemma3_sets` (ValueError when it is not one)."""
    index = next((i for i in range(out["h"].size) if out["h"][i] == h and out["S"][i] == tuple(S)), None)
    if index is None:
        raise ValueError(f"(h, S) = ({h}, {list(S)}) is not a candidate pair of this DAG (S must be a k-set of "
                         "earlier positions other than the true set)")
    return index


def planted_overlap_ratio(eps: float = 0.05) -> dict:
    """The planted overlap instance (``overlap_ratio_one_instance``, π ≥ ε): its ratio
    I(x_3; x_{0,2}) / I(x_3; x_{0,1}), I(x_3; x_{0,1}), min π and a JSON-ready record."""
    inst = overlap_ratio_one_instance(2, eps)
    out = dag_lemma3_sets(inst["kernels"], inst["parent_sets"])
    p = pair_index(out, inst["h"], inst["S"])
    return {"ratio": float(out["ratio"][p]), "mi_true": float(out["mi_true"][p]), "eps": eps,
            "min_pi": float(min(t.min() for t in inst["kernels"])),
            "record": dag_instance_record(inst["kernels"], inst["parent_sets"], None, h=inst["h"], S=list(inst["S"]),
                                          T=list(inst["T"]), ratio=float(out["ratio"][p]))}


def recheck_stored_lemma3(stored) -> list[dict]:
    """Recompute each stored counterexample's ratio and its candidate α; keep whether it still violates.

    ``stored``: records with ``candidate`` (a key of :data:`LEMMA3_SET_CANDIDATES`), ``h``, ``S``, ``kernels``,
    ``parent_sets``, ``init`` (None: stationary). Returns each record with ``value``, ``alpha``, ``overlap``,
    ``violates`` added."""
    out = []
    for record in stored:
        kernels = check_dag_kernels(record["kernels"])
        init = None if record["init"] is None else np.asarray(record["init"], dtype=np.float64)
        res = dag_lemma3_sets(kernels, np.asarray(record["parent_sets"]), init)
        p = pair_index(res, record["h"], record["S"])
        bound, alpha_name = LEMMA3_SET_CANDIDATES[record["candidate"]]
        value = float(res["ratio"][p] if bound == "ratio" else res["excess"][p])
        alpha = float(kernel_constants(kernels)["alphas"][alpha_name])
        out.append({**record, "value": value, "alpha": alpha, "overlap": int(res["overlap"][p]),
                    "violates": violates(value, alpha, float(res["mi_true"][p]))})
    return out
