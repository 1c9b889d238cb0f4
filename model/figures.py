"""The paper's figures from trained runs (matplotlib, Agg backend, deterministic PNG bytes, dpi <= 100).

Each function saves one PNG and returns its path. Claim ids served: ``exp-fig2-attention``,
``exp-fig3-parameters``, ``exp-fig5-generalization``, ``exp-fig6-column-alignment``, ``exp-robustness``.
"""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

import numerics  # noqa: E402
from model.analysis import softmax, copier_summary, effective_selector_matrices  # noqa: E402
from model.training import model_outputs  # noqa: E402

DPI = 80


def _save(fig, path) -> str:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI, metadata={"Software": None})
    plt.close(fig)
    return str(path)


def attention_heatmaps(model, kernel, batch, path, n: int = 3) -> str:
    """A^(2) of the model (top) and the BMA posterior (bottom) for ``n`` contexts; true parents as red dots."""
    context, query, parents = batch.context[:n], batch.query[:n], batch.parents[:n]
    attention, _ = model_outputs(model, context, query)
    posterior = numerics.parent_posterior(kernel, context)
    H = query.shape[1]
    fig, axes = plt.subplots(2, n, figsize=(3 * n, 6), squeeze=False)
    for i in range(n):
        for row, (mat, title) in enumerate(((attention[i], "model A^(2)"), (posterior[i], "BMA posterior"))):
            ax = axes[row, i]
            ax.imshow(mat, vmin=0, vmax=1, cmap="viridis")
            ax.scatter(parents[i, 1:], np.arange(1, H), c="red", s=12, marker="o")
            ax.set_title(f"{title}, context {i}", fontsize=8)
            ax.set_xlabel("key h'", fontsize=7)
            ax.set_ylabel("query h", fontsize=7)
    fig.tight_layout()
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
    for ax in axes:
        ax.set_xlabel("step")
        ax.legend(fontsize=7)
    fig.tight_layout()
    return _save(fig, path)


def parameter_figure(model, kernel, L: int, H: int, path) -> str:
    """fig3: w_H and w_L per head, W_KQ, and σ(W_OV) beside π."""
    w_H = model.w_H.detach().double().cpu().numpy()  # (K, 2 max_H − 1)
    w_L = model.w_L.detach().double().cpu().numpy()  # (K, max_L + 1)
    W_KQ = model.W_KQ.detach().double().cpu().numpy()
    sigma_ov = torch.softmax(model.W_OV.detach().double(), dim=-1).cpu().numpy()
    max_H = model.config.max_H
    fig, axes = plt.subplots(1, 5, figsize=(17, 3.5))
    axes[0].imshow(w_H, aspect="auto", cmap="coolwarm",
                   extent=(-(max_H - 1) - 0.5, max_H - 1 + 0.5, w_H.shape[0] - 0.5, -0.5))
    axes[0].set_title("w_H (head × offset h−h')", fontsize=8)
    axes[1].imshow(w_L, aspect="auto", cmap="coolwarm")
    axes[1].set_title("w_L (head × offset l−l')", fontsize=8)
    axes[2].imshow(W_KQ, cmap="coolwarm")
    axes[2].set_title("W_KQ (Kd × Kd)", fontsize=8)
    axes[3].imshow(sigma_ov, vmin=0, vmax=1)
    axes[3].set_title("σ(W_OV)", fontsize=8)
    axes[4].imshow(kernel, vmin=0, vmax=1)
    axes[4].set_title("π", fontsize=8)
    fig.tight_layout()
    return _save(fig, path)


def generalization_grid(metrics_by_run: dict, path) -> str:
    """fig5: L_pa^{L'} of each trained model and of BMA against the test L'."""
    fig, ax = plt.subplots(figsize=(6, 4))
    bma_drawn = False
    for label, metrics in metrics_by_run.items():
        rows = metrics["by_test_L"]
        Ls = sorted(int(k) for k in rows)
        ax.plot(Ls, [rows[str(L)]["parent_loss"] for L in Ls], marker="o", ms=3, label=f"trained at {label}")
        if not bma_drawn:
            ax.plot(Ls, [rows[str(L)]["bma_parent_loss"] for L in Ls], "k--", label="BMA")
            bma_drawn = True
    ax.set_xlabel("test L'")
    ax.set_ylabel("L_pa^{L'}")
    ax.set_yscale("log")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return _save(fig, path)


def column_alignment_figure(model, kernel, L: int, H: int, path) -> str:
    """fig6: column softmax of the effective W_tf and of log π, and the row softmax beside π."""
    W_tf = effective_selector_matrices(model, L, H)["W_tf"]
    panels = ((softmax(W_tf, 0), "σ_col(W_tf)"), (softmax(np.log(kernel), 0), "σ_col(log π)"),
              (softmax(W_tf, 1), "σ_row(W_tf)"), (kernel, "π = σ_row(log π)"))
    fig, axes = plt.subplots(1, 4, figsize=(14, 3.6))
    for ax, (mat, title) in zip(axes, panels):
        ax.imshow(mat, vmin=0, vmax=max(1e-12, float(mat.max())))
        ax.set_title(title, fontsize=8)
    fig.tight_layout()
    return _save(fig, path)


def copier_figure(model, L: int, H: int, path) -> str:
    """Mass of each copier head per example offset (rows: heads)."""
    summary = copier_summary(model, L, H)
    with torch.no_grad():
        att = model.copier_attention(L, H).double().cpu().numpy().reshape(model.K, H, L + 1, H)
    by_example = att.sum(-1).mean(1)[:, ::-1]
    fig, ax = plt.subplots(figsize=(5, 4))
    ax.imshow(by_example, aspect="auto", vmin=0, vmax=1)
    ax.set_xlabel("example offset (0 = query example)")
    ax.set_ylabel("head")
    ax.set_title(f"copier heads; same-position mass ≥ 0.5: {sum(m >= 0.5 for m in summary['same_position_mass'])}",
                 fontsize=8)
    fig.tight_layout()
    return _save(fig, path)
