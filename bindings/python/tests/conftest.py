"""Fixtures: a real ``gsrelay serve`` on loopback ports, started from the binary that
``GSRELAY_BIN`` names (tests/python_client.rs sets it to the one cargo built), with its
dev secret read back from its output; tokens are minted with the package under test."""

from __future__ import annotations

import os
import queue
import shutil
import signal
import socket
import subprocess
import threading
import time
import uuid
from pathlib import Path
from typing import Dict, Iterator, List, Optional

import pytest

import gsrelay

ROOT = Path(__file__).resolve().parents[3]
START = 30.0


def relay_bin() -> str:
    """The ``gsrelay`` binary under test."""
    named = os.environ.get("GSRELAY_BIN")
    if named:
        return named
    for candidate in (ROOT / "target/debug/gsrelay", ROOT / "target/release/gsrelay"):
        if candidate.is_file():
            return str(candidate)
    found = shutil.which("gsrelay")
    if found:
        return found
    raise RuntimeError("no gsrelay binary: set GSRELAY_BIN or run `cargo build`")


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def free_tcp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Relay:
    """A ``gsrelay serve`` child process."""

    def __init__(self, ports: Optional[Dict[str, int]] = None, secret: Optional[str] = None) -> None:
        self.ports = ports
        args = [relay_bin(), "serve"]
        for flag in ("http", "rtp", "quic", "webrtc"):
            port = 0 if ports is None else ports[flag]
            args += [f"--{flag}-addr", f"127.0.0.1:{port}"]
        if secret is not None:
            args += ["--token-secret", secret]
        env = {k: v for k, v in os.environ.items() if not k.startswith("GSRELAY_")}
        env["GSRELAY_UDP_MAX_QUEUE_DELAY_MS"] = "250"
        self.proc = subprocess.Popen(
            args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True
        )
        self.lines: "queue.Queue[str]" = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.secret = secret or self._line("dev token secret: ")[len("dev token secret: ") :]
        if secret is None:
            curl = self._line("try: curl ")
            url = next(w for w in curl.split() if w.startswith("http://"))
            self.base = url.split("/v1/")[0]
        else:
            assert ports is not None
            self.base = f"http://127.0.0.1:{ports['http']}"
            self._wait_http()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))

    def _line(self, prefix: str) -> str:
        deadline = time.monotonic() + START
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise RuntimeError(f"gsrelay serve printed no line starting {prefix!r}")
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                continue
            if line.startswith(prefix):
                return line

    def _wait_http(self) -> None:
        assert self.ports is not None
        deadline = time.monotonic() + START
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.ports["http"]), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("the relay's HTTP port never opened")

    def token(self, room: str, identity: str, publish: bool = True, subscribe: bool = True) -> str:
        return gsrelay.mint_token(
            self.secret, room, identity, publish=publish, subscribe=subscribe, ttl=600
        )

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)


@pytest.fixture(scope="session")
def relay() -> Iterator[Relay]:
    r = Relay()
    yield r
    r.kill()


@pytest.fixture
def room() -> str:
    return "py-" + uuid.uuid4().hex[:12]


@pytest.fixture
def clients() -> Iterator[List[gsrelay.Client]]:
    """Clients a test joined, left at its end whatever happened."""
    joined: List[gsrelay.Client] = []
    yield joined
    for c in joined:
        c.leave(timeout=1.0)


def fixed_ports() -> Dict[str, int]:
    return {
        "http": free_tcp_port(),
        "rtp": free_udp_port(),
        "quic": free_udp_port(),
        "webrtc": free_udp_port(),
    }
