"""The /metrics server's policy on a fake clock, no socket: whom the cap cuts, in what order,
which deadline each phase gets, and the order of a turn's steps."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from runtime.webpolicy import (
    HANDLING,
    HANDSHAKE,
    HEAD,
    LINGER,
    WRITING,
    ConnState,
    Deadlines,
    Eviction,
    Limits,
    deadline,
    turn_order,
)

LIMITS = Limits(evict_min_age_s=0.25, stalled_write_s=1.0)


class Clock:
    """A fake clock: ``now`` moves only when the test says."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.seq = 0

    def conn(self, phase: str = HEAD, served: int = 0, tries: int = 0) -> ConnState:
        self.seq += 1
        return ConnState(seq=self.seq, born=self.now, phase=phase, served=served, tries=tries)


def accepted(eviction: Eviction[ConnState], clock: Clock, n: int, **kw: int) -> list[ConnState]:
    conns = [clock.conn(**kw) for _ in range(n)]  # type: ignore[arg-type]
    for conn in conns:
        eviction.waiting(conn)
    return conns


def test_none_younger_than_the_minimum_age_is_cut() -> None:
    clock, eviction = Clock(), Eviction[ConnState](LIMITS)
    first = accepted(eviction, clock, 3)
    clock.now += 0.2
    assert eviction.victim(clock.now) is None  # all too young: the loop waits for one to age
    clock.now += 0.05
    assert eviction.victim(clock.now) is first[0]


def test_the_one_idle_longest_goes_first_and_activity_moves_it_back() -> None:
    clock, eviction = Clock(), Eviction[ConnState](LIMITS)
    a, b, c = accepted(eviction, clock, 3)
    clock.now += 1.0
    eviction.waiting(a)  # a sent a byte and waits on its client again
    assert eviction.victim(clock.now) is b
    eviction.forget(b)
    assert eviction.victim(clock.now) is c
    eviction.forget(c)
    assert eviction.victim(clock.now) is a


def test_bytes_waiting_on_the_loop_go_after_every_idle_one() -> None:
    clock, eviction = Clock(), Eviction[ConnState](LIMITS)
    hello, idle = accepted(eviction, clock, 2)
    eviction.ready(hello)  # its ClientHello waits on the loop
    clock.now += 1.0
    assert eviction.victim(clock.now) is idle
    eviction.forget(idle)
    assert eviction.victim(clock.now) is hello
    eviction.taken(hello)  # stepped: out of the pending queue until it waits again
    assert eviction.victim(clock.now) is None
    eviction.waiting(hello)
    assert eviction.victim(clock.now) is hello


def test_ready_moves_only_incomplete_connections() -> None:
    clock, eviction = Clock(), Eviction[ConnState](LIMITS)
    (kept,) = accepted(eviction, clock, 1, served=1)
    writer = clock.conn(phase=WRITING)
    eviction.responding(writer)
    eviction.ready(kept)
    eviction.ready(writer)
    assert not eviction.pending and list(eviction.kept) == [kept]
    assert list(eviction.writing) == [writer]


def test_a_writer_goes_only_once_stalled_and_an_incomplete_one_first() -> None:
    clock, eviction = Clock(), Eviction[ConnState](LIMITS)
    writer = clock.conn()
    eviction.responding(writer)
    writer.progress_at = clock.now
    (young,) = accepted(eviction, clock, 0 + 1)
    clock.now += 0.5
    assert eviction.victim(clock.now) is young  # aged past 0.25 s: incomplete goes first
    eviction.forget(young)
    assert eviction.victim(clock.now) is None  # the writer took a byte 0.5 s ago: not stalled
    clock.now += 0.5
    assert eviction.victim(clock.now) is writer


def test_kept_connections_go_last_least_recent_first_and_only_with_no_incomplete_left() -> None:
    clock, eviction = Clock(), Eviction[ConnState](LIMITS)
    old, recent = accepted(eviction, clock, 2, served=1)
    clock.now += 10.0
    (junk,) = accepted(eviction, clock, 1)
    assert eviction.victim(clock.now) is None  # junk is young: wait for it, never a kept one
    clock.now += 0.25
    assert eviction.victim(clock.now) is junk
    eviction.forget(junk)
    assert eviction.victim(clock.now) is old
    eviction.waiting(old)  # its next request: now the most recently active
    assert eviction.victim(clock.now) is recent


def test_a_request_in_hand_is_never_cut_and_a_lingering_one_goes_first() -> None:
    clock, eviction = Clock(), Eviction[ConnState](LIMITS)
    handled, lingering = accepted(eviction, clock, 2)
    eviction.forget(handled)  # a handler thread has its request
    eviction.responding(lingering)
    eviction.lingering(lingering)
    clock.now += 5.0
    assert eviction.victim(clock.now) is lingering
    eviction.forget(lingering)
    assert eviction.victim(clock.now) is None


def test_each_phase_has_its_deadline() -> None:
    limits = Limits(handshake_s=1, read_s=2, keepalive_idle_s=3, write_s=4, linger_s=5)
    assert deadline(limits, HANDSHAKE, 100.0) == 101
    assert deadline(limits, HEAD, 100.0) == 102
    assert deadline(limits, HEAD, 100.0, kept_idle=True) == 103  # a kept one's idle wait
    assert deadline(limits, WRITING, 100.0) == 104
    assert deadline(limits, LINGER, 100.0) == 105
    assert deadline(limits, HANDLING, 100.0) == float("inf")


def test_deadlines_cut_only_a_phase_still_current_soonest_first() -> None:
    clock, deadlines = Clock(), Deadlines[ConnState]()
    assert deadlines.wait_s(clock.now, 1.0) == 1.0
    moved_on, late, soon, closed = (clock.conn() for _ in range(4))
    for conn, in_s in ((moved_on, 1.0), (late, 2.0), (soon, 0.5), (closed, 0.5)):
        conn.deadline = clock.now + in_s
        deadlines.track(conn)
    assert deadlines.wait_s(clock.now, 1.0) == 0.5
    moved_on.deadline = clock.now + 10.0  # its next phase: the earlier deadline is stale
    deadlines.track(moved_on)
    closed.closed = True
    clock.now += 2.0
    assert list(deadlines.expired(clock.now)) == [soon, late]
    assert deadlines.wait_s(clock.now, 1.0) == 1.0 and len(deadlines) == 1
    clock.now += 8.0
    assert list(deadlines.expired(clock.now)) == [moved_on]


def test_a_turn_takes_reads_and_writes_then_handshakes_under_way_then_hellos_from_both_ends() -> (
    None
):
    clock = Clock()
    hellos = [clock.conn(phase=HANDSHAKE) for _ in range(5)]  # seq 1..5, none stepped yet
    under_way = clock.conn(phase=HANDSHAKE, tries=1)
    reader, writer = clock.conn(phase=HEAD), clock.conn(phase=WRITING)
    steps = [(c, 1) for c in (*hellos, under_way, reader, writer)]
    order = [c for c, _ in turn_order(steps)]
    assert order[:2] == [reader, writer]  # stable: as the selector reported them
    assert order[2] is under_way
    assert [c.seq for c in order[3:]] == [5, 1, 4, 2, 3]  # newest, oldest, next newest...


@given(st.lists(st.tuples(st.sampled_from([HEAD, WRITING, LINGER, HANDSHAKE]), st.booleans())))
def test_a_turn_steps_every_connection_once(specs: list[tuple[str, bool]]) -> None:
    clock = Clock()
    steps = [(clock.conn(phase=phase, tries=int(tried)), 1) for phase, tried in specs]
    order = turn_order(steps)
    assert sorted(c.seq for c, _ in order) == [c.seq for c, _ in steps]
    first_hellos = [c for c, _ in order if c.phase == HANDSHAKE and not c.tries]
    assert [c for c, _ in order][len(order) - len(first_hellos) :] == first_hellos  # hellos last
