"""The Python blocks of docs/python-client.md marked as a quick start run as written
against a real relay."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import List

from conftest import ROOT, Relay

MARK = "<!-- quick start: bindings/python/tests/test_quickstart.py runs this block as written -->"


def blocks() -> List[str]:
    text = (ROOT / "docs/python-client.md").read_text()
    found = re.findall(re.escape(MARK) + r"\n```python\n(.*?)```", text, re.S)
    assert len(found) == 3, "the guide's quick-start blocks moved"
    return found


def test_the_guides_blocks_run_as_written(relay: Relay, room: str, tmp_path: Path) -> None:
    env = dict(os.environ, GSRELAY_URL=relay.base, GSRELAY_TOKEN=relay.token(room, "qs"), GSRELAY_ROOM=room)
    outputs = []
    for i, code in enumerate(blocks()):
        script = tmp_path / f"block{i}.py"
        script.write_text(code)
        run = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=60)
        assert run.returncode == 0, run.stdout + run.stderr
        outputs.append(run.stdout)
    assert outputs[0].startswith("joined as ") and "SnapshotComplete" in outputs[0]
    assert "SnapshotComplete(partial=False)" in outputs[1]
    assert "Head1(id=1" in outputs[2] and "Head1(id=0, time=1280" in outputs[2]
