"""The boundary of Theorem 3's repair (``thm3-init-gradient``, "what holds instead"): how far μ₀ can move from the
stationary law μ of π before the J form or the exact π̄ form fails, and how the failures depend on depth.

- :func:`boundary_evidence` computes: per (form, d, d·min π) the smallest TV(μ₀, μ) at which the counterexample
  search finds a violation (``reports.search.smallest_violating_tv``); the J form and its weaker sufficient
  condition (π-side gap below J(pa)(1 − η)/η) by the depth of pa(h) and h' (``numerics.thm3_stationary.depth_sweep``);
  the condition on the search's hardest instances; its negative control, the known J-form counterexample.
- :func:`boundary_holds` decides, :func:`boundary_figure` and :func:`boundary_sentence` render.

Measured values, with their commands and seeds: docs/notes/thm3-init-gradient.md.
"""
from __future__ import annotations

import numpy as np

from bma_verify.numerics.thm3_stationary import DEPTH_CAP, condition_holds, depth_sweep, proof_chain
from bma_verify.reports.checks.numeric_common import save_check_figure
from bma_verify.reports.core import CheckContext, Table, new_figure
from bma_verify.reports.search import KNOWN_COUNTEREXAMPLES, smallest_violating_tv, tv_distance

#: Per tier: examples per search (each cell runs a few searches), and instances of the depth sweep.
BOUNDARY_SIZES = {"quick": {"budget": 200, "depth_instances": 400},
                  "full": {"budget": 1000, "depth_instances": 4000}}
#: The search's cells: the number of states d and d·min π (min π = this / d; 0.001: near-sparse rows).
BOUNDARY_STATES = (2, 3, 4)
BOUNDARY_D_MIN_PI = (0.0003, 0.003, 0.03, 0.3)
FORMS = {"approximate": "J form", "exact": "exact π̄ form"}
#: The negative control: the known counterexample to the paper's J form (chain x_0 → x_1 → x_2, d = 3).
J_FORM_COUNTEREXAMPLE = next(i for i in KNOWN_COUNTEREXAMPLES if i["target"] == "thm3" and i["form"] == "approximate")


def _cells(ctx: CheckContext, budget: int) -> list[dict]:
    """The smallest violating TV per (form, d, d·min π), each cell with its own generator."""
    cells = []
    for form in FORMS:
        for d in BOUNDARY_STATES:
            for d_min_pi in BOUNDARY_D_MIN_PI:
                rng = ctx.rng(f"thm3-boundary/{form}/{d}/{d_min_pi}")
                out = smallest_violating_tv(form, d, d_min_pi / d, budget=budget, rng=rng)
                cells.append({"form": form, "d": d, "d_min_pi": d_min_pi, "smallest_tv": out["smallest_tv"],
                              "instance": out["instance"], "searches": len(out["searches"]),
                              "examples": out["examples"]})
    return cells


def _condition_on(instance: dict) -> dict:
    """The weaker sufficient condition at every position of one instance: cases meeting it, violations among them
    (J(h') ≥ J(pa) where it holds: a counterexample to the condition), and the smallest margin where it holds."""
    kernel, parents = np.array(instance["kernel"]), np.array(instance["parents"])
    init = None if instance["init"] is None else np.array(instance["init"])
    met, violations, smallest = 0, 0, np.inf
    for h in range(2, parents.size):
        chain = proof_chain(kernel, parents, h, init)
        holds = condition_holds(chain) & (chain["J_parent"] > 0)
        met += int(holds.sum())
        violations += int((holds & (chain["margin"] <= 0)).sum())
        if holds.any():
            smallest = min(smallest, float(chain["margin"][holds].min()))
    return {"cases": met, "violations": violations, "smallest_margin": smallest}


def _control() -> dict:
    """The known J-form counterexample: the condition must not hold where J(h') > J(pa); the nearest false condition
    (its allowance widened to just above the counterexample's π-side gap) admits it, so the rule rejects it."""
    c = J_FORM_COUNTEREXAMPLE
    chain = proof_chain(np.array(c["kernel"]), np.array(c["parents"]), c["h"], np.array(c["init"]))
    k = int(np.argmin(chain["margin"]))
    widened = chain["pi_side_gap"][k] * 1.001
    return {"instance": {key: c[key] for key in ("kernel", "parents", "init", "h")},
            "candidate": int(chain["candidates"][k]), "margin": float(chain["margin"][k]),
            "pi_side_gap": float(chain["pi_side_gap"][k]), "gap_allowance": float(chain["gap_allowance"][k]),
            "tv": tv_distance(c["init"], np.array(c["kernel"])),
            "condition_met": bool(condition_holds(chain)[k]), "widened_allowance": float(widened),
            "widened_admits_violation": bool(chain["pi_side_gap"][k] < widened and chain["margin"][k] <= 0)}


def boundary_evidence(ctx: CheckContext) -> dict:
    """Compute the boundary: the search's cells, the depth sweep, the condition on the hardest instances (every
    violation the cells found, and the depth sweep's smallest margin) and the control."""
    sizes = BOUNDARY_SIZES[ctx.tier]
    cells = _cells(ctx, sizes["budget"])
    depth = depth_sweep(ctx.rng("thm3-boundary/depth"), sizes["depth_instances"])
    hardest = [c["instance"] for c in cells if c["instance"] is not None] + [depth["hardest"]]
    on_hardest = [_condition_on(i) for i in hardest]
    return {"cells": cells, "depth": depth, "budget": sizes["budget"],
            "hardest": {"instances": len(hardest), "cases": sum(o["cases"] for o in on_hardest),
                        "violations": sum(o["violations"] for o in on_hardest)},
            "control": _control()}


def boundary_holds(evidence: dict) -> tuple[bool, bool]:
    """Decide: (the condition holds on the depth sweep and the hardest instances, its control is rejected: the
    condition is not met on the counterexample and the widened condition admits it)."""
    holds = evidence["depth"]["condition_violations"] == 0 and evidence["hardest"]["violations"] == 0
    control = evidence["control"]
    return holds, (not control["condition_met"]) and control["widened_admits_violation"]


def boundary_measured(evidence: dict) -> dict:
    """The boundary's values for results.json (instances left out but the first violation per cell's TV)."""
    depth = evidence["depth"]
    return {"budget": evidence["budget"],
            "smallest_tv": [{k: c[k] for k in ("form", "d", "d_min_pi", "smallest_tv", "searches", "examples")}
                            for c in evidence["cells"]],
            "depth": {k: depth[k] for k in ("instances", "cases", "ties", "violations", "condition_cases",
                                            "condition_violations", "condition_smallest_margin", "by_parent_depth",
                                            "by_candidate_depth")},
            "hardest": evidence["hardest"], "control": evidence["control"]}


def closest_violation(evidence: dict, form: str) -> dict | None:
    """The cell with the smallest violating TV for ``form`` (None when the search found none)."""
    found = [c for c in evidence["cells"] if c["form"] == form and c["smallest_tv"] is not None]
    return min(found, key=lambda c: c["smallest_tv"]) if found else None


def _depth_text(rows: dict, name: str) -> str:
    return ", ".join(f"{name} {'≥ ' if int(k) == DEPTH_CAP else ''}{k}: {r['violations']}/{r['cases']}"
                     for k, r in rows.items())


def boundary_sentence(evidence: dict) -> str:
    """The boundary in words, from the measured values."""
    parts = []
    for form, name in FORMS.items():
        cells = [c for c in evidence["cells"] if c["form"] == form]
        found = [c for c in cells if c["smallest_tv"] is not None]
        where = ", ".join(f"d = {c['d']}, d·min π = {c['d_min_pi']:g}: TV {c['smallest_tv']:.3f}" for c in found)
        parts.append(f"{name}: the search ({evidence['budget']} examples per search) finds a violation in "
                     f"{len(found)} of {len(cells)} (d, d·min π) cells" + (f" (smallest TV(μ₀, μ) {where})" if found
                                                                           else "") + ", none in the others at any TV ≤ 1")
    depth = evidence["depth"]
    parts.append(f"by depth ({depth['instances']} random sparse instances, Dirichlet(0.3) μ₀, violations/cases of "
                 f"the J form): {_depth_text(depth['by_parent_depth'], 'pa(h) at depth')}; "
                 f"{_depth_text(depth['by_candidate_depth'], 'h′ at depth')}")
    parts.append(f"the sufficient condition ‖B‖² − I_χ²(x_pa; x_h) < J(pa)(1 − η)/η holds on all "
                 f"{depth['condition_cases']} sweep cases that meet it and on the {evidence['hardest']['cases']} cases "
                 f"of the {evidence['hardest']['instances']} hardest instances (no J(h') ≥ J(pa) among them)")
    return "; ".join(parts) + "."


def boundary_tables(evidence: dict) -> list[Table]:
    """The search's cells (smallest violating TV per form, d, d·min π) and the depth sweep by depth."""
    cells = Table("boundary: smallest TV(μ₀, μ) at which the search finds a violation (None: none found)",
                  ["form", "d", "d·min π", "smallest TV", "searches", "examples"],
                  [[FORMS[c["form"]], c["d"], c["d_min_pi"], c["smallest_tv"], c["searches"], c["examples"]]
                   for c in evidence["cells"]])
    depth = evidence["depth"]
    rows = []
    for k in range(DEPTH_CAP + 1):
        pa, cand = depth["by_parent_depth"][k], depth["by_candidate_depth"][k]
        rows.append([f"≥ {k}" if k == DEPTH_CAP else str(k), pa["cases"], pa["violations"], pa["smallest_margin"],
                     cand["cases"], cand["violations"], cand["smallest_margin"]])
    by_depth = Table("boundary: the J form under Dirichlet(0.3) μ₀ by depth (margin J(pa) − J(h'))",
                     ["depth", "pa(h) there: cases", "violations", "smallest margin", "h' there: cases",
                      "violations", "smallest margin"], rows)
    return [cells, by_depth]


def boundary_figure(ctx: CheckContext, evidence: dict) -> str:
    """Left: the smallest violating TV(μ₀, μ) against d·min π, per d and form (a cross at the top: none found at any
    TV ≤ 1). Right: the J form's violation rate by the depth of pa(h) and of h'."""
    fig, (left, right) = new_figure(1, 2, figsize=(9, 3.4))
    markers = {"approximate": "o", "exact": "s"}
    for d, color in zip(BOUNDARY_STATES, ("C0", "C1", "C2")):
        for form, name in FORMS.items():
            cells = [c for c in evidence["cells"] if c["form"] == form and c["d"] == d]
            x = [c["d_min_pi"] for c in cells]
            y = [c["smallest_tv"] if c["smallest_tv"] is not None else np.nan for c in cells]
            left.plot(x, y, marker=markers[form], color=color, ls="-" if form == "approximate" else ":",
                      label=f"d = {d}, {name}")
            none = [c["d_min_pi"] for c in cells if c["smallest_tv"] is None]
            left.scatter(none, [1.02 + 0.02 * BOUNDARY_STATES.index(d)] * len(none), marker="x", color=color, s=14)
    left.set_xscale("log")
    left.set_ylim(0, 1.1)
    left.set_xlabel("d·min π")
    left.set_ylabel("smallest TV(μ₀, μ) with a violation")
    left.set_title("search: where the statement fails (x: none found)", fontsize=9)
    left.legend(fontsize=6, ncol=2, loc="lower right")
    depth = evidence["depth"]
    levels = np.arange(DEPTH_CAP + 1)
    for shift, (key, name) in zip((-0.2, 0.2), (("by_parent_depth", "depth of pa(h)"),
                                              ("by_candidate_depth", "depth of h′"))):
        rows = depth[key]
        rate = [rows[k]["violations"] / rows[k]["cases"] if rows[k]["cases"] else 0.0 for k in levels]
        right.bar(levels + shift, rate, 0.4, label=name)
    right.set_xticks(levels, [str(k) if k < DEPTH_CAP else f"≥{k}" for k in levels])
    right.set_xlabel("depth in the tree")
    right.set_ylabel("J-form violation rate")
    right.set_title(f"J form under Dirichlet(0.3) μ₀, {depth['cases']} cases", fontsize=9)
    right.legend(fontsize=7)
    fig.tight_layout()
    return save_check_figure(fig, ctx, "thm3_init_gradient_boundary.png")

