"""Symbolic tier budget: all symbolic checks of the quick tier, from a cold SymPy cache, under 60 s on
one core. Prints the time and its ratio to the budget, and the slowest derivations."""
from __future__ import annotations

import time

from bma_verify import theory
from bma_verify.reports.builder import run_claims
from bma_verify.reports.core import CheckContext
from bma_verify.reports.registry import CLAIMS

BUDGET_S = 60.0


def main() -> None:
    for name in theory.__all__:
        if name.startswith(("derive_", "perturb_")):
            getattr(theory, name).cache_clear()
    start = time.perf_counter()
    records = run_claims(CLAIMS, CheckContext(tier="quick", seed=0), kinds=["symbolic"])
    elapsed = time.perf_counter() - start
    checks = sorted(((c["seconds"], r["id"]) for r in records for c in r["checks"]), reverse=True)
    print(f"symbolic quick tier, cold cache: {elapsed:.1f} s = {elapsed / BUDGET_S:.2f} of the {BUDGET_S:.0f} s "
          f"budget ({'met' if elapsed < BUDGET_S else 'NOT met'}); slowest: "
          + ", ".join(f"{cid} {s:.1f} s" for s, cid in checks[:3]))


if __name__ == "__main__":
    main()
