"""A metrics host that does not resolve, or is no address of this host, is named as such.

It was reported as a bad port, with the advice to pick another port. The probe and the stream
check it before any connection (the bootstrap here is a closed port nobody is asked about).
"""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from monitor.cli import main

#: RFC 6761: names under .invalid never resolve.
UNRESOLVABLE = "no-such-host.invalid"


@pytest.mark.parametrize("command", ["probe", "stream"])
def test_an_unresolvable_metrics_host_is_named(command: str) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "monitor", command, "--bootstrap", "127.0.0.1:1",
         "--metrics-host", UNRESOLVABLE, "--metrics-port", "9"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(
        f"nines {command}: error: metrics-host: cannot resolve '{UNRESOLVABLE}'"
    ), lines[0]
    assert "another port" not in lines[0]


def test_an_address_of_another_host_is_named() -> None:
    """192.0.2.1 (TEST-NET-1) resolves, but no interface of this host has it."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(["stream", "--bootstrap", "127.0.0.1:1", "--metrics-host", "192.0.2.1"])
    assert code == 2
    assert err.getvalue().strip() == (
        "nines stream: error: metrics-host: cannot listen on 192.0.2.1 (Cannot assign requested "
        "address): not an address of this host"
    )


@settings(max_examples=40, deadline=None)
@given(
    st.from_regex(r"[a-z][a-z0-9-]{0,20}\.invalid", fullmatch=True)
    | st.sampled_from(["a b", "-x", "host..name", "ho st.invalid", "[::1", "::zz"])
)
def test_generated_unresolvable_hosts(host: str) -> None:
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(["stream", "--bootstrap", "127.0.0.1:1", f"--metrics-host={host}"])
    lines = err.getvalue().strip().splitlines()
    assert code == 2 and len(lines) == 1, lines
    assert lines[0].startswith("nines stream: error: metrics-host: "), lines[0]
    assert "pick another port" not in lines[0]
