"""Receiving throughput of the Python client: joins a room other processes fill and
counts updates for ``--seconds``, with the CPU time this process used (its Python thread
and the extension's network thread together).

    python bench/receive.py --http URL --token TOKEN --room ROOM --seconds 20 --mode raw

``--mode raw``: ``recv_batch`` tuples, the fast path; ``typed``: ``poll()`` events
(an :class:`Update` per object, not decoded); ``decoded``: ``Update.object`` of each.
Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from typing import List, Optional

import gsrelay


def cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--http", required=True)
    p.add_argument("--token", required=True)
    p.add_argument("--room", required=True)
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--mode", choices=["raw", "typed", "decoded"], default="raw")
    p.add_argument("--aggregated", action="store_true")
    p.add_argument("--transport", default="srtp")
    args = p.parse_args(argv)

    client = gsrelay.Client.join(
        args.http, args.token, args.room, transport=args.transport,
        delivery="aggregated" if args.aggregated else None,
    )
    # Let the room's streams start before the clock does.
    client.wait_for(lambda e: isinstance(e, gsrelay.SnapshotComplete), 5.0)
    client.recv_batch(max=1 << 20)
    updates = dropped = 0
    cpu0, start = cpu_seconds(), time.monotonic()
    end = start + args.seconds
    OBJECT = int(gsrelay.Kind.OBJECT)
    while time.monotonic() < end:
        if args.mode == "raw":
            batch = client.recv_batch(max=65536, timeout=0.1)
            for kind, _ssrc, _oid, code, _data in batch:
                if kind == OBJECT:
                    updates += 1
                elif kind == gsrelay.Kind.DROPPED:
                    dropped += code
        else:
            for e in client.poll(timeout=0.1, max=65536):
                if isinstance(e, gsrelay.Update):
                    updates += 1
                    if args.mode == "decoded":
                        e.object
                elif isinstance(e, gsrelay.Dropped):
                    dropped += e.count
    wall, cpu = time.monotonic() - start, cpu_seconds() - cpu0
    client.leave()
    print(json.dumps({
        "mode": args.mode, "aggregated": args.aggregated, "seconds": round(wall, 2),
        "updates": updates, "updates_per_s": round(updates / wall), "dropped": dropped,
        "cpu_s": round(cpu, 3), "cores": round(cpu / wall, 3),
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
