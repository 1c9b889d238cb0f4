"""Counterexample search for ``lemma3-strict-dpi`` and ``thm3-init-gradient``, and the replay of saved instances.

``run_search("lemma3", budget, seed)`` draws (kernel, tree, μ₀) from a NumPy Generator seeded by ``seed``: half of
the examples fresh draws, half perturbations of the best one so far (a hill climb on the score: the worst pair's
ratio − α, or the worst position's −margin / max|gradient|). It stops at the first clear violation and shrinks it
deterministically: positions the violation does not need are removed, states dropped, the kernel and μ₀ rounded to
as few decimals as keep it. The result depends on ``seed`` and ``budget`` only (no example database, no state from
earlier runs, nothing read from the source files), so the ``found_by`` command recorded with an instance replays
it; a larger budget finds the same instance (the search stops where the smaller one did).

Instance format (JSON), the one of every refuted finding (report, ``check --kernel --json``, ``search --out``)::

    {"target": "lemma3", "kernel": [[...], ...], "parents": [-1, 0, ...], "init": null | [...],
     "h": 3, "h_prime": 1, "alpha": "dobrushin" | "doeblin" | "sdpi" | "dobrushin_channel" | "eta_chi2" | 0.3}
    {"target": "thm3", "kernel": ..., "parents": ..., "init": ..., "h": 4, "form": "exact" | "approximate"}

``kernel[i][j] = π(j | i)``, positions 0-based, ``init`` null means the stationary law. Other keys (ratio,
margin, relation, found_by, ...) are informative and ignored by :func:`check_instance`, which also accepts an
object holding the instance under ``"instance"`` (a finding, or the output of ``search --json``). The refuted
findings of the extension claims (k-parent DAGs, footnote 1's mappings) replay too: :mod:`reports.replay`.
"""
from __future__ import annotations

import json
import math
import shlex
from typing import NamedTuple

import numpy as np

from bma_verify.numerics.claim_sweeps import TIE_ATOL, VIOLATION_RTOL, instance_record
from bma_verify.numerics.dpi_sweep import LEMMA3_CANDIDATES, lemma3_check_pair, lemma3_pairs, sdpi_coefficients
from bma_verify.numerics.validation import check_positive_int
from bma_verify.numerics.enumeration import MAX_SEQUENCES
from bma_verify.numerics.init_gradient_sweep import argmax_status, thm3_check_position
from bma_verify.numerics.task import stationary_distribution
from bma_verify.numerics.large_kernels import (MONTE_CARLO_SAMPLES, MONTE_CARLO_Z, exact_form_decision,
                                               exact_form_gradients, j_form_gradients)

TARGETS = ("lemma3", "thm3")
DEFAULT_ALPHA = "dobrushin"  # δ(π): the uniform α of the lemma's usual proof, not a theorem for ancestor pairs


#: Counterexamples found by this search, kept so that reports and tests re-check them: two to Lemma 3 with α = δ(π)
#: (h' an ancestor of pa(h), non-stationary μ₀), one to Theorem 3's exact π̄ form (the J form holds on it) and one to
#: the paper's J form under a non-stationary μ₀ (no stationary μ₀ has given one). Each is
#: exactly what its ``found_by`` command prints (tests/test_search.py runs them). Their numbers:
#: docs/notes/search-counterexamples.md.
KNOWN_COUNTEREXAMPLES = (
    {"target": "lemma3", "kernel": [[0.015, 0.985], [0.001, 0.999]], "parents": [-1, 0, 1], "init": [0.2, 0.8],
     "h": 2, "h_prime": 0, "alpha": "dobrushin", "found_by": "bma-verify search lemma3 --seed 0 --budget 1000"},
    {"target": "lemma3", "kernel": [[0.045, 0.955], [0.001, 0.999]], "parents": [-1, 0, 1], "init": [0.1, 0.9],
     "h": 2, "h_prime": 0, "alpha": "dobrushin", "found_by": "bma-verify search lemma3 --seed 8 --budget 1000"},
    {"target": "thm3", "kernel": [[0.001, 0.998, 0.001], [0.98, 0.019, 0.001], [0.998, 0.001, 0.001]],
     "parents": [-1, 0, 1, 2], "init": [0.1, 0.1, 0.8], "h": 3, "form": "exact",
     "found_by": "bma-verify search thm3 --seed 1 --budget 1000"},
    # the paper's J form itself under a non-stationary μ₀: J(x_0) = 0.2329 > J(pa) = I_χ²(x_1; x_2) = 0.1893
    {"target": "thm3", "kernel": [[0.01, 0.89, 0.1], [0.02, 0.22, 0.76], [0.01, 0.01, 0.98]], "parents": [-1, 0, 1],
     "init": [0.4, 0.5, 0.1], "h": 2, "form": "approximate",
     "found_by": "bma-verify search thm3 --seed 0 --budget 1000 --form approximate"},
)


def _check_alpha(alpha):
    if alpha is None:
        return DEFAULT_ALPHA
    if isinstance(alpha, str):
        if alpha not in LEMMA3_CANDIDATES:
            raise ValueError(f"alpha must be one of {', '.join(LEMMA3_CANDIDATES)} or a number in [0, 1]; "
                             f"got {alpha!r}")
        return alpha
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 <= float(alpha) < 1 + 1e-12:
        raise ValueError(f"alpha must be a candidate name or a number in [0, 1]; got {alpha!r}")
    return float(alpha)


def _lemma3_tolerance(mi_parent: float) -> float:
    # as in numerics.dpi_sweep: relative rounding of the ratio grows like 1e-15 / I(x_h; x_pa)
    return VIOLATION_RTOL + 1e-14 / max(mi_parent, 1e-300)


def _lemma3_worst_pair(kernel, parents, init, alpha) -> dict | None:
    """The pair of the instance with the largest ratio − α, or None if no pair has I(x_h; x_pa) > 0."""
    pairs = lemma3_pairs(kernel, parents, init)
    defined = np.isfinite(pairs["ratio"])
    if not defined.any():
        return None
    if isinstance(alpha, float):
        alphas = np.full(pairs["h"].size, alpha)
    elif alpha == "sdpi":
        alphas = np.full(pairs["h"].size, np.inf)
        alphas[defined] = sdpi_coefficients(pairs, np.flatnonzero(defined))
    elif alpha in ("dobrushin", "doeblin"):
        alphas = np.full(pairs["h"].size, pairs[alpha])
    else:
        alphas = pairs[alpha]
    excess = np.where(defined, pairs["ratio"] - alphas, -np.inf)
    p = int(np.argmax(excess))
    return {"h": int(pairs["h"][p]), "h_prime": int(pairs["h_prime"][p]), "ratio": float(pairs["ratio"][p]),
            "alpha_value": float(alphas[p]), "excess": float(excess[p]), "mi_parent": float(pairs["mi_parent"][p]),
            "relation": "ancestor" if pairs["ancestor"][p] else "non-ancestor"}


INIT_MODES = ("any", "stationary", "full-support")


class SearchSpace(NamedTuple):
    """Where a search draws its instances: the μ₀ mode (:data:`INIT_MODES`), and optionally a fixed number of
    states, a floor on every kernel entry (min π) and a largest total-variation distance TV(μ₀, μ) of μ₀ from the
    kernel's stationary law μ (the boundary of Theorem 3's repaired statement: a drawn μ₀ is moved towards μ
    until it lies within ``max_tv``)."""

    init: str = "any"
    states: int | None = None
    min_pi: float | None = None
    max_tv: float | None = None

    @property
    def kernel_floor(self) -> float:
        return KERNEL_FLOOR if self.min_pi is None else self.min_pi
#: Smallest mass of every state of μ₀ in the "full-support" mode.
FULL_SUPPORT_MASS = 0.02
#: The drawn instances: d states and H positions (Theorem 3 enumerates d^(h+1) sequences, so d^H is capped).
SEARCH_SIZES = {"lemma3": {"d": (2, 4), "H": (3, 7)}, "thm3": {"d": (2, 3), "H": (3, 6), "max_sequences": 4096}}
#: The fixed numbers of states a Theorem 3 search may ask for (d^H stays capped by max_sequences).
STATES_RANGE = (2, 4)
#: Every drawn kernel entry is at least this: the hypothesis π > 0 of the lemma, with near-deterministic rows,
#: where the counterexamples live.
KERNEL_FLOOR = 1e-4
#: A drawn non-stationary μ₀ (mode "any") has every mass at least this: near point masses, full support.
INIT_FLOOR = 1e-3
#: A violation counts only when it is far above rounding (ratio − α above its tolerance and this; margin / max|g|
#: below minus this), so that its replay on another machine agrees.
CLEAR_VIOLATION = 1e-6
MAX_SHRINK_STEPS = 500
MAX_DECIMALS = 6


def _floored(p: np.ndarray, floor: float) -> np.ndarray:
    """Rows of ``p`` mixed with the uniform law so that every entry is at least ``floor``."""
    d = p.shape[-1]
    return (1.0 - d * floor) * p + floor


def _draw_init(rng: np.random.Generator, d: int, mode: str):
    if mode == "stationary" or (mode == "any" and rng.random() < 0.25):
        return None
    floor = FULL_SUPPORT_MASS if mode == "full-support" else INIT_FLOOR
    return _floored(rng.dirichlet(np.full(d, 0.3)), floor)  # concentration 0.3: often near a point mass


def tv_distance(init, kernel) -> float:
    """TV(μ₀, μ) = ½ Σ |μ₀ − μ|, μ the stationary law of ``kernel`` (``init`` None: μ₀ = μ, distance 0)."""
    if init is None:
        return 0.0
    return 0.5 * float(np.abs(np.asarray(init) - stationary_distribution(kernel)).sum())


def _within_tv(init, kernel, max_tv: float | None):
    """``init`` moved along the segment towards the stationary law μ until TV(μ₀, μ) ≤ ``max_tv``."""
    if init is None or max_tv is None:
        return init
    mu = stationary_distribution(kernel)
    distance = 0.5 * float(np.abs(init - mu).sum())
    return init if distance <= max_tv else mu + (max_tv / distance) * (init - mu)


def _draw_instance(rng: np.random.Generator, target: str, space: SearchSpace) -> tuple:
    """One (kernel, parents, init): peaked Dirichlet rows, a chain (ancestor pairs) or a random recursive tree."""
    sizes = SEARCH_SIZES[target]
    d = space.states or int(rng.integers(sizes["d"][0], sizes["d"][1] + 1))
    H = int(rng.integers(sizes["H"][0], sizes["H"][1] + 1))
    while d**H > sizes.get("max_sequences", math.inf):
        H -= 1
    concentration = float(np.exp(rng.uniform(math.log(0.05), math.log(2.0))))
    kernel = _floored(rng.dirichlet(np.full(d, concentration), size=d), space.kernel_floor)
    if rng.random() < 0.5:
        parents = np.arange(-1, H - 1)
    else:
        parents = np.concatenate([[-1], rng.integers(0, np.arange(1, H))])
    return kernel, parents, _within_tv(_draw_init(rng, d, space.init), kernel, space.max_tv)


def _perturbed(rng: np.random.Generator, instance: tuple, space: SearchSpace) -> tuple:
    """The instance with its kernel (and a drawn μ₀) moved by log-normal noise of a random scale; same tree."""
    kernel, parents, init = instance
    scale = 10.0 ** rng.uniform(-2.0, 0.0)

    def move(p, floor):
        logits = np.log(p) + scale * rng.standard_normal(p.shape)
        q = np.exp(logits - logits.max(axis=-1, keepdims=True))
        return _floored(q / q.sum(axis=-1, keepdims=True), floor)

    kernel = move(kernel, space.kernel_floor)
    if init is not None:
        init = _within_tv(move(init, FULL_SUPPORT_MASS if space.init == "full-support" else INIT_FLOOR), kernel,
                          space.max_tv)
    return kernel, parents, init


def lemma3_verdict(instance: tuple, alpha) -> tuple[float, dict | None, bool]:
    """(score, worst pair, clearly violated) of one instance for the Lemma 3 search."""
    worst = _lemma3_worst_pair(*instance, alpha)
    if worst is None:
        return -math.inf, None, False
    clear = max(_lemma3_tolerance(worst["mi_parent"]), CLEAR_VIOLATION)
    return worst["excess"], worst, worst["excess"] > clear


def thm3_verdict(instance: tuple, form: str) -> tuple[float, dict | None, bool]:
    """(score, worst position, clearly violated) of one instance for the Theorem 3 search."""
    worst, relative = _thm3_worst_position(*instance, form)
    if worst is None:
        return -math.inf, None, False
    return -relative, worst, worst[f"margin_{form}"] < 0 and relative < -CLEAR_VIOLATION


def _hill_climb(rng, budget: int, space: SearchSpace, target: str, verdict) -> tuple[int, tuple | None, tuple, float]:
    """Odd examples fresh draws, even ones perturbations of the best so far; stop at the first clear violation.

    Returns (examples run, the violating instance or None, the best instance, its score)."""
    best, best_score = None, -math.inf
    for n in range(1, budget + 1):
        fresh = best is None or n % 2 == 1
        candidate = _draw_instance(rng, target, space) if fresh else _perturbed(rng, best, space)
        score, _, violated = verdict(candidate)
        if violated:
            return n, candidate, candidate, score
        if score > best_score or best is None:
            best, best_score = candidate, score
    return budget, None, best, best_score


# ----------------------------------------------------------------------------------------------------------
# Shrinking: deterministic, towards fewer positions, fewer states, the stationary law, short decimals


def _without_leaf(parents: np.ndarray, v: int) -> np.ndarray:
    """The tree without the leaf v, later positions renumbered."""
    rest = np.delete(parents, v)
    return np.where(rest > v, rest - 1, rest)


def _without_state(instance: tuple, s: int) -> tuple:
    kernel, parents, init = instance
    kernel = np.delete(np.delete(kernel, s, axis=0), s, axis=1)
    init = None if init is None else np.delete(init, s) / np.delete(init, s).sum()
    return kernel / kernel.sum(axis=1, keepdims=True), parents, init


def _decimals(p: np.ndarray) -> int:
    """The fewest decimals that write every entry of ``p`` exactly (MAX_DECIMALS + 1 when more are needed)."""
    return next((k for k in range(MAX_DECIMALS + 1) if np.array_equal(np.round(p, k), p)), MAX_DECIMALS + 1)


def _rounded(p: np.ndarray, decimals: int, floor: float) -> np.ndarray | None:
    """Rows of ``p`` rounded to ``decimals``, every entry at least max(floor, 10^-decimals), each row's largest
    entry set so that the row sums to 1; None when that entry would fall below the floor."""
    low = max(floor, 10.0**-decimals)
    rows = np.maximum(np.round(np.atleast_2d(p), decimals), low)
    top = rows.argmax(axis=1)
    index = np.arange(rows.shape[0])
    rows[index, top] = 0.0
    rows[index, top] = np.round(1.0 - rows.sum(axis=1), decimals)
    if (rows[index, top] < low).any():
        return None
    return rows.reshape(np.shape(p))


def simpler_instances(instance: tuple, space: SearchSpace):
    """Candidates simpler than ``instance``, the most drastic first: a leaf removed, a state dropped (unless the
    space fixes the states), the stationary μ₀, a parent moved towards the root, the kernel or μ₀ written with fewer
    decimals (kernel entries kept at least the space's min π, if it sets one)."""
    kernel, parents, init = instance
    H, d = parents.shape[0], kernel.shape[0]
    leaves = [v for v in range(H - 1, 0, -1) if v not in parents]
    if H > 3:
        yield from ((kernel, _without_leaf(parents, v), init) for v in leaves)
    if d > 2 and space.states is None:
        yield from (_without_state(instance, s) for s in range(d))
    if init is not None and space.init == "any":
        yield kernel, parents, None
    for v in range(2, H):
        for q in range(parents[v]):
            yield kernel, np.where(np.arange(H) == v, q, parents), init
    for k in range(_decimals(kernel)):
        rounded = _rounded(kernel, k, space.min_pi or 0.0)
        if rounded is not None:
            yield rounded, parents, init
    if init is not None:
        floor = FULL_SUPPORT_MASS if space.init == "full-support" else 0.0
        for k in range(_decimals(init)):
            rounded = _rounded(init, k, floor)
            if rounded is not None:
                yield kernel, parents, rounded


def _in_space(instance: tuple, space: SearchSpace) -> bool:
    """Does a shrinking candidate stay where the search looked (TV(μ₀, μ) ≤ max_tv, when the space sets one)?"""
    return space.max_tv is None or tv_distance(instance[2], instance[0]) <= space.max_tv


def _shrink(instance: tuple, space: SearchSpace, verdict) -> tuple:
    """Greedy shrinking: take the first simpler candidate that still clearly violates, until none does."""
    for _ in range(MAX_SHRINK_STEPS):
        simpler = next((c for c in simpler_instances(instance, space) if _in_space(c, space) and verdict(c)[2]), None)
        if simpler is None:
            break
        instance = simpler
    return instance

def _thm3_worst_position(kernel, parents, mu0, form: str) -> tuple[dict | None, float]:
    """The position with the smallest margin relative to the gradients' size, ties and uninformative parents
    left out: (its :func:`thm3_check_position` output or None, the relative margin)."""
    worst, worst_relative = None, math.inf
    for h in range(2, parents.shape[0]):
        out = thm3_check_position(kernel, parents, h, mu0)
        spread = float(np.abs(out[form]).max())
        if abs(out[f"margin_{form}"]) <= TIE_ATOL * max(1.0, spread) or out["i_chi2"] <= TIE_ATOL:
            continue  # a tie, or a parent that carries no information about x_h: not a violation
        # the margin relative to the gradients' size: near-zero-information kernels have tiny margins
        # that say nothing, so the search is steered by the relative margin
        relative = out[f"margin_{form}"] / spread
        if relative < worst_relative:
            worst, worst_relative = out, relative
    return worst, worst_relative


def _check_space(target: str, space: SearchSpace) -> None:
    """The optional bounds of a Theorem 3 search: ``states`` in its d range, 0 < min π < 1/d, 0 < max_tv ≤ 1."""
    if target != "thm3" and space[1:] != (None, None, None):
        raise ValueError("states, min_pi and max_tv apply to the thm3 search only")
    low, high = STATES_RANGE
    if space.states is not None and (isinstance(space.states, bool) or not isinstance(space.states, (int, np.integer))
                                     or not low <= space.states <= high):
        raise ValueError(f"states must be an integer in {low}..{high}; got {space.states!r}")
    if space.min_pi is not None and not 0.0 < space.min_pi < 1.0 / (space.states or high):
        raise ValueError(f"min_pi must lie in (0, 1/d) (every kernel entry at least it); got {space.min_pi!r}")
    if space.max_tv is not None and not 0.0 < space.max_tv <= 1.0:
        raise ValueError(f"max_tv must lie in (0, 1] (a total-variation distance); got {space.max_tv!r}")


def _check_search_arguments(target: str, budget, seed, alpha, form: str, init: str) -> None:
    if target not in TARGETS:
        raise ValueError(f"target must be one of {', '.join(TARGETS)}; got {target!r}")
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
        raise ValueError(f"budget must be a positive integer number of examples; got {budget!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer; got {seed!r}")
    if target == "thm3" and alpha is not None:
        raise ValueError("alpha applies to the lemma3 search only")
    if form not in ("exact", "approximate"):
        raise ValueError(f"form must be 'exact' or 'approximate'; got {form!r}")
    if init not in INIT_MODES:
        raise ValueError(f"init must be one of {', '.join(INIT_MODES)}; got {init!r}")


def search_command(target: str, budget: int, seed: int, alpha=None, init: str = "any", form: str = "exact", *,
                   states: int | None = None, min_pi: float | None = None, max_tv: float | None = None) -> str:
    """The ``bma-verify search`` command line that runs :func:`run_search` with these arguments."""
    words = ["bma-verify", "search", target, "--seed", str(seed), "--budget", str(budget)]
    for flag, value in (("--states", states), ("--min-pi", min_pi), ("--max-tv", max_tv)):
        if value is not None:
            words += [flag, repr(value) if isinstance(value, float) else str(value)]
    if target == "lemma3" and alpha not in (None, DEFAULT_ALPHA):
        words += ["--alpha", str(alpha)]
    if init != "any":
        words += ["--init", init]
    if target == "thm3" and form != "exact":
        words += ["--form", form]
    return shlex.join(words)


def _record(target: str, instance: tuple, found: dict, alpha, form: str, **extra) -> dict:
    """The JSON instance of a search result (the format of the module docstring)."""
    if target == "lemma3":
        return instance_record("lemma3", *instance, h=found["h"], h_prime=found["h_prime"], alpha=alpha,
                               ratio=found["ratio"], alpha_value=found["alpha_value"], relation=found["relation"],
                               **extra)
    spread = float(np.abs(found[form]).max())
    return instance_record("thm3", *instance, h=found["h"], form=form, margin=found[f"margin_{form}"],
                           relative_margin=found[f"margin_{form}"] / spread, **extra)


def run_search(target: str, budget: int, seed: int, alpha=None, init: str = "any", form: str = "exact", *,
               states: int | None = None, min_pi: float | None = None, max_tv: float | None = None) -> dict:
    """Search for a counterexample to ``target`` ("lemma3" or "thm3") with at most ``budget`` examples.

    Parameters
    ----------
    target : "lemma3": some pair with I(x_h; x_h') > α I(x_h; x_pa); "thm3": some position where another
        candidate's expected init gradient exceeds the true parent's (ties, i.e. zero-information kernels, are
        not violations).
    budget : maximum number of examples (shrinking evaluates extra ones on top).
    seed : seed of the NumPy Generator; the result depends on (seed, budget) and the arguments below only.
    alpha : Lemma 3 only: a candidate name (default "dobrushin", δ(π)) or a number (a planted constant α).
    init : which μ₀ to search over: "any" (the stationary law or a drawn one, near point masses included),
        "stationary", or "full-support" (every state has mass ≥ FULL_SUPPORT_MASS).
    form : Theorem 3 only: "exact" (π̄ in the denominator) or "approximate" (the J form).
    states, min_pi, max_tv : Theorem 3 only (:class:`SearchSpace`): a fixed number of states d, a floor on every
        kernel entry, and a largest TV(μ₀, μ) from the kernel's stationary law μ (the boundary of the repaired
        statement); None: d drawn in its range, floor KERNEL_FLOOR, any μ₀ of the mode.

    Returns
    -------
    dict: ``target``, ``budget``, ``seed``, ``alpha``, ``init``, ``found`` (bool), ``examples`` (examples run),
    ``instance`` (the shrunk JSON counterexample, with ``found_by``: the command that finds it, or None),
    ``check`` (``check_instance`` of it), ``closest`` (the best score seen and its instance: the largest
    ratio − α, or the largest −margin/max|g|), ``tv`` (TV(μ₀, μ) of the counterexample, None without one) and
    ``message`` (one line for the command).
    """
    _check_search_arguments(target, budget, seed, alpha, form, init)
    space = SearchSpace(init, states, min_pi, max_tv)
    _check_space(target, space)
    alpha = _check_alpha(alpha) if target == "lemma3" else None

    def verdict(instance):
        return lemma3_verdict(instance, alpha) if target == "lemma3" else thm3_verdict(instance, form)

    rng = np.random.default_rng(seed)
    examples, violating, best, best_score = _hill_climb(rng, budget, space, target, verdict)
    command = search_command(target, budget, seed, alpha, init, form, states=states, min_pi=min_pi, max_tv=max_tv)
    counterexample, closest, tv = None, None, None
    if violating is not None:
        shrunk = _shrink(violating, space, verdict)
        tv = tv_distance(shrunk[2], shrunk[0])
        counterexample = _record(target, shrunk, verdict(shrunk)[1], alpha, form, found_by=command)
        message = f"counterexample found ({target}, alpha={alpha}) and shrunk:\n{json.dumps(counterexample)}"
    else:
        found = verdict(best)[1]
        closest = None if found is None else _record(target, best, found, alpha, form)
        what = "largest ratio − α" if target == "lemma3" else "largest −margin / max|gradient|"
        message = f"no counterexample in {budget} examples; closest call: {what} = {best_score:.3g}"
    return {"target": target, "budget": budget, "seed": seed, "alpha": alpha, "init": init,
            "found": counterexample is not None, "examples": examples, "instance": counterexample,
            "check": None if counterexample is None else check_instance(counterexample),
            "closest": {"score": best_score, "instance": closest if counterexample is None else counterexample},
            "tv": tv, "message": message}


def replayable_kernel_findings(result: dict, kernel, init) -> None:
    """Make the refuted findings of a ``check --kernel`` result (``reports.kernel_report.check_kernel_claims``)
    replayable, in place: each finding's swept row (its ``tree`` index, h, h') becomes an instance of the format
    above, with the kernel, that tree and μ₀, the row's numbers kept as informative fields."""
    targets = {"lemma3-strict-dpi": "lemma3", "thm3-init-gradient": "thm3"}
    for claim, target in targets.items():
        for finding in result["claims"].get(claim, {}).get("findings", []):
            row = finding.get("instance")
            if not isinstance(row, dict) or "target" in row:
                continue
            extra = {"alpha": row.get("alpha", DEFAULT_ALPHA)} if target == "lemma3" else {"form": "exact"}
            finding["instance"] = instance_record(target, kernel, result["trees"][row["tree"]], init,
                                                  **{**row, **extra})


def as_instance(obj) -> dict:
    """The instance in ``obj``: an instance itself, or an object holding one under ``"instance"`` (a finding of
    the report or of ``check --kernel --json``, the output of ``search --json``); its target and fields checked."""
    if isinstance(obj, dict) and "kernel" not in obj and isinstance(obj.get("instance"), dict):
        obj = obj["instance"]
    if not isinstance(obj, dict):
        raise ValueError(f"instance must be a JSON object (dict); got {type(obj).__name__}")
    # the DAG and footnote-1 replays import torch (seconds): only when an instance is read, not for check --kernel
    from bma_verify.reports.replay import EXTENSION_TARGETS, check_extension_fields

    target = obj.get("target")
    if target in EXTENSION_TARGETS:
        check_extension_fields(obj)
        return obj
    if target is None and "parent_sets" in obj:
        raise ValueError("this instance of the k-parent DAG task (kernels, parent_sets) names no target; add "
                         "'target': one of dag-lemma3, dag-lemma4, dag-thm3 (the format: README, 'Replaying an "
                         "instance')")
    if target not in TARGETS:
        raise ValueError(f"instance['target'] must be one of {', '.join(TARGETS + EXTENSION_TARGETS)}; got "
                         f"{target!r} (the format: README, 'Replaying an instance')")
    for key in ("kernel", "parents", "h") + (("h_prime",) if target == "lemma3" else ()):
        if key not in obj:
            raise ValueError(f"instance must have a {key!r} field for target {target!r} (the format: README, "
                             "'Replaying an instance')")
    return obj


def check_instance(instance: dict) -> dict:
    """Re-check a saved instance from scratch (``bma-verify check --instance FILE``); ``instance`` as accepted by
    :func:`as_instance`.

    Returns
    -------
    dict: ``target``, ``holds`` (bool: the claim holds on this instance), ``verdict`` ("pass" or "fail"),
    ``summary`` (one line), and the recomputed numbers. Lemma 3: ``ratio``, ``alpha``, ``alpha_value``, ``bar``
    (α plus the ratio's rounding tolerance: the instance holds when ratio ≤ bar), every candidate in ``alphas``,
    ``relation``. Theorem 3: ``tie``, ``margin_exact``, ``margin_approximate``, ``exact``,
    ``approximate``.
    """
    from bma_verify.reports.replay import EXTENSION_TARGETS, check_extension_instance

    instance = as_instance(instance)
    target = instance["target"]
    if target in EXTENSION_TARGETS:
        return check_extension_instance(instance)
    kernel = np.asarray(instance["kernel"], dtype=np.float64)
    parents = np.asarray(instance["parents"], dtype=np.int64)
    init = None if instance.get("init") is None else np.asarray(instance["init"], dtype=np.float64)
    h = int(instance["h"])
    if target == "lemma3":
        return _check_lemma3_instance(instance, kernel, parents, h, init)
    return _check_thm3_instance(instance, kernel, parents, h, init)


def _check_lemma3_instance(instance: dict, kernel, parents, h: int, init) -> dict:
    alpha = _check_alpha(instance.get("alpha"))
    out = lemma3_check_pair(kernel, parents, h, int(instance["h_prime"]), init)
    alpha_value = alpha if isinstance(alpha, float) else out["alphas"][alpha]
    bar = alpha_value + _lemma3_tolerance(out["mi_parent"])
    holds = not out["ratio"] > bar
    return {"target": "lemma3", "holds": bool(holds), "ratio": out["ratio"], "alpha": alpha,
            "alpha_value": float(alpha_value), "bar": float(bar), "alphas": out["alphas"], "relation": out["relation"],
            "h": h, "h_prime": int(instance["h_prime"]), "verdict": "pass" if holds else "fail",
            "summary": f"I(x_h; x_h')/I(x_h; x_pa) = {out['ratio']:.6g} {'≤' if holds else '>'} "
                       f"α = {alpha_value:.6g} ({alpha}); h={h}, h'={instance['h_prime']}, {out['relation']}"}


def _check_thm3_instance(instance: dict, kernel, parents, h: int, init) -> dict:
    form = instance.get("form", "exact")
    if form not in ("exact", "approximate"):
        raise ValueError(f"instance['form'] must be 'exact' or 'approximate'; got {form!r}")
    if kernel.shape[0] ** (h + 1) > MAX_SEQUENCES:
        return check_thm3_large(instance, kernel, parents, h, init, form)
    out = thm3_check_position(kernel, parents, h, init)
    margin = out[f"margin_{form}"]
    scale = max(1.0, float(np.abs(out[form]).max()))
    tie = abs(margin) <= TIE_ATOL * scale
    uninformative = out["i_chi2"] <= TIE_ATOL  # x_pa carries no information about x_h: no parent can be found
    holds = tie or uninformative or margin > 0
    return {"target": "thm3", "holds": bool(holds), "tie": bool(tie), "uninformative_parent": bool(uninformative),
            "i_chi2_parent": out["i_chi2"], "form": form, "h": h,
            "parent": out["parent"], "margin_exact": out["margin_exact"],
            "margin_approximate": out["margin_approximate"], "exact": out["exact"].tolist(),
            "approximate": out["approximate"].tolist(), "verdict": "pass" if holds else "fail",
            "summary": f"E g(pa) − max other E g = {margin:.6g} at h={h} ({form} form){' (tie)' if tie else ''}"}


def check_thm3_large(instance: dict, kernel, parents, h: int, init, form: str) -> dict:
    """Theorem 3 beyond enumeration (d^(h+1) > MAX_SEQUENCES), with the methods of ``check --kernel``: the J form in
    closed form (any d); the exact π̄ form by Monte Carlo from ``instance["exact_samples"]`` chains (default
    20 000) drawn from a generator seeded by ``instance["replay_seed"]`` (default 0), a violation or a hold only
    when every margin clears MONTE_CARLO_Z standard errors, else "undecided"."""
    parent = int(parents[h])
    if form == "approximate":
        gradient = j_form_gradients(kernel, parents, h, init)
        status, margin = argmax_status(gradient, parent)
        stderr, method, values = 0.0, "closed form (pairwise joints)", gradient
    else:
        n = check_positive_int(instance.get("exact_samples", MONTE_CARLO_SAMPLES[1]), "instance['exact_samples']",
                               2)
        seed = check_positive_int(instance.get("replay_seed", 0), "instance['replay_seed']", 0)
        exact = exact_form_gradients(kernel, parents, h, init, n=n, rng=np.random.default_rng(seed))
        decision = exact_form_decision(exact, parent)  # what check --kernel decides
        status, margin, stderr = decision["exact_form"], decision["exact_margin"], decision["exact_margin_stderr"]
        values = exact["gradient"]
        method = "enumeration" if exact["method"] == "enumeration" else \
            f"Monte Carlo, {n} chains (seed {seed}), decided at {MONTE_CARLO_Z:g} standard errors"
    verdict = {"violation": "fail", "undecided": "undecided"}.get(status, "pass")
    error = f" ± {stderr:.2g} (s.e.)" if stderr else ""
    return {"target": "thm3", "holds": verdict == "pass", "tie": status == "tie", "form": form, "h": h,
            "parent": parent, "method": method, f"margin_{form}": margin, "margin_stderr": stderr,
            form: np.asarray(values).tolist(), "verdict": verdict,
            "summary": f"E g(pa) − max other E g = {margin:.6g}{error} at h={h} ({form} form, {method})"
                       f"{' (tie)' if status == 'tie' else ''}{' (undecided)' if status == 'undecided' else ''}"}


#: :func:`smallest_violating_tv`: each round searches within this fraction of the last violation's TV(μ₀, μ).
TV_STEP = 0.7


def smallest_violating_tv(form: str, states: int, min_pi: float | None, *, budget: int, rng: np.random.Generator,
                          rounds: int = 6) -> dict:
    """The smallest TV(μ₀, μ) at which the Theorem 3 search finds a violation of ``form`` (``thm3-init-gradient``,
    the boundary of "what holds instead"): a search within TV ≤ 1, then, after each violation at distance t, one
    within TV_STEP·t, until a search finds none (or ``rounds`` searches ran).

    Parameters
    ----------
    form : "approximate" (the J form) or "exact" (π̄).
    states, min_pi : the search space's d and kernel floor (:class:`SearchSpace`).
    budget : examples per search.
    rng : numpy Generator; each search's seed is drawn from it (the ``found_by`` commands replay each).
    rounds : most searches.

    Returns
    -------
    dict: ``smallest_tv`` (None when no search found a violation: an upper bound on the boundary otherwise, since
    a search finds violations, it does not exclude them), ``instance`` (the violation there, with ``found_by``),
    ``searches`` (per search: ``max_tv``, ``found``, ``tv``, ``examples``) and ``examples`` (in all).
    """
    if not isinstance(rng, np.random.Generator):
        raise ValueError(f"rng must be a numpy.random.Generator; got {type(rng).__name__}")
    rounds = check_positive_int(rounds, "rounds")
    searches, smallest, instance, max_tv = [], None, None, 1.0
    for _ in range(rounds):
        result = run_search("thm3", budget, int(rng.integers(2**31)), form=form, states=states, min_pi=min_pi,
                            max_tv=max_tv)
        searches.append({"max_tv": max_tv, "found": result["found"], "tv": result["tv"],
                         "examples": result["examples"]})
        if not result["found"]:
            break
        smallest, instance = result["tv"], result["instance"]
        if smallest <= 0.0:
            break
        max_tv = TV_STEP * smallest
    return {"smallest_tv": smallest, "instance": instance, "searches": searches,
            "examples": sum(s["examples"] for s in searches)}
