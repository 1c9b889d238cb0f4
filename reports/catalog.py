"""What the command names before it imports any check: the claims (id, module, kinds of check, a short statement), the
tiers, the devices and the claims about a kernel. Standard library only.

The claim modules import torch, SymPy, SciPy and matplotlib (seconds); ``bma-verify --help``, ``--version``,
``check --list`` and the refusal of a bad argument need none of them and read this table instead.
:mod:`reports.registry` imports the modules named here, in this order, and ``tests/test_catalog.py`` checks each
module's ``CLAIM`` against its entry (id, section, kinds of check), so that the two cannot drift apart.

A claim is either a module listed in :data:`LISTED` or a *claim folder* ``reports/claims/<claim_id>/`` (the id with
``_`` for ``-``): its ``__init__.py`` holds ``CATALOG_ENTRY`` (id, section, kinds, short; standard library only),
its ``claim.py`` the ``CLAIM``, and an optional ``plan.py`` its sizes per tier. Claim folders are discovered
(:func:`folder_entries`), so adding one edits no table; ``bma-verify check --claims-dir DIR`` adds the claim folders
of a folder of one's own (docs/adding-a-claim.md).
"""
from __future__ import annotations

import importlib.util
import sys
from importlib import import_module, metadata
from pathlib import Path
from typing import NamedTuple


class ClaimEntry(NamedTuple):
    """One claim as the command lists it; the claim itself (statement, checks) is ``CLAIM`` of ``module``."""

    id: str
    module: str  # the module of reports.claims that defines the claim's CLAIM ("<folder>.claim" for a claim folder)
    section: str  # "paper" or "beyond", as Claim.section
    kinds: tuple[str, ...]  # the kinds of its checks, each once, in the order of its checks
    short: str  # what it states, in one line (the precise statement: Claim.statement, ``check --list --json``)


#: The claims that are modules of reports.claims: the paper's, in the order of the paper, then ours and the paper's
#: footnote 1 ("Beyond the paper").
LISTED: tuple[ClaimEntry, ...] = (
    ClaimEntry("bma-score-identity", "bma_score_identity", "paper", ("symbolic", "exact", "model"),
               "score = Σ_l log π(x_h | x_h'); its softmax is the parent posterior"),
    ClaimEntry("prop1-invariance", "prop1_invariance", "paper", ("symbolic", "exact", "model"),
               "W + 1aᵀ gives the same A^(2); W + b1ᵀ does not"),
    ClaimEntry("thm1-construction", "thm1_construction", "paper", ("symbolic", "exact", "model"),
               "the construction's A^(2) → the BMA posterior as β → ∞"),
    ClaimEntry("lemma3-strict-dpi", "lemma3_strict_dpi", "paper", ("symbolic", "exact", "monte-carlo"),
               "π ≥ ε > 0: I(x_h; x_h') ≤ α·I(x_h; x_pa) with α < 1"),
    ClaimEntry("lemma4-loglik-gap", "lemma4_loglik_gap", "paper", ("symbolic", "exact", "monte-carlo"),
               "log-likelihood gap of pa over h' = MI gap + E KL > 0"),
    ClaimEntry("thm2-consistency", "thm2_consistency", "paper", ("monte-carlo", "symbolic", "model"),
               "A^(2) → e_pa(h) as the number of examples L → ∞"),
    ClaimEntry("thm3-init-gradient", "thm3_init_gradient", "paper", ("symbolic", "exact", "monte-carlo", "model"),
               "at initialisation the largest expected gradient is on pa(h)"),
    ClaimEntry("prop2-ds-quadratic", "prop2_ds_quadratic", "paper", ("symbolic", "exact", "model"),
               "DS task: the BMA score is quadratic; no bilinear W matches it"),
    ClaimEntry("exp-fig2-attention", "exp_fig2_attention", "paper", ("model",),
               "Fig. 2: trained A^(2) puts its mass on the true parent"),
    ClaimEntry("exp-fig3-parameters", "exp_fig3_parameters", "paper", ("model",),
               "Fig. 3: trained w_H peaks at 0, W_KQ block-diagonal, σ(W_OV) ≈ π"),
    ClaimEntry("exp-fig5-generalization", "exp_fig5_generalization", "paper", ("model",),
               "Fig. 5: trained at small L, L_pa stays near BMA at other L'"),
    ClaimEntry("exp-fig6-column-alignment", "exp_fig6_column_alignment", "paper", ("model",),
               "Fig. 6: σ_col(W) aligns with σ_col(log π), unlike the rows"),
    ClaimEntry("exp-robustness", "exp_robustness", "paper", ("model",),
               "a standard GPT also learns the task, near BMA"),
    ClaimEntry("ext-dag-posterior", "ext_dag_posterior", "beyond", ("exact",),
               "k-parent DAGs: the set posterior is Bayes over every DAG"),
    ClaimEntry("ext-dag-lemma4-sets", "ext_dag_lemma4_sets", "beyond", ("symbolic", "exact", "monte-carlo"),
               "k-sets: the log-likelihood gap is an expected KL, ≥ 0"),
    ClaimEntry("ext-dag-lemma3-sets", "ext_dag_lemma3_sets", "beyond", ("exact",),
               "k-sets: I(x_h; x_S) ≤ I(x_h; x_T), ratio < 1 for disjoint S"),
    ClaimEntry("ext-dag-thm3-sets", "ext_dag_thm3_sets", "beyond", ("exact",),
               "k-sets: the largest initial gradient is on the true set"),
    ClaimEntry("ext-dag-construction", "ext_dag_construction", "beyond", ("symbolic", "model"),
               "k-sets: a construction whose attention is the set posterior"),
    ClaimEntry("ext-dag-families", "ext_dag_families", "beyond", ("exact",),
               "k = 2: which attention families can fit the set posterior"),
    ClaimEntry("ext-dag-training", "ext_dag_training", "beyond", ("model",),
               "k = 2: copier + pair attention trains to the set posterior"),
    ClaimEntry("footnote1-selective-induction", "footnote1_selective_induction", "beyond", ("exact", "model"),
               "footnote 1: selective induction maps onto the tree task"),
    ClaimEntry("ext-selective-fig3", "ext_selective_fig3", "beyond", ("monte-carlo",),
               "their task: the tree construction is the Bayes predictive"),
    ClaimEntry("ext-selective-claim1", "ext_selective_claim1", "beyond", ("exact", "monte-carlo"),
               "their task: the true lag has the largest expected likelihood"),
    ClaimEntry("ext-selective-depth", "ext_selective_depth", "beyond", ("model",),
               "their task: depth 3 reaches the Bayes predictive, depth 2 not"),
)

#: The claim folders of the package: reports/claims/<claim_id>/.
CLAIMS_DIR = Path(__file__).resolve().parent / "claims"
#: The package that holds every claim, a claim folder of one's own (``--claims-dir``) included.
CLAIMS_PACKAGE = "bma_verify.reports.claims"
#: What a claim folder's ``CATALOG_ENTRY`` holds.
ENTRY_KEYS = ("id", "section", "kinds", "short")
SECTIONS = ("paper", "beyond")


def claim_folders(root: Path) -> list[Path]:
    """The claim folders directly under ``root`` (those holding a ``claim.py``), by name."""
    return sorted(folder for folder in Path(root).iterdir() if (folder / "claim.py").is_file())


def _import_folder(folder: Path):
    """The package of a claim folder as ``bma_verify.reports.claims.<folder name>``: imported from the package, or
    loaded from ``folder`` when it lies elsewhere (so that its claim.py may ``from .plan import ...``)."""
    name = f"{CLAIMS_PACKAGE}.{folder.name}"
    if folder.parent == CLAIMS_DIR:
        return import_module(name)
    loaded = sys.modules.get(name)
    if loaded is not None:
        if Path(loaded.__file__).parent != folder:
            raise ValueError(f"claim folder {folder}: the name {folder.name!r} is taken by {loaded.__file__}; rename "
                             "the folder")
        return loaded
    if not (folder / "__init__.py").is_file():
        raise ValueError(f"claim folder {folder}: expected an __init__.py holding CATALOG_ENTRY beside claim.py")
    import_module(CLAIMS_PACKAGE)
    spec = importlib.util.spec_from_file_location(name, folder / "__init__.py",
                                                  submodule_search_locations=[str(folder)])
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def folder_entry(folder: Path) -> ClaimEntry:
    """The catalog entry of one claim folder, from its ``CATALOG_ENTRY`` (its claim.py is not imported)."""
    folder = Path(folder).resolve()
    data = getattr(_import_folder(folder), "CATALOG_ENTRY", None)
    if not isinstance(data, dict) or set(data) != set(ENTRY_KEYS):
        raise ValueError(f"claim folder {folder}: __init__.py must define CATALOG_ENTRY = a dict with the keys "
                         f"{', '.join(ENTRY_KEYS)}; got {data!r}")
    if data["id"].replace("-", "_") != folder.name:
        raise ValueError(f"claim folder {folder}: its name must be the claim id with '_' for '-' "
                         f"({data['id'].replace('-', '_')!r})")
    if data["section"] not in SECTIONS:
        raise ValueError(f"claim folder {folder}: CATALOG_ENTRY['section'] must be one of {SECTIONS}, got "
                         f"{data['section']!r}")
    return ClaimEntry(data["id"], f"{folder.name}.claim", data["section"], tuple(data["kinds"]), data["short"])


def folder_entries(root: Path) -> tuple[ClaimEntry, ...]:
    """The catalog entries of the claim folders under ``root``, by folder name."""
    if not Path(root).is_dir():
        raise ValueError(f"claims dir must be a folder holding claim folders (<claim_id>/claim.py); got {root}")
    return tuple(folder_entry(folder) for folder in claim_folders(root))


def claim_index(claims_dir: str | Path | None = None) -> tuple[ClaimEntry, ...]:
    """Every claim: the listed modules and the package's claim folders, plus the claim folders of ``claims_dir``;
    the paper's section first, each section in that order."""
    entries = LISTED + folder_entries(CLAIMS_DIR) + (() if claims_dir is None else folder_entries(claims_dir))
    ids = [entry.id for entry in entries]
    repeated = sorted({i for i in ids if ids.count(i) > 1})
    if repeated:
        raise ValueError(f"claim ids must be unique; {', '.join(repeated)} is defined twice")
    return tuple(sorted(entries, key=lambda entry: SECTIONS.index(entry.section)))  # stable: order kept within


#: Every claim of the package, in report order (:func:`claim_index`).
CLAIM_INDEX: tuple[ClaimEntry, ...] = claim_index()
CLAIM_IDS: tuple[str, ...] = tuple(entry.id for entry in CLAIM_INDEX)

#: Check sizes: ``quick`` for a laptop and CI, ``full`` the paper's.
TIERS = ("quick", "full")
#: Where the paper-experiment presets of a check train (``bma-verify check --device``).
DEVICES = ("cpu", "cuda")
#: The claims that are statements about a kernel (``check --kernel``), in report order.
KERNEL_CLAIMS = ("lemma3-strict-dpi", "lemma4-loglik-gap", "thm2-consistency", "thm3-init-gradient",
                 "thm1-construction")



def package_version() -> str:
    """The installed bma-verify's version (``bma-verify --version``, results.json), "unknown" when not installed."""
    try:
        return metadata.version("bma-verify")
    except metadata.PackageNotFoundError:
        return "unknown"
