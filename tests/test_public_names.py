"""Private stays home (issue 41): no module of the package uses a name with a leading underscore that another
package module defines. What another module needs is public, documented and tested.

The scan reads every module of theory/, numerics/, model/ and reports/ (the installed ``bma_verify.*``) as source
and flags, in each:

- an import of a private module (``import bma_verify.model._x``, ``from bma_verify.model._x import y``,
  ``from bma_verify.model import _x``), relative imports resolved;
- an import of a private name from another package module (``from bma_verify.numerics.task import _x``);
- an attribute ``m._x`` where ``m`` is a package module or package bound by an import;
- an attribute ``obj._x`` (``self._x`` included) where ``_x`` is not defined in the module itself but is defined in
  another package module: an inherited private method, or another module's private field read from outside.

Dunder names (``__version__``, ``__all__``, ``__init__``) and a module's own private names are fine.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: The folders installed as ``bma_verify.<folder>`` (pyproject.toml's package-dir).
PACKAGES = ("theory", "numerics", "model", "reports")


def is_private(name: str) -> bool:
    """A leading underscore, dunders excepted."""
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def package_modules(root: Path) -> dict[str, Path]:
    """{dotted module name: file} for every module of the package under ``root``."""
    modules = {}
    for folder in PACKAGES:
        for path in sorted((root / folder).rglob("*.py")):
            parts = list(path.relative_to(root / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(["bma_verify", folder, *parts])] = path
    return modules


def private_definitions(tree: ast.AST) -> set[str]:
    """Every private name a module binds: functions, classes, variables, attributes it assigns, arguments."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.keyword) and node.arg:
            names.add(node.arg)
    return {name for name in names if is_private(name)}


def _source_module(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    """The absolute module a ``from ... import`` reads from, relative imports resolved."""
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _dotted(node: ast.AST) -> tuple[str, list[str]] | None:
    """``a.b.c`` as ("a", ["b", "c"]); None when the chain does not start at a plain name."""
    chain = []
    while isinstance(node, ast.Attribute):
        chain.append(node.attr)
        node = node.value
    return (node.id, chain[::-1]) if isinstance(node, ast.Name) else None


def _import_violations(tree: ast.AST, module: str, is_package: bool, modules: dict) -> tuple[list, dict]:
    """Private modules and names imported from other package modules, and {local name: module} for the package
    modules the imports bind."""
    found, aliases = [], {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if not alias.name.startswith("bma_verify"):
                    continue
                if any(is_private(part) for part in alias.name.split(".")):
                    found.append((node.lineno, f"imports the private module {alias.name}"))
                aliases[alias.asname or "bma_verify"] = alias.name if alias.asname else "bma_verify"
        elif isinstance(node, ast.ImportFrom):
            source = _source_module(node, module, is_package)
            if not source.startswith("bma_verify"):
                continue
            if any(is_private(part) for part in source.split(".")):
                found.append((node.lineno, f"imports from the private module {source}"))
            for alias in node.names:
                if is_private(alias.name):
                    found.append((node.lineno, f"imports the private name {alias.name} from {source}"))
                target = f"{source}.{alias.name}"
                if target in modules:
                    aliases[alias.asname or alias.name] = target
    return found, aliases


def violations(path: Path, module: str, modules: dict, definitions: dict) -> list[str]:
    """Each use, in ``path`` (module ``module``), of a private name of another package module, as "file:line:
    what"."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found, aliases = _import_violations(tree, module, path.name == "__init__.py", modules)
    own = private_definitions(tree)
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and is_private(node.attr)):
            continue
        dotted = _dotted(node.value)
        target = ".".join([aliases[dotted[0]], *dotted[1]]) if dotted and dotted[0] in aliases else None
        if target is not None and target != module:
            found.append((node.lineno, f"uses {target}.{node.attr}"))
        elif target is None and node.attr not in own:
            homes = sorted(name for name, names in definitions.items() if node.attr in names and name != module)
            if homes:
                found.append((node.lineno, f"uses .{node.attr}, defined in {', '.join(homes)}"))
    return [f"{path}:{line}: {what}" for line, what in sorted(found)]


def scan(root: Path) -> list[str]:
    """Every cross-module use of a private name in the package under ``root``."""
    modules = package_modules(root)
    definitions = {name: private_definitions(ast.parse(path.read_text(encoding="utf-8")))
                   for name, path in modules.items()}
    return [v for name, path in modules.items() for v in violations(path, name, modules, definitions)]


def test_no_module_uses_a_private_name_of_another_module():
    found = scan(ROOT)
    assert not found, "private names used across modules (make them public, or keep them home):\n" + "\n".join(found)


def test_the_scan_reads_every_package_folder():
    modules = package_modules(ROOT)
    for folder in PACKAGES:
        assert any(name.startswith(f"bma_verify.{folder}.") for name in modules), folder
    assert "bma_verify.reports.checks.trained" in modules  # subpackages are read too


@pytest.mark.parametrize("source, what", [
    ("from bma_verify.numerics.task import _helper\n", "imports the private name _helper"),
    ("from ..numerics.task import _helper\n", "imports the private name _helper from bma_verify.numerics.task"),
    ("import bma_verify.numerics._hidden\n", "imports the private module bma_verify.numerics._hidden"),
    ("from bma_verify.numerics import _hidden\n", "imports the private name _hidden"),
    ("from bma_verify.numerics import task\ntask._helper()\n", "uses bma_verify.numerics.task._helper"),
    ("import bma_verify.numerics.task as t\nt._helper()\n", "uses bma_verify.numerics.task._helper"),
    ("from bma_verify.numerics.task import Base\nclass C(Base):\n    def f(self):\n        return self._step()\n",
     "uses ._step, defined in bma_verify.numerics.task"),
])
def test_the_scan_flags_each_kind_of_cross_module_use(tmp_path, source, what):
    (tmp_path / "numerics").mkdir()
    (tmp_path / "numerics" / "task.py").write_text("class Base:\n    def _step(self):\n        pass\n\n\n"
                                                  "def _helper():\n    pass\n")
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "user.py").write_text(source)
    found = scan(tmp_path)
    assert len(found) == 1 and what in found[0], found


@pytest.mark.parametrize("source", [
    "from bma_verify import __version__\nimport bma_verify.numerics.task as t\nprint(t.__all__)\n",
    "def _own():\n    pass\n\n\n_own()\n",
    "class C:\n    def __init__(self):\n        self._cache = {}\n\n    def f(self):\n        return self._cache\n",
    "from bma_verify.numerics.task import Base\nclass C(Base):\n    def _step(self):\n        return super()._step()\n",
])
def test_the_scan_leaves_dunders_and_a_modules_own_private_names_alone(tmp_path, source):
    (tmp_path / "numerics").mkdir()
    (tmp_path / "numerics" / "task.py").write_text("class Base:\n    def _step(self):\n        pass\n")
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "user.py").write_text(source)
    assert scan(tmp_path) == []
