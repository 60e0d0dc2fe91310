"""N bots wander a map and publish their Head1 at 20 Hz, from one Python process.

    python bots.py --http http://127.0.0.1:8080 --secret SECRET --room dev --bots 100 --seconds 30

Each bot is its own session (its own SSRC), joined with a publish-only token minted from
the relay's secret (``--secret``; or one ``--token`` for all), so the relay sends the bots
nothing: the process only sends. At the end it prints one JSON line of figures: packets
sent, CPU seconds used and the share of a core.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import resource
import sys
import time
from dataclasses import dataclass
from typing import List, Optional

import gsrelay


@dataclass
class Bot:
    """A wanderer: where it is, where it heads, and its session."""

    client: gsrelay.Client
    x: float
    z: float
    heading: float
    speed: float
    props: int = 0

    def step(self, dt: float, size: float, rng: random.Random) -> List[gsrelay.Object]:
        """Moves on (turning a little, bouncing off the map's edges) and says where."""
        self.heading += rng.uniform(-0.5, 0.5) * dt
        vx, vz = math.cos(self.heading) * self.speed, math.sin(self.heading) * self.speed
        self.x += vx * dt
        self.z += vz * dt
        if not -size <= self.x <= size:
            self.heading = math.pi - self.heading
            self.x = max(-size, min(size, self.x))
        if not -size <= self.z <= size:
            self.heading = -self.heading
            self.z = max(-size, min(size, self.z))
        half = self.heading / 2
        now = int(time.time() * 1000) & 0xFFFF
        head = gsrelay.Head1(
            id=1,
            time=now,
            location=gsrelay.Loc2(x=self.x, y=1.7, z=self.z, vx=vx, vz=vz),
            rotation=gsrelay.Rot2(sj=math.sin(half), ej=math.sin(half)),
        )
        # What the bot carries, trailing behind it (--props).
        props: List[gsrelay.Object] = [
            gsrelay.Object1(id=2 + i, time=now, position=gsrelay.Vec3(self.x - vx * 0.1 * (i + 1), 1.0, self.z))
            for i in range(self.props)
        ]
        return [head, *props]


def token_for(args: argparse.Namespace, i: int) -> str:
    if args.token:
        return str(args.token)
    return gsrelay.mint_token(
        args.secret, args.room, f"bot-{i}", publish=True, subscribe=False, ttl=24 * 3600 - 60
    )


def cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--http", default="http://127.0.0.1:8080", help="the relay's HTTP API")
    p.add_argument("--room", default="dev")
    auth = p.add_mutually_exclusive_group(required=True)
    auth.add_argument("--secret", help="the relay's token secret: a token per bot")
    auth.add_argument("--token", help="one token for every bot")
    p.add_argument("--bots", type=int, default=10)
    p.add_argument("--rate", type=float, default=20.0, help="updates per second per bot")
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--map", type=float, default=50.0, help="half the map's side, in metres")
    p.add_argument("--transport", default="srtp", choices=["srtp", "quic", "webtransport", "webrtc"])
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--props", type=int, default=0, help="Object1s each bot carries, in the same packet")
    args = p.parse_args(argv)
    if args.bots < 1 or args.rate <= 0 or args.seconds <= 0 or args.props < 0:
        p.error("--bots, --rate and --seconds must be positive, --props not negative")

    rng = random.Random(args.seed)
    bots = [
        Bot(
            gsrelay.Client.join(
                args.http, token_for(args, i), args.room, transport=args.transport, snapshot=False
            ),
            rng.uniform(-args.map, args.map),
            rng.uniform(-args.map, args.map),
            rng.uniform(0, 2 * math.pi),
            rng.uniform(0.5, 3.0),
            args.props,
        )
        for i in range(args.bots)
    ]
    period = 1.0 / args.rate
    sent = errors = 0
    cpu0, start = cpu_seconds(), time.monotonic()
    next_tick = start
    try:
        while time.monotonic() - start < args.seconds:
            for b in bots:
                b.client.publish(*b.step(period, args.map, rng))
                sent += 1
                # Events are only errors here (a publish-only token receives nothing).
                errors += sum(1 for e in b.client.poll() if isinstance(e, gsrelay.ErrorEvent))
            next_tick += period
            delay = next_tick - time.monotonic()
            if delay > 0:
                time.sleep(delay)
    except KeyboardInterrupt:
        pass
    wall, cpu = time.monotonic() - start, cpu_seconds() - cpu0
    for b in bots:
        b.client.leave(timeout=2.0)
    print(json.dumps({
        "bots": args.bots, "rate_hz": args.rate, "seconds": round(wall, 2), "sent": sent,
        "sent_per_s": round(sent / wall, 1), "errors": errors,
        "cpu_s": round(cpu, 3), "cores": round(cpu / wall, 3),
    }))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
