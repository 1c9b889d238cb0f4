"""Numeric checks (exact and Monte Carlo) of the claims; each calls ``numerics`` and packages the results.

Every check applies its decision rule twice in the same call (SPEC §4.1): to the real input and to a negative
control known to be false, through one ``_decide_*`` function: a planted wrong formula against the same independent
computation (exact checks), a bound known to be violated or a shuffled parent label (Monte Carlo and argmax rules).
A Monte Carlo estimate is judged by its agreement with its exact value (|z| ≤ ``Z_AGREE``) and by its interval
against the bound; each Monte Carlo check also runs a close-call instance, whose bound lies a few standard errors
from the truth, next to the easy ones.

Regression tolerances: every value here is a function of the report seed alone. The exact values are float64
sums, and the Monte Carlo values come from NumPy generators seeded from the report seed, so a rerun with the same
seed reproduces them bit for bit on one machine: the spread over OMP_NUM_THREADS=1|2 × ATEN_CPU_CAPABILITY=
default|avx2 was 0 for every measured value (seed 0, quick tier; this CPU has no AVX-512, and these checks use no
torch kernels). Values without a listed tolerance are therefore compared at the default abs 1e-9 (floats) or
exactly; the seed-to-seed spread (seeds 0, 1, 2) of each Monte Carlo value is noted next to it for scale, not used
as a tolerance. Listed tolerances are for values at rounding level (identity errors), which no rule should pin.

Sizes per tier are in ``SIZES``; the quick tier of every check here together runs in about 10 s on one core (the
Lemma 3 sweep is most of it).
"""
from __future__ import annotations

from functools import partial

import numpy as np

from bma_verify.numerics.bma import parent_posterior, selector_attention
from bma_verify.numerics.claims import (HISTOGRAM_EDGES, INIT_KINDS, LEMMA3_RANGES, MI_FLOOR, THM3_RANGES, VIOLATION_RTOL,
                             hoeffding_bound, lemma3_monte_carlo, lemma3_pairs, lemma3_sweep_chunk, lemma4_monte_carlo,
                             merge_sweeps, prop1_shift_effects, thm2_error_rates, thm3_check_position,
                             thm3_monte_carlo, thm3_sweep_chunk, wilson_interval)
from bma_verify.numerics.enumeration import brute_force_parent_posterior
from bma_verify.numerics.task import random_kernel, random_parents, sample_chains
from bma_verify.reports.core import (CheckContext, CheckOutcome, Control, Finding, Table, jsonable, new_figure, save_figure,
                          verdict_from_interval)
from bma_verify.reports.search import KNOWN_COUNTEREXAMPLES, check_instance, run_search

SIZES = {
    "quick": {"posterior_contexts": 30, "prop1_draws": 200, "lemma3_instances": 400, "lemma3_chunk": 100,
              "mc_instances": 4, "mc_samples": 20_000, "thm2_blocks": 6, "thm3_instances": 60, "thm3_chunk": 30,
              "thm3_mc_samples": 100_000, "search_budget": 0},
    "full": {"posterior_contexts": 200, "prop1_draws": 2000, "lemma3_instances": 5000, "lemma3_chunk": 250,
             "mc_instances": 20, "mc_samples": 100_000, "thm2_blocks": 40, "thm3_instances": 1000, "thm3_chunk": 50,
             "thm3_mc_samples": 1_000_000, "search_budget": 1000},
}
#: A Monte Carlo estimate agrees with its exact value when |estimate − exact| ≤ Z_AGREE standard errors: a false
#: alarm has probability 6e-5 per estimate, ~2e-3 for the ~30 estimates of one check.
Z_AGREE = 4.0
#: Largest |enumerated − factorised| posterior entry that reads as equal (float64 sums give ~1e-15).
POSTERIOR_ATOL = 1e-10
#: Largest change of A^(2) under a shift that reads as "unchanged" (float64 softmax: ~1e-15).
SHIFT_ATOL = 1e-12
#: Largest |lhs − rhs| of an exact identity (Lemma 4; J(pa) = I_χ²; E = (1/h) J) that reads as equal.
IDENTITY_ATOL = 1e-10
#: Lemma 3's planted bounds: α = (1 − shortfall) × an exact ratio for the exact verifier (far above its rounding
#: tolerance 1e-9), α = exact ratio − 3 standard errors for the Monte Carlo interval rule.
PLANTED_ALPHA_SHORTFALL = 1e-6
PLANTED_STDERRS = 3.0
CANDIDATE_LABELS = {
    "sdpi": "η_KL of the channel x_pa → x_h' (theorem)",
    "dobrushin_channel": "δ of the channel x_pa → x_h' (≥ η_KL)",
    "dobrushin": "δ(π), Dobrushin coefficient of the kernel",
    "doeblin": "1 − d·min π (Doeblin)",
    "eta_chi2": "η_χ² of the channel (not a bound for I in general)",
}
#: Lemma 3's negative control: the copy kernel π = I (ε = 0, outside the hypothesis π ≥ ε > 0) on a chain, where
#: x_0 = x_1 = x_2 and the ratio I(x_2; x_0)/I(x_2; x_1) is exactly 1.
COPY_CONTROL = {"kernel": [[1.0, 0.0], [0.0, 1.0]], "parents": [-1, 0, 1], "init": [0.5, 0.5]}
#: Lemma 3's Monte Carlo close call: a nearly copying binary chain x_0 → x_1 → x_2 (flip probability 1e-3,
#: stationary μ₀), whose exact ratio 0.9905 lies 4.6 / 5.9 / 3.9 standard errors below 1 at 20 000 samples (seeds
#: 0 / 1 / 2; about 10 at 100 000).
LEMMA3_CLOSE_CALL = {"flip": 1e-3, "parents": [-1, 0, 1], "h": 2, "h_prime": 0}
#: Lemma 4's Monte Carlo close call: a nearly uninformative binary chain (flip probability 1/2 − δ), pair (2, 0).
#: The gap is ∝ δ² and its standard error ∝ δ/√n, so δ = 0.03·√(20 000/n) keeps the gap near 5.8 standard errors
#: above 0 in every tier.
LEMMA4_CLOSE_CALL = {"delta_at_20000": 0.03, "parents": [-1, 0, 1], "h": 2, "h_prime": 0}
#: Theorem 2's instances: a random d = 3 kernel (Hoeffding is loose there) and the flip kernel ε = 0.1 (increments
#: ±log 9 or 0, nearly two-point), where the true error rate lies within a factor 4 of Hoeffding's exponent, so
#: that the bound with its exponent ×4 (the negative control) is violated, by 7 standard errors at L = 4 with
#: 3000 contexts (exact rate 0.052 against 0.023; 15 cells with whole intervals above it on seeds 0, 1 and 2),
#: while the real bound clears every judged interval (by ≥ 2.7 interval half-widths over seeds 0-2, the closest
#: cells being those near the resolution floor; at small L by 20 standard errors and more). The flip
#: kernel's L stop at 24: beyond, its bound (5e-4 at L = 32) is below what 3000 contexts resolve (no error seen
#: gives an upper end of 1.3e-3); such cells are not judged (``_decide_bound``).
THM2_INSTANCES = {"random": {"parents": [-1, 0, 1, 1, 2, 0], "L": [1, 2, 4, 8, 16, 32, 64]},
                  "flip": {"kernel": [[0.1, 0.9], [0.9, 0.1]], "parents": [-1, 0, 1, 1, 2],
                           "L": [1, 2, 3, 4, 6, 8, 12, 16, 24]}}
#: Theorem 3's Monte Carlo close call at d = 5, h = 11: a fixed random kernel K (seed below) mixed with the uniform
#: kernel, (1 − t)/d + t K. J(pa) − J(h') is ∝ t² and its standard error ∝ t/√n, so t = 0.04·√(100 000/n) keeps the
#: smallest margin near 5 standard errors in every tier.
THM3_CLOSE_CALL = {"seed": 2026, "t_at_100000": 0.04, "d": 5, "H": 12}


def _size(ctx: CheckContext, key: str) -> int:
    return SIZES[ctx.tier][key]


def _save(fig, ctx: CheckContext, filename: str) -> str:
    save_figure(fig, ctx.figure_path(filename))  # PNG at FIGURE_DPI and an SVG copy
    return filename




def _chunks(n: int, size: int) -> list[tuple[int, int]]:
    return [(start, min(start + size, n)) for start in range(0, n, size)]


def _combine(verdicts) -> str:
    """fail if any part fails, pass if every part passes, else inconclusive."""
    verdicts = list(verdicts)
    if "fail" in verdicts:
        return "fail"
    return "pass" if verdicts and all(v == "pass" for v in verdicts) else "inconclusive"


def _lemma3_task(seed: int, kernel, chunk: tuple[int, int]):
    return lemma3_sweep_chunk(seed, *chunk, kernel=kernel)


def _thm3_task(seed: int, chunk: tuple[int, int]):
    return thm3_sweep_chunk(seed, *chunk)


def _lemma3_sweep(ctx: CheckContext):
    """The exact Lemma 3 / Lemma 4 sweep, run once per report and shared through ``ctx.cache``."""
    kernel = ctx.options.get("kernel")  # a user's kernel (bma-verify check lemma3-strict-dpi --kernel FILE)
    key = ("numeric", "lemma3_sweep", ctx.tier, ctx.seed, None if kernel is None else np.asarray(kernel).tobytes())
    if key not in ctx.cache:
        seed = ctx.seed_for("lemma3-sweep")
        chunks = _chunks(_size(ctx, "lemma3_instances"), _size(ctx, "lemma3_chunk"))
        ctx.cache[key] = merge_sweeps(ctx.map(partial(_lemma3_task, seed, kernel), chunks, desc="lemma3 sweep"))
    return ctx.cache[key]


def _thm3_sweep(ctx: CheckContext):
    """The exact Theorem 3 sweep (both forms, both μ₀, with the shuffled-label control), shared through the cache."""
    key = ("numeric", "thm3_sweep", ctx.tier, ctx.seed)
    if key not in ctx.cache:
        chunks = _chunks(_size(ctx, "thm3_instances"), _size(ctx, "thm3_chunk"))
        ctx.cache[key] = merge_sweeps(ctx.map(partial(_thm3_task, ctx.seed_for("thm3-sweep")), chunks,
                                              desc="thm3 sweep"))
    return ctx.cache[key]


def _stored(target: str) -> list[dict]:
    """Counterexamples found earlier by the search (reports.search), re-checked from scratch on every report."""
    return [i for i in KNOWN_COUNTEREXAMPLES if i["target"] == target]


def _smallest(instances: list[dict]) -> dict:
    """The smallest instance: fewest states, then fewest positions."""
    return min(instances, key=lambda i: (len(i["kernel"]), len(i["parents"])))


def _binary_flip_kernel(flip: float) -> np.ndarray:
    return np.array([[1.0 - flip, flip], [flip, 1.0 - flip]])


# ----------------------------------------------------------------------------------------------------------
# bma-score-identity, prop1-invariance


def _decide_posterior(max_error: float) -> str:
    return "pass" if max_error <= POSTERIOR_ATOL else "fail"


def bma_score_identity(ctx: CheckContext) -> CheckOutcome:
    """Posterior over parents by Bayes' rule over every tree with the full likelihood vs ``parent_posterior``.

    Control: the posterior of the transposed kernel, softmax Σ_l log π(x^l_{h'} | x^l_h) (child → parent), against
    the same enumeration.
    """
    rng = ctx.rng("bma-score-identity/numeric")
    rows, worst, worst_case, planted = [], 0.0, None, 0.0
    max_H = 6 if ctx.tier == "quick" else 7
    for _ in range(_size(ctx, "posterior_contexts")):
        d, H, L = int(rng.integers(2, 5)), int(rng.integers(2, max_H + 1)), int(rng.integers(0, 7))
        kernel = random_kernel(d, eps=float(rng.uniform(0, 0.5 / d)), rng=rng)
        context = sample_chains(kernel, random_parents(H, rng=rng), L, rng=rng)
        enumerated = brute_force_parent_posterior(kernel, context)
        error = float(np.abs(enumerated - parent_posterior(kernel, context)).max())
        planted = max(planted, float(np.abs(enumerated - selector_attention(np.log(kernel).T, context)).max()))
        rows.append([d, H, L, error])
        if error >= worst:
            worst, worst_case = error, {"kernel": kernel.tolist(), "context": context.tolist()}
    verdict = _decide_posterior(worst)
    control = Control("the posterior of the transposed kernel, softmax of Σ_l log π(x^l_h' | x^l_h), against the same "
                      "enumeration", {"max_abs_error": planted},
                      rejected=_decide_posterior(planted) != "pass")
    return CheckOutcome(
        verdict=verdict, measured={"max_abs_error": worst, "contexts": len(rows)}, threshold=POSTERIOR_ATOL,
        summary=f"Bayes' rule over all (H−1)! trees with the full likelihood equals parent_posterior on {len(rows)} "
                f"random contexts (d ≤ 4, H ≤ {max_H}, L ≤ 6): max |difference| = {worst:.2e}; the transposed "
                f"kernel's posterior differs by {planted:.2f} (control, rejected).",
        tables=[Table("enumerated vs factorised posterior", ["d", "H", "L", "max |Δ|"], rows[:10])],
        instance=None if verdict == "pass" else {"target": "bma-score-identity", **worst_case}, control=control,
        # rounding level (7e-16 at seed 0, 4e-16 .. 9e-16 over seeds 0-2; spread 0 over threads/CPU capability):
        # 1e-12 lies far above rounding and far below the 1e-10 threshold
        tolerances={"max_abs_error": {"abs": 1e-12}})


def _invariant(changes) -> bool:
    """A shift is invisible to A^(2) when no draw moves it by more than SHIFT_ATOL."""
    return float(np.max(changes)) <= SHIFT_ATOL


def prop1_invariance(ctx: CheckContext) -> CheckOutcome:
    """selector_attention under W + 1aᵀ (unchanged) and W + b1ᵀ (changed in general), random W, a, b.

    Control: the row shift W + b1ᵀ claimed invariant, judged by the same invariance rule.
    """
    rng = ctx.rng("prop1-invariance/numeric")
    column, row = [], []
    for _ in range(_size(ctx, "prop1_draws")):
        d, H, L = int(rng.integers(2, 8)), int(rng.integers(2, 10)), int(rng.integers(1, 6))
        out = prop1_shift_effects(rng.normal(size=(d, d)), rng.normal(size=d), rng.normal(size=d),
                                  rng.integers(0, d, size=(L, H)))
        column.append(out["column_shift_change"])
        row.append(out["row_shift_change"])
    column, row = np.array(column), np.array(row)
    changed = float(np.mean(row > SHIFT_ATOL))
    threshold = {"column_shift_change_max": SHIFT_ATOL, "row_shift_changed_fraction_min": 0.5}
    verdict = "pass" if _invariant(column) and changed >= 0.5 else "fail"
    control = Control("the row shift W + b1ᵀ claimed invariant, judged by the same rule (max change ≤ 1e-12)",
                      {"row_shift_change_max": float(row.max())}, rejected=not _invariant(row))
    return CheckOutcome(
        verdict=verdict,
        measured={"column_shift_change_max": float(column.max()), "row_shift_changed_fraction": changed,
                  "row_shift_change_median": float(np.median(row)), "draws": int(row.size)},
        threshold=threshold,
        summary=f"Over {row.size} random (W, a, b, context): W + 1aᵀ moves A^(2) by at most {column.max():.1e}; "
                f"W + b1ᵀ changes it in {100 * changed:.0f}% of draws (median max change {np.median(row):.2f}; "
                "unchanged only for H = 2, where a single candidate has weight 1); the row shift claimed invariant "
                f"is rejected (max change {row.max():.2f}).",
        control=control,
        # column_shift_change_max is rounding (9e-16 at seed 0, up to 1.1e-15 over seeds 0-2; spread 0 over
        # threads/CPU capability): 1e-13 is above rounding and below the 1e-12 threshold
        tolerances={"column_shift_change_max": {"abs": 1e-13}})


# ----------------------------------------------------------------------------------------------------------
# lemma3-strict-dpi


def _decide_ratio(max_ratio: float) -> str:
    """Lemma 3 as stated: some α < 1 exists, i.e. the largest exact ratio is below 1 by more than rounding."""
    return "pass" if max_ratio < 1.0 - VIOLATION_RTOL else "fail"


def _lemma3_degenerate(pairs: int, counts: dict) -> CheckOutcome:
    # only a zero-information (user) kernel gets here: I(x_h; x_pa) = 0 for every pair
    return CheckOutcome(
        verdict="inconclusive", measured={"pairs": pairs, "degenerate_pairs": counts.get("degenerate", 0)},
        threshold="I(x_h; x_pa) > 0 for some pair", reason="the ratio is undefined on every pair",
        summary=f"All {pairs} pairs have I(x_h; x_pa) ≤ {MI_FLOOR:g}: the kernel carries no information, so the "
                "ratio is undefined.")


def lemma3_strict_dpi_exact(ctx: CheckContext) -> CheckOutcome:
    """Lemma 3 as stated: the largest exact ratio I(x_h; x_h')/I(x_h; x_pa) over the sweep (random kernels with
    π ≥ ε > 0, trees, both μ₀) and the stored instances is < 1, so some α < 1 exists.

    Control: the copy kernel π = I (ε = 0, outside the hypothesis), where the ratio is exactly 1, under the same rule.
    """
    result = _lemma3_sweep(ctx)
    counts, worst = result.counts, result.worst
    pairs = counts["pairs"]
    if "ratio" not in worst:
        return _lemma3_degenerate(pairs, counts)
    user_kernel = ctx.options.get("kernel") is not None  # the stored instances have kernels of their own
    stored = [] if user_kernel else [{"instance": i, "ratio": check_instance(i)["ratio"]} for i in _stored("lemma3")]
    sweep_ratio = worst["ratio"].value
    max_ratio = max([sweep_ratio] + [s["ratio"] for s in stored])
    verdict = _decide_ratio(max_ratio)
    copy = lemma3_pairs(np.array(COPY_CONTROL["kernel"]), np.array(COPY_CONTROL["parents"]),
                        np.array(COPY_CONTROL["init"]))
    control_ratio = float(np.nanmax(copy["ratio"]))
    control = Control("the copy kernel π = I (ε = 0, outside the hypothesis) on the chain x_0 → x_1 → x_2, μ₀ "
                      "uniform, where I(x_2; x_0) = I(x_2; x_1) = log 2", {"max_ratio": control_ratio},
                      rejected=_decide_ratio(control_ratio) != "pass")
    fig, ax = new_figure(figsize=(6, 3.2))
    ax.stairs(result.histograms["ratio"], HISTOGRAM_EDGES, label="sweep pairs")
    ax.axvline(1.0, color="k", lw=0.8, label="1 (α must be below)")
    ax.axvline(max_ratio, color="C3", ls="--", lw=0.8, label=f"largest ratio {max_ratio:.4f}")
    ax.set_xlabel("I(x_h; x_h') / I(x_h; x_pa)")
    ax.set_ylabel("pairs")
    ax.set_yscale("log")
    ax.legend(fontsize=7)
    fig.tight_layout()
    figure = _save(fig, ctx, "lemma3_ratio.png")
    measured = {"pairs": pairs, "pairs_by_init": {k: counts.get(f"{k}/pairs", 0) for k in INIT_KINDS},
                "degenerate_pairs": counts.get("degenerate", 0), "max_ratio": max_ratio,
                "max_ratio_sweep": sweep_ratio, "max_ratio_instance": worst["ratio"].instance,
                "stored_instance_ratios": [s["ratio"] for s in stored],
                "ranges": "user kernel; H and μ₀ as in ranges" if user_kernel else LEMMA3_RANGES}
    return CheckOutcome(
        verdict=verdict, measured=jsonable(measured), threshold=f"largest ratio < 1 − {VIOLATION_RTOL:g}",
        summary=f"{pairs} (kernel with π ≥ ε > 0, tree, μ₀, pair) cases, stationary and non-stationary μ₀, and "
                f"{len(stored)} stored search instances: largest exact ratio I(x_h;x_h')/I(x_h;x_pa) = "
                f"{max_ratio:.4f} {'<' if verdict == 'pass' else '≥'} 1, so α = {max_ratio:.4f} serves; the copy "
                f"kernel (ε = 0) reaches ratio {control_ratio:.3f} and is rejected (control).",
        figures=[figure], instance=None if verdict == "pass" else worst["ratio"].instance, control=control,
        # exact float64 values; spread 0 over threads/CPU capability (seed 0); 1e-12 is rounding-level slack
        tolerances={"max_ratio": {"abs": 1e-12}, "max_ratio_sweep": {"abs": 1e-12},
                    "stored_instance_ratios": {"abs": 1e-12}})


def _alpha_finding(statement: str, violations: int, pairs: int, refuting: list[dict], extra: str = "") -> Finding:
    """One candidate α: refuted (smallest refuting instance) or holds on the pairs counted."""
    if refuting:
        return Finding(statement, "refuted", _smallest(refuting),
                       f"violated on {violations} of {pairs} sweep pairs" + (f"; {extra}" if extra else ""))
    return Finding(statement, "holds", None, f"on {pairs} sweep pairs" + (f"; {extra}" if extra else ""))


def lemma3_alpha_candidates(ctx: CheckContext) -> CheckOutcome:
    """Our candidate α (stronger than the lemma): one finding per candidate, on the shared sweep, the stored
    counterexamples and (full tier) a Hypothesis search. η_KL and η_χ² of the pair's own channel are reported as
    consistency checks, not candidates.

    Verdict: fail when a candidate is refuted or a consistency check breaks (η_KL of the pair's own channel, a
    theorem, exceeded: a bug), else pass. Control: α just below the exact ratio of the sweep's largest-ratio pair
    must be reported violated by the same verifier (``reports.search.check_instance``).
    """
    result = _lemma3_sweep(ctx)
    counts, worst = result.counts, result.worst
    pairs = counts["pairs"]
    if "ratio" not in worst:
        return _lemma3_degenerate(pairs, counts)
    ancestor_pairs = counts.get("pairs/ancestor", 0)
    violations = {name: counts.get(f"violations/{name}", 0) for name in CANDIDATE_LABELS}
    ancestor_violations = {name: counts.get(f"violations/{name}/ancestor", 0) for name in CANDIDATE_LABELS}
    stored = _stored("lemma3")
    rechecks = {name: [check_instance(dict(i, alpha=name)) for i in stored] for name in ("dobrushin", "doeblin")}
    searches = {}
    budget = _size(ctx, "search_budget")
    if budget:  # an active search for counterexamples to the two candidates that depend on π alone
        for name in ("dobrushin", "doeblin"):
            found = run_search("lemma3", budget, ctx.seed_for(f"lemma3-search/{name}") % 2**32, alpha=name)
            searches[name] = {"found": found["found"], "instance": found["instance"], "closest": found["closest"]}

    def refuting(name: str, ancestors_only: bool = False) -> list[dict]:
        out = [dict(i, alpha=name) for i, k in zip(stored, rechecks.get(name, [])) if not k["holds"]
               and (not ancestors_only or k["relation"] == "ancestor")]
        if name in searches and searches[name]["found"]:
            out.append(searches[name]["instance"])
        swept = ancestor_violations[name] if ancestors_only else violations[name]
        if swept and worst[f"excess/{name}"].instance is not None:
            out.append(worst[f"excess/{name}"].instance)
        return out

    def stored_evidence(name: str) -> str:
        parts = [f"stored instance (d={len(i['kernel'])}, H={len(i['parents'])}): {k['summary']}"
                 for i, k in zip(stored, rechecks[name])]
        if name in searches:
            parts.append(f"Hypothesis search ({budget} examples): "
                         + ("found a counterexample" if searches[name]["found"] else
                            f"none, closest ratio − α = {searches[name]['closest']['score']:.3g}"))
        return "; ".join(parts)

    findings = [
        _alpha_finding("I(x_h; x_h') ≤ δ(π)·I(x_h; x_pa(h)) for every non-parent h' < h (α = δ(π), the Dobrushin "
                       "coefficient of the kernel)", violations["dobrushin"], pairs, refuting("dobrushin"),
                       stored_evidence("dobrushin")),
        _alpha_finding("I(x_h; x_h') ≤ (1 − d·min π)·I(x_h; x_pa(h)) for every non-parent h' < h (the Doeblin "
                       "bound)", violations["doeblin"], pairs, refuting("doeblin"), stored_evidence("doeblin")),
        _alpha_finding("the Doeblin bound for the pairs where h' is an ancestor of pa(h), which the SDPI argument "
                       "through δ(π) does not cover", ancestor_violations["doeblin"], ancestor_pairs,
                       refuting("doeblin", ancestors_only=True)),
        _alpha_finding("I(x_h; x_h') ≤ δ(T)·I(x_h; x_pa(h)), T the channel x_pa(h) → x_h' (δ(T) ≥ η_KL(T), so this "
                       "also follows from the SDPI theorem)", violations["dobrushin_channel"], pairs,
                       refuting("dobrushin_channel")),
    ]
    consistency = {"sdpi_violations": violations["sdpi"], "sdpi_evaluations": counts.get("sdpi_computed", 0),
                   "eta_chi2_exceeded": violations["eta_chi2"]}
    consistent = violations["sdpi"] == 0
    refuted = [f for f in findings if f.status == "refuted"]
    verdict = "fail" if refuted or not consistent else "pass"
    # the control: the largest-ratio pair of the sweep against an α just below its own exact ratio
    top = worst["ratio"].instance
    planted_alpha = top["ratio"] * (1.0 - PLANTED_ALPHA_SHORTFALL)
    planted = check_instance(dict(top, alpha=planted_alpha))
    control = Control(f"α = (1 − {PLANTED_ALPHA_SHORTFALL:g}) × the exact ratio of the sweep's largest-ratio pair "
                      f"({top['ratio']:.6f}), re-checked by check_instance",
                      {"alpha": planted_alpha, "ratio": planted["ratio"], "holds": planted["holds"]},
                      rejected=not planted["holds"])
    centres = 0.5 * (HISTOGRAM_EDGES[1:] + HISTOGRAM_EDGES[:-1])
    mean_ratio_over_alpha = {name: float(result.histograms[f"ratio_over_alpha/{name}"] @ centres / max(pairs, 1))
                             for name in CANDIDATE_LABELS}
    fig, ax = new_figure(figsize=(6, 3.5))
    for name in CANDIDATE_LABELS:
        ax.stairs(result.histograms[f"ratio_over_alpha/{name}"], HISTOGRAM_EDGES, label=name)
    ax.axvline(1.0, color="k", lw=0.8)
    ax.set_xlabel("I(x_h; x_h') / (α · I(x_h; x_pa))  (last bin: ≥ 1.18)")
    ax.set_ylabel("pairs")
    ax.set_yscale("log")
    ax.legend(fontsize=7)
    fig.tight_layout()
    figure = _save(fig, ctx, "lemma3_ratio_over_alpha.png")
    rows = [[name, CANDIDATE_LABELS[name], violations[name], ancestor_violations[name],
             round(mean_ratio_over_alpha[name], 4), round(worst[f"excess/{name}"].value, 6)]
            for name in CANDIDATE_LABELS]
    measured = {"pairs": pairs, "pairs_h_prime_ancestor_of_parent": ancestor_pairs, "violations": violations,
                "violations_ancestor": ancestor_violations,
                "violations_by_init": {kind: {name: counts.get(f"{kind}/violations/{name}", 0)
                                              for name in CANDIDATE_LABELS} for kind in INIT_KINDS},
                "largest_excess": {name: worst[f"excess/{name}"].value for name in CANDIDATE_LABELS},
                "stored_rechecks": {name: [{"ratio": k["ratio"], "alpha_value": k["alpha_value"],
                                            "holds": k["holds"]} for k in ks] for name, ks in rechecks.items()},
                "consistency": consistency, "searches": searches}
    summary = (f"Candidate α of ours on {pairs} sweep pairs ({ancestor_pairs} with h' an ancestor of pa(h)) and "
               f"{len(stored)} stored instances: "
               + "; ".join(f"{name} {'refuted' if f.status == 'refuted' else 'holds'}"
                           for name, f in zip(("δ(π)", "Doeblin", "Doeblin (ancestor pairs)", "δ of the channel"),
                                              findings))
               + f". Consistency: η_KL of the pair's own channel (a theorem) exceeded {violations['sdpi']} times; η_χ² "
               f"exceeded {violations['eta_chi2']} times (expected: η_χ² ≤ η_KL is not a bound on the ratio). "
               f"Control: α just below the largest ratio is reported violated: {not planted['holds']}.")
    return CheckOutcome(
        verdict=verdict, measured=jsonable(measured),
        threshold={"candidates": "ratio ≤ α + rounding on every pair", "sdpi_violations": 0},
        summary=summary, figures=[figure], findings=findings, control=control,
        instance=refuted[0].instance if refuted else None,
        tables=[Table("candidate α", ["id", "candidate", "violations", "of which h' ancestor of pa",
                                      "mean ratio/α", "max (ratio − α)"], rows)],
        # exact float64 values; spread 0 over threads/CPU capability (seed 0); the η_KL excess comes from an
        # iterative optimiser, whose last digits may move: 1e-9
        tolerances={"largest_excess": {"abs": 1e-9}, "stored_rechecks": {"abs": 1e-12}})


def _z(estimate, exact) -> np.ndarray:
    """(estimate − exact) / stderr, elementwise."""
    return (np.asarray(estimate.value) - exact) / np.asarray(estimate.stderr)


def _decide_interval(z_scores, low, high, bound: float, *, below: bool = True) -> str:
    """The Monte Carlo rule: every estimate within Z_AGREE standard errors of its exact value (else inconclusive:
    the sampling does not corroborate the exact computation), then the 95% interval(s) against ``bound``: pass
    when wholly on the claimed side, fail when one is wholly on the other, else inconclusive."""
    if np.max(np.abs(z_scores)) > Z_AGREE:
        return "inconclusive"
    return _combine(verdict_from_interval(lo, hi, bound, below=below)
                    for lo, hi in zip(np.atleast_1d(low), np.atleast_1d(high)))


def _lemma3_mc_case(label: str, kernel, parents, init, h: int, h_prime: int, n: int, rng) -> dict:
    """Estimates of one pair, their z against the exact values, and the rule applied to the bound 1 (the lemma
    as stated) and to a bound known to be violated (the exact ratio minus 3 standard errors)."""
    out = lemma3_monte_carlo(kernel, parents, h, h_prime, n, rng=rng, init=init)
    exact = out["exact"]
    z = {f"{method}/{key}": float(_z(out[method][key], exact[key]))
         for method in ("plug-in", "miller-madow") for key in ("mi_candidate", "mi_parent", "ratio")}
    ratio = out["miller-madow"]["ratio"]
    planted = exact["ratio"] - PLANTED_STDERRS * ratio.stderr
    return {"case": label, "h": h, "h_prime": h_prime, "init": "stationary" if init is None else "non-stationary",
            "exact_ratio": exact["ratio"], "estimate": ratio.value, "stderr": ratio.stderr, "low": ratio.low,
            "high": ratio.high, "max_abs_z": max(abs(v) for v in z.values()), "z": z,
            "margin_in_stderr": (1.0 - exact["ratio"]) / ratio.stderr,
            "verdict": _decide_interval(list(z.values()), ratio.low, ratio.high, 1.0),
            "planted_alpha": planted, "control_verdict": _decide_interval(list(z.values()), ratio.low, ratio.high,
                                                                            planted)}


def lemma3_strict_dpi_monte_carlo(ctx: CheckContext) -> CheckOutcome:
    """Plug-in and Miller–Madow estimates with intervals of I and of the ratio, each judged against its exact value
    by z, and the Miller–Madow ratio interval against 1 (the lemma as stated), on random instances (the pair with
    the largest exact ratio of each tree) and a close call (exact ratio 0.99).

    Control: the same rule against α = the exact ratio − 3 standard errors (a bound known to be violated).
    """
    rng = ctx.rng("lemma3-strict-dpi/monte-carlo")
    n = _size(ctx, "mc_samples")
    cases, skipped = [], 0
    for i in range(_size(ctx, "mc_instances")):
        # informative kernels (peaked rows, small ε) and, per tree, the pair with the largest exact ratio
        d = int(rng.integers(2, 5))
        kernel = random_kernel(d, alpha=0.5, eps=float(rng.uniform(0.02, 0.1) / d), rng=rng)
        if ctx.options.get("kernel") is not None:  # bma-verify check lemma3-strict-dpi --kernel FILE
            kernel = np.asarray(ctx.options["kernel"], dtype=np.float64)
            d = kernel.shape[0]
        parents = random_parents(int(rng.integers(3, 8)), rng=rng)
        init = None if i % 2 == 0 else rng.dirichlet(np.ones(d))
        pairs = lemma3_pairs(kernel, parents, init)
        if not np.isfinite(pairs["ratio"]).any():  # x_h carries no information about its parent: no ratio
            skipped += 1
            continue
        p = int(np.nanargmax(pairs["ratio"]))
        cases.append(_lemma3_mc_case(f"random {i}", kernel, parents, init, int(pairs["h"][p]),
                                     int(pairs["h_prime"][p]), n, rng))
    cc = LEMMA3_CLOSE_CALL
    cases.append(_lemma3_mc_case("close call", _binary_flip_kernel(cc["flip"]), np.array(cc["parents"]), None,
                                 cc["h"], cc["h_prime"], n, rng))
    verdicts = [c["verdict"] for c in cases] + ["inconclusive"] * skipped
    verdict = _combine(verdicts)
    control_verdict = _combine(c["control_verdict"] for c in cases)
    control = Control(f"α = exact ratio − {PLANTED_STDERRS:g} standard errors (a bound known to be violated) on every "
                      "instance, "
                      "judged by the same rule", {"planted_alpha": [c["planted_alpha"] for c in cases],
                                                  "verdicts": [c["control_verdict"] for c in cases]},
                      rejected=control_verdict != "pass")
    close = cases[-1]
    rows = [[c["case"], c["init"], c["h"], c["h_prime"], round(c["exact_ratio"], 4), round(c["estimate"], 4),
             round(c["low"], 4), round(c["high"], 4), round(c["max_abs_z"], 2), c["verdict"], c["control_verdict"]]
            for c in cases]
    reason = ""
    if verdict == "inconclusive":
        reason = ("an estimate disagrees with its exact value (|z| > 4)" if max(c["max_abs_z"] for c in cases) > Z_AGREE
                  else f"x_h carries no information about its parent in {skipped} instances (no ratio)" if skipped
                  else "a ratio interval straddles 1")
    # no listed tolerances (bit-reproducible, see the module docstring); seeds 0 / 1 / 2 read max_abs_z 1.86 / 2.50 /
    # 2.58 and the close call's margin 4.55 / 5.94 / 3.93 standard errors
    return CheckOutcome(
        verdict=verdict,
        measured={"samples": n, "instances": len(cases), "skipped": skipped,
                  "max_abs_z": max(c["max_abs_z"] for c in cases),
                  "instance_verdicts": [c["verdict"] for c in cases],
                  "close_call": {"exact_ratio": close["exact_ratio"], "margin_in_stderr": close["margin_in_stderr"],
                                 "high": close["high"]},
                  "cases": [{k: c[k] for k in ("case", "exact_ratio", "estimate", "stderr", "max_abs_z")}
                            for c in cases]},
        threshold=f"every estimate within {Z_AGREE:g} standard errors of its exact value; Miller–Madow ratio 95% "
                  "interval below 1",
        summary=f"{len(cases)} pairs × {n} chains (the largest-ratio pair of random trees, and a close call with exact "
                f"ratio {close['exact_ratio']:.4f}, {close['margin_in_stderr']:.1f} standard errors below 1): every "
                f"estimate within {max(c['max_abs_z'] for c in cases):.1f} standard errors of its exact value; ratio "
                f"intervals against 1: {', '.join(c['verdict'] for c in cases)}; α = exact − 3 s.e. is rejected "
                f"({control_verdict}, control).",
        tables=[Table("ratio estimates", ["case", "μ₀", "h", "h'", "exact", "estimate (MM)", "low", "high",
                                          "max |z|", "verdict vs 1", "vs exact − 3 s.e."], rows)],
        control=control, reason=reason)


# ----------------------------------------------------------------------------------------------------------
# lemma4-loglik-gap


def _decide_identity(identity_error: float, nonpositive_gaps: int) -> str:
    """Lemma 4: both sides equal (to IDENTITY_ATOL) on every pair and every gap > 0."""
    return "pass" if identity_error <= IDENTITY_ATOL and nonpositive_gaps == 0 else "fail"


def lemma4_loglik_gap_exact(ctx: CheckContext) -> CheckOutcome:
    """Both sides of the Lemma 4 identity from exact joints on every pair of the Lemma 3 sweep: the left side from
    xlogy(joint, π) directly, the right side from the informations and the E KL term.

    Control: the identity with its E KL term dropped (a planted wrong formula), compared with the same left side.
    """
    result = _lemma3_sweep(ctx)
    error = result.worst["lemma4/identity_error"].value
    min_gap = -result.worst["lemma4/negative_gap"].value
    nonpositive = result.counts.get("lemma4/nonpositive_gap", 0)
    verdict = _decide_identity(error, nonpositive)
    planted = result.worst["lemma4/identity_error_without_kl"].value
    control = Control("the identity without its E KL term (lhs = I_pa − I_h'), against the same left side",
                      {"max_identity_error": planted}, rejected=_decide_identity(planted, nonpositive) != "pass")
    instance = None
    if verdict == "fail":
        key = "lemma4/identity_error" if error > IDENTITY_ATOL else "lemma4/negative_gap"
        instance = result.worst[key].instance
    return CheckOutcome(
        verdict=verdict,
        measured={"pairs": result.counts["pairs"], "max_identity_error": error, "min_gap": min_gap,
                  "nonpositive_gaps": nonpositive, "min_gap_instance": result.worst["lemma4/negative_gap"].instance},
        threshold={"max_identity_error": IDENTITY_ATOL, "gap": "> 0"},
        summary=f"On {result.counts['pairs']} pairs: E log π(x_h|x_pa) − E log π(x_h|x_h') equals "
                f"[I_pa − I_h'] + E KL(q‖π) to {error:.1e}; smallest gap {min_gap:.3e} "
                f"({nonpositive} non-positive); without the E KL term the identity is off by {planted:.3f} "
                "(control, rejected).",
        instance=instance, control=control,
        # max_identity_error is rounding (8.9e-16 at seed 0; spread 0 over threads/CPU capability): 1e-13 is above
        # rounding and far below the 1e-10 threshold. min_gap (5.3e-7) is a difference of exact sums: rel 1e-6
        tolerances={"max_identity_error": {"abs": 1e-13}, "min_gap": {"rel": 1e-6}})


def _lemma4_mc_case(label: str, kernel, parents, init, h: int, h_prime: int, n: int, rng) -> dict:
    out = lemma4_monte_carlo(kernel, parents, h, h_prime, n, rng=rng, init=init)
    est, exact = out["estimate"], out["exact"]
    planted = exact["mi_parent"] - exact["mi_candidate"]  # the identity without its E KL term
    z, z_planted = float(_z(est, exact["lhs"])), float(_z(est, planted))
    return {"case": label, "h": h, "h_prime": h_prime, "exact": exact["lhs"], "planted": planted,
            "estimate": est.value, "stderr": est.stderr, "low": est.low, "high": est.high, "z": z,
            "z_planted": z_planted, "gap_in_stderr": exact["lhs"] / est.stderr,
            "verdict": _decide_interval([z], est.low, est.high, 0.0, below=False),
            "control_verdict": _decide_interval([z_planted], est.low, est.high, 0.0, below=False)}


def lemma4_loglik_gap_monte_carlo(ctx: CheckContext) -> CheckOutcome:
    """Sample means of log π(x_h|x_pa) − log π(x_h|x_h') with standard errors, judged against the exact gap by z and
    against 0 by their interval, on random pairs and a close call (gap ≈ 6 standard errors).

    Control: the exact value replaced by the identity without its E KL term (I_pa − I_h'), judged by the same rule.
    """
    rng = ctx.rng("lemma4-loglik-gap/monte-carlo")
    n = _size(ctx, "mc_samples")
    cases = []
    for i in range(_size(ctx, "mc_instances")):
        d = int(rng.integers(2, 5))
        kernel = random_kernel(d, eps=float(rng.uniform(0.05, 0.5) / d), rng=rng)
        parents = random_parents(int(rng.integers(3, 8)), rng=rng)
        init = None if i % 2 == 0 else rng.dirichlet(np.ones(d))
        h = int(parents.shape[0] - 1)
        cases.append(_lemma4_mc_case(f"random {i}", kernel, parents, init, h, 0 if parents[h] != 0 else 1, n, rng))
    cc = LEMMA4_CLOSE_CALL
    delta = cc["delta_at_20000"] * np.sqrt(20_000 / n)
    cases.append(_lemma4_mc_case("close call", _binary_flip_kernel(0.5 - delta), np.array(cc["parents"]), None,
                                 cc["h"], cc["h_prime"], n, rng))
    verdict = _combine(c["verdict"] for c in cases)
    control_verdict = _combine(c["control_verdict"] for c in cases)
    control = Control("the exact gap replaced by I_pa − I_h' (the identity without E KL), judged by the same rule",
                      {"max_abs_z": max(abs(c["z_planted"]) for c in cases), "verdict": control_verdict},
                      rejected=control_verdict != "pass")
    close = cases[-1]
    rows = [[c["case"], c["h"], c["h_prime"], round(c["exact"], 5), round(c["estimate"], 5), round(c["stderr"], 5),
             round(c["z"], 2), round(c["z_planted"], 1), c["verdict"]] for c in cases]
    max_z = max(abs(c["z"]) for c in cases)
    # no listed tolerances (bit-reproducible); seeds 0 / 1 / 2 read max_abs_z 1.12 / 2.05 / 2.83, the close call's
    # gap 5.81 / 5.79 / 5.83 standard errors, and the control's largest |z| 43 / 27 / 27
    return CheckOutcome(
        verdict=verdict,
        measured={"samples": n, "max_abs_z": max_z, "instance_verdicts": [c["verdict"] for c in cases],
                  "close_call": {"delta": delta, "exact_gap": close["exact"], "gap_in_stderr": close["gap_in_stderr"]},
                  "control_max_abs_z": control.measured["max_abs_z"]},
        threshold=f"every estimate within {Z_AGREE:g} standard errors of the exact gap; 95% interval above 0",
        summary=f"{len(cases)} pairs × {n} chains (random, and a close call whose gap is {close['gap_in_stderr']:.1f} "
                f"standard errors above 0): estimates within {max_z:.1f} standard errors of the exact gap; gap > 0: "
                f"{', '.join(c['verdict'] for c in cases)}; against I_pa − I_h' (E KL dropped) they are up to "
                f"{control.measured['max_abs_z']:.0f} standard errors off (control, {control_verdict}).",
        tables=[Table("gap estimates", ["case", "h", "h'", "exact", "estimate", "stderr", "z", "z vs no-KL",
                                        "verdict"], rows)],
        control=control, reason="an interval straddles 0 or an estimate disagrees" if verdict == "inconclusive" else "")


# ----------------------------------------------------------------------------------------------------------
# thm2-consistency


def _decide_bound(low, high, bound, contexts: int) -> tuple[str, np.ndarray]:
    """Theorem 2's rule: each (L, pair) Wilson interval against its bound, the cells' verdicts combined. A cell whose
    bound lies below the upper end of the interval for zero errors in ``contexts`` cannot be decided at this sample
    size whatever the truth (``"unresolved"``) and does not enter the verdict."""
    floor = float(wilson_interval(0, contexts)[1])
    cells = np.array([verdict_from_interval(lo, hi, b) if b > floor else "unresolved" for lo, hi, b in
                      zip(np.ravel(low), np.ravel(high), np.ravel(bound))]).reshape(np.shape(bound))
    return _combine(cells[cells != "unresolved"]), cells


def thm2_consistency(ctx: CheckContext) -> CheckOutcome:
    """Empirical P(score(pa) ≤ score(h')) and argmax error against L, against the Hoeffding bound, on a random
    d = 3 kernel and on the flip kernel ε = 0.1 (where Hoeffding is within a factor 4 of the truth in exponent).

    Control: the bound with its exponent ×4, exp(−4LΔ²/(2 log²(1/ε))), judged by the same interval rule.
    """
    rng = ctx.rng("thm2-consistency/numeric")
    instances = {name: (np.array(spec["kernel"]) if "kernel" in spec else
                        random_kernel(3, alpha=0.5, eps=0.05, rng=rng), np.array(spec["parents"]), spec["L"])
                 for name, spec in THM2_INSTANCES.items()}
    blocks = _size(ctx, "thm2_blocks")
    measured, verdicts, control_verdicts, rows = {}, [], [], []
    control_cells = {}
    fig, axes = new_figure(1, 2, figsize=(9, 3.5), sharey=True)
    for ax, (name, (kernel, parents, L_values)) in zip(axes, instances.items()):
        out = thm2_error_rates(ctx.seed_for(f"thm2-consistency/{name}"), kernel, parents, L_values, blocks)
        Ls = np.asarray(L_values)[:, None]
        planted = hoeffding_bound(Ls, out["gap"][None, :], out["eps"], exponent_factor=4.0)
        verdict, real_cells = _decide_bound(out["pair_low"], out["pair_high"], out["bound"], out["contexts"])
        control_verdict, cells = _decide_bound(out["pair_low"], out["pair_high"], planted, out["contexts"])
        verdicts.append(verdict)
        control_verdicts.append(control_verdict)
        worst_argmax = out["argmax_rate"].max(axis=1)
        # the closest the real bound comes: its slack above the intervals' upper ends, in interval half-widths
        half = np.maximum((out["pair_high"] - out["pair_low"]) / 2, 1e-12)
        judged = real_cells != "unresolved"
        violated = np.argwhere(cells == "fail")
        if violated.size:
            i, p = violated[np.argmax((out["pair_low"] - planted)[tuple(violated.T)])]
            control_cells[name] = {"cells_violated": int(violated.shape[0]), "L": L_values[i],
                                   "pair": list(out["pairs"][p]), "rate": float(out["pair_rate"][i, p]),
                                   "low": float(out["pair_low"][i, p]), "bound_x4": float(planted[i, p])}
        else:
            control_cells[name] = {"cells_violated": 0}
        measured[name] = {"L": L_values, "contexts_per_L": out["contexts"], "argmax_error": worst_argmax.tolist(),
                          "max_pair_error": out["pair_rate"].max(axis=1).tolist(),
                          "min_bound": out["bound"].min(axis=1).tolist(), "min_gap": float(out["gap"].min()),
                          "min_slack_in_half_widths": float(((out["bound"] - out["pair_high"]) / half)[judged].min()),
                          "cells_judged": int(judged.sum()), "cells_unresolved": int((~judged).sum()),
                          "eps": out["eps"], "kernel": kernel.tolist(), "parents": parents.tolist(),
                          "verdict": verdict, "control_verdict": control_verdict}
        rows += [[name, L, round(float(worst_argmax[i]), 4), round(float(out["pair_rate"][i].max()), 4),
                  round(float(out["bound"][i].min()), 4), int((cells[i] == "fail").sum())]
                 for i, L in enumerate(L_values)]
        p = int(np.argmin(out["gap"]))
        ax.plot(L_values, worst_argmax, "o-", label="argmax ≠ pa (worst h)")
        ax.errorbar(L_values, out["pair_rate"][:, p], yerr=[out["pair_rate"][:, p] - out["pair_low"][:, p],
                                                         out["pair_high"][:, p] - out["pair_rate"][:, p]],
                    fmt="s", ms=3, label=f"pair {out['pairs'][p]} (smallest Δ), 95% interval")
        ax.plot(L_values, out["bound"][:, p], "k--", label="Hoeffding bound")
        ax.plot(L_values, planted[:, p], "k:", label="exponent ×4 (control)")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_ylim(1e-4, 1.5)
        ax.set_xlabel("L")
        ax.set_title(f"{name} (d={kernel.shape[0]}, H={parents.size})", fontsize=9)
        ax.legend(fontsize=6)
    fig.tight_layout()
    figure = _save(fig, ctx, "thm2_error_vs_L.png")
    verdict, control_verdict = _combine(verdicts), _combine(control_verdicts)
    control = Control("the Hoeffding bound with its exponent ×4, judged by the same interval rule",
                      control_cells, rejected=control_verdict != "pass")
    flip = measured["flip"]
    # no listed tolerances (bit-reproducible: a rerun moves the rates by 0, so the old abs 0.05 could not fail);
    # seeds 0 / 1 / 2 read the flip kernel's argmax error at L = 24 as 0.080 / 0.089 / 0.095 (the random kernel
    # changes with the seed)
    return CheckOutcome(
        verdict=verdict, measured=jsonable(measured),
        threshold="Wilson 95% interval of each pair's error rate below exp(−LΔ²/(2 log²(1/ε)))",
        summary=f"Random d=3 kernel (H=6) and flip kernel ε=0.1 (H=5), {blocks * 500} contexts per L: the worst argmax "
                f"error falls to {measured['random']['argmax_error'][-1]:.4f} (L=64) and "
                f"{flip['argmax_error'][-1]:.4f} (L=24); every pair's rate is below its Hoeffding bound ({verdict} on "
                f"{sum(measured[n]['cells_judged'] for n in instances)} (L, pair) cells; "
                f"{sum(measured[n]['cells_unresolved'] for n in instances)} cells whose bound is below what "
                f"{blocks * 500} contexts resolve are not judged; closest slack "
                f"{min(measured[n]['min_slack_in_half_widths'] for n in instances):.1f} interval half-widths); the "
                f"bound with exponent ×4 is violated in {sum(c['cells_violated'] for c in control_cells.values())} "
                f"(L, pair) cells (control, {control_verdict}).",
        figures=[figure], control=control,
        tables=[Table("error vs L", ["instance", "L", "argmax error", "max pair error", "min bound",
                                     "cells violating ×4"], rows)])


# ----------------------------------------------------------------------------------------------------------
# thm3-init-gradient


def _decide_argmax(violations: int, identity_errors) -> str:
    """Theorem 3's exact rule: the claimed parent is the strict argmax in every (non-tie) case, and the identities
    hold to IDENTITY_ATOL."""
    return "pass" if violations == 0 and max(identity_errors) <= IDENTITY_ATOL else "fail"


def _thm3_bars(ax, out: dict, forms: dict, title: str) -> None:
    positions = np.arange(out["exact"].size)
    width = 0.8 / len(forms)
    for k, (key, label) in enumerate(forms.items()):
        ax.bar(positions + (k - (len(forms) - 1) / 2) * width, out[key], width, label=label)
    ax.axvline(out["parent"], color="k", lw=0.8, ls="--")
    ax.axhline(0.0, color="k", lw=0.5)
    ax.set_xlabel("candidate h' (dashed: true parent)")
    ax.set_xticks(positions)  # candidates are integers
    ax.set_title(title, fontsize=9)


def thm3_init_gradient_exact(ctx: CheckContext) -> CheckOutcome:
    """Theorem 3 as the paper writes it ('≈'): with the marginal P(x_h) in place of π̄, E = (1/h) J(h') (enumeration
    over sequences against pairwise joints), J(pa) = I_χ² and J(pa) > J(h') for every other h', stationary and
    non-stationary μ₀, by exact enumeration on the sweep and on the stored instance.

    Control: a shuffled parent label (a uniformly drawn other candidate claimed to be the parent at every position),
    judged by the same argmax rule.
    """
    result = _thm3_sweep(ctx)
    counts = result.counts
    identities = {"chi2": result.worst["chi2_identity_error"].value, "j": result.worst["j_identity_error"].value}
    stored = [(i, check_instance(dict(i, form="approximate"))) for i in _stored("thm3")]
    violations = counts.get("violations/approximate", 0) + sum(not k["holds"] for _, k in stored)
    verdict = _decide_argmax(violations, identities.values())
    control_violations = counts.get("control/violations/approximate", 0)
    control_cases = counts.get("positions", 0) - counts.get("control/ties/approximate", 0)
    control = Control("a shuffled parent label: at every position a uniformly drawn other candidate is claimed to be "
                      "the parent, judged by the same argmax rule",
                      {"violations": control_violations, "cases": control_cases},
                      rejected=_decide_argmax(control_violations, identities.values()) != "pass")
    instance = None
    if verdict == "fail":
        failing = [i for i, k in stored if not k["holds"]]
        instance = (result.worst["negative_margin/approximate"].instance if counts.get("violations/approximate", 0)
                    else failing[0] if failing else result.worst["chi2_identity_error"].instance)
    # one example for the figure: the J form at h = 6 on a random kernel, both μ₀
    rng = ctx.rng("thm3-init-gradient/figure")
    kernel = random_kernel(3, eps=0.05, rng=rng)
    parents = np.array([-1, 0, 1, 1, 0, 2, 4])
    init = rng.dirichlet(np.ones(3))
    fig, axes = new_figure(1, 2, figsize=(8, 3.2), sharey=True)
    forms = {"approximate": "(1/h) J, pairwise joints", "enumerated_approximate": "enumerated with P(x_h)"}
    for ax, (name, mu0) in zip(axes, (("stationary μ₀", None), ("non-stationary μ₀", init))):
        _thm3_bars(ax, thm3_check_position(kernel, parents, 6, mu0), forms, name)
    axes[0].set_ylabel("E[−∂ℓ/∂p̂_h'] (approximate form)")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    figure = _save(fig, ctx, "thm3_init_gradient.png")
    per_kind = {kind: {"positions": counts.get(f"{kind}/positions", 0),
                       "violations": counts.get(f"{kind}/violations/approximate", 0),
                       "ties": counts.get(f"{kind}/ties/approximate", 0)} for kind in INIT_KINDS}
    smallest = -result.worst["negative_margin/approximate"].value
    measured = {"positions": counts.get("positions", 0), "violations": violations,
                "ties": counts.get("ties/approximate", 0), "by_init": per_kind, "smallest_margin": smallest,
                "smallest_margin_instance": result.worst["negative_margin/approximate"].instance,
                "max_chi2_identity_error": identities["chi2"], "max_j_identity_error": identities["j"],
                "stored_instance_margins": [k["margin_approximate"] for _, k in stored], "ranges": THM3_RANGES}
    return CheckOutcome(
        verdict=verdict, measured=jsonable(measured),
        threshold={"violations": 0, "|J(pa) − I_χ²|, |E − (1/h)J|": IDENTITY_ATOL},
        summary=f"J form ('≈', P(x_h) in place of π̄) on {counts.get('positions', 0)} (instance, μ₀, h) cases of the "
                f"sweep, stationary and non-stationary μ₀, enumerated exactly, and on the stored non-stationary "
                f"instance: J(pa) is the strict largest in every non-tie case ({violations} violations, "
                f"{counts.get('ties/approximate', 0)} ties from zero-information kernels; smallest margin "
                f"{smallest:.2e}); |J(pa) − I_χ²| ≤ {identities['chi2']:.1e}, |E − (1/h)J| ≤ {identities['j']:.1e}. "
                f"A shuffled parent label fails the same rule in {control_violations} of {control_cases} cases "
                "(control).",
        figures=[figure], instance=instance, control=control,
        # exact float64 values, spread 0 over threads/CPU capability (seed 0). smallest_margin (1.1e-4) is a
        # difference of exact sums: rel 1e-6. The identity errors are rounding (≤ 1e-15): 1e-13, far below 1e-10
        tolerances={"smallest_margin": {"rel": 1e-6}, "max_chi2_identity_error": {"abs": 1e-13},
                    "max_j_identity_error": {"abs": 1e-13}, "stored_instance_margins": {"abs": 1e-12}})


def thm3_init_gradient_exact_pibar(ctx: CheckContext) -> CheckOutcome:
    """Ours (stronger): the exact expectation with π̄ has its largest entry at pa(h), under a stationary and under a
    non-stationary μ₀ (two findings), on the shared sweep and the stored search instance.

    Verdict: fail when a finding is refuted, else pass. Control: the shuffled parent label of the sweep, judged by
    the same argmax rule in the π̄ form.
    """
    result = _thm3_sweep(ctx)
    counts = result.counts
    stored = [(i, check_instance(dict(i, form="exact"))) for i in _stored("thm3")]
    findings = []
    for kind in INIT_KINDS:
        swept = counts.get(f"{kind}/violations/exact", 0)
        cases = counts.get(f"{kind}/positions", 0) - counts.get(f"{kind}/ties/exact", 0)
        refuting = [i for i, k in stored if not k["holds"] and (i["init"] is None) == (kind == "stationary")]
        if swept and not refuting:
            refuting = [result.worst[f"{kind}/negative_margin/exact"].instance]
        statement = f"the exact π̄ form of the expected init gradient has its largest entry at pa(h) under a {kind} μ₀"
        stored_note = "; ".join(f"stored instance (chain, μ₀ = {i['init']}, h = {i['h']}): {k['summary']}"
                                for i, k in stored if (i["init"] is None) == (kind == "stationary"))
        evidence = f"{swept} violations in {cases} non-tie sweep cases" + (f"; {stored_note}" if stored_note else "")
        findings.append(Finding(statement, "refuted" if refuting else "holds",
                                _smallest(refuting) if refuting else None, evidence))
    control_violations = counts.get("control/violations/exact", 0)
    control = Control("a shuffled parent label (the sweep's uniformly drawn other candidate), same argmax rule in "
                      "the π̄ form", {"violations": control_violations,
                                      "cases": counts.get("positions", 0) - counts.get("control/ties/exact", 0)},
                      rejected=_decide_argmax(control_violations, [0.0]) != "pass")
    refuted = [f for f in findings if f.status == "refuted"]
    # the figure shows the instance the refuted finding is about: the stored counterexample, both μ₀
    shown, check = stored[0] if stored else (None, None)
    figures = []
    if shown is not None:
        kernel, parents = np.array(shown["kernel"]), np.array(shown["parents"])
        fig, axes = new_figure(1, 2, figsize=(8, 3.2), sharey=True)
        forms = {"exact": "exact (π̄)", "approximate": "(1/h) J"}
        for ax, (name, mu0) in zip(axes, ((f"μ₀ = {shown['init']}", np.array(shown["init"])),
                                          ("stationary μ₀", None))):
            _thm3_bars(ax, thm3_check_position(kernel, parents, shown["h"], mu0), forms, name)
        axes[0].set_ylabel("E[−∂ℓ/∂p̂_h']")
        axes[0].legend(fontsize=7)
        fig.tight_layout()
        figures.append(_save(fig, ctx, "thm3_init_gradient_pibar.png"))
    per_kind = {kind: {"positions": counts.get(f"{kind}/positions", 0),
                       "violations": counts.get(f"{kind}/violations/exact", 0),
                       "ties": counts.get(f"{kind}/ties/exact", 0),
                       "smallest_margin": -result.worst[f"{kind}/negative_margin/exact"].value
                       if f"{kind}/negative_margin/exact" in result.worst else None}
                for kind in INIT_KINDS}
    measured = {"by_init": per_kind,
                "stored": [{"init": i["init"], "h": i["h"], "margin_exact": k["margin_exact"],
                            "margin_approximate": k["margin_approximate"], "exact": k["exact"]} for i, k in stored]}
    summary = (f"Exact π̄ form on {counts.get('positions', 0)} sweep cases and the stored instance: "
               + "; ".join(f"{kind} μ₀: {f.status} ({f.evidence.split(';')[0]})"
                           for kind, f in zip(INIT_KINDS, findings)))
    if stored:
        summary += (f". Stored chain x_0 → x_1 → x_2 → x_3, μ₀ = {shown['init']}, h = {shown['h']}: exact gradients "
                    f"{np.round(check['exact'], 4).tolist()} with pa(h) = {check['parent']}, while the J form keeps "
                    f"the parent first (margin {check['margin_approximate']:.4f})")
    summary += f". A shuffled parent label fails the same rule in {control_violations} cases (control)."
    return CheckOutcome(
        verdict="fail" if refuted else "pass", measured=jsonable(measured),
        threshold={"violations": 0}, summary=summary, figures=figures, findings=findings, control=control,
        instance=refuted[0].instance if refuted else None,
        # exact float64 values, spread 0 over threads/CPU capability (seed 0); margins are differences of exact
        # sums: rel 1e-6; the stored instance's values: abs 1e-12
        tolerances={"by_init": {"rel": 1e-6}, "stored": {"abs": 1e-12}})


def _thm3_mc_case(label: str, kernel, parents, init, n: int, rng) -> dict:
    """The J form at h = H − 1 by Monte Carlo: z of every coordinate and margin against the exact (1/h) J, margins'
    intervals against 0; the same rule with the runner-up claimed to be the parent (the control)."""
    h = parents.size - 1
    out = thm3_monte_carlo(kernel, parents, h, n, rng=rng, init=init, form="approximate")
    exact = out["approximate"]
    parent = out["parent"]
    others = out["others"]
    z = np.concatenate([_z(out["gradient"], exact), _z(out["margins"], exact[parent] - exact[others])])
    margins = out["margins"]
    closest = int(np.argmin((exact[parent] - exact[others]) / margins.stderr))
    runner_up = int(others[np.argmax(exact[others])])
    shuffled = thm3_monte_carlo(kernel, parents, h, n, rng=rng, init=init, form="approximate", claimed=runner_up)
    z_shuffled = np.concatenate([_z(shuffled["gradient"], exact),
                                 _z(shuffled["margins"], exact[shuffled["claimed"]] - exact[shuffled["others"]])])
    return {"case": label, "h": h, "parent": parent, "closest": int(others[closest]),
            "margin": float(margins.value[closest]), "stderr": float(margins.stderr[closest]),
            "exact_margin": float(exact[parent] - exact[others][closest]),
            "margin_in_stderr": float((exact[parent] - exact[others][closest]) / margins.stderr[closest]),
            "max_abs_z": float(np.abs(z).max()),
            "verdict": _decide_interval(z, margins.low, margins.high, 0.0, below=False),
            "runner_up": runner_up,
            "control_verdict": _decide_interval(z_shuffled, shuffled["margins"].low, shuffled["margins"].high, 0.0,
                                                below=False)}


def thm3_init_gradient_monte_carlo(ctx: CheckContext) -> CheckOutcome:
    """Theorem 3's J form beyond enumeration (d = 5, h = 11: 5^12 configurations): Monte Carlo gradients with P(x_h)
    in place of π̄, each coordinate and paired margin judged against the exact (1/h) J from pairwise joints by z,
    and every margin's interval against 0; a random kernel under both μ₀ and a close call (margin ≈ 5 s.e.).

    Control: the runner-up candidate claimed to be the parent (a shuffled label), judged by the same rule.
    """
    rng = ctx.rng("thm3-init-gradient/monte-carlo")
    n = _size(ctx, "thm3_mc_samples")
    kernel = random_kernel(5, eps=0.02, rng=rng)
    parents = random_parents(12, rng=rng)
    cases = [_thm3_mc_case(kind, kernel, parents, None if kind == "stationary" else rng.dirichlet(np.ones(5)), n, rng)
             for kind in INIT_KINDS]
    cc = THM3_CLOSE_CALL
    fixed = np.random.default_rng(cc["seed"])  # a fixed instance: its closeness does not depend on the report seed
    t = cc["t_at_100000"] * np.sqrt(100_000 / n)
    weak = (1.0 - t) / cc["d"] + t * random_kernel(cc["d"], eps=0.02, rng=fixed)
    cases.append(_thm3_mc_case("close call", weak, random_parents(cc["H"], rng=fixed), None, n, rng))
    verdict = _combine(c["verdict"] for c in cases)
    control_verdict = _combine(c["control_verdict"] for c in cases)
    control = Control("the runner-up candidate (largest exact J among the others) claimed to be the parent, judged by "
                      "the same rule", {"verdicts": [c["control_verdict"] for c in cases]},
                      rejected=control_verdict != "pass")
    close = cases[-1]
    rows = [[c["case"], c["parent"], c["closest"], round(c["exact_margin"], 5), round(c["margin"], 5),
             round(c["stderr"], 5), round(c["max_abs_z"], 2), c["verdict"], c["control_verdict"]] for c in cases]
    max_z = max(c["max_abs_z"] for c in cases)
    # no listed tolerances (bit-reproducible); seeds 0 / 1 / 2 read max_abs_z 2.44 / 2.48 / 3.11 and the close
    # call's margin 4.86 / 4.87 / 4.88 standard errors
    return CheckOutcome(
        verdict=verdict,
        measured={"samples": n, "kernel": kernel.tolist(), "parents": parents.tolist(), "max_abs_z": max_z,
                  "instance_verdicts": [c["verdict"] for c in cases],
                  "close_call": {"t": t, "exact_margin": close["exact_margin"],
                                 "margin_in_stderr": close["margin_in_stderr"]},
                  "smallest_margin": {c["case"]: c["margin"] for c in cases}},
        threshold=f"every estimate within {Z_AGREE:g} standard errors of the exact (1/h) J; 95% interval of every "
                  "margin J(pa) − J(h') above 0",
        summary=f"J form at d=5, h=11 (beyond enumeration), {n} samples per case (random kernel, both μ₀, and a close "
                f"call whose smallest margin is {close['margin_in_stderr']:.1f} standard errors): every estimate "
                f"within {max_z:.1f} standard errors of the exact (1/h) J; margins above 0: "
                f"{', '.join(c['verdict'] for c in cases)}; the runner-up claimed as parent: "
                f"{', '.join(c['control_verdict'] for c in cases)} (control).",
        tables=[Table("smallest margin", ["case", "pa(h)", "closest h'", "exact", "estimate", "stderr", "max |z|",
                                          "verdict", "runner-up as parent"], rows)],
        control=control, reason="a margin interval straddles 0 or an estimate disagrees" if verdict == "inconclusive"
        else "")
