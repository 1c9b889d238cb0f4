"""`bma-verify search` output and files: --json gives JSON alone on stdout, and no .hypothesis/ is left in the
working directory (Hypothesis' files go under --cache-dir or the default cache directory)."""
import json
import os
import subprocess
import sys

from hypothesis.configuration import storage_directory

from bma_verify.reports import cli, search


def _spy_on_cache_dir(monkeypatch) -> list:
    """Record the cache_dir the command hands to run_search (Hypothesis writes there only when it has something
    new to cache, which an earlier search in the same process may already have done)."""
    seen, real = [], search.run_search

    def spy(*args, cache_dir=None, **kwargs):
        seen.append(cache_dir)
        return real(*args, cache_dir=cache_dir, **kwargs)

    monkeypatch.setattr(cli, "run_search", spy)  # the name the command calls
    return seen


def test_search_json_stdout_is_json_alone_and_messages_go_to_stderr(tmp_path, monkeypatch, capsys):
    # Reference: json.loads of the whole stdout (any message line before the JSON would make it fail); the
    # planted α = 0.05 is far below the true ratios, so the search finds and shrinks a violation (exit 1).
    monkeypatch.chdir(tmp_path)
    cache = tmp_path / "cache"
    seen = _spy_on_cache_dir(monkeypatch)
    code = cli.main(["search", "lemma3", "--budget", "20", "--alpha", "0.05", "--json", "--cache-dir", str(cache)])
    out, err = capsys.readouterr()
    assert code == 1
    result = json.loads(out)
    assert result["found"] is True and result["instance"]["alpha"] == 0.05
    assert "counterexample found" in err and out.startswith("{")  # the message also sits in result["message"]
    assert not (tmp_path / ".hypothesis").exists()  # the working directory stays clean
    assert seen == [cache]  # Hypothesis' files go where --cache-dir says


def test_search_json_without_a_counterexample_is_strict_json_and_quiet_is_silent(tmp_path, monkeypatch, capsys):
    # Reference: json.loads with non-standard constants (Infinity, NaN) refused, so strict JSON only; with
    # --quiet nothing at all goes to stderr. α = dobrushin_channel is a theorem, so no counterexample (exit 0).
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv(search.CACHE_ENV, raising=False)
    seen = _spy_on_cache_dir(monkeypatch)
    code = cli.main(["search", "thm3", "--budget", "3", "--json", "--quiet"])
    out, err = capsys.readouterr()
    assert code == 0 and err == ""

    def refuse(name):
        raise AssertionError(f"non-standard JSON constant {name}")

    result = json.loads(out, parse_constant=refuse)
    assert result["found"] is False and result["instance"] is None
    assert not (tmp_path / ".hypothesis").exists()
    assert seen == [tmp_path / "xdg" / "bma-verify"]  # the default: $XDG_CACHE_HOME/bma-verify


def test_default_cache_dir_honours_the_environment(tmp_path, monkeypatch):
    # Reference: the documented order $BMA_VERIFY_CACHE_DIR > $XDG_CACHE_HOME/bma-verify > ~/.cache/bma-verify.
    monkeypatch.setenv(search.CACHE_ENV, str(tmp_path / "mine"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert search.default_cache_dir() == tmp_path / "mine"
    monkeypatch.delenv(search.CACHE_ENV)
    assert search.default_cache_dir() == tmp_path / "xdg" / "bma-verify"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert search.default_cache_dir() == tmp_path / "home" / ".cache" / "bma-verify"


def test_search_restores_hypothesis_storage_directory(tmp_path):
    # Reference: Hypothesis' own storage_directory() before the search; the redirection must not leak into the
    # rest of the process (a test session's database, say).
    before = storage_directory(intent_to_write=False).path
    with search._hypothesis_home(tmp_path / "c"):
        assert storage_directory(intent_to_write=False).path == tmp_path / "c" / "hypothesis"
    assert storage_directory(intent_to_write=False).path == before
    search.run_search("lemma3", budget=3, seed=0, cache_dir=tmp_path / "c")
    assert storage_directory(intent_to_write=False).path == before


def test_search_help_says_where_hypothesis_files_go(capsys):
    try:
        cli.main(["search", "--help"])
    except SystemExit as exc:
        assert exc.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "--cache-dir" in text and "--json" in text and "XDG_CACHE_HOME" in text and ".hypothesis" in text


def test_a_fresh_search_process_writes_hypothesis_files_to_the_cache_not_the_cwd(tmp_path):
    # Reference: the files on disk after a search in a new process (where Hypothesis' caches start empty, so it
    # does write): none under cwd/.hypothesis, Hypothesis' under --cache-dir/hypothesis; stdout parses as JSON.
    work, cache = tmp_path / "work", tmp_path / "cache"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", search.CACHE_ENV)}
    env["OMP_NUM_THREADS"] = "1"
    run = subprocess.run([sys.executable, "-m", "bma_verify.reports.cli", "search", "lemma3", "--budget", "5", "--json",
                          "--cache-dir", str(cache)], cwd=work, env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode in (0, 1), run.stderr
    assert json.loads(run.stdout)["target"] == "lemma3"
    assert list(work.iterdir()) == []  # no .hypothesis/ (nor anything else) in the working directory
    assert any((cache / "hypothesis").rglob("*")), "Hypothesis wrote nothing under --cache-dir/hypothesis"
