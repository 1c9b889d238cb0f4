"""Probe (not part of the package): the boundary evidence of thm3-init-gradient's stationary check
(``reports/claims/thm3_init_gradient/boundary.py``) at quick-tier sizes on report seeds 0, 1, 2, one JSON line each.

    OMP_NUM_THREADS=1 .venv/bin/python docs/probes/thm3_boundary_seeds.py

Numbers: docs/notes/thm3-init-gradient.md, "Boundary in the report".
"""
import json, time
from pathlib import Path
from bma_verify.reports.core import CheckContext
from bma_verify.reports.claims.thm3_init_gradient.claim import boundary as B
import tempfile
for seed in (0, 1, 2):
    ctx = CheckContext(tier="quick", seed=seed, figures_dir=Path(tempfile.mkdtemp()))
    t = time.time(); ev = B.boundary_evidence(ctx); secs = time.time() - t
    m = B.boundary_measured(ev)
    found = [(c["form"], c["d"], c["d_min_pi"], round(c["smallest_tv"], 3)) for c in m["smallest_tv"] if c["smallest_tv"] is not None]
    d = m["depth"]
    print(json.dumps({"seed": seed, "secs": round(secs, 1), "found": found, "viol": d["violations"], "cases": d["cases"],
                      "cond": [d["condition_cases"], d["condition_violations"], d["condition_smallest_margin"]],
                      "by_pa": {k: [v["violations"], v["cases"]] for k, v in d["by_parent_depth"].items()},
                      "by_hp": {k: [v["violations"], v["cases"]] for k, v in d["by_candidate_depth"].items()},
                      "hardest": m["hardest"]}))
