"""The asyncio client against a real relay: join, publish, receive on the loop without a
thread, a late joiner's snapshot, leave; and a loop that keeps running while it waits."""

from __future__ import annotations

import asyncio
import time
from typing import List

import pytest

import gsrelay
from conftest import Relay


async def first_update_from(client: gsrelay.AsyncClient, ssrc: int, sender: gsrelay.AsyncClient) -> gsrelay.Update:
    async def publish_forever() -> None:
        while True:
            sender.publish(gsrelay.Head1(id=3, location=gsrelay.Loc2(x=2.0)))
            await asyncio.sleep(0.05)

    publisher = asyncio.ensure_future(publish_forever())
    try:
        async def wait() -> gsrelay.Update:
            async for e in client.updates():
                if e.ssrc == ssrc:
                    return e
            raise AssertionError("the session ended")

        return await asyncio.wait_for(wait(), 10.0)
    finally:
        publisher.cancel()


def test_asyncio_clients_publish_and_receive(relay: Relay, room: str) -> None:
    async def main() -> None:
        a = await gsrelay.AsyncClient.join(relay.base, relay.token(room, "a"), room)
        b = await gsrelay.AsyncClient.join(relay.base, relay.token(room, "b"), room, transport="quic")
        async with a, b:
            assert repr(b).startswith("<gsrelay.AsyncClient room=")
            ticks = 0

            async def ticker() -> None:
                nonlocal ticks
                while True:
                    ticks += 1
                    await asyncio.sleep(0.01)

            t = asyncio.ensure_future(ticker())
            async for e in b.events():
                if isinstance(e, gsrelay.SnapshotComplete):
                    break
            # Nothing more comes: the wait times out, and the loop ran meanwhile.
            start = time.monotonic()
            quiet = await b.poll(timeout=0.3)
            assert quiet == [] and time.monotonic() - start >= 0.25 and ticks >= 3
            u = await first_update_from(b, a.ssrc, a)
            t.cancel()
            o = u.object
            assert isinstance(o, gsrelay.Head1) and o.location.x == 2.0
            late = await gsrelay.AsyncClient.join(relay.base, relay.token(room, "late"), room)
            async with late:
                got = {}
                async for e in late.events():
                    if isinstance(e, gsrelay.Update):
                        got[e.ssrc] = e.object
                    if isinstance(e, gsrelay.SnapshotComplete):
                        break
                assert a.ssrc in got

    asyncio.run(asyncio.wait_for(main(), 30.0))


def test_asyncio_join_errors_and_leave(relay: Relay, room: str) -> None:
    async def main() -> List[gsrelay.Event]:
        with pytest.raises(gsrelay.JoinError) as e:
            await gsrelay.AsyncClient.join(relay.base, "garbage", room)
        assert e.value.status == 401
        c = await gsrelay.AsyncClient.join(relay.base, relay.token(room, "x"), room)
        assert await c.leave() == "left"
        events = [e async for e in c.events()]
        await c.close()
        return events

    events = asyncio.run(asyncio.wait_for(main(), 30.0))
    assert isinstance(events[-1], gsrelay.Ended)
