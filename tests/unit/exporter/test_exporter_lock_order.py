"""The exporter's two locks in their one order (render, then state): the wrong order raises at
once in the thread that tried it, instead of deadlocking a scrape; the right order works, and
another thread holding ``state`` does not make this thread's ``render`` raise."""

from __future__ import annotations

import threading

import pytest

from monitor.exporter.render import Locks


def test_render_under_state_raises_and_releases_nothing_it_did_not_take() -> None:
    locks = Locks()
    with locks.state(), pytest.raises(RuntimeError, match="never under it"), locks.render():
        pass
    # both locks free again: the right order works afterwards
    with locks.render(), locks.state():
        pass


def test_another_threads_state_does_not_count_as_this_threads() -> None:
    locks = Locks()
    holding, release, seen = threading.Event(), threading.Event(), []

    def hold_state() -> None:
        with locks.state():
            holding.set()
            release.wait(10)

    t = threading.Thread(target=hold_state)
    t.start()
    assert holding.wait(10)
    with locks.render():  # no error: the state lock is held, but not by this thread
        seen.append("render")
    release.set()
    t.join(10)
    assert seen == ["render"]
