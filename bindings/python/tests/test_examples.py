"""The examples run briefly against a real relay: bots.py publishes, record.py writes what
it receives as JSON lines; and mypy --strict checks them against the package's stubs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import Relay

HERE = Path(__file__).resolve().parent
EXAMPLES = HERE.parent / "examples"


def test_bots_are_recorded(relay: Relay, room: str, tmp_path: Path) -> None:
    out = tmp_path / "room.jsonl"
    record = subprocess.Popen(
        [sys.executable, str(EXAMPLES / "record.py"), "--http", relay.base, "--room", room,
         "--token", relay.token(room, "recorder", publish=False), "--seconds", "12",
         "--out", str(out)],
        stderr=subprocess.PIPE, text=True,
    )
    try:
        bots = subprocess.run(
            [sys.executable, str(EXAMPLES / "bots.py"), "--http", relay.base, "--room", room,
             "--secret", relay.secret, "--bots", "3", "--seconds", "2"],
            capture_output=True, text=True, timeout=60,
        )
        assert bots.returncode == 0, bots.stderr
        figures = json.loads(bots.stdout.strip().splitlines()[-1])
        assert figures["bots"] == 3 and figures["errors"] == 0
        assert figures["sent"] >= 3 * 20 * 2 * 0.8
        _, err = record.communicate(timeout=60)
        assert record.returncode == 0, err
    finally:
        record.kill()
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    heads = [x for x in lines if x.get("object", {}).get("type") == "Head1"]
    assert len({x["ssrc"] for x in heads}) == 3, lines[:5]
    assert len(heads) >= 3 * 20
    assert any(x.get("event") == "StreamStarted" for x in lines)


def test_mypy_strict_passes_on_the_package_and_examples() -> None:
    import mypy.api  # scripts/test.sh installs mypy into the tools venv

    stdout, stderr, status = mypy.api.run(
        ["--strict", "--no-incremental", str(HERE.parent / "python/gsrelay"), str(EXAMPLES)]
    )
    assert status == 0, stdout + stderr
