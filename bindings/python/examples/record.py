"""Writes every update of a room as JSON lines: the room as it is (the snapshot), then
every live update, for ``--seconds`` or until Ctrl-C.

    python record.py --http http://127.0.0.1:8080 --token TOKEN --room dev --out room.jsonl

A line per object: ``{"t": seconds since start, "ssrc", "object_id", "object": its JSON
form}``, and a line per other event (``{"t", "event": "StreamStarted", ...}``). With
``--aggregated`` the relay sends one stream carrying every sender.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from typing import IO, Any, Dict, List, Optional

import gsrelay
from gsrelay.objects import to_json


def line(start: float, event: gsrelay.Event) -> Dict[str, Any]:
    t = round(time.monotonic() - start, 4)
    if isinstance(event, gsrelay.Update):
        return {"t": t, "ssrc": event.ssrc, "object_id": event.object_id, "object": to_json(event.object)}
    return {"t": t, "event": type(event).__name__, **dataclasses.asdict(event)}


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--http", default="http://127.0.0.1:8080", help="the relay's HTTP API")
    p.add_argument("--room", default="dev")
    p.add_argument("--token", required=True, help="a token with the subscribe right")
    p.add_argument("--seconds", type=float, default=None, help="stop after this long")
    p.add_argument("--out", default="-", help="the file to write (- for standard output)")
    p.add_argument("--aggregated", action="store_true", help="ask for aggregated delivery")
    p.add_argument("--dialect", default="draft01", choices=["draft01", "gse"])
    args = p.parse_args(argv)

    out: IO[str] = sys.stdout if args.out == "-" else open(args.out, "w", encoding="utf-8")
    start = time.monotonic()
    lines = 0
    with gsrelay.Client.join(
        args.http,
        args.token,
        args.room,
        dialect=args.dialect,
        delivery="aggregated" if args.aggregated else None,
    ) as client:
        try:
            for event in client.events(timeout=args.seconds):
                out.write(json.dumps(line(start, event)) + "\n")
                lines += 1
                if isinstance(event, gsrelay.Ended):
                    break
        except KeyboardInterrupt:
            pass
        out.flush()
    if out is not sys.stdout:
        out.close()
    print(f"record: {lines} lines", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
