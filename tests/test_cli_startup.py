"""The command starts at once: ``--help``, ``--version``, ``check --list`` and a refused argument import neither torch
nor SymPy, SciPy or matplotlib (seconds), each command importing what it needs once its arguments are checked; and
its help documents every option with its default. Import times are measured by ``make bench``, not here: a test
looks at which modules a start-up imported (``sys.modules``), which no load on the machine changes."""
import re
import subprocess
import sys

import numpy as np
import pytest

from bma_verify.reports import cli

HEAVY = ("torch", "sympy", "scipy", "matplotlib")

#: Runs the console script's entry in a fresh interpreter and reports, as its last stderr line, the heavy packages
#: it imported.
PROBE = """
import sys
from bma_verify.reports.entry import main
try:
    status = main(sys.argv[1:])
except SystemExit as exc:
    status = exc.code
print("imported:" + ",".join(m for m in %r if m in sys.modules), file=sys.stderr)
sys.exit(status)
""" % (HEAVY,)


def _imported(argv: list[str]) -> tuple[int, set[str], str]:
    """(exit status, heavy packages imported, stdout) of ``bma-verify ARGV``."""
    run = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, timeout=120)
    last = run.stderr.strip().splitlines()[-1]
    assert last.startswith("imported:"), run.stderr
    return run.returncode, set(filter(None, last.removeprefix("imported:").split(","))), run.stdout


@pytest.mark.parametrize("argv", [["--help"], ["--version"], ["check", "--help"], ["report", "--help"],
                                  ["check", "--list"], ["check", "no-such-claim"], ["report", "--jobs", "0"]],
                         ids=" ".join)
def test_help_version_list_and_a_refused_argument_import_no_heavy_package(argv):
    status, heavy, _ = _imported(argv)
    assert status in (0, 2) and heavy == set()


#: Files ``check --kernel`` refuses, by what is wrong with them: {name: bytes}.
BAD_KERNEL_FILES = {"empty.npy": b"", "garbled.npy": b"\x93NUMPY not an array", "object.json": b'{"a": 1}',
                    "ragged.csv": b"0.5,0.5\n1.0\n", "empty.csv": b""}


@pytest.mark.parametrize("name", BAD_KERNEL_FILES)
def test_a_refused_kernel_file_imports_no_heavy_package(tmp_path, name):
    # the file is read and refused before any claim's code (SciPy: half a second of start-up) is imported
    (tmp_path / name).write_bytes(BAD_KERNEL_FILES[name])
    status, heavy, _ = _imported(["check", "lemma3-strict-dpi", "--kernel", str(tmp_path / name)])
    assert status == 2 and heavy == set(), heavy


def test_a_refused_tree_for_a_good_kernel_imports_no_heavy_package(tmp_path):
    np.save(tmp_path / "K.npy", np.array([[0.9, 0.1], [0.3, 0.7]]))
    status, heavy, _ = _imported(["check", "--kernel", str(tmp_path / "K.npy"), "--parents=-1,5"])
    assert status == 2 and heavy == set(), heavy


def test_every_public_name_of_numerics_resolves_though_imported_on_first_use():
    # numerics imports its submodules lazily (what keeps SciPy out of a refusal): each name of __all__ still
    # resolves, to the object its submodule defines, and ``import *`` binds them all
    run = subprocess.run([sys.executable, "-c", """
import sys
import bma_verify.numerics as nm
before = "scipy" in sys.modules
namespace = {}
exec("from bma_verify.numerics import *", namespace)
missing = [n for n in nm.__all__ if namespace.get(n) is not getattr(nm, n)
           or getattr(nm, n) is not getattr(sys.modules[getattr(nm, n).__module__], n)]
print(before, missing, set(nm.__all__) <= set(dir(nm)), nm.task.__name__)
"""], capture_output=True, text=True, timeout=120)
    assert run.stdout.split() == ["False", "[]", "True", "bma_verify.numerics.task"], run.stderr


def test_a_kernel_check_without_the_construction_imports_neither_torch_nor_matplotlib(tmp_path):
    # the kernel claims but thm1-construction are NumPy and SciPy: torch (seconds of start-up) only for the
    # construction, the control; matplotlib for neither
    np.save(tmp_path / "K.npy", np.array([[0.6, 0.3, 0.1], [0.2, 0.5, 0.3], [0.3, 0.3, 0.4]]))
    for claims, torch in ((["lemma3-strict-dpi", "lemma4-loglik-gap", "thm2-consistency", "thm3-init-gradient"], False),
                          (["thm1-construction"], True)):
        status, heavy, out = _imported(["check", *claims, "--kernel", str(tmp_path / "K.npy"), "--trees", "2"])
        assert status == 0 and ("torch" in heavy) == torch and "matplotlib" not in heavy, (claims, heavy)
        assert "holds" in out


def test_the_probe_sees_a_command_that_imports_the_claims():
    # the control: the full listing reads the claims themselves, which import every heavy package
    status, heavy, out = _imported(["check", "--list", "--json"])
    assert status == 0 and heavy == set(HEAVY) and '"statement"' in out


def test_version_prints_the_installed_version(capsys):
    from importlib import metadata

    with pytest.raises(SystemExit) as stop:
        cli.main(["--version"])
    assert stop.value.code == 0 and capsys.readouterr().out == f"bma-verify {metadata.version('bma-verify')}\n"


def _option_entries(help_text: str) -> dict[str, str]:
    """{option: its help text (flattened)} from argparse's help: an entry starts with '  -' and continues on lines
    indented further."""
    entries, current = {}, None
    for line in help_text.splitlines():
        if re.match(r"  -", line):
            current = line.split()[0].rstrip(",")
            entries[current] = line
        elif current and re.match(r"\s{3,}\S", line):
            entries[current] += " " + line.strip()
        else:
            current = None
    return {option: " ".join(text.split()) for option, text in entries.items()}


#: check's options with a default, and how the help must show it.
CHECK_DEFAULTS = {"--tier": "quick", "--seed": "0", "--init": "stationary", "--trees": "20", "--H": "6",
                  "--units": "nats", "--jobs": "1", "--device": "cpu", "--threads": "1"}


def test_check_help_documents_every_option_and_shows_each_default(capsys):
    with pytest.raises(SystemExit):
        cli.main(["check", "--help"])
    entries = _option_entries(capsys.readouterr().out)
    assert {"--tier", "--seed", "--quiet", "--list", "--kernel"} <= set(entries)
    for option, default in CHECK_DEFAULTS.items():
        assert f"(default {default})" in entries[option], entries[option]


@pytest.mark.parametrize("command", ["check", "train", "report", "search"])
def test_every_option_of_every_command_has_help_text(command, capsys):
    argv = [command, "--help"]
    with pytest.raises(SystemExit):
        cli.main(argv)
    entries = _option_entries(capsys.readouterr().out)
    signature = re.compile(r"^(-[-\w]+( [A-Z_|{}.,\w-]+)?(, )?)+")  # the option and its metavar or choices
    undocumented = [option for option, text in entries.items() if option != "-h"
                    and not signature.sub("", text).strip()]
    assert undocumented == []
