"""The render step of ``prop2-ds-quadratic``'s checks (:mod:`reports.claims.prop2_ds_quadratic.claim`): measured values,
tables, figures and prose, made from what the claim module computed and decided; nothing here decides.

Every function takes the claim's :class:`Readings` (its instance and thresholds) so the numbers it prints are the
ones the rules used.
"""
from __future__ import annotations

from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np

from bma_verify.model.ds_runs import final_train_loss
from bma_verify.reports.checks.trained import seeds_text
from bma_verify.reports.core import CheckContext, Control, Table, new_figure


@dataclass(frozen=True)
class Readings:
    """The DS instance and the thresholds of the claim's rules (values: the claim module's constants)."""

    d: int
    H: int
    rho: float
    small_L: int
    closed_by_L: int
    train_L: int
    gap_tol: float
    closes_tol: float
    below_bilinear_L: int


#: The derivation of Proposition 2 the report shows (the trained check shows its last step).
DERIVATION = [
    ("Gaussian conditional likelihood of candidate h' (uniform prior over h' < h)",
     r"\log P(\mathrm{pa}(h)=h' \mid \mathcal D) = \sum_{l=1}^{L} \log \mathcal N\big(x^l_h;\ \rho A^\top "
     r"x^l_{h'},\ (1-\rho^2) I\big) + \mathrm{const}(h)"),
    ("expand the square", r"= -\frac{1}{2(1-\rho^2)} \sum_l \big(\|x^l_h\|^2 - 2\rho\, x^{l\top}_{h'} A x^l_h "
                          r"+ \rho^2 \|A^\top x^l_{h'}\|^2\big) + \mathrm{const}(h)"),
    ("Proposition 2: a bilinear term and a key-only quadratic term",
     r"= \frac{\rho}{1-\rho^2} \sum_l x^{l\top}_{h'} A x^l_h \;-\; \frac{\rho^2}{2(1-\rho^2)} \sum_l "
     r"\|x^l_{h'}\|^2 + \mathrm{const}(h)"),
    ("the key-norm family contains it; the bilinear family does not (the second term varies with h')",
     r"W^\star = \tfrac{\rho}{1-\rho^2} A,\quad c^\star = -\tfrac{\rho^2}{2(1-\rho^2)}"),
    ("gap of a selector A to BMA, measured exactly given each context",
     r"L_{pa}(A) - L_{pa}(\mathrm{BMA}) = \mathbb E_{\mathcal D} \tfrac{1}{H-1}\sum_{h\ge1} "
     r"\mathrm{KL}\big(P(\mathrm{pa}(h)=\cdot \mid \mathcal D)\,\|\,A_{h\to\cdot}\big)"),
]


def _save(fig, ctx: CheckContext, filename: str) -> str:
    fig.savefig(ctx.figure_path(filename), dpi=80, metadata={"Software": None})
    plt.close(fig)
    return filename


def _gap_axes(ax, r: Readings) -> None:
    """The L_pa-gap axes of the trained and FFN figures: the tolerance line, symlog scale, labels."""
    ax.axhline(r.gap_tol, color="grey", lw=0.8, ls=":", label=f"{r.gap_tol} nats (the bilinear gap's reading)")
    ax.axhline(r.closes_tol, color="grey", lw=0.8, ls="--", label=f"{r.closes_tol} nats ('closes')")
    ax.set_yscale("symlog", linthresh=1e-3)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("L' (in-context examples at test)")
    ax.set_ylabel("L_pa gap to BMA (nats)")


# ------------------------------------------------------------------------------------------ the exact check

def fit_measured(r: Readings, s: dict, bil: dict, kn: dict, rule: dict, small: list, c_star: float,
                 closing) -> dict:
    L_values, i_peak = bil["L"], rule["i_peak"]
    return {
        "L": L_values, "bilinear_gap_fit": bil["gap_fit"], "bilinear_gap_fit_se": bil["gap_fit_se"],
        "bilinear_gap_fit_z_small_L": [rule["z"][i] for i in small],
        "bilinear_gap_eval": bil["gap_eval"], "bilinear_gap_eval_se": bil["gap_eval_se"],
        "bma_parent_loss": bil["bma_parent_loss"], "bilinear_parent_loss": bil["fit_parent_loss"],
        "bilinear_converged": bil["converged"], "gap_found": rule["gap_found"], "shrinks": rule["shrinks"],
        "key_norm_L": kn["L"], "key_norm_gap_eval": kn["gap_eval"],
        "key_norm_coef": kn["key_norm_coef"], "exact_key_norm_coef": c_star,
        "peak_L": L_values[i_peak], "peak_gap": bil["gap_eval"][i_peak],
        "closing_L_below_0.01": closing, "d": r.d, "H": r.H, "rho": r.rho, "n_fit": s["n_fit"],
        "n_eval": s["n_eval"],
    }


def fit_summary(r: Readings, bil: dict, kn: dict, ctl: dict, rule: dict, small: list, c_star: float, closing,
                control: Control) -> str:
    L_values, i_peak = bil["L"], rule["i_peak"]
    z_min = min(rule["z"][i] for i in small)
    return (f"best bilinear W: gap {bil['gap_fit'][small[0]]:.4f} nats at L'={L_values[small[0]]} (z >= "
            f"{z_min:.0f} over L' <= {r.small_L}), peak {bil['gap_eval'][i_peak]:.4f} at L'={L_values[i_peak]}, "
            f"{bil['gap_eval'][-1]:.4f} at L'={L_values[-1]}"
            f"{'' if closing is None else f', below 0.01 from L={closing} on'}; fitted to a bilinear "
            f"posterior (control) it reaches {max(ctl['gap_fit'][i] for i in small):.0e}, "
            f"{'no gap' if control.rejected else 'a GAP'} by the same rule; the key-norm score, whose family "
            f"contains the posterior, reaches {max(kn['gap_eval']):.1e} (fitted c = "
            f"{kn['key_norm_coef'][0]:.4f}, exact {c_star:.4f}).")


def fit_tables(bil: dict, kn: dict, ctl: dict, c_star: float) -> list[Table]:
    rows = [[L, f"{bil['gap_fit'][i]:.4f} ± {bil['gap_fit_se'][i]:.4f}",
             f"{bil['gap_eval'][i]:.4f} ± {bil['gap_eval_se'][i]:.4f}", f"{bil['bma_parent_loss'][i]:.4f}",
             f"{bil['fit_parent_loss'][i]:.4f}", f"{ctl['gap_fit'][i]:.1e}"] for i, L in enumerate(bil["L"])]
    table = Table("best bilinear W per L' (convex fit): L_pa gap to the exact posterior, nats",
                  ["L'", "gap, fit contexts (lower est.)", "gap, fresh contexts (upper est.)", "L_pa BMA",
                   "L_pa bilinear", "control: gap to a bilinear posterior"], rows)
    kn_table = Table("best key-norm score (W, c) per L' (its family contains the posterior: a check of the fitter)",
                     ["L'", "gap, fresh contexts", "fitted c", "exact c"],
                     [[L, f"{g:.2e}", f"{c:.5f}", f"{c_star:.5f}"]
                      for L, g, c in zip(kn["L"], kn["gap_eval"], kn["key_norm_coef"])])
    return [table, kn_table]


def fit_figure(ctx: CheckContext, r: Readings, bil: dict, kn: dict, ctl: dict) -> str:
    fig, ax = new_figure(figsize=(6, 3.6))
    ax.errorbar(bil["L"], bil["gap_eval"], yerr=2 * np.asarray(bil["gap_eval_se"]), marker="o", ms=3,
                label="best bilinear W (fresh contexts, ±2 SE)")
    ax.plot(bil["L"], bil["gap_fit"], ls="--", lw=1, label="best bilinear W (fit contexts)")
    ax.plot(kn["L"], kn["gap_eval"], marker="s", ms=3, ls=":", label="best key-norm score")
    ax.plot(bil["L"], ctl["gap_fit"], marker="x", ms=4, ls="-.", lw=1,
            label="control: best bilinear W, bilinear posterior")
    ax.set_xlabel("L' (in-context examples)")
    ax.set_ylabel("L_pa gap to BMA (nats)")
    ax.set_title(f"DS, d={r.d}, H={r.H}, ρ={r.rho}: Proposition 2 gap")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return _save(fig, ctx, "prop2_bilinear_fit_gap.png")


# --------------------------------------------------------------------------------------- the trained check

def trained_measured(r: Readings, s: dict, ev: dict, histories: dict, rule: dict, conv: dict) -> dict:
    """The first training seed's values; ``ev``, ``histories``: per model (bilinear, key-norm)."""
    measured = {"L": ev["bilinear"]["L"], "steps": s["steps"], "copier": s["copier"], "d": r.d, "H": r.H,
                "rho": r.rho, "train_L_max": r.train_L, "bilinear_minus_best_bilinear_gap": conv["distance"],
                "training_converged": bool(conv["converged"]), "bilinear_at_family_optimum": bool(conv["at_optimum"]),
                "key_norm_loss_flat": conv["key_norm_flat"], "bilinear_shows_gap": rule["shows_gap"],
                "key_norm_closes_gap": rule["closes"], "bilinear_small_L_gap_lower": rule["small_L_gap_lower"],
                "bilinear_late_L_gap_upper": rule["late_L_gap_upper"], "key_norm_gap_upper": rule["closing_gap_upper"]}
    for name, e in ev.items():
        tag = name.replace("-", "_")
        for key in ("gap", "gap_se"):
            measured[f"{tag}_{key}"] = e[key]
        measured[f"{tag}_max_gap"] = float(max(e["gap"]))
        for key in ("parent_loss", "mse", "mse_excess", "parent_accuracy"):
            measured[f"{tag}_{key}"] = e[key]
        measured[f"{tag}_final_train_loss"] = final_train_loss(histories[name])
    measured["bma_parent_loss"] = ev["bilinear"]["bma_parent_loss"]
    measured["bma_mse"] = ev["bilinear"]["bma_mse"]
    return measured


def trained_summary(r: Readings, s: dict, rule: dict, control: Control, conv: dict, record: dict) -> str:
    m = record["metrics"]
    return (f"first training seed: bilinear model gap >= {rule['small_L_gap_lower']:.4f} nats (3-SE lower bound) at "
            f"L' <= {r.small_L}, <= {rule['late_L_gap_upper']:.4f} at L' >= {r.closed_by_L}; key-norm model (its "
            f"family contains BMA by construction) within {rule['closing_gap_upper']:.4f} of BMA at every L' "
            f"(tolerance {r.closes_tol}; over seeds median {m['closing_gap_upper']['median']:.4f}, "
            f"{m['closing_gap_upper']['min']:.4f} to {m['closing_gap_upper']['max']:.4f}); {seeds_text(record)}; "
            f"control (BMA in the gap slot, the bilinear model in the closing slot) "
            f"{'rejected' if control.rejected else 'NOT rejected'}; power: {power_scale_text(control.power)}; "
            f"bilinear model within {max(np.abs(conv['distance'])):.4f} of its family's optimum.")


def power_scale_text(power: list[dict]) -> str:
    """'the rule rejects λ = 0, 0.5 and accepts λ = 0.9, 1' over the key-norm selector at λ × (W*, c*)."""
    rejected = [f"{p['x']:g}" for p in power if p["rejected"]]
    accepted = [f"{p['x']:g}" for p in power if not p["rejected"]]
    return (f"with the key-norm selector at λ × its exact weights, the rule rejects λ = "
            f"{', '.join(rejected) or 'none'} "
            f"and accepts λ = {', '.join(accepted) or 'none'}")


def trained_assumptions(r: Readings, s: dict) -> list[str]:
    return [
        "the key-norm model's family contains BMA by construction (W = ρ/(1−ρ²)A, c = −ρ²/(2(1−ρ²))): its "
        "closing the gap shows that training reaches that member, not that a quadratic key feature is learned",
        "'a variant with a quadratic key feature or an FFN closes it' is met by either variant; the FFN model "
        f"({ffn_description(r, s)}) is judged apart (open question 3) and does not decide this verdict",
        f"'closes' = within {r.closes_tol} nats of BMA (+3 SE) at every L' tested (set on development seeds); "
        f"'gap at small L'' = above "
        f"{r.gap_tol} nats by 3 SE at some L' <= {r.small_L}; 'closing near L' ≈ 20' = within {r.gap_tol} (+3 SE) "
        f"at every L' >= {r.closed_by_L} tested",
        f"layer 1 is the exact (β → ∞) copier, not trained; training L' ~ U{{1..{r.train_L}}} zero-padded, "
        f"squared error on the query, Adam (lr 0.02) with cosine decay, {s['steps']} steps of batch {s['batch']} "
        f"(the FFN: its own run, above)",
    ]


def trained_table(ev: dict) -> Table:
    names = ("bilinear", "key-norm")
    rows = [[L] + [f"{ev[n]['gap'][i]:.4f} ± {ev[n]['gap_se'][i]:.4f}" for n in names]
            + [f"{ev['bilinear']['bma_parent_loss'][i]:.4f}"] + [f"{ev[n]['mse_excess'][i]:+.4f}" for n in names]
            for i, L in enumerate(ev["bilinear"]["L"])]
    return Table("trained models: L_pa gap to BMA (nats, ± SE) and excess squared error over BMA, per L'",
                 ["L'", "gap bilinear", "gap key-norm", "L_pa BMA", "ΔMSE bilinear", "ΔMSE key-norm"], rows)


def trained_figure(ctx: CheckContext, r: Readings, s: dict, fit: dict, ev: dict) -> str:
    fig, ax = new_figure(figsize=(6.4, 3.8))
    ax.plot(fit["L"], fit["gap_eval"], color="k", ls="--", lw=1, label="best bilinear W (exact fit)")
    L_values = ev["bilinear"]["L"]
    for name in ("bilinear", "key-norm"):
        ax.errorbar(L_values, ev[name]["gap"], yerr=2 * np.asarray(ev[name]["gap_se"]), marker="o", ms=3,
                    label=f"trained {name} model")
    _gap_axes(ax, r)
    ax.set_title(f"DS (d={r.d}, H={r.H}, ρ={r.rho}), {s['steps']} steps, {s['copier']} copier, first training "
                 "seed", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return _save(fig, ctx, "prop2_trained_gap.png")


def attention_figure(ctx: CheckContext, panels: list, parents: np.ndarray, L: int) -> str:
    """``panels``: (title, (H, H) attention) of :func:`model.ds_runs.attention_maps`; ``parents`` (H,) true tree."""
    H = len(parents)
    fig, axes = new_figure(1, len(panels), figsize=(3.0 * len(panels), 3.0))
    for ax, (title, att) in zip(axes, panels):
        ax.imshow(att, vmin=0, vmax=1, cmap="viridis")
        ax.scatter(parents[1:], np.arange(1, H), marker="x", c="red", s=18, label="true parent")
        ax.set_title(title, fontsize=8)
        ax.set_xlabel("h' (key)", fontsize=7)
        ax.set_ylabel("h (query)", fontsize=7)
    axes[-1].legend(fontsize=6, loc="upper right", framealpha=0.5)
    fig.suptitle(f"second-layer attention, one context with L'={L} (red x: true parent)", fontsize=9)
    fig.tight_layout()
    return _save(fig, ctx, "prop2_attention_maps.png")


# ------------------------------------------------------------------------ the FFN check (open question 3)

def ffn_description(r: Readings, s: dict) -> str:
    f = s["ffn"]
    return (f"SwiGLU FFN (LLaMA's gated FFN, no biases; hidden {f['ffn_hidden']}, {f['ffn_spare']} spare residual "
            f"dimension{'s' if f['ffn_spare'] != 1 else ''}) on each copied example, then query-key attention "
            f"full rank over the residual width, weights shared by the {r.train_L} slots; {s['ffn_steps']} steps of "
            f"batch {s['ffn_batch']}, Adam lr {s['ffn_lr']} with cosine decay")


def ffn_measured(r: Readings, s: dict, run: dict, fit: dict, rule: dict, converged: bool) -> dict:
    ev = run["eval"]
    fit_gap = dict(zip(fit["L"], fit["gap_fit"]))
    return {"L": ev["L"], "ffn_gap": ev["gap"], "ffn_gap_se": ev["gap_se"], "ffn_max_gap": rule["max_gap"],
            "ffn_gap_upper": rule["gap_upper"], "ffn_closes_gap": rule["closes"],
            "ffn_below_best_bilinear": rule["below_best_bilinear"],
            "ffn_below_best_bilinear_at_L": rule["below_at_L"],
            "ffn_not_below_best_bilinear_at_L": rule["not_below_at_L"],
            "best_bilinear_gap_fit": [fit_gap[L] if L in fit_gap else None for L in ev["L"]],
            "ffn_parent_loss": ev["parent_loss"], "bma_parent_loss": ev["bma_parent_loss"],
            "ffn_mse_excess": ev["mse_excess"], "ffn_final_train_loss": final_train_loss(run["history"]),
            "ffn_loss_flat": converged, "steps": s["ffn_steps"], "batch": s["ffn_batch"], "lr": s["ffn_lr"],
            "ffn_hidden": s["ffn"]["ffn_hidden"], "ffn_spare": s["ffn"]["ffn_spare"],
            "d": r.d, "H": r.H, "rho": r.rho, "train_L_max": r.train_L}


def ffn_summary(r: Readings, s: dict, scale: str, rule: dict, control: Control, record: dict) -> str:
    m = record["metrics"]["max_gap"]
    return (f"first training seed ({scale}): max gap {rule['max_gap']:.4f} nats (upper 3-SE bound "
            f"{rule['gap_upper']:.4f}, tolerance {r.closes_tol}), below the best bilinear W at L' in "
            f"{rule['below_at_L'] or 'none'}"
            f"{'' if not rule['not_below_at_L'] else ', not at ' + str(rule['not_below_at_L'])}"
            f"; over seeds max gap median {m['median']:.4f} ({m['min']:.4f} to {m['max']:.4f}); {seeds_text(record)}; "
            f"control ({control.description}: max gap {control.measured['max_gap']:.3f}) "
            f"{'rejected' if control.rejected else 'NOT rejected'}; power: {power_scale_text(control.power)}.")


def ffn_untrained_summary(control: Control, reason: str) -> str:
    return (f"{reason}. Control ({control.description}: max gap {control.measured['max_gap']:.3f}) "
            f"{'rejected' if control.rejected else 'NOT rejected'}; power: {power_scale_text(control.power)}.")


def ffn_table(run: dict, fit: dict) -> Table:
    ev = run["eval"]
    fit_gap = dict(zip(fit["L"], zip(fit["gap_fit"], fit["gap_fit_se"])))
    rows = [[L, f"{ev['gap'][i]:.4f} ± {ev['gap_se'][i]:.4f}",
             f"{fit_gap[L][0]:.4f} ± {fit_gap[L][1]:.4f}" if L in fit_gap else "—", f"{ev['mse_excess'][i]:+.4f}"]
            for i, L in enumerate(ev["L"])]
    return Table("FFN model (open question 3), first training seed: L_pa gap to BMA per L' (nats, ± SE)",
                 ["L'", "gap FFN (trained)", "best bilinear W (fit contexts)", "ΔMSE FFN"], rows)


def ffn_figure(ctx: CheckContext, r: Readings, s: dict, fit: dict, run: dict) -> str:
    ev = run["eval"]
    fig, ax = new_figure(figsize=(6, 3.6))
    ax.plot(fit["L"], fit["gap_fit"], color="k", ls="--", lw=1, label="best bilinear W (exact fit)")
    ax.errorbar(ev["L"], ev["gap"], yerr=2 * np.asarray(ev["gap_se"]), marker="o", ms=3,
                label=f"SwiGLU FFN + query-key, {s['ffn_steps']} steps")
    _gap_axes(ax, r)
    ax.set_title(f"DS (d={r.d}, H={r.H}, ρ={r.rho}): does an FFN close the gap?", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return _save(fig, ctx, "prop2_ffn_gap.png")
