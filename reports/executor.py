"""One executor for the heavy loops (Lemma 3 sweep, fig5 grid, searches, seeds × configs).

``map_tasks(fn, tasks)`` runs ``fn(task)`` for every task and returns the results in task order, serially, in
joblib worker processes (``backend="joblib"``, ``jobs`` > 1) or on a Dask distributed cluster
(``backend="dask"``: the scheduler at ``scheduler``, or a ``LocalCluster`` of ``jobs`` workers when no address is
given). Each task carries its own seed (see :func:`spawn_seeds`), so results never depend on the backend, on the
number of workers or on the order in which workers finish.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np
from joblib import Parallel, delayed
from tqdm.auto import tqdm

BACKENDS = ("joblib", "dask")


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
        return list(Parallel(n_jobs=jobs)(delayed(fn)(t) for t in tqdm(tasks, desc=desc, disable=disable,
                                                                      leave=False)))
    return _map_dask(fn, tasks, jobs=jobs, scheduler=scheduler, disable=disable, desc=desc)


def _map_dask(fn, tasks, *, jobs, scheduler, disable, desc):
    try:
        from dask.distributed import Client, LocalCluster, as_completed
    except ImportError as exc:  # the dask extra is optional
        raise ValueError("backend='dask' needs dask.distributed: pip install 'bma-verify[dask]'") from exc
    cluster = None
    if scheduler is None:
        cluster = LocalCluster(n_workers=jobs, threads_per_worker=1, processes=True, dashboard_address=None)
        client = Client(cluster)
    else:
        client = Client(scheduler)
    try:
        futures = client.map(fn, tasks, pure=False)
        for _ in tqdm(as_completed(futures), total=len(futures), desc=desc, disable=disable, leave=False):
            pass
        return client.gather(futures)
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
