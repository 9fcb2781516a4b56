"""Processes that race: each child runs ``PRELUDE`` and its ``code`` (``python -c``)
with the paths of its "ready" file and of the shared "go" file first in ``sys.argv``,
then its own arguments (``sys.argv[3:]``); set up, it calls ``wait_for_go()``, so that
the work of all of them starts at once."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

#: What every child's code starts with.
PRELUDE = """
import sys, time
from pathlib import Path

def wait_for_go():
    Path(sys.argv[1]).touch()
    while not Path(sys.argv[2]).exists():
        time.sleep(0.01)
"""


def run_at_once(code: str, arguments: Sequence[Sequence[str]], folder: Path,
                timeout: float = 240) -> None:
    """Run one child per entry of ``arguments``; each must exit 0."""
    go = folder / "go"
    ready = [folder / f"ready{n}" for n in range(len(arguments))]
    children = [subprocess.Popen([sys.executable, "-c", PRELUDE + code, str(mark), str(go),
                                  *args],
                                 stderr=subprocess.PIPE, text=True)
                for mark, args in zip(ready, arguments, strict=True)]
    deadline = time.monotonic() + 120
    while not all(mark.exists() for mark in ready) and all(
            c.poll() is None for c in children) and time.monotonic() < deadline:
        time.sleep(0.02)
    go.touch()
    for child in children:
        _, err = child.communicate(timeout=timeout)
        assert child.returncode == 0, err
