"""The suite's scheduling hint (tests/conftest.py): the files it names exist and go first, and `make test` keeps
xdist from reordering files by their number of tests, without which the hint would do nothing."""
from pathlib import Path
from types import SimpleNamespace

from tests.conftest import LONGEST_FIRST, pytest_collection_modifyitems

TESTS = Path(__file__).parent


def test_every_file_named_longest_first_exists():
    missing = [name for name in LONGEST_FIRST if not (TESTS / name).is_file()]
    assert not missing, f"LONGEST_FIRST names files that are gone: {missing}"


def test_the_named_files_go_first_in_their_order_and_the_rest_keep_theirs():
    names = ["test_a.py", LONGEST_FIRST[2], "test_b.py", LONGEST_FIRST[0], "test_a.py"]
    items = [SimpleNamespace(path=TESTS / name, n=i) for i, name in enumerate(names)]
    pytest_collection_modifyitems(items)
    assert [item.n for item in items] == [3, 1, 0, 2, 4]


def test_make_test_hands_out_files_in_collection_order():
    command = next(line for line in (TESTS.parent / "Makefile").read_text().splitlines() if "-m pytest" in line
                   and "--dist loadfile" in line)
    assert "--no-loadscope-reorder" in command
