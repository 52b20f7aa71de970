"""Engines: where the batches of a job run. Registered by name (`registry.engines`).

An engine maps `run_batch` over batches and yields each batch's records as it finishes (in any
order; the driver puts them in session order). A batch that fails as a whole (its store read
failed, its worker died) comes back as the exception's traceback, after the engine's retries.
- `local`: one process, the driver's own; for small stores and tests.
- `ray`: tasks on a Ray cluster (`pip install "context-editor[ray]"`); `address` is the
  cluster's (`ray://host:10001` or `host:6379`), none starts a local Ray on this machine.
"""

from __future__ import annotations

import socket
import traceback
from collections.abc import Iterable, Iterator
from typing import Any, Protocol

from ..errors import Errors, MissingExtraError
from .jobs import Batch, Job, run_batch

Outcome = tuple[Batch, list[dict[str, Any]] | None, str | None]  # (batch, records, or the traceback of its failure)
RAY_RETRIES = 2  # a task whose worker died is run again this many times


class Engine(Protocol):
    name: str
    workers: int

    def run(self, job: Job, batches: Iterable[Batch]) -> Iterator[Outcome]: ...

    def close(self) -> None: ...


class LocalEngine:
    name, workers = "local", 1

    def run(self, job: Job, batches: Iterable[Batch]) -> Iterator[Outcome]:
        for batch in batches:
            try:
                yield batch, run_batch(job, batch), None
            except Exception:  # the batch as a whole failed (e.g. its store read): reported, the run goes on
                yield batch, None, traceback.format_exc()

    def close(self) -> None:
        from .jobs import forget_workers

        forget_workers()


def _reachable(address: str) -> None:
    """Refuse an address no Ray cluster answers at, in a second rather than after ray's own timeouts."""
    hostport = address.split("://", 1)[-1].rstrip("/")
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit():
        raise Errors.RAY_ADDRESS(address=address, detail="it is not host:port")
    try:
        socket.create_connection((host, int(port)), timeout=3).close()
    except OSError as exc:
        raise Errors.RAY_ADDRESS(address=address, detail=exc.strerror or str(exc)) from None


class RayEngine:
    """Batches as Ray tasks; at most two per CPU in flight, so the driver's memory stays flat."""

    name = "ray"

    def __init__(self, address: str | None = None, workers: int | None = None):
        try:
            import ray
        except ImportError as exc:
            raise MissingExtraError("ray", "ray", "--engine ray") from exc
        self.ray, self.started = ray, False
        if address:
            _reachable(address)
        if not ray.is_initialized():  # else: the runtime this process already joined (a test's, a notebook's)
            try:
                ray.init(address=address, num_cpus=None if address else workers, include_dashboard=False,
                         log_to_driver=False, configure_logging=False)
            except (ConnectionError, RuntimeError, ValueError) as exc:
                raise Errors.RAY_ADDRESS(address=address or "a local Ray runtime", detail=str(exc).splitlines()[0]) from None
            self.started = True
        self.workers = int(ray.cluster_resources().get("CPU", 1))  # type: ignore[no-untyped-call]
        self._task = ray.remote(max_retries=RAY_RETRIES, num_cpus=1)(run_batch)

    def run(self, job: Job, batches: Iterable[Batch]) -> Iterator[Outcome]:
        ray = self.ray
        job_ref = ray.put(job)
        pending: dict[Any, Batch] = {}
        todo = iter(batches)
        while True:
            while len(pending) < 2 * self.workers and (batch := next(todo, None)) is not None:
                pending[self._task.remote(job_ref, batch)] = batch
            if not pending:
                return
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                batch = pending.pop(ref)
                try:
                    yield batch, ray.get(ref), None
                except Exception as exc:  # ray.exceptions.RayTaskError carries the worker's traceback
                    yield batch, None, str(exc)

    def close(self) -> None:
        if self.started:
            self.ray.shutdown()


def local(address: str | None = None, workers: int | None = None) -> Engine:
    """`--engine local`: one process (`--address` and `--workers` do not apply)."""
    if address:
        raise Errors.BAD_ENGINE_OPTION(problem="--address names a Ray cluster; the local engine runs in this process",
                                       fix="add --engine ray, or drop --address")
    return LocalEngine()


def ray(address: str | None = None, workers: int | None = None) -> Engine:
    """`--engine ray`: the cluster at `address`, or a local Ray runtime with `workers` CPUs."""
    return RayEngine(address, workers)
