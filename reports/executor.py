"""One executor for the heavy loops (Lemma 3 sweep, fig5 grid, searches, seeds × configs).

``map_tasks(fn, tasks)`` runs ``fn(task)`` for every task and returns the results in task order, serially, in
joblib worker processes (``backend="joblib"``, ``jobs`` > 1) or on a Dask distributed cluster
(``backend="dask"``: the scheduler at ``scheduler``, or a ``LocalCluster`` of ``jobs`` workers when no address is
given). Each task carries its own seed (see :func:`spawn_seeds`), so results never depend on the backend, on the
number of workers or on the order in which workers finish.

:func:`stop_on_signals` makes SIGINT (Ctrl-C) and SIGTERM (a batch scheduler's stop) stop the worker processes
first, then raise :class:`~bma_verify.reports.stopping.Interrupted` in the main thread, so that every ``finally``
and ``except BaseException`` above (temporary folders, atomic writes) runs with no worker left to write into them.
"""
from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
from joblib import Parallel, delayed
from tqdm import std as tqdm_std
from tqdm.auto import tqdm

from bma_verify.reports.stopping import STOP_SIGNALS, install_stop_handlers

BACKENDS = ("joblib", "dask")

#: Seconds workers get to exit after SIGTERM before SIGKILL.
STOP_GRACE_S = 3.0


def spawn_seeds(seed: int, n: int) -> list[np.random.SeedSequence]:
    """n independent child seeds of ``seed``; task i always gets child i, whoever runs it."""
    if n < 0:
        raise ValueError(f"n must be a non-negative number of tasks, got {n}")
    return np.random.SeedSequence(seed).spawn(n)


def _check_arguments(jobs, backend: str, scheduler) -> None:
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"jobs must be a positive integer, got {jobs!r}")
    if scheduler is not None and backend != "dask":
        raise ValueError("scheduler is only used with backend='dask' (--backend dask)")


def validate_executor(*, jobs: int = 1, backend: str = "joblib", scheduler: str | None = None,
                      timeout: float = 10.0) -> None:
    """Refuse bad executor settings before any work starts; for a Dask scheduler address, connect once.

    Raises ValueError naming the argument: an unreachable scheduler must stop the command, not become a verdict.
    """
    _check_arguments(jobs, backend, scheduler)
    if backend == "dask":
        try:
            from dask.distributed import Client
        except ImportError as exc:  # the dask extra is optional
            raise ValueError("backend='dask' needs dask.distributed: pip install 'bma-verify[dask]'") from exc
        if scheduler is not None:
            try:
                Client(scheduler, timeout=timeout).close()
            except Exception as exc:  # noqa: BLE001 - any failure to connect means the same to the user
                raise ValueError(f"scheduler {scheduler!r} cannot be reached within {timeout:g} s "
                                 f"({type(exc).__name__}: {exc}); start it or drop --scheduler") from None


def map_tasks(fn: Callable[[Any], Any], tasks: Sequence[Any], *, jobs: int = 1, backend: str = "joblib",
              scheduler: str | None = None, quiet: bool = True, desc: str | None = None) -> list:
    """Apply ``fn`` to every task; results in the order of ``tasks``.

    Parameters
    ----------
    fn : picklable function of one task (a module-level function)
    tasks : sequence of picklable tasks
    jobs : worker processes (joblib) or LocalCluster workers (dask); 1 runs serially with joblib
    backend : "joblib" or "dask"
    scheduler : address of a running Dask scheduler (``tcp://host:8786``); None starts a LocalCluster
    quiet : hide the progress bar (it also hides itself when stderr is not a terminal)
    """
    _check_arguments(jobs, backend, scheduler)
    tasks = list(tasks)
    disable = True if quiet else None  # None: tqdm shows a bar only on a terminal
    if backend == "joblib":
        if jobs == 1:
            return [fn(t) for t in tqdm(tasks, desc=desc, disable=disable, leave=False)]
        return list(Parallel(n_jobs=jobs, initializer=prepare_worker)(
            delayed(fn)(t) for t in tqdm(tasks, desc=desc, disable=disable, leave=False)))
    return _map_dask(fn, tasks, jobs=jobs, scheduler=scheduler, disable=disable, desc=desc)


def _map_dask(fn, tasks, *, jobs, scheduler, disable, desc):
    try:
        from dask.distributed import Client, LocalCluster, as_completed
    except ImportError as exc:  # the dask extra is optional
        raise ValueError("backend='dask' needs dask.distributed: pip install 'bma-verify[dask]'") from exc
    cluster = client = None
    try:
        if scheduler is None:
            cluster = LocalCluster(n_workers=jobs, threads_per_worker=1, processes=True, dashboard_address=None,
                                   preload=[__name__])  # runs dask_setup in each worker
        client = Client(scheduler or cluster)
        futures = client.map(fn, tasks, pure=False)
        for _ in tqdm(as_completed(futures), total=len(futures), desc=desc, disable=disable, leave=False):
            pass
        return client.gather(futures)
    finally:
        if client is not None:
            client.close()
        if cluster is not None:
            cluster.close()


# -------------------------------------------------------------------------------------------- stopping workers

def _parents() -> dict[int, int]:
    """{pid: parent pid} of the processes visible in /proc (empty where there is no /proc)."""
    table = {}
    for entry in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            stat = (entry / "stat").read_text()
            table[int(entry.name)] = int(stat[stat.rindex(")") + 2:].split()[1])  # the name may hold spaces
    return table


def descendants(pid: int | None = None) -> list[int]:
    """Every process started by ``pid`` (default: this one), its children's children included."""
    children: dict[int, list[int]] = {}
    for child, parent in _parents().items():
        children.setdefault(parent, []).append(child)
    found, todo = [], [os.getpid() if pid is None else pid]
    while todo:
        kids = children.get(todo.pop(), [])
        found += kids
        todo += kids
    return found


def _running(pid: int) -> bool:
    """``pid`` exists and is not a zombie (a zombie has stopped; its parent only has not read its status)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def _resource_tracker(pid: int) -> bool:
    """multiprocessing's and loky's resource trackers ignore SIGTERM and exit by themselves with their parent."""
    with contextlib.suppress(OSError):
        return b"resource_tracker" in Path(f"/proc/{pid}/cmdline").read_bytes()
    return False


def stop_workers(grace: float = STOP_GRACE_S) -> list[int]:
    """Stop every process this one started (joblib/loky, ProcessPoolExecutor and Dask workers, their children):
    SIGTERM, then SIGKILL for those still running after ``grace`` seconds. Returns the pids signalled.

    The whole tree is listed before any signal, since a killed worker's own children move to another parent.
    Without /proc, the children known to ``multiprocessing`` are terminated instead.
    """
    if not Path("/proc/self/stat").exists():
        for child in multiprocessing.active_children():
            child.terminate()
        return []
    pids = [p for p in descendants() if not _resource_tracker(p)]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            with contextlib.suppress(OSError):  # already gone
                os.kill(pid, sig)
        deadline = time.monotonic() + grace
        while any(_running(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.05)
    return pids


def ignore_interrupts(*_) -> None:
    """Run in each worker as it starts (see :func:`prepare_worker`): Ctrl-C reaches the whole process group, and only
    the main process, which stops the workers, acts on it (a worker would print its traceback or log its cancelled
    tasks)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def prepare_worker(*_) -> None:
    """Run in each worker process as it starts (loky's and the report pool's initializer; Dask's preload hook,
    :func:`dask_setup`): Ctrl-C is left to the main process (:func:`ignore_interrupts`), and tqdm's lock is a
    thread lock. tqdm's default lock, made by any bar, even a disabled one, is a multiprocessing lock: a named
    semaphore that a worker stopped by a signal (:func:`stop_workers`) never releases, and that multiprocessing's
    resource tracker then reports as leaked after the command's last line. A worker shows no bar, so it needs no
    lock shared across processes."""
    ignore_interrupts()
    tqdm_std.tqdm.set_lock(threading.RLock())  # on the base class: tqdm.auto's bars and tqdm's own share it


dask_setup = prepare_worker  # the name Dask looks for in a preload module (LocalCluster(preload=[__name__]))


@contextlib.contextmanager
def children_ignore_interrupts():
    """Worker processes started within the block ignore SIGINT from their first instruction: an ignored signal
    stays ignored across exec (an initializer such as :func:`ignore_interrupts` runs only after the imports).

    For a pool that starts its workers in the calling thread (the report's ProcessPoolExecutor, on submit). This
    process ignores a Ctrl-C within the block too (milliseconds); SIGTERM still stops it then."""
    if threading.current_thread() is not threading.main_thread():  # only the main thread may set handlers
        yield
        return
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


@contextlib.contextmanager
def stop_on_signals(signums: Sequence[int] = STOP_SIGNALS):
    """Within the block, SIGINT and SIGTERM stop the workers (:func:`stop_workers`), then raise
    :class:`Interrupted` in the main thread. Further signals are ignored while the block cleans up (SIGKILL
    still ends it). The previous handlers are restored on exit."""
    if threading.current_thread() is not threading.main_thread():  # only the main thread may set handlers
        yield
        return

    def stop(signum: int) -> None:
        logging.getLogger("distributed").setLevel(logging.CRITICAL + 1)  # its notes on lost workers are expected
        stop_workers()

    previous = install_stop_handlers(stop, signums)
    try:
        yield
    finally:
        for s, old in previous.items():
            signal.signal(s, old)
