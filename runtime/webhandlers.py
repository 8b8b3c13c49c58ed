"""The /metrics server's handler threads: complete requests in, answers out to the loop.

A handler checks credentials, renders and compresses, which may take a while; the loop writes
the answer, so a slow reader holds a socket, never a handler. Threads start as requests
outnumber the idle ones, up to ``MAX_HANDLERS``, and all of the server's threads run niced
(``NICE``) so that the process's own work comes first on a busy core.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import queue
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

from runtime.webhttp import Outcome

log = logging.getLogger("runtime.webserver")  # the server's one logger, whichever room logs

#: Threads that handle complete requests (credentials, render, compression), started as needed.
MAX_HANDLERS = 8
#: Niceness added to the server's threads, so that on a busy core the probe's sender, not a
#: flood's handshakes, runs first; not 10, which starved the server behind other processes' work
#: (docs/architecture.md). In a container the niceness only ranks the process's own threads.
NICE = 5
#: Seconds ``close()`` waits for the handler threads to end (a render or a check in flight).
CLOSE_JOIN_S = 5.0

T = TypeVar("T")


class Handlers(Generic[T]):
    """The handler threads of one server; ``wake`` tells the loop an answer is ready."""

    def __init__(self, handle: Callable[[Any, bytes], Outcome], wake: Callable[[], None]) -> None:
        self._handle = handle
        self._wake = wake
        self._lock = threading.Lock()
        #: answers the handlers finished, for the loop to write: (its connection, parts, keep,
        #: linger)
        self._done: collections.deque[tuple[T, list[bytes], bool, bool]] = collections.deque()
        self._requests: queue.SimpleQueue[tuple[T, Any, bytes] | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._idle = 0

    def submit(self, conn: T, addr: Any, head: bytes) -> None:
        """Answer the request ``head`` of ``conn`` (from ``addr``) in a handler thread."""
        self._requests.put((conn, addr, head))
        with self._lock:  # a thread more while requests outnumber the idle ones, up to the cap
            start = self._requests.qsize() > self._idle and len(self._threads) < MAX_HANDLERS
            if start:
                self._idle += 1
        if start:
            worker = threading.Thread(target=self._work, name="nines-metrics-handler", daemon=True)
            self._threads.append(worker)
            worker.start()

    def finished(self) -> Iterator[tuple[T, list[bytes], bool, bool]]:
        """The answers ready, in the order they were finished."""
        while self._done:
            yield self._done.popleft()

    def _work(self) -> None:
        """A handler thread: complete requests in, responses out to the loop."""
        yield_cpu()
        while True:
            item = self._requests.get()
            with self._lock:
                self._idle -= 1
            if item is None:
                return
            conn, addr, head = item
            parts: list[bytes] = []
            keep, linger = False, False
            try:
                parts, keep, linger = self._handle(addr, head)
            except Exception:
                log.exception("/metrics: a request failed")
            finally:
                with self._lock:
                    self._idle += 1
            self._done.append((conn, parts, keep, linger))
            self._wake()

    def close(self) -> None:
        """End the threads, within ``CLOSE_JOIN_S``: one still inside an extension (a bcrypt
        check) when the interpreter finalizes is ended mid-call, and the process aborts
        ("FATAL: exception not rethrown", seen once under a flood of wrong passwords at
        SIGTERM)."""
        for _ in self._threads:
            self._requests.put(None)
        deadline = time.monotonic() + CLOSE_JOIN_S
        for worker in list(self._threads):
            worker.join(timeout=max(0.0, deadline - time.monotonic()))


def yield_cpu() -> None:
    """This thread's niceness: the process's (its main thread's) plus ``NICE`` (Linux: a thread
    is a task; one started by a niced thread inherits its niceness, so the base is the main's)."""
    with contextlib.suppress(OSError, AttributeError):
        base = os.getpriority(os.PRIO_PROCESS, os.getpid())
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), min(19, base + NICE))
