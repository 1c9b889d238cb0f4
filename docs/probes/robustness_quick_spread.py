"""Probe (not part of the package): the quick tier's exp-robustness readings under one CPU path, for the spread that
sets the check's regression tolerances (``DIAGNOSTIC_TOLERANCES`` in reports/claims/exp_robustness/claim.py).

Trains each named reading on its planned report seeds (report seed 0, ``SEED_PLAN["quick"]``) in this process, with
torch's thread count left to OMP_NUM_THREADS, and prints JSON: per reading its verdict, reason, first seed's values,
each seed's status, KL and plateau test. Run it once per path and compare the values:

    PYTHONPATH=. OMP_NUM_THREADS=1 ATEN_CPU_CAPABILITY=default .venv/bin/python \\
        docs/probes/robustness_quick_spread.py gpt-d2-rope gpt-d3-absolute gpt-d3-rope > spread_1_default.json
"""
from __future__ import annotations

import json
import os
import sys

import bma_verify.reports.claims.exp_robustness.claim as robustness
from bma_verify.reports.checks.trained import training_seeds
from bma_verify.reports.core import CheckContext

ctx = CheckContext(tier="quick", seed=0, quiet=True)
seeds = training_seeds(ctx, "robustness")
out = {"env": {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "ATEN_CPU_CAPABILITY")}}
for label in sys.argv[1:]:
    r = robustness._reading(ctx, label, seeds[:robustness.SEED_PLAN["quick"][label]])
    out[label] = {"verdict": r["verdict"], "reason": r["reason"], "first": r["first"],
                  "statuses": r["seeds"]["statuses"],
                  "kl": r["seeds"]["metrics"]["kl"]["values"],
                  "tests": [{k: v for k, v in t.items() if not isinstance(v, list)} for t in r["converged"]["seeds"]]}
print(json.dumps(out, default=float))
