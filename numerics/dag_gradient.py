"""Theorem 3 for parent sets on the k-parent DAG task: the gradient at initialisation (``ext-dag-thm3-sets``; ours).

Mixture output over the C = C(h, k) candidate sets, f(x_h) = Σ_c A_c π(x_h | x_{S_c}), A = softmax(p̂), ℓ = −log f.
At p̂ = 0, −∂ℓ/∂p̂_c = (1/C)(π(x_h | x_{S_c}) / π̄(x_h) − 1), π̄ the mean over candidates; :func:`dag_init_gradient`
is its exact expectation (enumeration) or a Monte Carlo estimate; :func:`dag_chi2_gain` the J form with the
marginal P(x_h) in place of π̄: J(S) = E[π(x_h | x_S) / P(x_h)] − 1, and J(T) = I_χ²(x_T; x_h).
"""
from __future__ import annotations

import math

import numpy as np

from bma_verify.numerics.validation import check_positive_int, check_rng
from bma_verify.numerics.dag import (check_dag_kernels, check_parent_sets, dag_candidate_sets, encode_parent_values,
                                     sample_dag_chains)
from bma_verify.numerics.dag_enumeration import dag_sequence_log_likelihood
from bma_verify.numerics.dag_law import (DAG_RANGES, INIT_KINDS, DagLaw, dag_instance_record, draw_dag_instance,
                                         instance_rng, instance_size_key)
from bma_verify.numerics.enumeration import MAX_SEQUENCES, all_sequences
from bma_verify.numerics.estimators import mean_estimate
from bma_verify.numerics.information import chi2_mutual_information

#: Configurations x_0..x_h per block when summing the exact expected gradient (as ``numerics.gradient``).
_BLOCK = 1 << 17
#: Relative tolerance for gradient ties.
TIE_ATOL = 1e-12
#: The two forms of the expected init gradient: "approximate" is the J form (P(x_h) for π̄), "exact" uses π̄.
GRADIENT_FORMS = ("approximate", "exact")


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
        instance = draw_dag_instance(instance_rng(seed, 1533, index), ranges)
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
                        key = instance_size_key(instance, index) + (h,)
                        if keys[form][kind] is None or key < keys[form][kind]:
                            keys[form][kind], smallest[form][kind] = key, record()
                    if -margin > worst[form]["value"]:
                        worst[form] = {"value": float(-margin), "instance": record()}
    return {"counts": dict(sorted(counts.items())), "worst": worst, "smallest_violation": smallest,
            "max_chi2_identity_error": float(max_identity_error), "seed": int(seed),
            "instances": [start, start + n_instances],
            "ranges": {k: list(v) if isinstance(v, tuple) else v for k, v in ranges.items()}}


def entry_margin(values: np.ndarray, index: int) -> float:
    """values[index] − the largest other entry (negative: another entry is larger)."""
    return float(values[index] - np.delete(values, index).max())


def thm3_sets_sweep(rng: np.random.Generator, n_instances: int, ranges: dict = DAG_RANGES) -> dict:
    """For every position h > k of random DAGs and both μ₀: margins of the true set in both forms, and of a
    uniformly drawn *other* set (the shuffled label of the control of ``ext-dag-thm3-sets``). Violations (margin <
    −tie) are counted per form and μ₀ with the smallest instance by (H, d, k, instance index, h). ``ranges``: those
    of :func:`numerics.dag_law.draw_dag_instance` (k = (1, 1): trees, the claim's positive control)."""
    counts: dict[str, int] = {}
    smallest: dict[str, dict | None] = {}
    keys: dict[str, tuple] = {}
    identity_error = 0.0
    worst = {form: 0.0 for form in GRADIENT_FORMS}

    def add(key):
        counts[key] = counts.get(key, 0) + 1

    for index in range(n_instances):
        instance = draw_dag_instance(rng, ranges)
        for kind in INIT_KINDS:
            init = None if kind == "stationary" else instance["init"]
            for h in range(instance["k"] + 1, instance["H"]):
                out = dag_thm3_check_position(instance["kernels"], instance["parent_sets"], h, init)
                add(f"{kind}/positions")
                identity_error = max(identity_error, out["chi2_identity_error"])
                C = out["exact"].size
                wrong = int(rng.integers(C - 1))
                wrong += wrong >= out["true_index"]
                for form in GRADIENT_FORMS:
                    values = out[form]
                    tie = TIE_ATOL * max(1.0, float(np.abs(values).max()))
                    margin = entry_margin(values, out["true_index"])
                    worst[form] = min(worst[form], margin)
                    if margin < -tie:
                        add(f"{kind}/violations/{form}")
                        key = (instance["H"], instance["d"], instance["k"], index, h)
                        if f"{form}/{kind}" not in keys or key < keys[f"{form}/{kind}"]:
                            keys[f"{form}/{kind}"] = key
                            smallest[f"{form}/{kind}"] = dag_instance_record(
                                instance["kernels"], instance["parent_sets"], init, h=h, T=list(out["T"]),
                                argmax=list(out[f"argmax_{form}"]), margin=margin, form=form, init_kind=kind,
                                d=instance["d"], k=instance["k"], H=instance["H"])
                    if entry_margin(values, wrong) < -tie:
                        add(f"{kind}/shuffled_violations/{form}")
    return {"counts": dict(sorted(counts.items())), "smallest": smallest, "identity_error": identity_error,
            "worst_margin": worst}


def recheck_stored_thm3(stored: dict) -> dict:
    """Each stored instance's margins in both forms, recomputed (negative: the true set is not the largest).

    ``stored``: {μ₀ kind: record with ``kernels``, ``parent_sets``, ``init`` (None: stationary), ``h``}."""
    out = {}
    for kind, record in stored.items():
        init = None if record["init"] is None else np.asarray(record["init"], dtype=np.float64)
        check = dag_thm3_check_position(check_dag_kernels(record["kernels"]), np.asarray(record["parent_sets"]),
                                        record["h"], init)
        out[kind] = {"margin_exact": check["margin_exact"], "margin_approximate": check["margin_approximate"],
                     "T": list(check["T"]), "argmax_exact": list(check["argmax_exact"]),
                     "argmax_approximate": list(check["argmax_approximate"])}
    return out
