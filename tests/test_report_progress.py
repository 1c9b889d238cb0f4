"""Progress where no bar shows: a report or check whose stderr is a file, a pipe or CI's log prints one line per
finished claim (a terminal gets tqdm's bar instead), and nothing with --quiet."""
import re

import pytest

import bma_verify.reports.builder as builder
from bma_verify.reports import cli
from tests.report_stand_ins import beyond_registry, registry  # noqa: F401 (fixtures)

LINE = re.compile(r"^\[(\d+)/(\d+) claims, \d+ s\] (\S+): (\S+)$")


def _progress(err: str) -> list[tuple[int, int, str, str]]:
    lines = err.splitlines()
    assert all(LINE.match(line) for line in lines), lines
    return [(int(m[1]), int(m[2]), m[3], m[4]) for m in map(LINE.match, lines)]


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_report_to_a_log_prints_one_line_per_finished_claim_and_none_when_quiet(jobs, registry, tmp_path,
                                                                                   capsys):
    # capsys's stderr is not a terminal, as a log file's is not; the verdicts are those of results.json
    builder.build_report("quick", tmp_path / "rep", quiet=False, jobs=jobs)
    lines = _progress(capsys.readouterr().err)
    assert [n for n, _, _, _ in lines] == [1, 2, 3] and {total for _, total, _, _ in lines} == {3}
    assert sorted((claim, verdict) for _, _, claim, verdict in lines) == [("bad", "fail"), ("crash", "error"),
                                                                          ("good", "pass")]
    builder.build_report("quick", tmp_path / "rep", quiet=True, force=True, jobs=jobs)
    assert capsys.readouterr().err == ""


def test_check_to_a_log_prints_its_progress_lines_on_stderr_only(beyond_registry, capsys):
    assert cli.main(["check", "ext-stand-in", "footnote-stand-in"]) == 1
    captured = capsys.readouterr()
    assert [(claim, verdict) for _, _, claim, verdict in _progress(captured.err)] == [
        ("ext-stand-in", "refuted"), ("footnote-stand-in", "fail")]
    assert "[1/2 claims" not in captured.out  # the results table stays clean
    assert cli.main(["check", "ext-stand-in", "--quiet"]) == 0 and capsys.readouterr().err == ""
    assert cli.main(["check", "ext-stand-in", "--json"]) == 0 and capsys.readouterr().err == ""
