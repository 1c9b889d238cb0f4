"""Theorem 3 (init gradient) by exact enumeration: one position, the chunkable sweep over random instances, and
Monte Carlo beyond enumeration (``thm3-init-gradient``).

Both forms of Theorem 3 can fail under a non-stationary μ₀: the stored counterexamples
(``reports.search.KNOWN_COUNTEREXAMPLES``) give one instance for the exact π̄ form and one for the J form; no
stationary μ₀ has given one (docs/findings.md).
"""

from __future__ import annotations

import numpy as np
from tqdm import tqdm

from bma_verify.numerics.validation import check_kernel, check_parents, check_positive_int
from bma_verify.numerics.claim_sweeps import (INIT_KINDS, TIE_ATOL, SweepResult, draw_instance, instance_record,
                                              item_rng, resolve_init)
from bma_verify.numerics.estimators import mean_estimate
from bma_verify.numerics.gradient import approximate_init_gradient, chi2_gain, init_gradient, init_gradient_samples
from bma_verify.numerics.information import chi2_mutual_information, marginal, pairwise_joint
from bma_verify.numerics.task import sample_chains

#: Theorem 3 enumerates d^(h+1) configurations, so it uses smaller ranges; 5% of its kernels are
#: zero-information (identical rows) so that the tie bookkeeping is exercised.
THM3_RANGES = {"d": (2, 4), "H": (3, 7), "eps_times_d": (0.0, 0.5), "dirichlet_alpha": (0.2, 5.0),
               "max_configurations": 20_000, "zero_information_fraction": 0.05}

_THM3_TAG = 33

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
    kernel = check_kernel(kernel, single=True)
    parents = check_parents(parents)
    if not 2 <= h < parents.shape[-1]:
        raise ValueError(f"h must be a position in 2..{parents.shape[-1] - 1} (at least two candidates); got {h}")
    init = resolve_init(kernel, init)  # once: the stationary law is otherwise recomputed by every call below
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
    result = SweepResult("thm3")
    for index in tqdm(range(start, stop), disable=quiet, desc="thm3 sweep"):
        instance = draw_instance(item_rng(seed, _THM3_TAG, index), ranges)
        shuffle = item_rng(seed, _THM3_TAG, index, 1)  # the control's claimed parents, one per (μ₀, h)
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
