"""Hypothesis-driven counterexample search for ``lemma3-strict-dpi`` and ``thm3-init-gradient``.

``run_search("lemma3", budget, seed)`` draws (kernel, tree, μ₀) with the strategies of
:mod:`numerics.strategies`, scores each by its worst pair, pushes the score up with ``hypothesis.target`` and,
when an example violates the claim, lets Hypothesis shrink it to a minimal instance. The instance is a JSON
object that :func:`check_instance` (``bma-verify check --instance FILE``) re-checks from scratch.

Instance format (JSON)::

    {"target": "lemma3", "kernel": [[...], ...], "parents": [-1, 0, ...], "init": null | [...],
     "h": 3, "h_prime": 1, "alpha": "dobrushin" | "doeblin" | "sdpi" | "dobrushin_channel" | "eta_chi2" | 0.3}
    {"target": "thm3", "kernel": ..., "parents": ..., "init": ..., "h": 4, "form": "exact" | "approximate"}

``kernel[i][j] = π(j | i)``, positions 0-based, ``init`` null means the stationary law. Other keys (ratio,
margin, relation, ...) are informative and ignored by :func:`check_instance`.

The ``alpha`` argument of :func:`run_search` (a candidate name or a number) says which α the Lemma 3 search
tries to break; a deliberately wrong number (say 0.05) plants a violation that the search must find and shrink.

Files: the search keeps no example database (a run is reproducible from its seed and budget alone), and the
working files Hypothesis writes anyway (a cache of constants read from the source) go under
``<cache dir>/hypothesis`` (:func:`default_cache_dir`), never into a ``.hypothesis/`` folder of the working
directory.
"""
from __future__ import annotations

import contextlib
import json
import math
import os
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, Phase, Verbosity, configuration, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import target as hypothesis_target
from hypothesis import strategies as st

from bma_verify.numerics import strategies as bst
from bma_verify.numerics.claim_sweeps import TIE_ATOL, VIOLATION_RTOL, instance_record
from bma_verify.numerics.dpi_sweep import LEMMA3_CANDIDATES, lemma3_check_pair, lemma3_pairs, sdpi_coefficients
from bma_verify.numerics.init_gradient_sweep import thm3_check_position

TARGETS = ("lemma3", "thm3")
DEFAULT_ALPHA = "dobrushin"  # δ(π): the uniform α of the lemma's usual proof, not a theorem for ancestor pairs


#: Counterexamples found by this search (and one grid scan), kept so that reports and tests re-check them: two to
#: Lemma 3 with α = δ(π) (h' an ancestor of pa(h), non-stationary μ₀), one to Theorem 3's exact π̄ form.
#: How each was found, with its numbers: docs/notes/search-counterexamples.md.
KNOWN_COUNTEREXAMPLES = (
    {"target": "lemma3", "kernel": [[0.5, 0.5], [0.015625, 0.984375]], "parents": [-1, 0, 0, 1, 3],
     "init": [0.5, 0.5], "h": 4, "h_prime": 1, "alpha": "dobrushin",
     "found_by": "bma-verify search lemma3 --seed 0 --budget 1500"},
    {"target": "lemma3", "kernel": [[0.22, 0.78], [0.0005, 0.9995]], "parents": [-1, 0, 1],
     "init": [0.032, 0.968], "h": 2, "h_prime": 0, "alpha": "dobrushin",
     "found_by": "grid scan of binary chains x_0 -> x_1 -> x_2 with non-stationary init"},
    {"target": "thm3", "kernel": [[0.015625, 0.96875, 0.015625], [0.015625, 0.015625, 0.96875],
                                  [0.015625, 0.6510416666666666, 0.3333333333333333]],
     "parents": [-1, 0, 1, 2], "init": [0.9, 0.05, 0.05], "h": 3, "form": "exact",
     "found_by": "bma-verify search thm3 --seed 2 --budget 1000, then μ₀ moved from e_0 to full support"},
)


class _Violation(AssertionError):
    """Raised inside the Hypothesis test when an example breaks the claim (Hypothesis then shrinks it)."""


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


CACHE_ENV = "BMA_VERIFY_CACHE_DIR"


def default_cache_dir() -> Path:
    """Where the search keeps Hypothesis' files: ``$BMA_VERIFY_CACHE_DIR``, else ``$XDG_CACHE_HOME/bma-verify``,
    else ``~/.cache/bma-verify`` (Hypothesis writes under its ``hypothesis/`` subfolder)."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base).expanduser() / "bma-verify"


@contextlib.contextmanager
def _hypothesis_home(cache_dir):
    """Point Hypothesis' storage directory (default ``./.hypothesis``) at ``cache_dir/hypothesis`` for the
    duration, then restore whatever it was (a test session's own setting, say)."""
    before = vars(configuration).get("__hypothesis_home_directory")  # module global: not name-mangled
    configuration.set_hypothesis_home_dir(Path(cache_dir).expanduser() / "hypothesis")
    try:
        yield
    finally:
        configuration.set_hypothesis_home_dir(before)


INIT_MODES = ("any", "stationary", "full-support")
#: Smallest mass of every state of μ₀ in the "full-support" mode.
FULL_SUPPORT_MASS = 0.02


def _instances(max_d: int, max_H: int, min_eps: float, init: str):
    """(kernel, parents, init) with μ₀ stationary (None), drawn with full support, or either (``init="any"``,
    where shrinking may reach point masses)."""
    if init == "any":
        return bst.instances(min_d=2, max_d=max_d, min_H=3, max_H=max_H, min_eps=min_eps)
    kernels = bst.kernels(min_d=2, max_d=max_d, min_eps=min_eps)
    trees = bst.parent_trees(min_H=3, max_H=max_H)
    if init == "stationary":
        return st.tuples(kernels, trees, st.none())
    return kernels.flatmap(lambda k: st.tuples(st.just(k), trees,
                                               bst.init_distributions(k.shape[0], min_mass=FULL_SUPPORT_MASS)))


def _check_search_arguments(target: str, budget, alpha, form: str, init: str) -> None:
    if target not in TARGETS:
        raise ValueError(f"target must be one of {', '.join(TARGETS)}; got {target!r}")
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
        raise ValueError(f"budget must be a positive integer number of examples; got {budget!r}")
    if target == "thm3" and alpha is not None:
        raise ValueError("alpha applies to the lemma3 search only")
    if form not in ("exact", "approximate"):
        raise ValueError(f"form must be 'exact' or 'approximate'; got {form!r}")
    if init not in INIT_MODES:
        raise ValueError(f"init must be one of {', '.join(INIT_MODES)}; got {init!r}")


def _offer_closest(state: dict, score: float, make_instance) -> None:
    """Keep the instance of the best score seen so far (the closest call when nothing is found)."""
    if score > state["closest_score"]:
        state["closest_score"], state["closest"] = score, make_instance()


def _lemma3_property(state: dict, alpha):
    """The Hypothesis property of the Lemma 3 search: the worst pair's ratio − α stays within rounding of 0."""
    def property_(instance) -> None:
        kernel, parents, mu0 = instance
        state["examples"] += 1
        worst = _lemma3_worst_pair(kernel, parents, mu0, alpha)
        if worst is None:
            return
        hypothesis_target(worst["excess"], label="ratio - alpha")

        def make():
            return instance_record("lemma3", kernel, parents, mu0, h=worst["h"], h_prime=worst["h_prime"],
                                   alpha=alpha, ratio=worst["ratio"], alpha_value=worst["alpha_value"],
                                   relation=worst["relation"])

        _offer_closest(state, worst["excess"], make)
        if worst["excess"] > _lemma3_tolerance(worst["mi_parent"]):
            state["failure"] = make()
            raise _Violation(json.dumps(state["failure"]))
    return property_


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


def _thm3_property(state: dict, form: str):
    """The Hypothesis property of the Theorem 3 search: the true parent keeps the largest expected gradient."""
    def property_(instance) -> None:
        kernel, parents, mu0 = instance
        state["examples"] += 1
        worst, worst_relative = _thm3_worst_position(kernel, parents, mu0, form)
        if worst is None:
            return
        hypothesis_target(-worst_relative, label="-relative margin")

        def make():
            return instance_record("thm3", kernel, parents, mu0, h=worst["h"], form=form,
                                   margin=worst[f"margin_{form}"], relative_margin=worst_relative)

        _offer_closest(state, -worst_relative, make)
        if worst[f"margin_{form}"] < 0:
            state["failure"] = make()
            raise _Violation(json.dumps(state["failure"]))
    return property_


def _falsified(strategy, property_, *, budget: int, seed: int, quiet: bool, cache_dir) -> bool:
    """Run ``property_`` on at most ``budget`` examples of ``strategy``: True when Hypothesis found (and shrank)
    a violation."""
    test = given(strategy)(property_)
    test = settings(max_examples=budget, database=None, deadline=None, derandomize=False,
                    verbosity=Verbosity.quiet if quiet else Verbosity.normal, print_blob=False,
                    phases=(Phase.generate, Phase.target, Phase.shrink),
                    suppress_health_check=list(HealthCheck))(test)
    test = hypothesis_seed(seed)(test)
    try:
        with _hypothesis_home(default_cache_dir() if cache_dir is None else cache_dir):
            test()
    except _Violation:
        return True  # the last failing call was the shrunk example, so the recorded failure is minimal
    return False


def run_search(target: str, budget: int, seed: int, quiet: bool = True, alpha=None, init: str = "any",
               form: str = "exact", cache_dir=None) -> dict:
    """Search for a counterexample to ``target`` ("lemma3" or "thm3") with at most ``budget`` examples.

    Parameters
    ----------
    target : "lemma3": some pair with I(x_h; x_h') > α I(x_h; x_pa); "thm3": some position where another
        candidate's exact expected init gradient exceeds the true parent's (ties, i.e. zero-information
        kernels, are not violations).
    budget : maximum number of Hypothesis examples (shrinking runs extra calls on top).
    seed : Hypothesis seed (the search is deterministic for a given seed and budget).
    quiet : suppress Hypothesis' own output.
    alpha : Lemma 3 only: a candidate name (default "dobrushin") or a number (a planted constant α).
    init : which μ₀ to search over: "any" (stationary or any law, point masses included), "stationary", or
        "full-support" (every state has mass ≥ FULL_SUPPORT_MASS).
    form : Theorem 3 only: "exact" (π̄ in the denominator) or "approximate" (the J form).
    cache_dir : folder for Hypothesis' working files (under ``cache_dir/hypothesis``); default
        :func:`default_cache_dir`. No example database is kept, so results do not depend on earlier runs.

    Returns
    -------
    dict: ``target``, ``budget``, ``seed``, ``alpha``, ``found`` (bool), ``examples`` (examples run),
    ``instance`` (the shrunk JSON counterexample or None), ``check`` (``check_instance`` of it),
    ``closest`` (the best score seen and its instance: the largest ratio − α, or the largest −margin/max|g|) and
    ``message`` (one line for the command).
    """
    _check_search_arguments(target, budget, alpha, form, init)
    alpha = _check_alpha(alpha) if target == "lemma3" else None
    state = {"examples": 0, "closest": None, "closest_score": -math.inf, "failure": None}
    if target == "lemma3":
        strategy = _instances(max_d=4, max_H=7, min_eps=1e-3, init=init)
        property_ = _lemma3_property(state, alpha)
    else:
        strategy = _instances(max_d=4, max_H=6, min_eps=1e-3, init=init)  # d^H <= 4096 configurations
        property_ = _thm3_property(state, form)
    found = _falsified(strategy, property_, budget=budget, seed=seed, quiet=quiet, cache_dir=cache_dir)
    counterexample = state["failure"] if found else None
    closest = {"score": state["closest_score"], "instance": state["closest"]}
    if found:
        message = f"counterexample found ({target}, alpha={alpha}) and shrunk:\n{json.dumps(counterexample)}"
    else:
        what = "largest ratio − α" if target == "lemma3" else "largest −margin / max|gradient|"
        message = f"no counterexample in {budget} examples; closest call: {what} = {state['closest_score']:.3g}"
    return {"target": target, "budget": budget, "seed": seed, "alpha": alpha, "init": init, "found": found,
            "examples": state["examples"], "instance": counterexample,
            "check": check_instance(counterexample) if found else None, "closest": closest, "message": message}


def check_instance(instance: dict) -> dict:
    """Re-check a saved instance from scratch (``bma-verify check --instance FILE``).

    Returns
    -------
    dict: ``target``, ``holds`` (bool: the claim holds on this instance), ``verdict`` ("pass" or "fail"),
    ``summary`` (one line), and the recomputed numbers. Lemma 3: ``ratio``, ``alpha``, ``alpha_value``, every
    candidate in ``alphas``, ``relation``. Theorem 3: ``tie``, ``margin_exact``, ``margin_approximate``, ``exact``, ``approximate``.
    """
    if not isinstance(instance, dict):
        raise ValueError(f"instance must be a JSON object (dict); got {type(instance).__name__}")
    target = instance.get("target")
    if target not in TARGETS:
        raise ValueError(f"instance['target'] must be one of {', '.join(TARGETS)}; got {target!r}")
    for key in ("kernel", "parents", "h"):
        if key not in instance:
            raise ValueError(f"instance must have a {key!r} field (see reports.search for the format)")
    kernel = np.asarray(instance["kernel"], dtype=np.float64)
    parents = np.asarray(instance["parents"], dtype=np.int64)
    init = None if instance.get("init") is None else np.asarray(instance["init"], dtype=np.float64)
    h = int(instance["h"])
    if target == "lemma3":
        return _check_lemma3_instance(instance, kernel, parents, h, init)
    return _check_thm3_instance(instance, kernel, parents, h, init)


def _check_lemma3_instance(instance: dict, kernel, parents, h: int, init) -> dict:
    if "h_prime" not in instance:
        raise ValueError("instance must have an 'h_prime' field for target 'lemma3'")
    alpha = _check_alpha(instance.get("alpha"))
    out = lemma3_check_pair(kernel, parents, h, int(instance["h_prime"]), init)
    alpha_value = alpha if isinstance(alpha, float) else out["alphas"][alpha]
    holds = not out["ratio"] > alpha_value + _lemma3_tolerance(out["mi_parent"])
    return {"target": "lemma3", "holds": bool(holds), "ratio": out["ratio"], "alpha": alpha,
            "alpha_value": float(alpha_value), "alphas": out["alphas"], "relation": out["relation"],
            "h": h, "h_prime": int(instance["h_prime"]), "verdict": "pass" if holds else "fail",
            "summary": f"I(x_h; x_h')/I(x_h; x_pa) = {out['ratio']:.6g} {'≤' if holds else '>'} "
                       f"α = {alpha_value:.6g} ({alpha}); h={h}, h'={instance['h_prime']}, {out['relation']}"}


def _check_thm3_instance(instance: dict, kernel, parents, h: int, init) -> dict:
    form = instance.get("form", "exact")
    if form not in ("exact", "approximate"):
        raise ValueError(f"instance['form'] must be 'exact' or 'approximate'; got {form!r}")
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
