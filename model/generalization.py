"""Generalisation across context sizes L' (``exp-fig5-generalization``): grids of L_pa^{L'} − BMA's L_pa.

Every grid maps a training L to one value per test L', in the order of ``L_test`` (or of ``batches``, the held-out
contexts at each L', built in that order by :func:`held_out_batches`). Three grids, one per source of the trained
model's L_pa^{L'}: the run end to end (its ``by_test_L`` metrics), its selector alone on exact copies of the L'
examples (Theorem 1's copier, reading R3), and an ideal reader of its training L examples (the control).
"""
from __future__ import annotations

import numpy as np

from bma_verify import numerics
from bma_verify.model import analysis
from bma_verify.model.training import TrainRun, eval_batch


def held_out_batches(run: TrainRun, L_test) -> dict[int, numerics.TaskBatch]:
    """The held-out contexts at each L' of ``L_test``: those ``run`` (and every run of its seed) was tested on."""
    return {L: eval_batch(run.config, run.kernel, L) for L in L_test}


def end_to_end_grid(runs: list[TrainRun], L_test) -> dict[int, list[float]]:
    """{training L: [L_pa^{L'} − BMA's at each L']} of each trained run, read from its ``by_test_L`` metrics."""
    return {run.config.L: [run.metrics["by_test_L"][str(L)]["parent_loss"]
                           - run.metrics["by_test_L"][str(L)]["bma_parent_loss"] for L in L_test]
            for run in runs}


def selector_only_grid(runs: list[TrainRun], kernel: np.ndarray, batches: dict) -> dict[int, list[float]]:
    """{training L: [L_pa^{L'} − BMA's at each L']} of each run's trained selector W_tf (read from W_KQ and the
    copier heads) applied to exact copies of the L' examples: how well the selector is calibrated, whatever the
    copier does at L' ≠ L (reading R3)."""
    selectors = [analysis.effective_selector_matrices(run.model, run.config.L, run.config.H)["W_tf"]
                 for run in runs]
    return {run.config.L: [analysis.selector_only_parent_loss(W_tf, kernel, batch)["parent_loss_gap"]
                           for batch in batches.values()]
            for run, W_tf in zip(runs, selectors)}


def truncated_reader_grid(kernel: np.ndarray, batches: dict, train_L) -> dict[int, list[float]]:
    """{training L: [L_pa^{L'} − BMA's at each L']} of BMA reading only the last min(L, L') of the L' examples:
    an ideal reader of its training L examples, for which larger L generalizes better (fig5's control)."""
    return reader_grids(kernel, batches, [{L: L for L in train_L}])[0]


def reader_grids(kernel: np.ndarray, batches: dict, reads: list[dict[int, int]]) -> list[dict[int, list[float]]]:
    """One grid per ``reads`` entry {training L: m}: {training L: [L_pa^{L'} − BMA's of BMA reading only the last
    min(m, L') of the L' examples, at each L']}. Each (min(m, L'), L') is computed once for all the grids (fig5's
    power curve moves m row by row)."""
    table: dict[tuple[int, int], float] = {}

    def gap(m: int, L: int) -> float:
        m = min(int(m), L)
        if m == L:  # BMA itself
            return 0.0
        if (m, L) not in table:
            table[(m, L)] = analysis.truncated_bma_metrics(kernel, batches[L], m)["parent_loss_gap"]
        return table[(m, L)]

    for row in reads:
        if any(int(m) < 1 for m in row.values()):
            raise ValueError(f"reads must give every training L at least 1 example, got {row!r}")
    return [{Lt: [gap(m, L) for L in batches] for Lt, m in row.items()} for row in reads]
