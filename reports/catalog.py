"""What the command names before it imports any check: the claims (id, module, kinds of check, a short statement), the
tiers, the devices and the claims about a kernel. Standard library only.

Every claim is a *claim folder* ``reports/claims/<claim_id>/`` (the id with ``_`` for ``-``): its ``__init__.py``
holds ``CATALOG_ENTRY`` (id, section, kinds, short; standard library only), its ``claim.py`` the ``CLAIM`` and its
checks, and further modules what only that claim uses. ``claim.py`` imports torch, SymPy, SciPy and matplotlib
(seconds); ``bma-verify --help``, ``--version``, ``check --list`` and the refusal of a bad argument read the
``CATALOG_ENTRY`` only. Claim folders are discovered (:func:`folder_entries`), so adding one edits no table;
``tests/test_catalog.py`` checks each ``CLAIM`` against its entry. ``bma-verify check --claims-dir DIR`` adds the
claim folders of a folder of one's own (docs/adding-a-claim.md).
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
    module: str  # the module of reports.claims that defines the claim's CLAIM: "<folder>.claim"
    section: str  # "paper" or "beyond", as Claim.section
    kinds: tuple[str, ...]  # the kinds of its checks, each once, in the order of its checks
    short: str  # what it states, in one line (the precise statement: Claim.statement, ``check --list --json``)


#: The order of the report: the paper's claims in the order of the paper, then ours and the paper's footnote 1
#: ("Beyond the paper"). A claim folder not named here follows the named ones of its section, by folder name.
REPORT_ORDER: tuple[str, ...] = (
    "bma-score-identity", "prop1-invariance", "thm1-construction", "lemma3-strict-dpi", "lemma4-loglik-gap",
    "thm2-consistency", "thm3-init-gradient", "prop2-ds-quadratic", "exp-fig2-attention", "exp-fig3-parameters",
    "exp-fig5-generalization", "exp-fig6-column-alignment", "exp-robustness",
    "ext-dag-posterior", "ext-dag-lemma4-sets", "ext-dag-lemma3-sets", "ext-dag-thm3-sets", "ext-dag-construction",
    "ext-dag-families", "ext-dag-training", "footnote1-selective-induction", "ext-selective-fig3",
    "ext-selective-claim1", "ext-selective-depth",
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


def report_rank(entry: ClaimEntry) -> tuple:
    """Where a claim stands in the report: its section, then its place in :data:`REPORT_ORDER` (a claim not named
    there after the named ones, by id)."""
    named = entry.id in REPORT_ORDER
    return (SECTIONS.index(entry.section), not named, REPORT_ORDER.index(entry.id) if named else 0, entry.id)


def claim_index(claims_dir: str | Path | None = None) -> tuple[ClaimEntry, ...]:
    """Every claim: the package's claim folders, plus those of ``claims_dir``, in report order
    (:func:`report_rank`)."""
    entries = folder_entries(CLAIMS_DIR) + (() if claims_dir is None else folder_entries(claims_dir))
    ids = [entry.id for entry in entries]
    repeated = sorted({i for i in ids if ids.count(i) > 1})
    if repeated:
        raise ValueError(f"claim ids must be unique; {', '.join(repeated)} is defined twice")
    return tuple(sorted(entries, key=report_rank))


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
