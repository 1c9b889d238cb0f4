"""The paper's figures from trained runs (matplotlib, Agg backend, deterministic bytes).

Each function saves one PNG at ``DPI`` and a vector (SVG) copy beside it, and returns the PNG's path. Every axis is
labelled (losses in nats), every heat map has a colour bar. Claim ids served: ``exp-fig2-attention``,
``exp-fig3-parameters``, ``exp-fig5-generalization``, ``exp-fig6-column-alignment``, ``exp-robustness``.
"""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FormatStrFormatter, LogLocator, MaxNLocator, NullFormatter  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

from bma_verify import numerics  # noqa: E402
from bma_verify.model.analysis import softmax, copier_summary, effective_selector_matrices  # noqa: E402
from bma_verify.model.training import model_outputs  # noqa: E402

DPI = 150


def _save(fig, path) -> str:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with plt.rc_context({"svg.hashsalt": "bma-verify"}):  # fixed ids: the same figure gives the same SVG bytes
        fig.savefig(path, dpi=DPI, metadata={"Software": None})
        fig.savefig(path.with_suffix(".svg"), metadata={"Date": None, "Creator": None})
    plt.close(fig)
    return str(path)


def _integer_ticks(ax) -> None:
    ax.xaxis.set_major_locator(MaxNLocator(nbins=7, integer=True))
    ax.yaxis.set_major_locator(MaxNLocator(nbins=7, integer=True))


def _labelled_log_ticks(axis) -> None:
    """Plain-number labels (0.2, 0.5, 1, 2) on a log axis at 1, 2 and 5 per decade, or evenly spaced ones when fewer
    than two of those fall within its range (a range narrower than a decade): never a single labelled tick."""
    low, high = sorted(axis.get_view_interval())
    steps = LogLocator(base=10, subs=(1.0, 2.0, 5.0))
    inside = [t for t in steps.tick_values(low, high) if low <= t <= high]
    axis.set_major_locator(steps if len(inside) >= 2 else MaxNLocator(nbins=5))
    axis.set_major_formatter(FormatStrFormatter("%g"))
    axis.set_minor_formatter(NullFormatter())


def attention_heatmaps(model, kernel, batch, path, n: int = 3) -> str:
    """A^(2) of the model (top) and the BMA posterior (bottom) for ``n`` contexts; true parents as red dots.

    Rows are query positions h, columns key positions h' < h; colour = attention weight (a probability)."""
    context, query, parents = batch.context[:n], batch.query[:n], batch.parents[:n]
    attention, _ = model_outputs(model, context, query)
    posterior = numerics.parent_posterior(kernel, context)
    H = query.shape[1]
    fig, axes = plt.subplots(2, n, figsize=(3 * n, 6), squeeze=False)
    for i in range(n):
        for row, (mat, title) in enumerate(((attention[i], "model A^(2)"), (posterior[i], "BMA posterior"))):
            ax = axes[row, i]
            image = ax.imshow(mat, vmin=0, vmax=1, cmap="viridis")
            ax.scatter(parents[i, 1:], np.arange(1, H), c="red", s=12, marker="o",
                       label="true parent pa(h)" if (row, i) == (0, 0) else None)
            ax.set_title(f"{title}, context {i}", fontsize=8)
            ax.set_xlabel("key position h'", fontsize=7)
            ax.set_ylabel("query position h", fontsize=7)
            _integer_ticks(ax)
    fig.colorbar(image, ax=axes, shrink=0.6, label="attention weight on h'")
    fig.legend(loc="lower center", fontsize=7, frameon=False)
    return _save(fig, path)


def training_curves(metrics: dict, path) -> str:
    """L_pa and query loss over training beside their BMA values (and the logit-rule floor when known)."""
    c = metrics["curves"]
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.5))
    axes[0].plot(c["step"], c["parent_loss"], label="model L_pa")
    axes[0].axhline(metrics["bma_parent_loss"], color="k", ls="--", label="BMA L_pa")
    axes[1].plot(c["step"], c["query_loss"], label="model query loss")
    axes[1].axhline(metrics["bma_loss"], color="k", ls="--", label="BMA")
    axes[1].axhline(metrics["oracle_loss"], color="g", ls=":", label="oracle")
    if "logit_floor_loss" in metrics:
        axes[1].axhline(metrics["logit_floor_loss"], color="m", ls="-.", label="logit-rule floor")
    axes[0].set_yscale("log")
    axes[0].set_ylabel("parent-selection loss L_pa (nats)")
    axes[1].set_ylabel("query loss (nats/token)")
    for ax in axes:
        ax.set_xlabel("training step")
        ax.legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    return _save(fig, path)


def parameter_figure(model, kernel, L: int, H: int, path) -> str:
    """fig3: w_H and w_L per head, W_KQ, and σ(W_OV) beside π."""
    w_H = model.w_H.detach().double().cpu().numpy()  # (K, 2 max_H − 1)
    w_L = model.w_L.detach().double().cpu().numpy()  # (K, max_L + 1)
    W_KQ = model.W_KQ.detach().double().cpu().numpy()
    sigma_ov = torch.softmax(model.W_OV.detach().double(), dim=-1).cpu().numpy()
    max_H = model.config.max_H
    fig, axes = plt.subplots(1, 5, figsize=(14, 3.2))  # 150 dpi: under 300 kB (W_KQ is a noisy 120×120 map)
    panels = [
        (axes[0].imshow(w_H, aspect="auto", cmap="coolwarm",
                        extent=(-(max_H - 1) - 0.5, max_H - 1 + 0.5, w_H.shape[0] - 0.5, -0.5)),
         "w_H", "position offset h − h'", "copier head", "RPE weight"),
        (axes[1].imshow(w_L, aspect="auto", cmap="coolwarm"), "w_L", "example offset l − l'", "copier head",
         "RPE weight"),
        (axes[2].imshow(W_KQ, cmap="coolwarm"), "W_KQ (Kd × Kd)", "key slot × state", "query slot × state", "weight"),
        (axes[3].imshow(sigma_ov, vmin=0, vmax=1), "σ(W_OV)", "child state j", "parent state i", "probability"),
        (axes[4].imshow(kernel, vmin=0, vmax=1), "π (the run's kernel)", "child state j", "parent state i",
         "probability"),
    ]
    for ax, (image, title, xlabel, ylabel, bar) in zip(axes, panels):
        ax.set_title(title, fontsize=8)
        ax.set_xlabel(xlabel, fontsize=7)
        ax.set_ylabel(ylabel, fontsize=7)
        _integer_ticks(ax)
        fig.colorbar(image, ax=ax, shrink=0.8, label=bar)
    fig.tight_layout()
    return _save(fig, path)


def generalization_grid(metrics_by_run: dict, path) -> str:
    """fig5: L_pa^{L'} of each trained model (error bars: ± 2 standard errors over the held-out contexts) and of
    BMA against the test L' (left), and the paper-style heat map of L_pa^{L'} − BMA's over training L × test L'
    (right)."""
    fig, (ax, heat) = plt.subplots(1, 2, figsize=(12, 4))
    bma_drawn = False
    for label, metrics in metrics_by_run.items():
        rows = metrics["by_test_L"]
        Ls = sorted(int(k) for k in rows)
        se = [2 * rows[str(L)].get("parent_loss_se", 0.0) for L in Ls]
        ax.errorbar(Ls, [rows[str(L)]["parent_loss"] for L in Ls], yerr=se, marker="o", ms=3, capsize=2,
                    label=f"trained at {label}")
        if not bma_drawn:
            ax.plot(Ls, [rows[str(L)]["bma_parent_loss"] for L in Ls], "k--", label="BMA")
            bma_drawn = True
    ax.set_xlabel("test examples $L'$")
    ax.set_ylabel(r"parent-selection loss $L_{\mathrm{pa}}^{L'}$ (nats; ± 2 s.e.)")
    ax.set_yscale("log")
    tested = sorted({int(k) for m in metrics_by_run.values() for k in m["by_test_L"]})
    if len(tested) <= 10:  # each tested L' labelled; the paper's 30 (fig5) would crowd: integer ticks instead
        ax.set_xticks(tested, [str(L) for L in tested])
    else:
        ax.xaxis.set_major_locator(MaxNLocator(nbins=7, integer=True))
    _labelled_log_ticks(ax.yaxis)
    ax.legend(fontsize=7, loc="upper right")
    labels = list(metrics_by_run)
    Ls = sorted(int(k) for k in metrics_by_run[labels[0]]["by_test_L"])
    gaps = np.array([[metrics_by_run[label]["by_test_L"][str(L)]["parent_loss"]
                      - metrics_by_run[label]["by_test_L"][str(L)]["bma_parent_loss"] for L in Ls] for label in labels])
    image = heat.imshow(gaps, aspect="auto", cmap="magma", vmin=0.0)
    every = -(-len(Ls) // 10)  # at most 10 labelled columns: the paper's fig5 tests 30 L'
    heat.set_xticks(range(0, len(Ls), every), [str(L) for L in Ls[::every]], fontsize=7)
    heat.set_yticks(range(len(labels)), labels, fontsize=7)
    heat.set_xlabel("test examples $L'$")
    heat.set_ylabel("training run (training $L$)")
    fig.colorbar(image, ax=heat, label=r"$L_{\mathrm{pa}}^{L'}$ − BMA's (nats)")
    fig.tight_layout()
    return _save(fig, path)


def column_alignment_figure(model, kernel, L: int, H: int, path) -> str:
    """fig6: column softmax of the effective W_tf and of log π, and the row softmax beside π."""
    W_tf = effective_selector_matrices(model, L, H)["W_tf"]
    panels = ((softmax(W_tf, 0), "σ_col(W_tf)"), (softmax(np.log(kernel), 0), "σ_col(log π)"),
              (softmax(W_tf, 1), "σ_row(W_tf)"), (kernel, "π = σ_row(log π)"))
    fig, axes = plt.subplots(1, 4, figsize=(16, 3.8))
    for ax, (mat, title) in zip(axes, panels):
        image = ax.imshow(mat, vmin=0, vmax=max(1e-12, float(mat.max())))
        ax.set_title(title, fontsize=8)
        ax.set_xlabel("child state (column)", fontsize=7)
        ax.set_ylabel("parent state (row)", fontsize=7)
        _integer_ticks(ax)
        fig.colorbar(image, ax=ax, shrink=0.8, label="probability")
    fig.tight_layout()
    return _save(fig, path)


def copier_figure(model, L: int, H: int, path) -> str:
    """Mass of each copier head per example offset (rows: heads)."""
    summary = copier_summary(model, L, H)
    with torch.no_grad():
        att = model.copier_attention(L, H).double().cpu().numpy().reshape(model.K, H, L + 1, H)
    by_example = att.sum(-1).mean(1)[:, ::-1]
    fig, ax = plt.subplots(figsize=(5, 4))
    image = ax.imshow(by_example, aspect="auto", vmin=0, vmax=1)
    ax.set_xlabel("example offset (0 = query example)")
    ax.set_ylabel("copier head")
    _integer_ticks(ax)
    fig.colorbar(image, ax=ax, label="attention mass on that example")
    ax.set_title(f"copier heads; same-position mass ≥ 0.5: {sum(m >= 0.5 for m in summary['same_position_mass'])}",
                 fontsize=8)
    fig.tight_layout()
    return _save(fig, path)


def task_shaped_heads_figure(summary: dict, path, title: str = "") -> str:
    """Where the task-shaped model's layer-1 heads go (the analogue of fig3's copier panel): mean attention mass of
    each head per example offset (left) and per position offset (right), from the query example's rows;
    heads that copy one example at the same position are what BMA needs (one per example)."""
    ex, pos = np.asarray(summary["example_mass"]), np.asarray(summary["position_mass"])
    K, H = ex.shape[0], (pos.shape[1] + 1) // 2
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 0.35 * K + 2.2))
    image = a.imshow(ex, aspect="auto", cmap="viridis", vmin=0.0, vmax=1.0)
    a.set_xlabel("example offset L − l' (0: the query example's earlier positions)")
    a.set_ylabel("layer-1 head")
    a.set_xticks(range(ex.shape[1]))
    a.set_yticks(range(K))
    fig.colorbar(image, ax=a, label="mean attention mass")
    image = b.imshow(pos, aspect="auto", cmap="viridis", vmin=0.0, vmax=1.0)
    b.set_xticks(range(0, 2 * H - 1, 2), [str(o) for o in range(-(H - 1), H, 2)])
    b.set_xlabel("position offset h − h' (0: the same position)")
    b.set_ylabel("layer-1 head")
    b.set_yticks(range(K))
    fig.colorbar(image, ax=b, label="mean attention mass")
    covered = summary["covered"]
    fig.suptitle((title + ": " if title else "") + f"examples copied at the same position by some head: "
                 f"{covered if covered else 'none'}; uncovered: {summary['uncovered'] or 'none'}", fontsize=9)
    fig.tight_layout()
    return _save(fig, path)
