"""Sessions against a real relay on loopback: two Python clients publish and receive,
aggregated delivery, a late joiner's snapshot, an interest change, leaving, and garbage
refused with clear exceptions. Every wait has a deadline."""

from __future__ import annotations

import time
from typing import Callable, Dict, List, Set

import pytest

import gsrelay
from conftest import Relay

DEADLINE = 10.0


def head(id: int, x: float) -> gsrelay.Head1:
    return gsrelay.Head1(id=id, location=gsrelay.Loc2(x=x, y=1.5, z=-2.0))


def join(relay: Relay, room: str, who: str, clients: List[gsrelay.Client], **kw: object) -> gsrelay.Client:
    c = gsrelay.Client.join(relay.base, relay.token(room, who), room, **kw)  # type: ignore[arg-type]
    clients.append(c)
    return c


def publish_until(
    sender: gsrelay.Client,
    objects: List[gsrelay.Object],
    receiver: gsrelay.Client,
    done: Callable[[gsrelay.Update], bool],
) -> gsrelay.Update:
    """Publishes every 50 ms until the receiver holds an update for which ``done`` holds."""
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        sender.publish(*objects)
        for e in receiver.poll(timeout=0.05):
            if isinstance(e, gsrelay.Update) and done(e):
                return e
    raise AssertionError(f"no matching update within {DEADLINE} s")


@pytest.mark.parametrize("transport", ["srtp", "quic", "webtransport", "webrtc"])
def test_two_clients_publish_and_receive(
    relay: Relay, room: str, clients: List[gsrelay.Client], transport: gsrelay.Transport
) -> None:
    alice = join(relay, room, "alice", clients, transport=transport)
    bob = join(relay, room, "bob", clients, transport=transport)
    assert alice.ssrc != bob.ssrc
    assert repr(alice).startswith(f"<gsrelay.Client room='{room}' ssrc={alice.ssrc} transport={transport}")
    u = publish_until(alice, [head(1, 4.5)], bob, lambda u: u.ssrc == alice.ssrc)
    h = u.object
    assert isinstance(h, gsrelay.Head1) and h.id == 1 and h.location.x == 4.5
    assert u.object_id == 1
    # And back the other way, raw bytes this time.
    payload = gsrelay.encode(gsrelay.Hand1(id=2, left=True))
    u = publish_until_raw(bob, payload, alice)
    assert u.data == payload


def publish_until_raw(sender: gsrelay.Client, payload: bytes, receiver: gsrelay.Client) -> gsrelay.Update:
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        sender.publish_raw(payload)
        for kind, ssrc, oid, _, data in receiver.recv_batch(timeout=0.05):
            if kind == gsrelay.Kind.OBJECT and ssrc == sender.ssrc:
                assert isinstance(data, bytes)
                return gsrelay.Update(ssrc, oid, data, "draft01")
    raise AssertionError("nothing received")


def test_aggregated_delivery_carries_every_sender(
    relay: Relay, room: str, clients: List[gsrelay.Client]
) -> None:
    senders = [join(relay, room, f"p{i}", clients) for i in range(3)]
    viewer = join(relay, room, "viewer", clients, delivery="aggregated", max_delay_ms=5)
    seen: Set[int] = set()
    deadline = time.monotonic() + DEADLINE
    while seen != {s.ssrc for s in senders} and time.monotonic() < deadline:
        for i, s in enumerate(senders):
            s.publish(head(10 + i, float(i)))
        for e in viewer.poll(timeout=0.05):
            if isinstance(e, gsrelay.Update):
                o = e.object
                assert isinstance(o, gsrelay.Head1) and o.id == 10 + [s.ssrc for s in senders].index(e.ssrc)
                seen.add(e.ssrc)
    assert seen == {s.ssrc for s in senders}


def test_a_late_joiner_gets_the_room_in_its_snapshot(
    relay: Relay, room: str, clients: List[gsrelay.Client]
) -> None:
    early = join(relay, room, "early", clients)
    watcher = join(relay, room, "watcher", clients)
    publish_until(early, [head(1, 1.0), gsrelay.Hand1(id=2, left=True)], watcher, lambda u: u.object_id == 2)
    late = join(relay, room, "late", clients, snapshot=True)
    got: Dict[int, gsrelay.Object] = {}
    complete = None
    for e in late.events(timeout=DEADLINE):
        if isinstance(e, gsrelay.Update) and e.ssrc == early.ssrc:
            got[e.object_id] = e.object
        if isinstance(e, gsrelay.SnapshotComplete):
            complete = e
            break
    assert complete is not None and not complete.partial
    assert set(got) == {1, 2}
    assert isinstance(got[1], gsrelay.Head1) and isinstance(got[2], gsrelay.Hand1)


def test_an_interest_change_takes_effect(relay: Relay, room: str, clients: List[gsrelay.Client]) -> None:
    pub = join(relay, room, "pub", clients)
    sub = join(relay, room, "sub", clients, interest={"types": {"allow": ["Hand1"]}})
    objects: List[gsrelay.Object] = [head(1, 0.0), gsrelay.Hand1(id=2)]
    # Only hands while the interest says so...
    publish_until(pub, objects, sub, lambda u: u.object_id == 2)
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:
        pub.publish(*objects)
        for e in sub.poll(timeout=0.05):
            assert not (isinstance(e, gsrelay.Update) and isinstance(e.object, gsrelay.Head1))
    # ...and heads once it changes.
    sub.set_interest({"types": {"allow": ["Head1"]}})
    publish_until(pub, objects, sub, lambda u: isinstance(u.object, gsrelay.Head1))


def test_leave_ends_the_session(relay: Relay, room: str) -> None:
    c = gsrelay.Client.join(relay.base, relay.token(room, "x"), room)
    # A timeout past what the clock holds is no error (and no panic): it is a long one.
    assert c.leave(timeout=1e15) == "left"
    ended = c.wait_for(lambda e: isinstance(e, gsrelay.Ended), DEADLINE)
    assert isinstance(ended, gsrelay.Ended) and not ended.by_relay
    assert c.closed and c.ended == ended
    with pytest.raises(gsrelay.ClosedError) as e:
        c.publish(head(1, 0.0))
    assert e.value.code == "closed"
    assert c.leave() == "already over"
    with gsrelay.Client.join(relay.base, relay.token(room, "y"), room) as d:
        assert not d.closed
    assert d.wait_for(lambda e: isinstance(e, gsrelay.Ended), DEADLINE) is not None


def test_garbage_is_refused_with_clear_exceptions(
    relay: Relay, room: str, clients: List[gsrelay.Client]
) -> None:
    token = relay.token(room, "g")
    with pytest.raises(gsrelay.ArgumentError) as a:
        gsrelay.Client.join(relay.base, token, room, transport="carrier-pigeon")  # type: ignore[arg-type]
    assert a.value.code == "transport" and "carrier-pigeon" in str(a.value)
    with pytest.raises(gsrelay.ArgumentError) as a:
        gsrelay.Client.join(relay.base, token, room, dialect="xml")  # type: ignore[arg-type]
    assert a.value.code == "dialect"
    with pytest.raises(gsrelay.ArgumentError) as a:
        gsrelay.Client.join(relay.base, token, room, interest={"colour": "blue"})
    assert a.value.code == "interest"
    with pytest.raises(gsrelay.ArgumentError):
        gsrelay.Client.join(relay.base, token, room, delivery="carrier")  # type: ignore[arg-type]
    with pytest.raises(gsrelay.ArgumentError) as a:
        gsrelay.Client.join("ftp://nowhere", token, room)
    assert a.value.code == "http_base"
    with pytest.raises(gsrelay.ArgumentError):
        gsrelay.Client.join(relay.base, token, room, timeout=-1)
    with pytest.raises(gsrelay.ArgumentError):
        gsrelay.Client.join(relay.base, token, room, silence=float("nan"))
    with pytest.raises(TypeError):
        gsrelay.Client.join(relay.base, 42, room)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        gsrelay.Client.join(relay.base, token, room, ssrc="one")  # type: ignore[arg-type]
    with pytest.raises(OverflowError):
        gsrelay.Client.join(relay.base, token, room, ssrc=1 << 40)
    with pytest.raises(gsrelay.JoinError) as j:
        # Nothing listens on port 9 of loopback: a network failure, not a refusal.
        gsrelay.Client.join("http://127.0.0.1:9", token, room, timeout=5)
    assert j.value.status is None

    c = join(relay, room, "g", clients)
    with pytest.raises(gsrelay.CodecError) as e:
        c.publish_raw(b"\x01" * (gsrelay.MAX_PAYLOAD + 1))
    assert e.value.code == "too_large"
    with pytest.raises(gsrelay.CodecError) as e:
        c.publish_raw(b"\xff\xff\xff")
    assert e.value.code == "decode"
    with pytest.raises(TypeError):
        c.publish_raw("not bytes")  # type: ignore[arg-type]
    with pytest.raises(gsrelay.ArgumentError):
        c.publish()
    with pytest.raises(gsrelay.CodecError):
        c.publish(object())  # type: ignore[arg-type]
    with pytest.raises(gsrelay.ArgumentError):
        c.set_interest({"area": "everywhere"})
    with pytest.raises(gsrelay.ArgumentError):
        c.recv_batch(timeout=-0.5)
    with pytest.raises(gsrelay.ArgumentError):
        c.recv_batch(timeout=float("inf"))
    with pytest.raises(OverflowError):
        c.recv_batch(max=-1)
    with pytest.raises(TypeError):
        c.poll(timeout="soon")  # type: ignore[arg-type]
    # Still a working session after all that.
    c.publish(head(1, 0.0))
