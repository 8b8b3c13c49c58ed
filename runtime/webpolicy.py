"""Whom the /metrics server cuts, and when: the victim at the cap, the deadlines, a turn's order.

Pure: no socket and no clock of its own (the caller passes ``now``), so it is tested with a fake
clock. The loop (``runtime.webloop``) applies it; why each rule is as it is, and the floods that
chose the numbers, is in docs/architecture.md ("/metrics that no client can black out").
"""

from __future__ import annotations

import collections
import heapq
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar

#: A connection's phases: its TLS handshake, its request head (the first or a kept one's next),
#: a handler thread at work on its request, its response being written, and after a response to a
#: request not read whole, its rest read and dropped until the client closes (so that closing does
#: not reset the connection before the client has the response).
HANDSHAKE, HEAD, HANDLING, WRITING, LINGER = "handshake", "head", "handling", "writing", "linger"

#: Seconds a client has to finish its TLS handshake.
TLS_HANDSHAKE_TIMEOUT_S = 5.0
#: Seconds a client has to send its whole request line and headers, however it trickles them.
READ_TIMEOUT_S = 5.0
#: Seconds a kept-alive connection (HTTP/1.1) may wait for its next request: above the 5 min
#: Prometheus keeps an idle scrape connection (``prometheus/common``'s default
#: ``idleConnTimeout``), so every connection Prometheus keeps is kept here too, and Prometheus
#: closes first (no scrape sent into a close). A forgotten connection holds a socket 5.5 min at
#: most, and at the cap goes once no incomplete connection is left to evict.
KEEPALIVE_IDLE_S = 330.0
#: Seconds a client has to read the whole response (a 5 MB gzipped scrape takes well under 1 s
#: on any network Prometheus scrapes over).
WRITE_TIMEOUT_S = 30.0
#: Seconds the rest of a refused head is read and dropped after the 431, so that the client
#: reads the answer rather than a reset (Go waits 0.5 s for the same reason).
LINGER_S = 1.0
#: Connections open at once; at the cap a new one evicts the oldest incomplete one. 512 fit the
#: common soft open-file limit of 1,024 with room for the process's own (Kafka) sockets, and take
#: a flood 512 connections to push a scrape out before its head is in.
MAX_CONNECTIONS = 512
#: Seconds a connection is safe from eviction: a burst of connects larger than the cap waits in
#: the kernel's backlog (where it costs nothing) instead of evicting connections just accepted,
#: a scrape's among them, before their first bytes were read; and eviction, so the churn of a
#: flood that reconnects, is bounded at ``MAX_CONNECTIONS / EVICT_MIN_AGE_S`` a second.
EVICT_MIN_AGE_S = 0.25
#: Seconds without a byte taken before a connection being written to counts as idle (evictable).
STALLED_WRITE_S = 1.0
#: Seconds of handshakes, reads and writes per turn of the loop before it accepts and reads
#: again: a turn through a flood of ClientHellos (~1 ms of RSA each) let the listen backlog
#: overflow, and a dropped SYN costs a scrape 1 s. 0.01 was measured and not taken
#: (docs/architecture.md).
TURN_S = 0.02


@dataclass(frozen=True)
class Limits:
    """The deadlines and bounds one server runs with, read once when it starts."""

    handshake_s: float = TLS_HANDSHAKE_TIMEOUT_S
    read_s: float = READ_TIMEOUT_S
    keepalive_idle_s: float = KEEPALIVE_IDLE_S
    write_s: float = WRITE_TIMEOUT_S
    linger_s: float = LINGER_S
    max_connections: int = MAX_CONNECTIONS
    evict_min_age_s: float = EVICT_MIN_AGE_S
    stalled_write_s: float = STALLED_WRITE_S
    turn_s: float = TURN_S


@dataclass(eq=False, slots=True, kw_only=True)
class ConnState:
    """What the policy reads of a connection; the loop's connections add their socket."""

    #: the order of accepting: a later connection has a larger one
    seq: int
    #: when it was accepted
    born: float
    phase: str
    #: when its phase ends it (cut); inf: never
    deadline: float = 0.0
    #: handshake steps so far: the first one does the RSA (a ClientHello read whole)
    tries: int = 0
    #: responses written whole on it: a served one waits for its next request as kept
    served: int = 0
    #: when a byte of its response was last taken
    progress_at: float = 0.0
    closed: bool = False


C = TypeVar("C", bound=ConnState)


def deadline(limits: Limits, phase: str, now: float, *, kept_idle: bool = False) -> float:
    """When a connection entering ``phase`` at ``now`` is cut: each phase has its own deadline,
    and a kept connection waiting for its next request (``kept_idle``: nothing of it in hand)
    the idle one; from that request's first byte its head has ``read_s`` like any other."""
    if phase == HANDSHAKE:
        return now + limits.handshake_s
    if phase == HEAD:
        return now + (limits.keepalive_idle_s if kept_idle else limits.read_s)
    if phase == WRITING:
        return now + limits.write_s
    if phase == LINGER:
        return now + limits.linger_s
    return float("inf")  # HANDLING: the loop waits for the handler (its render is bounded)


class Deadlines(Generic[C]):
    """The deadlines set, soonest first; a connection's earlier ones are stale once it moved on."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, C]] = []
        self._n = 0

    def __len__(self) -> int:
        return len(self._heap)

    def track(self, conn: C) -> None:
        """Cut ``conn`` at its ``deadline`` unless it has another one by then."""
        self._n += 1
        heapq.heappush(self._heap, (conn.deadline, self._n, conn))

    def wait_s(self, now: float, longest_s: float) -> float:
        """How long the loop may sleep before the next deadline: at most ``longest_s``."""
        if not self._heap:
            return longest_s
        return min(longest_s, max(0.0, self._heap[0][0] - now))

    def expired(self, now: float) -> Iterator[C]:
        """The open connections past the deadline of the phase they are in, soonest first."""
        while self._heap and self._heap[0][0] <= now:
            due, _, conn = heapq.heappop(self._heap)
            if not conn.closed and conn.deadline == due:
                yield conn


class Eviction(Generic[C]):
    """The open connections in the order the cap cuts them.

    Incomplete ones (in their handshake or first head) that wait on their client, the one idle
    the longest first; then those whose bytes wait on the loop (a queue of ClientHellos, ~1 ms
    of RSA each: a scrape among them is not evicted for the loop's delay while an idle one
    remains); then writers that took no byte for ``stalled_write_s``; last, kept-alive ones
    (served at least once), the least recently active first, and only when no incomplete one is
    left to age into eviction: a flood's junk goes before a scraper's established connection,
    however fast the flood reconnects. A connection handled by a thread is in none of them: a
    request in hand is not evicted.
    """

    def __init__(self, limits: Limits) -> None:
        self._limits = limits
        self.idle: collections.OrderedDict[C, None] = collections.OrderedDict()
        self.pending: collections.OrderedDict[C, None] = collections.OrderedDict()
        self.writing: collections.OrderedDict[C, None] = collections.OrderedDict()
        self.kept: collections.OrderedDict[C, None] = collections.OrderedDict()

    def ready(self, conn: C) -> None:
        """The selector reports bytes of ``conn``: an incomplete one now waits on the loop
        (a deferred one keeps its place)."""
        if not conn.served and conn.phase in (HANDSHAKE, HEAD):
            self.idle.pop(conn, None)
            self.pending[conn] = None

    def taken(self, conn: C) -> None:
        """The loop steps ``conn``: its bytes no longer wait on the loop."""
        self.pending.pop(conn, None)

    def waiting(self, conn: C) -> None:
        """``conn`` waits on its client again: the most recently active of its kind."""
        queue = self.kept if conn.served else self.idle
        queue.pop(conn, None)
        queue[conn] = None

    def lingering(self, conn: C) -> None:
        """``conn`` reads and drops a request's rest: idle, among the first to evict."""
        self.writing.pop(conn, None)
        self.idle[conn] = None

    def responding(self, conn: C) -> None:
        """A response to ``conn`` starts: it goes with the writers, oldest first."""
        self.forget(conn)
        self.writing[conn] = None

    def kept_alive(self, conn: C) -> None:
        """A response was written whole and ``conn`` is kept for the next request."""
        self.writing.pop(conn, None)
        self.kept[conn] = None

    def forget(self, conn: C) -> None:
        """``conn`` is closed, or handled by a thread: never a victim."""
        self.idle.pop(conn, None)
        self.pending.pop(conn, None)
        self.writing.pop(conn, None)
        self.kept.pop(conn, None)

    def victim(self, now: float) -> C | None:
        """The connection to cut for a new one, or None: none may go yet (the loop waits for
        an incomplete one to age into eviction, or for one to close). Never one younger than
        ``evict_min_age_s``."""
        born_by = now - self._limits.evict_min_age_s
        for incomplete in (self.idle, self.pending):  # at most the cap: ~30 µs
            for conn in incomplete:
                if conn.born <= born_by:
                    return conn
        stalled = now - self._limits.stalled_write_s
        writer = next((c for c in self.writing if c.progress_at <= stalled), None)
        if writer is not None or self.idle or self.pending:
            return writer  # None: an incomplete one ages into eviction soon; wait for it
        return next(iter(self.kept), None)


def priority(step: tuple[ConnState, int]) -> tuple[int, int]:
    """The order of a turn's steps: reads and writes, then handshakes under way, then first
    handshake steps, the newest first."""
    conn = step[0]
    if conn.phase != HANDSHAKE:
        return (0, 0)
    return (1, 0) if conn.tries else (2, -conn.seq)


def both_ends(steps: list[tuple[C, int]]) -> list[tuple[C, int]]:
    """The first handshake steps (sorted newest first, at the end) taken from both ends in
    turn: the newest is served at once, and the oldest still gets served before eviction would
    take it (newest first alone starved a scrape's ClientHello for 2-3 s, then evicted it)."""
    first = next((i for i, (c, _) in enumerate(steps) if priority((c, 0))[0] == 2), len(steps))
    tail = steps[first:]
    newest, oldest = tail[: (len(tail) + 1) // 2], tail[(len(tail) + 1) // 2 :][::-1]
    mixed = [step for pair in zip(newest, oldest, strict=False) for step in pair]
    if len(newest) > len(oldest):
        mixed.append(newest[-1])
    return steps[:first] + mixed


def turn_order(steps: list[tuple[C, int]]) -> list[tuple[C, int]]:
    """A turn's steps in the order the loop takes them. First handshake steps go last, newest
    and oldest in turn: under a flood of ClientHellos the newest, a scrape's among them, is
    served within the turn and its next steps come before any other RSA (first come, first
    served spent it on connections evicted right after, and a scrape waited behind them all),
    and none starves until evicted."""
    return both_ends(sorted(steps, key=priority))
