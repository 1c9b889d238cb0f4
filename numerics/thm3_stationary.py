"""Theorem 3's J form under a stationary μ₀, step by step (``thm3-init-gradient``, "what holds instead").

For a candidate h' < h with Q the joint of (x_{h'}, x_h), p = P(x_{h'}), P_h = P(x_h) (the column sums of Q),
q(c|a) = Q(a, c)/p(a), and left = √p, right = √P_h:

    M_q = diag(√p) q diag(1/√P_h),   M_π = diag(√p) π diag(1/√P_h),
    A = M_q − left·rightᵀ,           B = M_π − left·rightᵀ.

The proof chain (each step evaluated here with its slack):

1. identity:        J(h') = ⟨A, B⟩_F (any μ₀: it uses only that p and P_h are Q's own marginals);
2. singular pair:   M_π·right = left always, leftᵀ·M_π = rightᵀ iff p·π = P_h (stationary μ₀: both are μ);
   then ‖B‖²_F = Σ p(a) π(c|a)²/P_h(c) − 1, which equals I_χ²(x_pa; x_h) when p = P(x_pa) (the π-side gap
   ‖B‖² − I_χ²(x_pa; x_h) = Σ_a (p − P(x_pa))(a) Σ_c π(c|a)²/P_h(c) is the step that breaks without stationarity);
3. Cauchy–Schwarz:  ⟨A, B⟩ ≤ ‖A‖·‖B‖, with ‖A‖² = I_χ²(x_{h'}; x_h);
4. χ² strong DPI:   x_h − x_pa − x_{h'} is a Markov chain (h is a leaf of the tree cut at h), so
   I_χ²(x_{h'}; x_h) ≤ η·I_χ²(x_pa; x_h), η = η_χ²(P(x_pa), channel x_pa → x_{h'}) < 1 when π > 0;
5. bound:           J(h') ≤ √(η·I_χ²(x_pa; x_h)·‖B‖²) = √η·J(pa) when the π-side gap is 0, so J(h') < J(pa).

More generally J(h') ≤ √(η·J(pa)·(J(pa) + gap)), which stays below J(pa) while gap < J(pa)·(1 − η)/η: a weaker
sufficient condition than stationarity (``gap_allowance``).
"""
from __future__ import annotations

import numpy as np

from bma_verify.numerics.validation import check_init, check_kernel, check_parents, check_positive_int, check_rng
from bma_verify.numerics.claim_sweeps import TIE_ATOL
from bma_verify.numerics.contraction import chi2_contraction
from bma_verify.numerics.gradient import chi2_gain
from bma_verify.numerics.information import chi2_mutual_information, depths, pairwise_joint
from bma_verify.numerics.task import random_kernel, random_parents, random_tree_instance, stationary_distribution

#: The fields of :func:`proof_chain` that are slacks of an inequality (must be ≥ 0) and the residuals of an
#: equality that the proof needs (must be 0 under a stationary μ₀).
SLACKS = ("cauchy_schwarz_slack", "sdpi_slack", "bound_slack", "margin")
RESIDUALS = ("identity_error", "left_singular_residual", "right_singular_residual", "pi_side_gap",
             "chi2_candidate_error")
#: Perturbed steps (negative controls): the factor each perturbed bound carries.
CONTROL_FACTOR = 0.95
#: Ranges of :func:`stationary_chain_sweep`: d, H, and d·ε with ε = min π (so π ≥ ε > 0 and dε ≤ 1).
STATIONARY_RANGES = {"d": (2, 4), "H": (3, 7), "eps_times_d": (0.05, 0.6)}


def factor_matrices(joint, kernel) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """M_q, M_π, left = √p, right = √P_h for the candidate–child joint Q of (x_{h'}, x_h).

    Parameters
    ----------
    joint : (d, d) P(x_{h'} = a, x_h = c), positive marginals.
    kernel : (d, d) π.

    Returns
    -------
    (M_q, M_pi, left, right): (d, d), (d, d), (d,), (d,).
    """
    left, right = np.sqrt(joint.sum(axis=1)), np.sqrt(joint.sum(axis=0))  # √p, √P_h
    M_q = joint / (left[:, None] * right[None, :])  # √p(a) q(c|a) / √P_h(c)
    M_pi = left[:, None] * kernel / right[None, :]
    return M_q, M_pi, left, right


def proof_chain(kernel, parents, h: int, init=None) -> dict:
    """Every step of the stationary proof of J(pa) > J(h') at position h, for each candidate h' ≠ pa(h).

    Parameters
    ----------
    kernel : (d, d) π with positive entries.
    parents : (H,) tree with H > h ≥ 2.
    h : the predicted position.
    init : (d,) μ₀, default the stationary law (the proof's hypothesis; any other law shows where it breaks).

    Returns
    -------
    dict of (h − 1,) float64 arrays over ``candidates`` (the h' ≠ pa(h) in order) and scalars:
    ``J`` (numerics.gradient.chi2_gain), ``frobenius`` ⟨A, B⟩, ``identity_error`` |⟨A, B⟩ − J|,
    ``left_singular_residual`` max |leftᵀ M_π − rightᵀ| (0 iff stationary along h'), ``right_singular_residual``
    max |M_π right − left|, ``top_singular_value`` σ₁(M_π), ``chi2_candidate`` ‖A‖², ``chi2_candidate_error``
    |‖A‖² − I_χ²(x_{h'}; x_h)|, ``pi_side`` ‖B‖², ``pi_side_gap`` ‖B‖² − I_χ²(x_pa; x_h), ``cauchy_schwarz_slack``
    ‖A‖‖B‖ − ⟨A, B⟩, ``eta`` η_χ²(P(x_pa), x_pa → x_{h'}), ``sdpi_slack`` η·I_χ²(x_pa; x_h) − ‖A‖²,
    ``bound_slack`` √η·J(pa) − J(h'), ``margin`` J(pa) − J(h'), ``gap_allowance`` J(pa)(1 − η)/η; scalars
    ``parent``, ``chi2_parent`` I_χ²(x_pa; x_h), ``J_parent``.
    """
    kernel = check_kernel(kernel, single=True)
    if kernel.min() <= 0:
        raise ValueError("kernel must have positive entries (the proof needs π ≥ ε > 0); mix it with the uniform "
                         "kernel to make it so")
    parents = check_parents(parents, single=True)
    h = check_positive_int(h, "h", 2)
    if h >= parents.shape[0]:
        raise ValueError(f"h must be a position in 2..{parents.shape[0] - 1}; got {h}")
    init = stationary_distribution(kernel) if init is None else check_init(init, kernel.shape[0])
    parent = int(parents[h])
    gains = chi2_gain(kernel, parents, h, init)  # (h,)
    chi2_parent = float(chi2_mutual_information(pairwise_joint(kernel, parents, parent, h, init)))
    rows = [_candidate_steps(kernel, parents, h, init, g, parent, gains, chi2_parent) for g in range(h) if g != parent]
    out = {key: np.array([row[key] for row in rows]) for key in rows[0]}
    out.update(candidates=np.array([g for g in range(h) if g != parent]), parent=parent, chi2_parent=chi2_parent,
               J_parent=float(gains[parent]))
    return out


def _candidate_steps(kernel, parents, h, init, candidate, parent, gains, chi2_parent) -> dict:
    """The proof chain's quantities for one candidate (the loop body of :func:`proof_chain`)."""
    joint = pairwise_joint(kernel, parents, candidate, h, init)  # (x_{h'}, x_h)
    M_q, M_pi, left, right = factor_matrices(joint, kernel)
    A, B = M_q - np.outer(left, right), M_pi - np.outer(left, right)
    frobenius, norm_a2, norm_b2 = float((A * B).sum()), float((A * A).sum()), float((B * B).sum())
    parent_joint = pairwise_joint(kernel, parents, parent, candidate, init)  # (x_pa, x_{h'})
    law_pa = parent_joint.sum(axis=1)
    eta = float(chi2_contraction(law_pa, parent_joint / law_pa[:, None]))
    J = float(gains[candidate])
    J_parent = float(gains[parent])
    return {"J": J, "frobenius": frobenius, "identity_error": abs(frobenius - J),
            "left_singular_residual": float(np.abs(left @ M_pi - right).max()),
            "right_singular_residual": float(np.abs(M_pi @ right - left).max()),
            "top_singular_value": float(np.linalg.svd(M_pi, compute_uv=False)[0]),
            "chi2_candidate": norm_a2,
            "chi2_candidate_error": abs(norm_a2 - float(chi2_mutual_information(joint))),
            "pi_side": norm_b2, "pi_side_gap": norm_b2 - chi2_parent,
            "cauchy_schwarz_slack": float(np.sqrt(norm_a2 * norm_b2)) - frobenius,
            "eta": eta, "sdpi_slack": eta * chi2_parent - norm_a2,
            "bound_slack": float(np.sqrt(eta)) * J_parent - J, "margin": J_parent - J,
            "gap_allowance": J_parent * (1.0 - eta) / eta if eta > 0 else np.inf}


def perturbed_slacks(chain: dict, factor: float = CONTROL_FACTOR) -> dict:
    """Negative controls of steps 3–5: each bound made smaller, evaluated on the same chain.

    ``cauchy_schwarz`` factor·‖A‖‖B‖ − ⟨A, B⟩, ``sdpi`` factor·η·I_χ²(x_pa; x_h) − ‖A‖², ``bound_eta``
    η·J(pa) − J(h') (η in place of √η). Each must have a negative minimum somewhere for the rule to have power.
    """
    return {"cauchy_schwarz": factor * np.sqrt(chain["chi2_candidate"] * chain["pi_side"]) - chain["frobenius"],
            "sdpi": factor * chain["eta"] * chain["chi2_parent"] - chain["chi2_candidate"],
            "bound_eta": chain["eta"] * chain["J_parent"] - chain["J"]}


def stationary_law_identity_error(kernel, parents, h: int, init) -> np.ndarray:
    """Negative control of step 1: ⟨A, B⟩ with M built from π's stationary law μ in place of the true marginals.

    Under a stationary μ₀ this is the identity itself; with x_0 ~ ``init`` ≠ μ it misses J. (h − 1,) |error|.
    """
    kernel = check_kernel(kernel, single=True)
    parents = check_parents(parents, single=True)
    init = check_init(init, kernel.shape[0])
    mu = stationary_distribution(kernel)
    s = np.sqrt(mu)
    gains = chi2_gain(kernel, parents, h, init)
    parent = int(parents[h])
    errors = []
    for candidate in (g for g in range(h) if g != parent):
        joint = pairwise_joint(kernel, parents, candidate, h, init)
        M_q = s[:, None] * (joint / joint.sum(axis=1, keepdims=True)) / s[None, :]
        M_pi = s[:, None] * kernel / s[None, :]
        ss = np.outer(s, s)
        errors.append(abs(float(((M_q - ss) * (M_pi - ss)).sum()) - float(gains[candidate])))
    return np.array(errors)


def stationary_chain_sweep(rng, n_instances: int, *, ranges: dict = STATIONARY_RANGES,
                           tolerance: float = 1e-9) -> dict:
    """The proof chain on random (kernel with π ≥ ε > 0, tree, stationary μ₀) instances, every h ≥ 2.

    Parameters
    ----------
    rng : numpy Generator (draws the instances, and a Dirichlet μ₀ per instance for the step-1 control).
    n_instances : how many instances.
    ranges : ``d``, ``H`` (inclusive ranges) and ``eps_times_d`` (d·min π, uniform in the range).
    tolerance : an equality's residual above it rejects the instance (steps 1 and 2's controls).

    Returns
    -------
    dict: ``cases`` (candidates h' ≠ pa over all positions), ``instances``; ``max_residual`` per name of
    :data:`RESIDUALS`; ``min_slack`` per name of :data:`SLACKS`; ``max_eta``; ``max_top_singular_error``
    |σ₁(M_π) − 1|; ``min_control_slack`` per perturbed step (:func:`perturbed_slacks`);
    ``control_identity`` and ``control_left_singular`` (steps 1 and 2's controls, the same instances with a
    Dirichlet μ₀): ``max`` residual and ``rejected_instances`` (largest residual above ``tolerance``);
    ``worst`` the instance with the smallest bound slack (kernel, parents, h, candidate); ``non_stationary``: on the
    same instances with the Dirichlet μ₀, ``cases``, ``max_identity_error`` (step 1), ``min_cauchy_schwarz_slack``,
    ``min_sdpi_slack`` (steps 3, 4), ``margin_violations`` (J(h') ≥ J(pa)), ``condition_cases`` (π-side gap below
    ``gap_allowance``: the weaker sufficient condition) and ``condition_violations`` (margin ≤ 0 among those).
    """
    rng = check_rng(rng)
    n_instances = check_positive_int(n_instances, "n_instances")
    max_residual = dict.fromkeys(RESIDUALS, 0.0)
    min_slack = dict.fromkeys(SLACKS, np.inf)
    min_control = dict.fromkeys(("cauchy_schwarz", "sdpi", "bound_eta"), np.inf)
    control_identity, control_singular = [], []
    cases, max_eta, top_error, worst = 0, 0.0, 0.0, None
    non_stationary = {"cases": 0, "max_identity_error": 0.0, "min_cauchy_schwarz_slack": np.inf,
                      "min_sdpi_slack": np.inf, "margin_violations": 0, "condition_cases": 0,
                      "condition_violations": 0}
    for _ in range(n_instances):
        kernel, parents, mu0 = random_tree_instance(ranges, rng=rng)
        identity_errors, singular_residuals = [0.0], [0.0]
        for h in range(2, len(parents)):
            chain = proof_chain(kernel, parents, h)
            cases += chain["candidates"].size
            for key in RESIDUALS:
                max_residual[key] = max(max_residual[key], float(np.abs(chain[key]).max()))
            for key in SLACKS:
                if chain[key].min() < min_slack[key] and key == "bound_slack":
                    k = int(np.argmin(chain[key]))
                    worst = {"kernel": kernel.tolist(), "parents": parents.tolist(), "h": h,
                             "candidate": int(chain["candidates"][k]), "bound_slack": float(chain[key][k])}
                min_slack[key] = min(min_slack[key], float(chain[key].min()))
            for key, value in perturbed_slacks(chain).items():
                min_control[key] = min(min_control[key], float(value.min()))
            max_eta = max(max_eta, float(chain["eta"].max()))
            top_error = max(top_error, float(np.abs(chain["top_singular_value"] - 1.0).max()))
            identity_errors.append(float(stationary_law_identity_error(kernel, parents, h, mu0).max()))
            moved = proof_chain(kernel, parents, h, mu0)
            singular_residuals.append(float(moved["left_singular_residual"].max()))
            _offer_non_stationary(non_stationary, moved)
        control_identity.append(max(identity_errors))
        control_singular.append(max(singular_residuals))
    return {"instances": n_instances, "cases": cases, "max_residual": max_residual, "min_slack": min_slack,
            "max_eta": max_eta, "max_top_singular_error": top_error, "min_control_slack": min_control,
            "control_identity": _control_summary(control_identity, tolerance),
            "control_left_singular": _control_summary(control_singular, tolerance), "worst": worst,
            "non_stationary": non_stationary}


def _offer_non_stationary(summary: dict, chain: dict) -> None:
    """Steps 1, 3, 4 and the weaker condition (π-side gap below J(pa)(1 − η)/η) under a non-stationary μ₀."""
    summary["cases"] += chain["candidates"].size
    summary["max_identity_error"] = max(summary["max_identity_error"], float(chain["identity_error"].max()))
    summary["min_cauchy_schwarz_slack"] = min(summary["min_cauchy_schwarz_slack"],
                                              float(chain["cauchy_schwarz_slack"].min()))
    summary["min_sdpi_slack"] = min(summary["min_sdpi_slack"], float(chain["sdpi_slack"].min()))
    summary["margin_violations"] += int((chain["margin"] <= 0).sum())
    condition = chain["pi_side_gap"] < chain["gap_allowance"]
    summary["condition_cases"] += int(condition.sum())
    summary["condition_violations"] += int((condition & (chain["margin"] <= 0)).sum())


def _control_summary(per_instance: list[float], tolerance: float) -> dict:
    """The largest residual of an equality's control and on how many instances it exceeds ``tolerance``."""
    values = np.array(per_instance)
    return {"max": float(values.max()), "rejected_instances": int((values > tolerance).sum())}


#: Ranges of :func:`depth_sweep`: d, H, d·min π and the Dirichlet concentration of π's rows (both log-uniform:
#: sparse rows, where the J form fails) and that of μ₀ (small: μ₀ near a point mass, far from μ).
DEPTH_RANGES = {"d": (2, 4), "H": (3, 7), "eps_times_d": (0.0003, 0.3), "kernel_alpha": (0.03, 0.5),
                "init_alpha": 0.3}
#: Depths of the tree at or beyond this one are pooled in :func:`depth_sweep`'s tables.
DEPTH_CAP = 3


def _depth_rows() -> dict:
    return {depth: {"cases": 0, "violations": 0, "smallest_margin": np.inf} for depth in range(DEPTH_CAP + 1)}


def _offer_depth(rows: dict, depth: int, margins: np.ndarray) -> None:
    row = rows[min(depth, DEPTH_CAP)]
    row["cases"] += margins.size
    row["violations"] += int((margins <= 0).sum())
    row["smallest_margin"] = min(row["smallest_margin"], float(margins.min()))


def depth_sweep(rng, n_instances: int, *, ranges: dict = DEPTH_RANGES) -> dict:
    """The J form and the weaker sufficient condition under non-stationary μ₀, by the depth of pa(h) and of h'
    (``thm3-init-gradient``, the boundary of "what holds instead": positions far from the root mix towards μ).

    Parameters
    ----------
    rng : numpy Generator.
    n_instances : random (sparse kernel with π ≥ ε > 0, chain or random recursive tree, Dirichlet μ₀) instances;
        every h ≥ 2 and every candidate h' ≠ pa(h) is a case.
    ranges : :data:`DEPTH_RANGES`.

    Returns
    -------
    dict: ``instances``, ``cases`` (ties and uninformative parents, |J(pa) − J(h')| or J(pa) at most TIE_ATOL, left
    out and counted as ``ties``), ``violations`` (J(h') > J(pa)); ``by_parent_depth`` and ``by_candidate_depth``
    ({depth: {cases, violations, smallest_margin}}, depths ≥ DEPTH_CAP pooled under DEPTH_CAP);
    ``condition_cases`` (π-side gap below J(pa)(1 − η)/η), ``condition_violations`` (margin ≤ 0 among those),
    ``condition_smallest_margin``; ``tv`` (TV(μ₀, μ) per instance, for the figure); ``hardest`` (the case with the
    smallest margin: kernel, parents, init, h, candidate, margin, pi_side_gap, gap_allowance).
    """
    rng = check_rng(rng)
    n_instances = check_positive_int(n_instances, "n_instances")
    by_parent, by_candidate = _depth_rows(), _depth_rows()
    summary = {"cases": 0, "ties": 0, "violations": 0, "condition_cases": 0, "condition_violations": 0,
               "condition_smallest_margin": np.inf}
    tv, hardest = [], None
    for _ in range(n_instances):
        kernel, parents, init = _depth_instance(rng, ranges)
        depth = depths(parents)
        tv.append(0.5 * float(np.abs(init - stationary_distribution(kernel)).sum()))
        for h in range(2, len(parents)):
            chain = proof_chain(kernel, parents, h, init)
            # a tie, or a parent that carries no information about x_h (J(pa) = 0): rounding, not a violation
            decided = (np.abs(chain["margin"]) > TIE_ATOL) & (chain["J_parent"] > TIE_ATOL)
            summary["ties"] += int((~decided).sum())
            if not decided.any():
                continue
            margin = chain["margin"][decided]
            _offer_depth(by_parent, int(depth[chain["parent"]]), margin)
            for candidate, value in zip(chain["candidates"][decided], margin):
                _offer_depth(by_candidate, int(depth[candidate]), np.array([value]))
            met = condition_holds(chain)[decided]
            summary["cases"] += margin.size
            summary["violations"] += int((margin <= 0).sum())
            summary["condition_cases"] += int(met.sum())
            summary["condition_violations"] += int((met & (margin <= 0)).sum())
            if met.any():
                summary["condition_smallest_margin"] = min(summary["condition_smallest_margin"],
                                                           float(margin[met].min()))
            k = int(np.flatnonzero(decided)[np.argmin(margin)])
            if hardest is None or chain["margin"][k] < hardest["margin"]:
                hardest = {"kernel": kernel.tolist(), "parents": parents.tolist(), "init": init.tolist(), "h": h,
                           "candidate": int(chain["candidates"][k]), "margin": float(chain["margin"][k]),
                           "pi_side_gap": float(chain["pi_side_gap"][k]),
                           "gap_allowance": float(chain["gap_allowance"][k])}
    return {"instances": n_instances, **summary, "by_parent_depth": by_parent, "by_candidate_depth": by_candidate,
            "tv": tv, "hardest": hardest}


def _depth_instance(rng: np.random.Generator, ranges: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One instance of :func:`depth_sweep`: a chain half the time (every earlier position an ancestor)."""
    d = int(rng.integers(ranges["d"][0], ranges["d"][1] + 1))
    H = int(rng.integers(ranges["H"][0], ranges["H"][1] + 1))
    alpha = float(np.exp(rng.uniform(*np.log(ranges["kernel_alpha"]))))
    eps_times_d = float(np.exp(rng.uniform(*np.log(ranges["eps_times_d"]))))
    kernel = random_kernel(d, alpha=alpha, eps=eps_times_d / d, rng=rng)
    parents = np.arange(-1, H - 1) if rng.random() < 0.5 else random_parents(H, rng=rng)
    init = rng.dirichlet(np.full(d, ranges["init_alpha"]))
    return kernel, parents, 0.999 * init + 0.001 / d  # full support: every law the proof chain accepts


def condition_holds(chain: dict) -> np.ndarray:
    """The weaker sufficient condition of the J form, per candidate of a :func:`proof_chain`: π-side gap below
    J(pa)(1 − η)/η (then J(h') < J(pa), whatever μ₀)."""
    return chain["pi_side_gap"] < chain["gap_allowance"]
