"""The asyncio client: the same session as :class:`gsrelay.Client`, awaited.

No thread and no other dependency: the extension hands out a socket that turns readable
when events arrive, the loop watches it (``add_reader``), and events are drained without
waiting. Only the join and the leave, which wait on HTTP, run in the loop's default
executor. Where there is no such socket (not Unix), receiving falls back to the executor.
"""

from __future__ import annotations

import asyncio
import functools
import os
from types import TracebackType
from typing import Any, AsyncIterator, List, Mapping, Optional, Type

from .client import Client, Delivery, Transport
from .codec import BytesLike, Dialect
from .events import Ended, Event, RawEvent, Update, typed_all
from .objects import Object


class AsyncClient:
    """One session in a room, for asyncio. Make it with ``await AsyncClient.join(...)``;
    ``async with`` leaves at the end."""

    def __init__(self, client: Client) -> None:
        """Wraps a joined :class:`Client`; call :meth:`join` instead."""
        self.client = client
        """The synchronous client underneath (its publishing calls never wait)."""
        self._loop = asyncio.get_running_loop()
        self._ready = asyncio.Event()
        self._fd = client._session.wake_fd()
        if self._fd is not None:
            self._loop.add_reader(self._fd, self._on_readable)

    def _on_readable(self) -> None:
        assert self._fd is not None
        try:
            os.read(self._fd, 4096)
        except BlockingIOError:
            pass
        self._ready.set()

    def _unwatch(self) -> None:
        if self._fd is not None:
            self._loop.remove_reader(self._fd)
            self._fd = None

    @classmethod
    async def join(
        cls,
        http_base: str,
        token: str,
        room: str,
        *,
        transport: Transport = "srtp",
        dialect: Dialect = "draft01",
        interest: Optional[Mapping[str, Any]] = None,
        delivery: Optional[Delivery] = None,
        max_delay_ms: Optional[int] = None,
        snapshot: bool = True,
        ssrc: Optional[int] = None,
        require_ssrc: bool = False,
        room_stream: bool = False,
        plain_rtp: bool = False,
        silence: Optional[float] = None,
        timeout: float = 15.0,
    ) -> "AsyncClient":
        """:meth:`gsrelay.Client.join`, awaited."""
        join = functools.partial(
            Client.join,
            http_base,
            token,
            room,
            transport=transport,
            dialect=dialect,
            interest=interest,
            delivery=delivery,
            max_delay_ms=max_delay_ms,
            snapshot=snapshot,
            ssrc=ssrc,
            require_ssrc=require_ssrc,
            room_stream=room_stream,
            plain_rtp=plain_rtp,
            silence=silence,
            timeout=timeout,
        )
        client = await asyncio.get_running_loop().run_in_executor(None, join)
        return cls(client)

    @property
    def ssrc(self) -> int:
        """The session's SSRC."""
        return self.client.ssrc

    def __repr__(self) -> str:
        return "<gsrelay.AsyncClient " + repr(self.client)[len("<gsrelay.Client ") :]

    def publish(self, *objects: Object) -> None:
        """:meth:`gsrelay.Client.publish` (it never waits)."""
        self.client.publish(*objects)

    def publish_raw(self, payload: BytesLike) -> None:
        """:meth:`gsrelay.Client.publish_raw` (it never waits)."""
        self.client.publish_raw(payload)

    def snapshot(self) -> None:
        """:meth:`gsrelay.Client.snapshot`."""
        self.client.snapshot()

    def set_interest(
        self,
        interest: Optional[Mapping[str, Any]] = None,
        *,
        delivery: Optional[Delivery] = None,
        max_delay_ms: Optional[int] = None,
    ) -> None:
        """:meth:`gsrelay.Client.set_interest`."""
        self.client.set_interest(interest, delivery=delivery, max_delay_ms=max_delay_ms)

    async def recv_batch(self, max: int = 4096, timeout: Optional[float] = None) -> List[RawEvent]:
        """Up to ``max`` raw events, awaiting the first at most ``timeout`` seconds
        (forever when ``None``); ``[]`` on timeout or after the end."""
        session = self.client._session
        if self._fd is None:
            wait = 3600.0 if timeout is None else timeout
            return await self._loop.run_in_executor(None, session.recv_batch, max, wait)
        while True:
            # Cleared before the look, so an arrival between the two still wakes the wait.
            self._ready.clear()
            batch = session.recv_batch(max, 0.0)
            if batch or session.is_over():
                return batch
            try:
                await asyncio.wait_for(self._ready.wait(), timeout)
            except asyncio.TimeoutError:
                return []

    async def poll(self, timeout: Optional[float] = None, max: int = 4096) -> List[Event]:
        """:meth:`recv_batch` as typed events."""
        return typed_all(await self.recv_batch(max, timeout), self.client.dialect)

    async def events(self) -> AsyncIterator[Event]:
        """Every event as it comes, until the session's :class:`Ended`."""
        while True:
            batch = await self.poll()
            if not batch:
                return
            for e in batch:
                yield e
                if isinstance(e, Ended):
                    return

    def __aiter__(self) -> AsyncIterator[Event]:
        return self.events()

    async def updates(self) -> AsyncIterator[Update]:
        """The :class:`Update`\\ s among :meth:`events`."""
        async for e in self.events():
            if isinstance(e, Update):
                yield e

    async def leave(self, timeout: float = 5.0) -> str:
        """:meth:`gsrelay.Client.leave`, awaited. Events already received can still be read."""
        return await self._loop.run_in_executor(None, self.client.leave, timeout)

    async def close(self) -> None:
        """Leaves and stops watching the session's socket."""
        try:
            await self.leave()
        finally:
            self._unwatch()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        await self.close()
