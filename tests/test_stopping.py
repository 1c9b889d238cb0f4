"""Stopping cleanly: SIGTERM (a batch scheduler's stop) and Ctrl-C (SIGINT to the whole process group) end
``report``, ``check`` and ``train`` within seconds, with their worker processes, no temporary file or folder left,
nothing half-written at the destination, one line on stderr and exit 128 + signal (143, 130).

Each test starts the real command in a subprocess and watches it from outside through /proc (this file does not use
the package's own process listing, which is what is under test)."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow,  # each starts the command and waits for it to be under way: about 15 s
              pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="watches processes through /proc")]

ROOT = Path(__file__).resolve().parents[1]


def _children_of(pid: int) -> list[int]:
    """Every process whose parent chain leads to ``pid``, read from /proc/*/stat."""
    parents = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        parents[int(stat.parent.name)] = int(text[text.rindex(")") + 2:].split()[1])
    found, todo = [], [pid]
    while todo:
        kids = [p for p, parent in parents.items() if parent == todo[-1]]
        todo.pop()
        found += kids
        todo += kids
    return found


def _running(pid: int) -> bool:
    """Alive and not a zombie (a zombie has exited; only its exit status is still to be read)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return text[text.rindex(")") + 2] != "Z"


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _signal_mask(pid: int, field: str) -> int:
    """The SigCgt (caught) or SigIgn (ignored) mask of ``pid`` from /proc/PID/status; 0 once it has gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    return int(next(line for line in status.splitlines() if line.startswith(field + ":")).split()[1], 16)


def _catches_sigterm(pid: int) -> bool:
    """The command has installed its handler (Python alone leaves SIGTERM to its default action)."""
    return bool(_signal_mask(pid, "SigCgt") >> (signal.SIGTERM - 1) & 1)


def _catches_sigint(pid: int) -> bool:
    return bool(_signal_mask(pid, "SigCgt") >> (signal.SIGINT - 1) & 1)


def _ignores_sigint(pid: int) -> bool:
    return bool(_signal_mask(pid, "SigIgn") >> (signal.SIGINT - 1) & 1)


def _as_from_a_terminal() -> None:
    """The child's Ctrl-C as a terminal's foreground job has it. A suite started as a background job (``make test
    &``) inherits SIGINT ignored, and the command rightly keeps an ignored SIGINT ignored (as ``nohup`` expects)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start(args: list[str], tmp_path: Path) -> subprocess.Popen:
    env = dict(os.environ, OMP_NUM_THREADS="1", TMPDIR=str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    return subprocess.Popen([sys.executable, "-m", "bma_verify.reports.cli", *args], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=_as_from_a_terminal)


def _wait_for(condition, proc: subprocess.Popen, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if proc.poll() is not None:
            raise AssertionError(f"the command ended before it was stopped: {proc.communicate()}")
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError("the command never reached the state to stop it in")
        time.sleep(0.1)


def _stop(proc: subprocess.Popen, signum: int, *, group: bool) -> tuple[str, float]:
    """Send ``signum`` (to the whole process group, as a terminal's Ctrl-C does, with ``group``); stderr, seconds."""
    start = time.monotonic()
    os.killpg(proc.pid, signum) if group else proc.send_signal(signum)
    try:
        _, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        raise AssertionError("the command did not stop within 30 s of the signal") from None
    return err, time.monotonic() - start


def _assert_all_stopped(pids: list[int]) -> None:
    # a resource tracker (multiprocessing's, loky's) exits by itself once the command has: give it a moment
    deadline = time.monotonic() + 5
    while any(_running(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert [(p, _cmdline(p)) for p in pids if _running(p)] == []


def _temporary_leftovers(folder: Path) -> list[Path]:
    """Our temporary siblings (.NAME.tmp-PID, .old-, .probe-) and tempfile's folders (tmpXXXXXXXX in TMPDIR); a
    library's own cache there (torchinductor_root) is not ours to remove."""
    return [p for p in folder.rglob("*") if any(k in p.name for k in (".tmp-", ".old-", ".probe-"))
            or p.parent == folder / "tmp" and p.name.startswith("tmp")]


@pytest.mark.parametrize("signum, group, status", [(signal.SIGTERM, False, 143), (signal.SIGINT, True, 130)],
                         ids=["SIGTERM", "Ctrl-C"])
def test_a_stopped_parallel_report_leaves_no_worker_no_temporary_folder_and_nothing_at_out(signum, group, status,
                                                                                           tmp_path):
    # two of the slowest claims of the quick tier (half a minute and more): both workers are busy when stopped;
    # Ctrl-C reaches the workers too (the process group), and must not make them print
    out = tmp_path / "rep"
    proc = _start(["report", "--jobs", "2", "--out", str(out), "--quiet",
                   "--claims", "exp-robustness", "prop2-ds-quadratic"], tmp_path)
    workers = lambda: [p for p in _children_of(proc.pid) if "resource_tracker" not in _cmdline(p)]  # noqa: E731
    _wait_for(lambda: _catches_sigterm(proc.pid) and _catches_sigint(proc.pid) and len(workers()) >= 2
              and all(_ignores_sigint(p) for p in workers()), proc)  # workers leave Ctrl-C to the command
    time.sleep(2)  # the workers are importing or computing
    seen = _children_of(proc.pid)
    err, seconds = _stop(proc, signum, group=group)
    assert proc.returncode == status, err
    assert len(err.strip().splitlines()) == 1 and f"stopped by {signal.Signals(signum).name}" in err, err
    assert seconds < 15
    _assert_all_stopped(seen)
    assert not out.exists() and _temporary_leftovers(tmp_path) == []


def test_ctrl_c_stops_check_with_one_line_and_exit_130(tmp_path):
    # SIGINT to the whole process group, as a terminal sends it; the check's scratch folder (under TMPDIR) goes too
    proc = _start(["check", "exp-robustness", "--quiet"], tmp_path)
    _wait_for(lambda: _catches_sigterm(proc.pid), proc)
    time.sleep(2)
    err, seconds = _stop(proc, signal.SIGINT, group=True)
    assert proc.returncode == 130, err
    assert len(err.strip().splitlines()) == 1 and "stopped by SIGINT" in err and "Traceback" not in err, err
    assert seconds < 15 and _temporary_leftovers(tmp_path) == []


def test_sigterm_stops_train_and_keeps_only_complete_files(tmp_path):
    # a run far longer than the test: stopped while training, --out holds no half-written or temporary file
    out = tmp_path / "run"
    proc = _start(["train", "--preset", "fig2", "--tier", "quick", "--steps", "1000000", "--out", str(out),
                   "--quiet"], tmp_path)
    _wait_for(lambda: _catches_sigterm(proc.pid) and out.is_dir(), proc)
    time.sleep(2)
    err, seconds = _stop(proc, signal.SIGTERM, group=False)
    assert proc.returncode == 143, err
    assert len(err.strip().splitlines()) == 1 and "stopped by SIGTERM" in err, err
    assert seconds < 15 and _temporary_leftovers(tmp_path) == []
    assert not out.exists() or all(p.stat().st_size > 0 for p in out.rglob("*") if p.is_file())


#: A sweep of four 60-s tasks on two workers, stopped as the command stops one (its exit status, one line).
SWEEP = """
import sys, time
from bma_verify.reports.executor import map_tasks, stop_on_signals
try:
    with stop_on_signals():
        map_tasks(time.sleep, [60] * 4, jobs=2, backend=sys.argv[1])
except KeyboardInterrupt as exc:
    print("stopped", file=sys.stderr)
    sys.exit(128 + exc.signum)
"""


@pytest.mark.parametrize("backend", ["joblib", "dask"])
def test_ctrl_c_stops_the_sweep_workers_of_joblib_and_dask(backend, tmp_path):
    # SIGINT to the whole group: the workers (loky's; Dask's LocalCluster) must neither survive nor print
    if backend == "dask":
        pytest.importorskip("dask.distributed")
    (tmp_path / "tmp").mkdir()
    proc = subprocess.Popen([sys.executable, "-c", SWEEP, backend], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True, preexec_fn=_as_from_a_terminal,
                            env=dict(os.environ, OMP_NUM_THREADS="1", TMPDIR=str(tmp_path / "tmp")))
    workers = lambda: [p for p in _children_of(proc.pid) if "resource_tracker" not in _cmdline(p)]  # noqa: E731
    # under way: two workers that leave Ctrl-C to the command (loky's from their start, Dask's from their preload),
    # and the command itself catching it again once they have started
    _wait_for(lambda: _catches_sigterm(proc.pid) and _catches_sigint(proc.pid) and len(workers()) >= 2
              and all(_ignores_sigint(p) for p in workers()), proc)
    time.sleep(1)
    seen = _children_of(proc.pid)
    err, seconds = _stop(proc, signal.SIGINT, group=True)
    assert (proc.returncode, err) == (130, "stopped\n") and seconds < 15
    _assert_all_stopped(seen)


@pytest.mark.parametrize("signum, group, status", [(signal.SIGTERM, False, 143), (signal.SIGINT, True, 130)],
                         ids=["SIGTERM", "Ctrl-C"])
def test_a_signal_while_the_command_is_still_importing_ends_in_one_line(signum, group, status, tmp_path):
    # The installed console script (what a user types), stopped as soon as its start-up handlers are in place, while
    # torch and SciPy are still being imported (about 1-2 s): one line and 128 + signal, not a KeyboardInterrupt
    # traceback or a silent death by signal. Reference: the exit statuses the README gives for a stopped command.
    script = Path(sys.executable).with_name("bma-verify")
    assert script.exists(), f"the console script is not installed beside {sys.executable}"
    env = dict(os.environ, OMP_NUM_THREADS="1", TMPDIR=str(tmp_path))
    proc = subprocess.Popen([str(script), "check", "lemma3-strict-dpi", "--quiet"], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=_as_from_a_terminal)
    deadline = time.monotonic() + 30
    while not (_catches_sigterm(proc.pid) and _catches_sigint(proc.pid)):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.005)
    err, _ = _stop(proc, signum, group=group)
    assert proc.returncode == status, err
    assert err.strip().splitlines() == [f"bma-verify check: stopped by {signal.Signals(signum).name} while starting; "
                                        "nothing written"], err


#: Two stand-in claims whose checks, in two ``--jobs`` workers, make a progress bar and wait; stopped as a command
#: stops (its exit status, one line).
WORKERS_WITH_BARS = """
import sys
from pathlib import Path
from bma_verify.reports.builder import run_claims
from bma_verify.reports.claim import Check, Claim
from bma_verify.reports.core import CheckContext
from bma_verify.reports.executor import stop_on_signals
from tests.report_stand_ins import bar_then_wait_check, bar_then_wait_check_2
claims = [Claim("wait-a", "p", "s", (Check("exact", bar_then_wait_check, "d"),)),
          Claim("wait-b", "p", "s", (Check("exact", bar_then_wait_check_2, "d"),))]
try:
    with stop_on_signals():
        run_claims(claims, CheckContext(tier="quick", seed=0, figures_dir=Path(sys.argv[1]), jobs=2))
except KeyboardInterrupt as exc:
    print("stopped", file=sys.stderr)
    sys.exit(128 + exc.signum)
"""


@pytest.mark.parametrize("signum, group, status", [(signal.SIGTERM, False, 143), (signal.SIGINT, True, 130)],
                         ids=["SIGTERM", "Ctrl-C"])
def test_stopped_workers_leave_no_leaked_semaphore_warning_after_the_one_line(signum, group, status, tmp_path):
    # a worker's progress bar made tqdm create a multiprocessing lock (a named semaphore); a worker stopped by a
    # signal never released it, and multiprocessing's resource tracker warned about it after the command's line
    started = tmp_path / "started"
    env = dict(os.environ, OMP_NUM_THREADS="1", TMPDIR=str(tmp_path), BMA_TEST_STARTED=str(started))
    proc = subprocess.Popen([sys.executable, "-c", WORKERS_WITH_BARS, str(tmp_path / "figures")], cwd=ROOT,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=_as_from_a_terminal)
    _wait_for(lambda: started.exists() and len(started.read_text().split()) == 2, proc)
    err, seconds = _stop(proc, signum, group=group)
    assert (proc.returncode, err) == (status, "stopped\n") and seconds < 15
