"""benchmarks/netns.py: hosts in network namespaces of their own behind a one-way delay, removed on exit."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import netns  # noqa: E402

DELAY_MS = 20


def _namespaces() -> set[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


def test_two_hosts_see_the_delay_both_ways_and_everything_is_removed(tmp_path):
    by, why = netns.delay_mechanism()
    if by is None:
        pytest.skip(f"no delayed namespaces here: {why}")
    before = _namespaces()
    with netns.Network(2, DELAY_MS, by) as net:
        assert set(net.ns) <= _namespaces()
        rtt_ms, how = net.round_trip_ms()
        # a host reaches the other only over the delayed link: one round trip is two one-way delays
        assert 2 * DELAY_MS <= rtt_ms < 2 * DELAY_MS + 100, (rtt_ms, how)
        log = tmp_path / "host1.log"
        proc = net.start(1, ["-c", "import socket; print(sorted(n for _, n in socket.if_nameindex()))"], log)
        assert proc.wait(timeout=30) == 0
        assert log.read_text().strip() == str(sorted(["lo", net.dev[1]]))  # it sees its own link only
        assert net.failure() is None
        assert net.dropped() == 0
    assert _namespaces() == before


def test_a_bad_host_count_is_refused_before_anything_is_made():
    with pytest.raises(ValueError, match="hosts must be between 1 and 200"):
        netns.Network(0, DELAY_MS, netns.NETEM)
