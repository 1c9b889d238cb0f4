"""Libraries take sizes; only a claim's plan knows tiers (issue 41). No module of ``model/`` or ``numerics/`` names a
tier in its code (docstrings and comments may say what a size is for) or holds a table keyed by the tiers' names, and
imports point one way: ``numerics`` imports neither ``theory``, ``model`` nor ``reports``; ``model`` never imports
``reports``. The per-tier sizes and runs live in ``reports/`` (``reports/plans.py``, ``reports/claims/exp_robustness/plan.py``).
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LIBRARIES = ("model", "numerics")
#: The word tier or tiers in a name or string: ``tier``, ``TIERS``, ``SEEDS_PER_TIER``; not ``frontier``.
TIER_WORD = re.compile(r"(?<![A-Za-z])tiers?(?![A-Za-z])", re.IGNORECASE)
#: The names of the report's tiers (``reports.catalog.TIERS``); a dict literal keyed by them is a tier table.
TIER_NAMES = {"quick", "full"}
#: Packages each library must not import.
FORBIDDEN_IMPORTS = {"numerics": ("bma_verify.theory", "bma_verify.model", "bma_verify.reports"),
                     "model": ("bma_verify.reports",)}


def library_files(root: Path = ROOT) -> list[Path]:
    """Every Python file of the libraries under ``root``."""
    return sorted(p for library in LIBRARIES for p in (root / library).rglob("*.py"))


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the string constants that are docstrings (first statement of a module, class or function)."""
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                ids.add(id(first.value))
    return ids


def _words(node: ast.AST) -> list[str]:
    """The identifiers and non-docstring text a node puts in the code."""
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Attribute):
        return [node.attr]
    if isinstance(node, ast.arg):
        return [node.arg]
    if isinstance(node, ast.keyword):
        return [node.arg or ""]
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, ast.alias):
        return [node.name, node.asname or ""]
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    return []


def tier_logic(source: str) -> list[str]:
    """What in ``source`` (Python code) knows tiers: each code word naming a tier, outside docstrings and comments
    (which the parser drops), and each dict literal keyed by the tiers' names; as ``"line N: ..."``."""
    tree = ast.parse(source)
    docstrings = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if id(node) in docstrings:
            continue
        for word in _words(node):
            if TIER_WORD.search(word):
                found.append(f"line {getattr(node, 'lineno', '?')}: {word!r}")
        if isinstance(node, ast.Dict):
            keys = {k.value for k in node.keys if isinstance(k, ast.Constant)}
            if TIER_NAMES <= keys:
                found.append(f"line {node.lineno}: a dict keyed by {sorted(TIER_NAMES)}")
    return found


def forbidden_imports(path: Path, library: str) -> list[str]:
    """The imports of ``path`` (in ``library``) that point the wrong way."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                 else [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else [])
        found += [n for n in names if n.startswith(FORBIDDEN_IMPORTS[library])]
    return found


@pytest.mark.parametrize("path", library_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_library_module_knows_tiers(path):
    assert tier_logic(path.read_text(encoding="utf-8")) == [], (
        f"{path.relative_to(ROOT)} knows tiers: take sizes as arguments; per-tier tables belong to reports/ plans")


@pytest.mark.parametrize("path", library_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_library_imports_point_one_way(path):
    library = path.relative_to(ROOT).parts[0]
    assert forbidden_imports(path, library) == []


def test_the_scan_finds_tier_arguments_names_and_tables_but_not_prose():
    # reference: the forms tier logic took in model/ before issue 41 (a tier argument, a per-tier table, a tier name)
    # and what may stay (docstrings and comments saying which size a value serves)
    assert tier_logic("def runs(tier: str):\n    return RUNS[tier]\n")
    assert tier_logic("SEEDS_PER_TIER = 3\n")
    assert tier_logic('SCALE = {"quick": {"d": 5}, "full": {"d": 10}}\n')
    assert tier_logic('def f(x):\n    return g(x, size="full tier")\n')
    prose = ('"""Sizes the full tier trains."""\n'
             'def f(x):\n    """At the quick tier, x is small."""\n    return x  # the full tier: x large\n'
             'frontier = {"full": 1, "empty": 0}\n')
    assert tier_logic(prose) == []
