"""A tool that reads the checkout, without installing or importing it, finds every ``bma_verify.*`` module's file
(issue 41): the checked-in folder ``bma_verify/`` holds the relative links ``theory -> ../theory``, ``numerics``,
``model`` and ``reports`` (README.md, "Layout"), so ``bma_verify.model.training`` is ``bma_verify/model/training.py``,
the file ``model/training.py``.

What each check is compared against:

- the links: ``bma_verify/`` holds exactly those four entries, each a link named ``../<its name>`` that reaches a folder
  with an ``__init__.py``;
- the imports: every ``import bma_verify.x.y`` and ``from bma_verify.x import y`` (``from bma_verify import numerics``
  included) and every relative import in the package's folders, tests/ and benchmarks/ is read with ``ast`` and looked
  up in the file system under this checkout's ``bma_verify/`` (``bma_verify/x/y.py`` or ``bma_verify/x/y/__init__.py``).
  Nothing is imported; a module loaded by ``importlib.import_module`` from a computed name is not read;
- the circles: the graph of the imports that run when a module loads (module level, ``if``/``try`` blocks and class
  bodies; imports inside functions are left out, since they run only when called) has no cycle over the package's
  modules. An arrow goes to the module an import names (``from bma_verify.x import y`` to ``bma_verify.x.y`` where
  that is a module, else to ``bma_verify.x``), not to the packages above it that Python also loads;
- the packaging: what setuptools finds under pyproject.toml's ``packages.find`` is ``bma_verify`` and every folder
  under it with an ``__init__.py``;
- one identity at run time: in this process no file of the checkout is loaded under two module names (a bare
  ``model.training`` beside ``bma_verify.model.training``).
"""
from __future__ import annotations

import ast
import os
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "bma_verify"
#: The folders installed as ``bma_verify.<folder>``, each linked from ``bma_verify/<folder>``.
FOLDERS = ("theory", "numerics", "model", "reports")
#: Where ``bma_verify.*`` imports are read: the package's folders, the tests and the benchmarks.
READ = (*FOLDERS, "tests", "benchmarks")


def module_file(name: str, package: Path = PACKAGE) -> Path | None:
    """The file of module ``name`` (``bma_verify.x.y``) under ``package``, or None: ``x/y.py`` or ``x/y/__init__.py``."""
    parts = name.split(".")[1:]
    if not parts:
        return None  # bma_verify itself is a namespace: a folder with no file
    base = package.joinpath(*parts)
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def module_name(path: Path, root: Path = ROOT) -> str | None:
    """``bma_verify.x.y`` for ``root/x/y.py`` (or ``root/x/y/__init__.py``) in one of FOLDERS; None elsewhere."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[0] not in FOLDERS:
        return None
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(["bma_verify", *parts])


def source_files(root: Path = ROOT) -> list[Path]:
    """Every .py file of READ under ``root`` (the real folders; ``bma_verify/`` is not walked)."""
    return sorted(p for folder in READ for p in (root / folder).rglob("*.py"))


def imports(tree: ast.AST, here: str | None, *, top_level_only: bool = False):
    """(line, module, names) for each import of ``tree`` that names ``bma_verify`` or is relative: ``module`` is the
    absolute dotted name (relative ones resolved from ``here``, the importing module's name; None where that is
    unknown), ``names`` the names of a from-import (empty for ``import``). With ``top_level_only``, imports inside
    functions are skipped."""
    def walk(node):
        for child in ast.iter_child_nodes(node):
            if top_level_only and isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                continue
            if isinstance(child, ast.Import):
                for alias in child.names:
                    if alias.name.split(".")[0] == "bma_verify":
                        yield child.lineno, alias.name, ()
            elif isinstance(child, ast.ImportFrom):
                names = tuple(alias.name for alias in child.names)
                if child.level:
                    if here is None:
                        yield child.lineno, None, names
                        continue
                    package = here if is_package.get(here) else here.rpartition(".")[0]
                    base = package.rsplit(".", child.level - 1)[0] if child.level > 1 else package
                    yield child.lineno, ".".join(filter(None, (base, child.module))), names
                elif child.module and child.module.split(".")[0] == "bma_verify":
                    yield child.lineno, child.module, names
            yield from walk(child)
    yield from walk(tree)


#: {module name: True for a package (an __init__.py)} over the package's files, for resolving relative imports.
is_package = {module_name(p): p.name == "__init__.py" for p in source_files() if module_name(p)}


def unresolved(path: Path, package: Path = PACKAGE, root: Path = ROOT) -> list[str]:
    """The imports of ``path`` that name a ``bma_verify`` module with no file under ``package``."""
    here = module_name(path, root)
    missing = []
    for line, module, names in imports(ast.parse(path.read_text(), str(path)), here):
        where = f"{path.relative_to(root)}:{line}"
        if module is None:
            missing.append(f"{where}: a relative import outside the package")
        elif module == "bma_verify":  # from bma_verify import numerics: each name is a subpackage
            missing += [f"{where}: bma_verify.{n}" for n in names if module_file(f"bma_verify.{n}", package) is None]
        elif module_file(module, package) is None:
            missing.append(f"{where}: {module}")
    return missing


def graph(root: Path = ROOT, package: Path = PACKAGE) -> dict[str, set[str]]:
    """{module: the package modules it imports when it loads} over every module of FOLDERS."""
    edges = {}
    for path in source_files(root):
        here = module_name(path, root)
        if here is None:
            continue
        targets = set()
        for _, module, names in imports(ast.parse(path.read_text(), str(path)), here, top_level_only=True):
            if module is None:
                continue
            submodules = {f"{module}.{n}" for n in names if module_file(f"{module}.{n}", package)}
            targets |= submodules
            if not names or len(submodules) < len(names):
                targets.add(module)  # an import of the module itself, or of names its file defines
        edges[here] = {t for t in targets if t != here and t != "bma_verify"}
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """One cycle for each strongly connected part with more than one module (Tarjan), each as a list of modules."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            part = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                part.append(top)
                if top == node:
                    break
            if len(part) > 1:
                found.append(sorted(part))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def test_the_links_are_the_four_folders():
    # Reference: FOLDERS; a link is relative (../<name>) so that a fresh clone anywhere gets working links
    assert sorted(os.listdir(PACKAGE)) == sorted(FOLDERS)
    for folder in FOLDERS:
        link = PACKAGE / folder
        assert link.is_symlink() and os.readlink(link) == f"../{folder}", f"bma_verify/{folder} is not ../{folder}"
        assert (link / "__init__.py").is_file() and link.resolve() == ROOT / folder


@pytest.mark.parametrize("path", source_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_bma_verify_import_resolves_to_a_file(path):
    # Reference: the file system under bma_verify/ (no import): bma_verify/x/y.py or bma_verify/x/y/__init__.py
    assert unresolved(path) == []


def test_the_import_graph_has_no_circles():
    # Reference: the module-level imports read by ast (imports inside functions left out, see the module docstring)
    edges = graph()
    assert len(edges) > 100 and sum(map(len, edges.values())) > 100  # the graph was read, not empty
    assert cycles(edges) == []


def test_the_packages_are_the_folders_under_bma_verify():
    # Reference: the folders with an __init__.py under bma_verify/, against what setuptools finds under pyproject.toml's
    # [tool.setuptools.packages.find] (found, not listed: a new claim folder needs no edit of pyproject.toml)
    from setuptools import find_namespace_packages
    find = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    packages = {p for p in find_namespace_packages(where=str(ROOT), include=find["include"], exclude=find["exclude"])
                if "__pycache__" not in p}
    found = {"bma_verify"} | {module_name(p) for p in source_files() if p.name == "__init__.py" and module_name(p)}
    assert packages == found


def test_no_file_of_the_checkout_is_loaded_under_two_names():
    # Reference: sys.modules of this process, after loading a module of each folder by the package's names
    import bma_verify.model.training  # noqa: F401
    import bma_verify.reports.cli  # noqa: F401
    from bma_verify import numerics, theory  # noqa: F401

    names: dict[str, list[str]] = {}
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if file and Path(file).resolve().is_relative_to(ROOT) and name != "__main__":
            names.setdefault(str(Path(file).resolve()), []).append(name)
    ours = {file: n for file, n in names.items() if any(m.startswith("bma_verify.") for m in n)}
    assert len(ours) > 10 and all(len(n) == 1 for n in ours.values()), {f: n for f, n in ours.items() if len(n) > 1}
    assert not any(name.split(".")[0] in FOLDERS for n in names.values() for name in n)


def test_a_missing_link_is_found(tmp_path):
    # Reference: a copy of the checkout's bma_verify/ without the model link: model's imports no longer resolve
    package = tmp_path / "bma_verify"
    package.mkdir()
    for folder in FOLDERS[:2] + FOLDERS[3:]:
        (package / folder).symlink_to(ROOT / folder)
    missing = unresolved(ROOT / "reports" / "cli.py", package=package)
    assert missing and all("bma_verify.model" in m for m in missing)
