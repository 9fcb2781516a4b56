"""The benchmarks stay runnable: each script under ``benchmarks/`` imports (a module
they share may move or a name they import be renamed; nothing else runs them in CI)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def test_every_benchmark_script_imports() -> None:
    names = sorted(p.stem for p in BENCHMARKS.glob("*.py"))
    assert len(names) > 10
    program = ("import importlib, sys\n"
               f"sys.path.insert(0, {str(BENCHMARKS)!r})\n"
               "failed = []\n"
               f"for name in {names!r}:\n"
               "    try:\n"
               "        importlib.import_module(name)\n"
               "    except Exception as exc:\n"
               "        failed.append(f'{name}: {exc!r}')\n"
               "print('\\n'.join(failed))\n")
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                          timeout=300, check=True)
    assert done.stdout.strip() == ""
