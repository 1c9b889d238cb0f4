"""Training a preset's runs (a named experiment of the paper: ``bma-verify train --preset NAME``; ``exp-*`` claims)
and writing what ``bma-verify train`` promises: ``metrics.json``, figures and checkpoints.

A preset's runs ({run label: :class:`TrainConfig`}) are an argument: the runs of each preset at each size the
report knows are its plan, ``bma_verify.reports.plans`` (``preset_configs``, ``train_preset``).
"""
from __future__ import annotations

from pathlib import Path

from bma_verify.model import figures
from bma_verify.model.run_files import prepare_run_dir, write_json_atomic
from bma_verify.model.gpt_training import train_gpt
from bma_verify.model.train_config import GPTOptions, TrainConfig
from bma_verify.model.training import TrainRun, eval_batch, train

#: Label prefix of fig5's reading-R2 runs (``"R2-L5"``); R1's runs are labelled ``"L5"``.
FIG5_R2_PREFIX = "R2-"


def fig5_readings(runs: dict) -> dict[str, dict]:
    """fig5's runs split by reading: ``{"R1": {"L1": run, ...}, "R2": {"L1": run, ...}}`` (R2 only when trained)."""
    split: dict[str, dict] = {"R1": {}}
    for label, run in runs.items():
        if label.startswith(FIG5_R2_PREFIX):
            split.setdefault("R2", {})[label.removeprefix(FIG5_R2_PREFIX)] = run
        else:
            split["R1"][label] = run
    return split


def train_runs(configs: dict[str, TrainConfig], *, out: str | Path | None = None, quiet: bool = True,
               resume: bool = False) -> dict[str, TrainRun]:
    """Train every run of ``configs`` ({run label: config}; each in ``out/<label>``, or in ``out`` itself for a single
    run, when ``out`` is given) and return them by label."""
    single = len(configs) == 1
    return {label: train_config(config, out=None if out is None else (Path(out) if single else Path(out) / label),
                                quiet=quiet, resume=resume)
            for label, config in configs.items()}


def train_config(config: TrainConfig, *, out: str | Path | None = None, quiet: bool = True,
                 resume: bool = False) -> TrainRun:
    """Train one run of a preset: a GPT (``train_gpt``, in memory) or a structured/absolute/task-shaped model
    (``train``, with ``out`` and ``resume``)."""
    if isinstance(config.model, GPTOptions):
        return train_gpt(config, quiet=quiet)
    return train(config, out=out, quiet=quiet, resume=resume)


def train_and_write(name: str, configs: dict[str, TrainConfig], *, out: str | Path | None = None,
                    quiet: bool = False, resume: bool = False, force: bool = False) -> dict:
    """Train preset ``name``'s runs ``configs`` and write ``out/metrics.json``, its figures and checkpoints.

    An ``out`` folder that already holds files is refused (FileExistsError) unless ``resume`` or ``force``.

    Returns
    -------
    The metrics dict (for presets with several runs: ``{"runs": {label: metrics}}`` plus the preset's
    summary numbers).
    """
    if out is not None:
        prepare_run_dir(out, resume=resume, force=force)
    runs = train_runs(configs, out=out, quiet=quiet, resume=resume)
    metrics = summarize_preset(name, runs)
    if out is not None:
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        metrics["figures"] = write_preset_figures(name, runs, out)
        write_json_atomic(out / "metrics.json", metrics)
    return metrics


def summarize_preset(name: str, runs: dict[str, TrainRun]) -> dict:
    """The numbers each preset reports (one run: its metrics; several: per run plus a grid)."""
    if len(runs) == 1:
        return dict(next(iter(runs.values())).metrics)
    summary: dict = {"runs": {label: run.metrics for label, run in runs.items()}}
    if name == "fig5":
        summary["grid"] = {label: {L_test: row["parent_loss"] - row["bma_parent_loss"]
                                   for L_test, row in run.metrics["by_test_L"].items()}
                           for label, run in runs.items()}
    return summary


def write_preset_figures(name: str, runs: dict[str, TrainRun], out: Path) -> list[str]:
    """Save the preset's figures under ``out`` and return their file names."""
    written = []
    if name in ("fig2", "fig3"):
        run = runs["fig2"]
        batch = eval_batch(run.config, run.kernel, run.config.L)
        written.append(figures.attention_heatmaps(run.model, run.kernel, batch, out / "fig2_attention.png"))
        written.append(figures.training_curves(run.metrics, out / "fig2_parent_loss.png"))
        written.append(figures.parameter_figure(run.model, run.kernel, run.config.L, run.config.H,
                                                out / "fig3_parameters.png"))
    elif name == "fig5":
        for reading, group in fig5_readings(runs).items():
            suffix = "" if reading == "R1" else f"_{reading}"
            written.append(figures.generalization_grid({k: r.metrics for k, r in group.items()},
                                                       out / f"fig5_grid{suffix}.png"))
    elif name == "fig6":
        run = runs["fig6"]
        written.append(figures.column_alignment_figure(run.model, run.kernel, run.config.L, run.config.H,
                                                       out / "fig6_columns.png"))
    else:
        for label, run in runs.items():
            if isinstance(run.config.model, GPTOptions):  # a GPT has no A^(2) to draw (its metrics hold attention)
                continue
            batch = eval_batch(run.config, run.kernel, run.config.L)
            written.append(figures.attention_heatmaps(run.model, run.kernel, batch,
                                                      out / f"robustness_{label}_attention.png"))
    return [Path(p).name for p in written]
