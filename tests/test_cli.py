"""The bma-verify command end to end: train refuses to overwrite, search writes a re-checkable instance, exit
status 1 is kept for a claim of the paper that fails (a refuted conjecture of ours exits 0), every bad input is one
line naming its flag or file with exit 2 and nothing written, and a closed pipe or a signal ends the command
quietly (141, 130, 143)."""
import errno
import json
import os
import signal
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from bma_verify.model.run_files import prepare_run_dir
from bma_verify.numerics.atomic import destination, temporary_sibling, write_atomic
from bma_verify.reports import cli, search
from bma_verify.reports.search import KNOWN_COUNTEREXAMPLES
from bma_verify.reports.stopping import Interrupted
from tests.report_stand_ins import beyond_registry  # noqa: F401 (a fixture)


def test_train_refuses_an_existing_run_unless_resume_or_force(tmp_path, capsys):
    out = tmp_path / "run"
    args = ["train", "--preset", "fig2", "--tier", "quick", "--steps", "4", "--out", str(out), "--quiet"]
    assert cli.main(args) == 0
    metrics = out / "metrics.json"
    first = metrics.read_text()
    assert cli.main(args) == 2  # refused: nothing overwritten
    assert "already holds a run" in capsys.readouterr().err and metrics.read_text() == first
    assert cli.main(args[:6] + ["8"] + args[7:] + ["--resume"]) == 0
    assert json.loads(metrics.read_text())["steps"] == 8
    assert cli.main(args + ["--force"]) == 0
    assert json.loads(metrics.read_text())["steps"] == 4


def test_prepare_run_dir_rejects_a_file_and_accepts_an_empty_folder(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(ValueError, match="folder"):
        prepare_run_dir(tmp_path / "f", resume=False, force=False)
    (tmp_path / "empty").mkdir()
    assert prepare_run_dir(tmp_path / "empty", resume=False, force=False).is_dir()


def test_train_rejects_a_missing_device_and_bad_threads(capsys):
    if not torch.cuda.is_available():
        assert cli.main(["train", "--preset", "fig2", "--device", "cuda", "--steps", "1", "--quiet"]) == 2
        assert "no CUDA device" in capsys.readouterr().err
    assert cli.main(["check", "--list", "--threads", "0"]) == 2
    assert "--threads" in capsys.readouterr().err


def test_check_device_is_refused_without_cuda_and_outside_claim_checks(tmp_path, capsys):
    if not torch.cuda.is_available():  # refused before any check runs
        assert cli.main(["check", "exp-robustness", "--device", "cuda", "--quiet"]) == 2
        assert "no CUDA device" in capsys.readouterr().err
    kernel = tmp_path / "k.json"
    kernel.write_text(json.dumps([[0.5, 0.5], [0.2, 0.8]]))
    assert cli.main(["check", "--kernel", str(kernel), "--device", "cuda"]) == 2
    assert "--device applies to claim checks" in capsys.readouterr().err


def test_check_instance_reproduces_a_saved_counterexample(tmp_path, capsys):
    # Reference: the stored Lemma 3 counterexample to α = δ(π), which check_instance recomputes exactly. α = δ(π) is
    # a candidate of ours, not the paper's lemma (some α < 1): a refuted finding, exit 0.
    lemma3 = next(i for i in KNOWN_COUNTEREXAMPLES if i["target"] == "lemma3")
    path = tmp_path / "ce.json"
    path.write_text(json.dumps(lemma3))
    assert cli.main(["check", "--instance", str(path)]) == 0
    assert capsys.readouterr().out.startswith("lemma3: refuted finding reproduced — ")


def test_replaying_the_thm3_counterexample_of_ours_exits_0_and_its_paper_form_holds(tmp_path, capsys):
    # Reference: the stored counterexample to Theorem 3's exact π̄ form (a stronger reading of ours); the same
    # instance in the paper's J form holds, so neither replay exits 1.
    thm3 = next(i for i in KNOWN_COUNTEREXAMPLES if i["target"] == "thm3")
    path = tmp_path / "thm3.json"
    path.write_text(json.dumps(thm3))
    assert cli.main(["check", "--instance", str(path)]) == 0
    assert capsys.readouterr().out.startswith("thm3: refuted finding reproduced — ")
    assert cli.main(["check", "--instance", str(path), "--json"]) == 0
    replay = json.loads(capsys.readouterr().out)
    assert (replay["verdict"], replay["owner"], replay["outcome"]) == ("fail", "ours", "refuted finding reproduced")
    path.write_text(json.dumps(dict(thm3, form="approximate")))
    assert cli.main(["check", "--instance", str(path), "--json"]) == 0
    replay = json.loads(capsys.readouterr().out)
    assert (replay["verdict"], replay["owner"], replay["outcome"]) == ("pass", "paper", "pass")


def test_an_instance_that_fails_a_statement_of_the_paper_still_exits_1(tmp_path, capsys, monkeypatch):
    # planted: check_instance reporting the paper's J form of Theorem 3 violated, as it would on a true counterexample
    thm3 = dict(next(i for i in KNOWN_COUNTEREXAMPLES if i["target"] == "thm3"), form="approximate")
    path = tmp_path / "paper.json"
    path.write_text(json.dumps(thm3))
    monkeypatch.setattr(search, "check_instance", lambda instance: {"target": "thm3", "form": "approximate",
                                                                 "verdict": "fail", "holds": False, "summary": "s"})
    assert cli.main(["check", "--instance", str(path)]) == 1
    assert capsys.readouterr().out == "thm3: fail — s\n"


def test_whose_statement_a_lemma3_instance_tests():
    # the paper's lemma (some α < 1) fails only when the ratio reaches 1 on a kernel with π > 0 (its hypothesis)
    positive, copy = {"kernel": [[0.9, 0.1], [0.2, 0.8]]}, {"kernel": [[1.0, 0.0], [0.0, 1.0]]}
    assert cli.instance_owner(positive, {"target": "lemma3", "ratio": 1.0}) == "paper"
    assert cli.instance_owner(positive, {"target": "lemma3", "ratio": 0.9}) == "ours"  # a stated α < 0.9 of ours
    assert cli.instance_owner(copy, {"target": "lemma3", "ratio": 1.0}) == "ours"  # outside π ≥ ε > 0


def test_check_exits_0_on_a_refuted_conjecture_of_ours_and_1_on_a_failed_claim_of_the_paper(beyond_registry,
                                                                                               capsys):
    # reference: docs/claims.md, "Whose claim" — stand-ins: ext-stand-in (ours) and footnote-stand-in (the paper's,
    # under "Beyond the paper" as footnote 1 is) both fail their checks
    assert cli.main(["check", "ext-stand-in", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "ext-stand-in                 REFUTED (ours)" in out
    assert "claims: 0 pass, 0 fail, 0 inconclusive, 0 error, 1 refuted (ours)" in out
    assert any(line.split()[1:4] == ["monte-carlo", "as-stated", "refuted"] for line in out.splitlines()
               if line.startswith("ext-stand-in"))
    assert cli.main(["check", "ext-stand-in", "footnote-stand-in", "--json"]) == 1
    claims = {c["id"]: c for c in json.loads(capsys.readouterr().out)["claims"]}
    assert claims["ext-stand-in"]["verdict"] == "refuted" and claims["footnote-stand-in"]["verdict"] == "fail"
    assert cli.main(["check", "--quiet"]) == 1  # every claim: the paper's fail decides


def test_search_with_a_planted_alpha_writes_an_instance_that_check_rechecks(tmp_path, capsys):
    # α = 0.05 is far below the true ratios, so the search must find a violation and save it; never overwrite. A
    # stated α of ours is not the paper's lemma (some α < 1): the finding exits 0, as its replay does.
    out = tmp_path / "found.json"
    assert cli.main(["search", "lemma3", "--budget", "30", "--alpha", "0.05", "--out", str(out), "--quiet"]) == 0
    instance = json.loads(out.read_text())
    assert instance["target"] == "lemma3" and instance["alpha"] == 0.05
    assert cli.main(["check", "--instance", str(out)]) == 0  # α = 0.05 is a stated α, not the paper's lemma
    assert "refuted finding reproduced" in capsys.readouterr().out
    assert cli.main(["search", "lemma3", "--budget", "30", "--alpha", "0.05", "--out", str(out), "--quiet"]) == 2
    assert "already exists" in capsys.readouterr().err


def test_user_input_errors_are_one_line_and_exit_2(tmp_path, capsys):
    # each bad input names the file and the problem, with no traceback (errors a user can act on)
    cases = {
        "missing instance": ["check", "--instance", str(tmp_path / "nope.json")],
        "broken json": ["check", "--instance", str(tmp_path / "broken.json")],
        "csv with header": ["check", "lemma3-strict-dpi", "--kernel", str(tmp_path / "header.csv")],
        "ragged json": ["check", "lemma3-strict-dpi", "--kernel", str(tmp_path / "ragged.json")],
    }
    (tmp_path / "broken.json").write_text("{not json")
    (tmp_path / "header.csv").write_text("a,b\n0.5,0.5\n0.5,0.5\n")
    (tmp_path / "ragged.json").write_text("[[0.5, 0.5], [1.0]]")
    for name, argv in cases.items():
        assert cli.main(argv) == 2, name
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "Traceback" not in err, (name, err)
        assert str(tmp_path) in err, (name, err)


#: A .csv or .json kernel that is not rows of numbers -> what the refusal says (NumPy's words must not show through).
NOT_ROWS_OF_NUMBERS = {
    "object.json": ('{"a": 1}', "expected a d×d list of numbers (row i holds π(· | i)), got an object with keys 'a'"),
    "one-row.json": ("[0.5, 0.5]", "got a list whose entries are not all rows"),
    "null.json": ("[[0.5, null], [0.5, 0.5]]", "row 1, entry 2 is None, not a number"),
    "empty.csv": ("", "expected a d×d list of numbers (row i holds π(· | i)), got no rows"),
    "blank.csv": ("\n\n", "got no rows"),
    "ragged.csv": ("0.5,0.5\n0.2,0.3,0.5\n", "row 2 has 3 entries where row 1 has 2"),
    "header.csv": ("a,b\n0.5,0.5\n0.5,0.5\n", "row 1, entry 1 is 'a', not a number"),
}


@pytest.mark.parametrize("name", NOT_ROWS_OF_NUMBERS)
def test_a_kernel_file_that_is_not_rows_of_numbers_is_refused_in_the_packages_own_words(name, tmp_path, capsys):
    # Reference: the format the README gives for --kernel (.csv: one row of π per line; .json: rows or
    # {"kernel": rows}). Before: '{"a": 1}' read as NaN ("found NaN or inf"), an empty or ragged .csv leaked NumPy's
    # warning and its advice ("use usecols").
    text, expected = NOT_ROWS_OF_NUMBERS[name]
    (tmp_path / name).write_text(text)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a NumPy warning on the way fails the test
        assert cli.main(["check", "--kernel", str(tmp_path / name)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"bma-verify check: error: --kernel file {tmp_path / name}"), err
    assert expected in err and "NaN" not in err and "usecols" not in err, err


def test_unwritable_report_folder_is_one_line_and_exit_2(tmp_path, capsys):
    # a folder that cannot be created (its parent is a file; permission bits do not stop root) must give one
    # line naming the path, not an OSError traceback, and must not start any check
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    assert cli.main(["report", "--out", str(blocker / "rep"), "--quiet", "--claims", "exp-robustness"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(blocker) in err and "Traceback" not in err


def test_train_resume_names_the_field_that_differs_and_resolves_auto_device(tmp_path, capsys):
    # the checkpoint stores the device it was asked for; "auto" and "cpu" are the same device on a CPU machine
    out = tmp_path / "run"
    args = ["train", "--preset", "fig2", "--tier", "quick", "--steps", "2", "--out", str(out), "--quiet",
            "--device", "cpu"]
    assert cli.main(args) == 0
    again = args[:6] + ["3"] + args[7:-2] + ["--resume"]  # default device: auto
    if not torch.cuda.is_available():
        assert cli.main(again) == 0
    assert cli.main(again[:6] + ["4"] + again[7:] + ["--seed", "5"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "seed: checkpoint" in err[0] and "now 5" in err[0] and "Traceback" not in err[0]


# ---------------------------------------------------------------------------------------- bad input, exit status

def _bad_inputs(tmp_path):
    """The user's files of the bad-input table: good and bad kernels, an empty and a pickled archive."""
    good = np.array([[0.9, 0.1], [0.3, 0.7]])
    np.save(tmp_path / "K.npy", good)
    np.savez(tmp_path / "empty.npz")
    np.save(tmp_path / "pickled.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    np.savez(tmp_path / "pickled.npz", K=good, bad=np.array([{"a": 1}], dtype=object))
    (tmp_path / "notnpy.npy").write_text("not numpy")
    (tmp_path / "empty.npy").write_bytes(b"")
    (tmp_path / "cut.npy").write_bytes((tmp_path / "K.npy").read_bytes()[:-8])  # a copy that stopped mid-write
    (tmp_path / "notzip.npz").write_text("not a zip")
    (tmp_path / "folder").mkdir()
    np.save(tmp_path / "folder" / "good.npy", good)
    np.save(tmp_path / "folder" / "bad.npy", good + [[0.0, 0.1], [0.0, 0.0]])  # first row sums to 1.1


#: argv (with {t} for the test's folder) -> what the one-line error must say (the flag or file, then the problem).
BAD_INPUTS = {
    "empty npz": (["check", "--kernel", "{t}/empty.npz", "--out", "{t}/out"], ["empty.npz", "holds no arrays"]),
    "pickled npy": (["check", "--kernel", "{t}/pickled.npy", "--out", "{t}/out"], ["pickled.npy", "pickled"]),
    "pickled array in npz": (["check", "--kernel", "{t}/pickled.npz"], ["pickled.npz", "'bad'", "pickled"]),
    "npy that is not numpy": (["check", "--kernel", "{t}/notnpy.npy"], ["notnpy.npy", "not a NumPy .npy"]),
    "empty npy": (["check", "--kernel", "{t}/empty.npy"], ["--kernel file", "empty.npy", "is empty"]),
    "cut-short npy": (["check", "--kernel", "{t}/cut.npy"], ["--kernel file", "cut.npy", "cut short"]),
    "init from an empty npy": (["check", "--kernel", "{t}/K.npy", "--init", "{t}/empty.npy"],
                               ["--init file", "empty.npy", "is empty"]),
    "npz that is not a zip": (["check", "--kernel", "{t}/notzip.npz"], ["notzip.npz", "not a .npz"]),
    "folder with one bad kernel": (["check", "--kernel", "{t}/folder", "--out", "{t}/out"],
                                   ["folder/bad.npy", "row-stochastic"]),
    "negative seed": (["check", "--kernel", "{t}/K.npy", "--seed", "-1", "--out", "{t}/out"],
                      ["--seed", "non-negative integer, got -1"]),
    "no trees": (["check", "--kernel", "{t}/K.npy", "--trees", "0"], ["--trees", ">= 1"]),
    "one position": (["check", "--kernel", "{t}/K.npy", "--H", "1"], ["--H", ">= 2"]),
    "two positions": (["check", "--kernel", "{t}/K.npy", "--H", "2"], ["--H", ">= 3"]),
    "parent list with a letter": (["check", "--kernel", "{t}/K.npy", "--parents", "-1,0,x"],
                                  ["--parents", "'-1,0,x'"]),
    "no workers": (["report", "--jobs", "0", "--out", "{t}/out"], ["--jobs", ">= 1"]),
    "check with no workers": (["check", "exp-robustness", "--jobs", "0"], ["--jobs", ">= 1"]),
    "no training steps": (["train", "--preset", "fig2", "--steps", "0", "--out", "{t}/out"], ["--steps", ">= 1"]),
    "no search budget": (["search", "lemma3", "--budget", "0", "--out", "{t}/out"], ["--budget", ">= 1"]),
    "check --out an existing file": (["check", "--kernel", "{t}/K.npy", "--out", "{t}/K.npy"],
                                     ["--out", "K.npy is a file"]),
    "report --out an existing file": (["report", "--out", "{t}/K.npy"], ["--out", "K.npy is a file"]),
    "train --out an existing file": (["train", "--preset", "fig2", "--out", "{t}/K.npy"], ["--out", "is a file"]),
    "search --out an existing folder": (["search", "lemma3", "--out", "{t}/folder"], ["--out", "is a folder"]),
    "parent after its child": (["check", "--kernel", "{t}/K.npy", "--parents=-1,5"],
                               ["--parents -1,5: parents[1] = 5 must be < 1"]),
    "negative parent": (["check", "--kernel", "{t}/K.npy", "--parents", "-1,0,-2"],
                        ["--parents -1,0,-2: parents[2] = -2 must be >= 0"]),
    "root with a parent": (["check", "--kernel", "{t}/K.npy", "--parents", "0,0,1"],
                           ["--parents 0,0,1: parents[0] = 0 must be -1"]),
    "parents from a missing file": (["check", "--kernel", "{t}/K.npy", "--parents", "{t}/tree.txt"],
                                    ["--parents file", "tree.txt", "does not exist"]),
    "init from a missing file": (["check", "--kernel", "{t}/K.npy", "--init", "{t}/mu0.json"],
                                 ["--init file", "mu0.json", "does not exist"]),
    "report folder under /proc": (["report", "--out", "/proc/rep"], ["--out /proc/rep", "cannot write"]),
    "search instance under /proc": (["search", "lemma3", "--out", "/proc/x.json"], ["--out /proc/x.json"]),
}


@pytest.mark.parametrize("case", BAD_INPUTS)
def test_bad_input_is_refused_in_one_line_naming_the_flag_or_file_and_nothing_is_written(case, tmp_path, capsys):
    # compared with the listing of the folder before the command: a refusal writes nothing (K.npy byte-identical)
    argv, expected = BAD_INPUTS[case]
    if "/proc" in " ".join(argv) and not Path("/proc/self").exists():
        pytest.skip("needs a /proc file system")
    _bad_inputs(tmp_path)
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    assert cli.main([a.format(t=tmp_path) for a in argv]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert all(text in err for text in expected), err
    assert ".tmp-" not in err and ".probe-" not in err  # the user's path, never a temporary twin
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before
    assert not (tmp_path / "out").exists()


def test_a_parent_list_starting_with_minus_one_needs_no_equals_sign(tmp_path, capsys):
    # Reference: the same tree given as --parents=-1,0,1 (argparse's own form) prints the same lines
    _bad_inputs(tmp_path)
    kernel = str(tmp_path / "K.npy")
    assert cli.main(["check", "--kernel", kernel, "--parents", "-1,0,1", "--rows"]) == 0
    spaced = capsys.readouterr().out
    assert cli.main(["check", "--kernel", kernel, "--parents=-1,0,1", "--rows"]) == 0
    assert spaced == capsys.readouterr().out and "[-1, 0, 1]" in spaced


def test_search_has_no_cache_folder_to_point_at_proc(capsys):
    # the search keeps no working files: --cache-dir is an unknown option (argparse's usage error, exit 2)
    with pytest.raises(SystemExit) as stop:
        cli.main(["search", "lemma3", "--cache-dir", "/proc/x"])
    assert stop.value.code == 2 and "--cache-dir" in capsys.readouterr().err


def test_a_failed_write_names_the_users_path_not_its_temporary_twin(monkeypatch, tmp_path, capsys):
    # planted: the report's rename fails on its temporary folder, as a full disk or a vanished parent makes it
    tmp = temporary_sibling(tmp_path / "rep")
    assert destination(tmp) == tmp_path / "rep" and destination(temporary_sibling(tmp_path / "x", "old")) == \
        tmp_path / "x"

    def failing_report(args):
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp))
    monkeypatch.setattr(cli, "report_command", failing_report)
    assert cli.main(["report", "--out", str(tmp_path / "rep")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"bma-verify report: error: cannot use {tmp_path / 'rep'}: No space left on device; choose a " \
                  "path you can read and write"


def test_an_interrupted_atomic_write_leaves_the_old_file_and_no_temporary_one(tmp_path):
    path = tmp_path / "table.csv"
    path.write_text("old")

    def interrupted(tmp):
        tmp.write_text("half")
        raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        write_atomic(path, interrupted)
    assert [p.name for p in tmp_path.iterdir()] == ["table.csv"] and path.read_text() == "old"


@pytest.mark.parametrize("signum, status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_stopped_command_says_so_in_one_line_and_exits_128_plus_the_signal(signum, status, monkeypatch, capsys):
    # planted: the check stopped by the signal handler (the real signals are sent in tests/test_stopping.py)
    def stopped(args):
        raise Interrupted(signum)
    monkeypatch.setattr(cli, "check_command", stopped)
    assert cli.main(["check", "--quiet"]) == status
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"bma-verify check: stopped by {signal.Signals(signum).name}"), err


def test_closing_the_output_pipe_ends_quietly_with_status_141(tmp_path):
    # as `bma-verify check ... | head -1`: the reader goes after one line; compared with what cat or yes do there
    # (killed by SIGPIPE: status 141 in a shell, nothing on stderr)
    np.save(tmp_path / "K.npy", np.array([[0.9, 0.1], [0.3, 0.7]]))
    proc = subprocess.Popen([sys.executable, "-m", "bma_verify.reports.cli", "check", "--kernel",
                             str(tmp_path / "K.npy"), "--trees", "300", "--rows"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert proc.stdout.readline().startswith(b"kernel K.npy")
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141 and err == ""


def test_stop_handlers_raise_once_keep_an_ignored_signal_ignored_and_restore():
    # Reference: the handlers' contract (reports.stopping): a stop calls on_stop, raises Interrupted with its signal
    # and ignores further stops; a signal ignored before stays ignored; the previous handlers are returned intact.
    from bma_verify.reports.stopping import install_stop_handlers  # noqa: PLC0415 (beside its contract)
    before = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGUSR1)}
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    seen = []
    try:
        previous = install_stop_handlers(seen.append, (signal.SIGTERM, signal.SIGUSR1))
        assert set(previous) == {signal.SIGTERM} and signal.getsignal(signal.SIGUSR1) is signal.SIG_IGN
        with pytest.raises(Interrupted) as stopped:
            os.kill(os.getpid(), signal.SIGTERM)  # the handler runs as soon as the call returns
        assert stopped.value.signum == signal.SIGTERM and seen == [signal.SIGTERM]
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN  # a second stop is not answered twice
    finally:
        for s, old in before.items():
            signal.signal(s, old)
