"""docs/adding-a-claim.md is a working example: its code blocks, written into a temporary folder, are a claim that
``bma-verify check --claims-dir`` lists and checks, with the verdicts and values its checks compute, and nothing in
the checkout changes."""
import json
import re
import subprocess
import sys
from importlib import import_module
from pathlib import Path

import pytest

from bma_verify.reports import catalog
from bma_verify.reports.core import CheckContext, settle

PAGE = Path(__file__).resolve().parents[1] / "docs" / "adding-a-claim.md"
#: A block of the page that is a file: a fenced Python block whose first line names its path.
FILE_BLOCK = re.compile(r"```python\n# (?P<path>[\w./]+\.py)\n(?P<code>.*?)```", re.DOTALL)
CLAIM_ID, FOLDER = "ext-small-model-bma", "ext_small_model_bma"


def page_files() -> dict[str, str]:
    """{path: code} of every file block of the page."""
    return {m["path"]: m["code"] for m in FILE_BLOCK.finditer(PAGE.read_text(encoding="utf-8"))}


def _git_status() -> str:
    return subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=PAGE.parents[1],
                          capture_output=True, text=True, check=True).stdout


def _bma_verify(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bma_verify.reports.entry", *args], capture_output=True, text=True,
                          timeout=300)


@pytest.fixture
def example(tmp_path):
    """The page's claim folder under ``tmp_path/claims`` and its test file under ``tmp_path/tests``; the package it
    is imported as is forgotten afterwards."""
    files = page_files()
    assert set(files) == {f"{FOLDER}/__init__.py", f"{FOLDER}/plan.py", f"{FOLDER}/claim.py",
                          f"tests/claims/test_{FOLDER}.py"}
    for path, code in files.items():
        target = tmp_path / ("claims" if path.startswith(FOLDER) else "") / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(code, encoding="utf-8")
    yield tmp_path
    for name in [n for n in sys.modules if n.startswith(f"{catalog.CLAIMS_PACKAGE}.{FOLDER}")]:
        del sys.modules[name]


@pytest.mark.slow  # two commands and three training runs: about 15 s on one core
def test_the_pages_claim_is_listed_and_checked_from_its_folder_and_nothing_in_the_checkout_changes(example):
    before = _git_status()
    listed = _bma_verify("check", "--list", "--claims-dir", str(example / "claims"))
    assert listed.returncode == 0, listed.stderr
    assert f"{CLAIM_ID}  " in listed.stdout and CLAIM_ID not in catalog.CLAIM_IDS
    checked = _bma_verify("check", CLAIM_ID, "--claims-dir", str(example / "claims"), "--json", "--quiet")
    assert checked.returncode == 0, checked.stderr
    [record] = json.loads(checked.stdout)["claims"]
    assert _git_status() == before

    # the same checks, run here from the same folder, compute what the command printed
    entry = catalog.folder_entry(example / "claims" / FOLDER)
    claim = import_module(f"{catalog.CLAIMS_PACKAGE}.{entry.module}")
    ctx = CheckContext(tier="quick", seed=0)
    exact, model = (check.run(ctx) for check in claim.CLAIM.checks)
    assert record["id"] == CLAIM_ID and record["verdict"] == "pass"
    printed = {check["kind"]: check for check in record["checks"]}
    assert printed["exact"]["verdict"] == settle(exact)[0] == "pass"
    assert printed["exact"]["measured"]["max_difference"] == pytest.approx(exact.measured["max_difference"], abs=1e-13)
    assert printed["exact"]["control"]["rejected"] and printed["exact"]["positive_control"]["passed"]
    assert printed["model"]["verdict"] == settle(model)[0] == "pass"
    assert printed["model"]["measured"]["gap_to_bma"] == pytest.approx(model.measured["gap_to_bma"], abs=1e-9)
    assert all(gap <= claim.GAP_TOL for gap in model.measured["gap_to_bma"])
    assert printed["model"]["seeds"]["training_seeds"] == claim.training_seeds(ctx)
    assert printed["model"]["control"]["measured"]["gap_to_bma"] > claim.GAP_TOL


def test_the_pages_test_file_passes_on_the_pages_claim(example):
    catalog.folder_entry(example / "claims" / FOLDER)  # imports the folder as bma_verify.reports.claims.<name>
    tests = {}
    exec(compile((example / "tests" / "claims" / f"test_{FOLDER}.py").read_text(), f"test_{FOLDER}.py", "exec"),
         tests)
    names = [name for name in tests if name.startswith("test_")]
    assert len(names) == 2
    for name in names:
        tests[name]()

