"""Claim ext-selective-fig3: their construction's predictor against the BMA at finite T, in the manner of their
Fig. 3 (D'Angelo, Croce and Flammarion, ICLR 2025), with our tree construction on the same axes.

Predictors of x_T from x_{<T} on their task (numerics.selective_induction), each a lag mixture
Σ_κ w_κ P*(· | x_{T−κ}): the BMA (w = their lag posterior), the maximum-likelihood lag (one-hot), their
construction (their Prop. 1, Eq. 3: w_κ ∝ exp(β / (T − k̂) Σ_i p̃_{i,κ}), p̃ the transition probabilities normalised
over the lags) for β ∈ {1, 10, 100}, and our tree construction mapped onto their task (footnote 1's mapping). Each
is scored by the KL from the true next-token law P*(· | x_{T−κ*}) (their Eq. 1) and by the KL from the Bayes
predictive, against T. Their own Sec. 5.3 says their construction "does not rely on likelihood nor computes the
BMA"; the check states which of the two is Bayes-optimal at finite T.
"""
from __future__ import annotations

import numpy as np
from scipy.special import rel_entr

from bma_verify.numerics.selective_induction import (bayes_at_last, construction_at_last, max_likelihood_weights,
                                                     sample_selective_induction, selective_head_weights)
from bma_verify.numerics.task import random_kernel
from bma_verify.reports.claim import Check, Claim
from bma_verify.reports.core import (CheckContext, CheckOutcome, Control, ControlMargin, PositiveControl, Table,
                                     new_figure, save_figure)

LAGS = [1, 2, 3]  # their Fig. 3
D = 5  # |S| of their Fig. 3
BETAS = (1.0, 10.0, 100.0)
SIZES = {"quick": {"T": (8, 16, 32, 64, 128, 256), "kernels": 4, "per_kernel": 50},
         "full": {"T": (8, 16, 32, 64, 128, 256, 512, 1024), "kernels": 10, "per_kernel": 100}}
#: Two float64 computations of one predictive agree far below this; a predictor further from the Bayes predictive
#: on some sampled (positive-probability) history is not the Bayes predictive.
EXACT_ATOL = 1e-10
#: The control: the tree construction fed every window of the sequence (our per-lag mapping, pad row μ).
EVERY_WINDOW = "tree construction, every window (control)"


def _kl(p, q) -> np.ndarray:
    return rel_entr(p, q).sum(-1)


def predictors(kernel, prefixes) -> dict:
    """Every predictor's law of x_T for each prefix (n, T), (n, d) each, and the Bayes predictive."""
    bayes = bayes_at_last(kernel, LAGS, prefixes)
    mix = lambda w: np.einsum("nj,njd->nd", w, bayes["lag_rows"])  # noqa: E731
    out = {"BMA": bayes["predictive"], "ML lag": mix(max_likelihood_weights(bayes["loglik"])),
           "tree construction (ours)": mix(construction_at_last(kernel, LAGS, prefixes)),
           EVERY_WINDOW: mix(construction_at_last(kernel, LAGS, prefixes, task="per_lag"))}
    out.update({f"theirs β = {beta:g}": mix(selective_head_weights(kernel, LAGS, prefixes, beta)) for beta in BETAS})
    return out


def kl_curves(ctx: CheckContext) -> dict:
    """Per predictor and T: per-sequence KL from the true law and from the Bayes predictive, and the largest
    deviation from the Bayes predictive (all sequences of every kernel pooled)."""
    rng = ctx.rng("ext-selective-fig3")
    sizes = SIZES[ctx.tier]
    draws = []
    for _ in range(sizes["kernels"]):
        kernel = random_kernel(D, alpha=1.0, rng=rng)
        x, kappa = sample_selective_induction(kernel, LAGS, sizes["per_kernel"], max(sizes["T"]), rng=rng)
        draws.append((kernel, x, kappa))
    curves = {}
    for T in sizes["T"]:
        for kernel, x, kappa in draws:
            true = kernel[x[np.arange(len(x)), T - kappa]]  # P*(· | x_{T−κ*}), their Eq. 1
            laws = predictors(kernel, x[:, :T])
            for name, q in laws.items():
                c = curves.setdefault(name, {}).setdefault(T, {"true": [], "bayes": [], "max_dev": 0.0})
                c["true"].extend(_kl(true, q))
                c["bayes"].extend(_kl(laws["BMA"], q))
                c["max_dev"] = max(c["max_dev"], float(np.abs(q - laws["BMA"]).max()))
    return curves


def _mean_se(values) -> tuple[float, float]:
    v = np.asarray(values)
    return float(v.mean()), float(v.std(ddof=1) / np.sqrt(v.size))


def equals_bayes(curve: dict) -> bool:
    """The rule 'computes the Bayes predictive': the largest deviation over every T and sequence ≤ EXACT_ATOL
    (the Bayes predictive is unique on histories of positive probability, so one deviation above it refutes it)."""
    return max(c["max_dev"] for c in curve.values()) <= EXACT_ATOL


def decide(curves: dict) -> dict:
    """pass iff our construction equals the BMA at every T and their predictor does not at any β."""
    ours = equals_bayes(curves["tree construction (ours)"])
    theirs = {name: equals_bayes(c) for name, c in curves.items() if name.startswith("theirs")}
    return {"verdict": "pass" if ours and not any(theirs.values()) else "fail", "ours_equals_bayes": ours,
            "theirs_equals_bayes": theirs}


def _figure(ctx: CheckContext, curves: dict) -> str:
    fig, axes = new_figure(1, 2, figsize=(10, 4.2))
    for ax, key, label in zip(axes, ("true", "bayes"), ("KL(P*(·|x_{T−κ*}) ‖ predictor)", "KL(BMA ‖ predictor)")):
        for name, curve in curves.items():
            if name == EVERY_WINDOW:
                continue
            Ts = sorted(curve)
            style = {"ls": "--", "marker": "x"} if name.startswith("tree") else {"marker": "o", "ms": 3}
            ax.plot(Ts, [_mean_se(curve[T][key])[0] for T in Ts], label=name, **style)
        ax.set_xscale("log", base=2)
        ax.set_yscale("symlog", linthresh=1e-6)
        ax.set_ylim(bottom=0.0)
        ax.set_xlabel("T (context length)")
        ax.set_ylabel(label)
    axes[0].legend(fontsize=7)
    fig.suptitle(f"their task, |S| = {D}, K = {LAGS}: predictors of x_T (mean over sequences)", fontsize=9)
    fig.tight_layout()
    filename = "ext_selective_fig3.png"
    save_figure(fig, ctx.figure_path(filename))
    return filename


def _table(curves: dict) -> Table:
    Ts = sorted(next(iter(curves.values())))
    rows = [[name] + [f"{_mean_se(c[T]['true'])[0]:.4f} / {_mean_se(c[T]['bayes'])[0]:.2e}" for T in Ts]
            for name, c in curves.items()]
    return Table("mean KL from the true next-token law / from the Bayes predictive (nats)", ["predictor"]
                 + [f"T = {T}" for T in Ts], rows)


def fig3_comparison(ctx: CheckContext) -> CheckOutcome:
    """Their construction's predictor, the ML lag and our tree construction against the BMA, against T.
    Control: the tree construction fed every window (our per-lag mapping), judged by the 'equals Bayes' rule."""
    curves = kl_curves(ctx)
    decided = decide(curves)
    planted = max(c["max_dev"] for c in curves[EVERY_WINDOW].values())
    control = Control("the tree construction fed every window of the sequence (pad row μ: our per-lag mapping)",
                      {"max_deviation": planted}, rejected=not equals_bayes(curves[EVERY_WINDOW]),
                      margin=ControlMargin("max_deviation", planted, EXACT_ATOL))
    # the ideal: the Bayes predictive itself in place of our construction, through the whole rule
    ideal = decide({**curves, "tree construction (ours)": curves["BMA"]})
    positive = PositiveControl("the Bayes predictive (BMA) itself in our construction's place, judged by the same rule "
                               "(it equals itself: the check of the rule, not of a second computation)",
                               ideal, ideal["verdict"] == "pass")
    Tmax = max(SIZES[ctx.tier]["T"])
    last = {name: {"kl_true": _mean_se(c[Tmax]["true"])[0], "kl_bayes": _mean_se(c[Tmax]["bayes"])[0]}
            for name, c in curves.items()}
    ours_dev = max(c["max_dev"] for c in curves["tree construction (ours)"].values())
    theirs_dev = {n: max(c["max_dev"] for c in curves[n].values()) for n in curves if n.startswith("theirs")}
    best = min((n for n in last if n.startswith("theirs")), key=lambda n: last[n]["kl_bayes"])
    summary = (f"Their task (|S| = {D}, K = {LAGS}, T = {', '.join(map(str, SIZES[ctx.tier]['T']))}): our tree "
               f"construction equals the BMA to {ours_dev:.1e} at every T (Bayes-optimal at finite T); their "
               f"construction's predictor is not (at T = {Tmax}, KL to the BMA "
               + ", ".join(f"{n.split(' ', 1)[1]}: {last[n]['kl_bayes']:.1e}" for n in last if n.startswith("theirs"))
               + f"; closest {best}); the ML lag {last['ML lag']['kl_bayes']:.1e}. KL from the "
               f"true next-token law at T = {Tmax}: BMA {last['BMA']['kl_true']:.4f}, {best} "
               f"{last[best]['kl_true']:.4f}, ML lag {last['ML lag']['kl_true']:.4f}; their predictor's largest "
               f"deviation from the BMA: " + ", ".join(f"{v:.3f}" for v in theirs_dev.values()) + ". Control "
               f"(every window fed, off by {planted:.3f}: {'rejected' if control.rejected else 'NOT rejected'}).")
    return CheckOutcome(
        verdict=decided["verdict"],
        measured={"at_T_max": last, "ours_max_deviation": ours_dev, "theirs_max_deviation": theirs_dev, **decided},
        threshold={"max_deviation": EXACT_ATOL}, summary=summary, tables=[_table(curves)],
        figures=[_figure(ctx, curves)] if ctx.figures_dir is not None else [], control=control,
        positive_control=positive,
        assumptions=[f"P*: rows Dirichlet(1) on |S| = {D} states, {SIZES[ctx.tier]['kernels']} kernels × "
                     f"{SIZES[ctx.tier]['per_kernel']} sequences; each T reads the first T tokens of one sequence",
                     "their Eq. 3 read as w_κ ∝ exp(β / (T − k̂) Σ_{k̂ ≤ i < T} p̃_{i,κ}) with p̃_{i,κ} = "
                     "P*(x_i | x_{i−κ}) / Σ_{κ'} P*(x_i | x_{i−κ'})"],
        # NumPy generator and float64 only (bit-identical for one seed): abs 1e-12 guards rounding
        tolerances={"ours_max_deviation": {"abs": 1e-12}})


CLAIM = Claim(
    "ext-selective-fig3",
    "Ours, beside D'Angelo et al.'s Fig. 3 (ICLR 2025): their three-layer construction (their Prop. 1) approaches the "
    "BMA as T grows; footnote 1's tree construction computes the BMA itself.",
    "On their task (|S| = 5, K = {1, 2, 3}), at every finite T tried, the tree construction mapped onto the task "
    "equals the Bayes predictive of x_T to float64 rounding, and their construction's predictor (their Eq. 3, "
    "β ∈ {1, 10, 100}) differs from it on sampled histories: the tree construction is the Bayes-optimal one.",
    (Check("monte-carlo", fig3_comparison,
           "KL from the true next-token law and from the Bayes predictive against T (log axis) for the BMA, the ML "
           "lag, their predictor at β = 1, 10, 100 and the tree construction; control: the tree construction fed "
           "every window (our per-lag mapping)"),),
    section="beyond")
