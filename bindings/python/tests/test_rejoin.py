"""The relay goes away and comes back on the same ports: sessions come back by
themselves (the Rust client's resume and rejoin) and say so with an event."""

from __future__ import annotations

import time

import gsrelay
from conftest import Relay, fixed_ports

SECRET = "python-rejoin-test-secret-0123456789"


def test_a_session_comes_back_after_the_relay_restarts(room: str) -> None:
    ports = fixed_ports()
    relay = Relay(ports, SECRET)
    try:
        token = relay.token(room, "survivor")
        c = gsrelay.Client.join(relay.base, token, room, silence=1.0)
        other = gsrelay.Client.join(relay.base, relay.token(room, "other"), room, silence=1.0)
        first = c.ssrc
        relay.kill()
        relay = Relay(ports, SECRET)
        back = c.wait_for(lambda e: isinstance(e, (gsrelay.Resumed, gsrelay.Rejoined)), 30.0)
        assert back is not None, "no Resumed or Rejoined within 30 s"
        assert isinstance(back, (gsrelay.Resumed, gsrelay.Rejoined))
        assert back.ssrc == c.ssrc
        if isinstance(back, gsrelay.Resumed):
            assert c.ssrc == first
        assert c.wait_for(lambda e: isinstance(e, gsrelay.SnapshotComplete), 10.0) is not None
        # The session works on the new relay: the other client, back too, receives.
        assert other.wait_for(lambda e: isinstance(e, (gsrelay.Resumed, gsrelay.Rejoined)), 30.0)
        deadline = time.monotonic() + 10.0
        got = False
        while not got and time.monotonic() < deadline:
            c.publish(gsrelay.Head1(id=5))
            got = any(
                isinstance(e, gsrelay.Update) and e.ssrc == c.ssrc for e in other.poll(timeout=0.05)
            )
        assert got
        c.leave()
        other.leave()
    finally:
        relay.kill()
