"""`bma-verify search` output, files and exit status: --json gives JSON alone on stdout, nothing is written but
--out, and exit 1 only when the counterexample fails a statement of the paper."""
import json
import os
import subprocess
import sys

from bma_verify.reports import cli


def test_search_json_stdout_is_json_alone_and_messages_go_to_stderr(tmp_path, monkeypatch, capsys):
    # Reference: json.loads of the whole stdout (any message line before the JSON would make it fail); the
    # planted α = 0.05 is far below the true ratios, so the search finds and shrinks a violation. A stated α of
    # the user's is not the paper's lemma (some α < 1), so the finding exits 0.
    monkeypatch.chdir(tmp_path)
    code = cli.main(["search", "lemma3", "--budget", "20", "--alpha", "0.05", "--json"])
    out, err = capsys.readouterr()
    assert code == 0
    result = json.loads(out)
    assert result["found"] is True and result["instance"]["alpha"] == 0.05
    assert result["instance"]["found_by"] == "bma-verify search lemma3 --seed 0 --budget 20 --alpha 0.05"
    assert "counterexample found" in err and out.startswith("{")  # the message also sits in result["message"]
    assert list(tmp_path.iterdir()) == []  # nothing written without --out


def test_search_json_without_a_counterexample_is_strict_json_and_quiet_is_silent(capsys):
    # Reference: json.loads with non-standard constants (Infinity, NaN) refused, so strict JSON only; with
    # --quiet nothing at all goes to stderr. Three examples are too few for a Theorem 3 counterexample (exit 0).
    code = cli.main(["search", "thm3", "--budget", "3", "--json", "--quiet"])
    out, err = capsys.readouterr()
    assert code == 0 and err == ""

    def refuse(name):
        raise AssertionError(f"non-standard JSON constant {name}")

    result = json.loads(out, parse_constant=refuse)
    assert result["found"] is False and result["instance"] is None


def test_search_exits_1_only_on_a_counterexample_to_the_paper(capsys):
    # Reference: the owner of the instance as `check --instance` decides it. The exact π̄ form is a reading of ours
    # (exit 0); the J form is the paper's statement of Theorem 3, which this search breaks with a non-stationary μ₀
    # (exit 1), and the replay of that instance exits 1 as well.
    assert cli.main(["search", "thm3", "--seed", "1", "--json", "--quiet"]) == 0
    assert json.loads(capsys.readouterr().out)["found"] is True
    assert cli.main(["search", "thm3", "--form", "approximate", "--seed", "0", "--json", "--quiet"]) == 1
    result = json.loads(capsys.readouterr().out)
    assert result["found"] is True and result["instance"]["form"] == "approximate"
    assert result["check"]["verdict"] == "fail"


def test_out_writes_the_instance_and_replays_and_an_existing_file_is_refused_first(tmp_path, capsys):
    # Reference: the instance in the JSON result of the same search; the replay of the written file prints the
    # documented outcome. An existing --out is refused before any search (the file is left as it was).
    path = tmp_path / "ce.json"
    assert cli.main(["search", "lemma3", "--seed", "0", "--out", str(path)]) == 0
    written = json.loads(path.read_text())
    assert "instance written to" in capsys.readouterr().out
    assert cli.main(["search", "lemma3", "--seed", "0", "--json", "--quiet"]) == 0
    assert json.loads(capsys.readouterr().out)["instance"] == written
    assert cli.main(["check", "--instance", str(path)]) == 0
    assert capsys.readouterr().out.startswith("lemma3: refuted finding reproduced — ")
    path.write_text("keep")
    assert cli.main(["search", "lemma3", "--seed", "0", "--out", str(path)]) == 2
    assert "--out" in capsys.readouterr().err and path.read_text() == "keep"


def test_search_help_says_what_the_result_depends_on(capsys):
    try:
        cli.main(["search", "--help"])
    except SystemExit as exc:
        assert exc.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "--seed and --budget only" in text and "found_by" in text and "--json" in text


def test_a_fresh_search_process_writes_nothing_in_the_working_directory(tmp_path):
    # Reference: the files on disk after a search in a new process; stdout parses as JSON.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["OMP_NUM_THREADS"] = "1"
    run = subprocess.run([sys.executable, "-m", "bma_verify.reports.cli", "search", "lemma3", "--budget", "5", "--json"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode in (0, 1), run.stderr
    assert json.loads(run.stdout)["target"] == "lemma3"
    assert list(tmp_path.iterdir()) == []  # no .hypothesis/ (nor anything else) in the working directory
