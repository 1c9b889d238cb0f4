"""Chunkable, mergeable sweeps: the seeds of their work items, random instances, and their results.

Every claim sweep (``numerics.dpi_sweep``, ``numerics.init_gradient_sweep``, ``numerics.consistency_rates``) is a
function of a seed and a range of work items (instances, or blocks of sampled contexts). Item i draws all of its
randomness from its own ``SeedSequence(seed, spawn_key=(..., i))``, and partial results merge associatively, so a
sweep cut into chunks (e.g. mapped by the report's executor) gives the same result for a given seed however it is
chunked::

    parts = [lemma3_sweep_chunk(seed, start, min(start + 500, n)) for start in range(0, n, 500)]
    result = merge_sweeps(parts)          # == lemma3_sweep_chunk(seed, 0, n)
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from bma_verify.numerics.validation import check_init, check_kernel
from bma_verify.numerics.task import random_kernel, random_parents, stationary_distribution

INIT_KINDS = ("stationary", "non-stationary")
#: Relative tolerance for "ratio > α" and for gradient ties (float64 rounding on sums of ≤ 2e6 terms).
VIOLATION_RTOL = 1e-9
TIE_ATOL = 1e-12
#: I(x_h; x_pa) at or below this (nats) makes the Lemma 3 ratio undefined ("degenerate"): rounding dominates.
MI_FLOOR = 1e-12

def item_rng(seed, tag: int, *index: int) -> np.random.Generator:
    """The generator of work item ``index`` of sweep ``tag``: independent of how items are chunked."""
    if isinstance(seed, np.random.SeedSequence):
        entropy, prefix = seed.entropy, tuple(seed.spawn_key)
    else:
        entropy, prefix = int(seed), ()
    return np.random.default_rng(np.random.SeedSequence(entropy, spawn_key=prefix + (tag, *index)))


def draw_instance(rng: np.random.Generator, ranges: dict, kernel=None) -> dict:
    """One random (kernel, tree, non-stationary μ₀) over ``ranges`` (see ``LEMMA3_RANGES``).

    With ``kernel`` given (a user's kernel) only the tree, H and μ₀ are drawn.
    """
    if kernel is not None:
        kernel = check_kernel(kernel)
        H = int(rng.integers(ranges["H"][0], ranges["H"][1] + 1))
        return {"d": kernel.shape[0], "H": H, "eps": float(kernel.min()), "dirichlet_alpha": None,
                "zero_information": False, "kernel": kernel, "parents": random_parents(H, rng=rng),
                "init": rng.dirichlet(np.ones(kernel.shape[0]))}
    d = int(rng.integers(ranges["d"][0], ranges["d"][1] + 1))
    H = int(rng.integers(ranges["H"][0], ranges["H"][1] + 1))
    if "max_configurations" in ranges:
        while d**H > ranges["max_configurations"]:
            H -= 1
    eps = float(rng.uniform(*ranges["eps_times_d"]) / d)
    low, high = np.log(ranges["dirichlet_alpha"])
    concentration = float(np.exp(rng.uniform(low, high)))
    kernel = random_kernel(d, alpha=concentration, eps=eps, rng=rng)
    zero_information = bool(rng.random() < ranges.get("zero_information_fraction", 0.0))
    if zero_information:
        kernel = np.repeat(kernel[:1], d, axis=0)  # identical rows: x_h is independent of everything
    parents = random_parents(H, rng=rng)
    init = rng.dirichlet(np.ones(d))
    return {"d": d, "H": H, "eps": eps, "dirichlet_alpha": concentration, "zero_information": zero_information,
            "kernel": kernel, "parents": parents, "init": init}


def resolve_init(kernel: np.ndarray, init) -> np.ndarray:
    """The law of x_0: ``init`` checked as a law on d states, or the stationary law of ``kernel`` when it is None."""
    return stationary_distribution(kernel) if init is None else check_init(init, kernel.shape[0])

# ----------------------------------------------------------------------------------------------------------
# Mergeable sweep results


#: Bins of the ratio / α histograms kept by the Lemma 3 sweep (the last bin collects everything ≥ 1.18).
HISTOGRAM_EDGES = np.linspace(0.0, 1.2, 61)


@dataclass
class Worst:
    """The extreme value of a quantity over a sweep and the instance where it occurred (ties: lowest key)."""

    value: float = -np.inf
    key: tuple = ()
    instance: dict | None = None

    def offer(self, value: float, key: tuple, make_instance) -> None:
        if value > self.value or (value == self.value and (not self.key or key < self.key)):
            self.value, self.key, self.instance = float(value), key, make_instance()

    def merged(self, other: "Worst") -> "Worst":
        out = Worst(self.value, self.key, self.instance)
        if other.key:
            out.offer(other.value, other.key, lambda: other.instance)
        return out


@dataclass
class SweepResult:
    """Counts and extremes of a sweep; ``merge_sweeps`` combines chunks (sums counts, keeps worst values)."""

    name: str
    counts: dict = field(default_factory=dict)
    worst: dict = field(default_factory=dict)
    maxima: dict = field(default_factory=dict)
    histograms: dict = field(default_factory=dict)

    def add(self, key: str, amount: int = 1) -> None:
        self.counts[key] = self.counts.get(key, 0) + int(amount)

    def histogram(self, key: str, values: np.ndarray, edges: np.ndarray = None) -> None:
        """Add ``values`` to the integer histogram ``key`` (default bins: 60 on [0, 1.2], overflow last)."""
        edges = HISTOGRAM_EDGES if edges is None else edges
        bins = edges.size - 1
        # equal-width bins: the index by arithmetic (np.histogram's generality costs more than the sweep itself)
        position = (np.asarray(values, dtype=np.float64) - edges[0]) / (edges[-1] - edges[0]) * bins
        index = np.clip(position, 0, bins - 1).astype(np.int64)  # clip before the cast: ratios/α reach 1e290
        counts = np.bincount(index, minlength=bins)
        self.histograms[key] = self.histograms.get(key, np.zeros(bins, dtype=np.int64)) + counts

    def offer(self, key: str, value: float, item_key: tuple, make_instance) -> None:
        self.worst.setdefault(key, Worst()).offer(value, item_key, make_instance)

    def maximum(self, key: str, value: float) -> None:
        self.maxima[key] = max(self.maxima.get(key, -np.inf), float(value))

    def summary(self) -> dict:
        """JSON-ready: counts, maxima, and for each worst quantity its value and instance."""
        return {"name": self.name, "counts": dict(sorted(self.counts.items())),
                "maxima": dict(sorted(self.maxima.items())),
                "histograms": {k: v.tolist() for k, v in sorted(self.histograms.items())},
                "worst": {k: {"value": w.value, "instance": w.instance} for k, w in sorted(self.worst.items())}}


def merge_sweeps(parts) -> SweepResult:
    """Combine chunk results of one sweep; the result does not depend on the chunking or the order."""
    parts = list(parts)
    if not parts:
        raise ValueError("parts must contain at least one SweepResult")
    out = SweepResult(parts[0].name)
    for part in parts:
        if part.name != out.name:
            raise ValueError(f"parts must come from one sweep; got {out.name!r} and {part.name!r}")
        for key, value in part.counts.items():
            out.add(key, value)
        for key, value in part.maxima.items():
            out.maximum(key, value)
        for key, worst in part.worst.items():
            out.worst[key] = out.worst.get(key, Worst()).merged(worst)
        for key, counts in part.histograms.items():
            out.histograms[key] = out.histograms.get(key, np.zeros_like(counts)) + counts
    return out


def instance_record(target: str, kernel, parents, init, **extra) -> dict:
    """A JSON-ready instance (the format of ``reports.search``): lists, with ``init`` None for stationary."""
    record = {"target": target, "kernel": np.asarray(kernel).tolist(), "parents": np.asarray(parents).tolist(),
              "init": None if init is None else np.asarray(init).tolist()}
    record.update({k: (v.item() if isinstance(v, np.generic) else v) for k, v in extra.items()})
    return record
