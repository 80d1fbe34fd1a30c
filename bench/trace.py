"""Run one git-lane command with every git call it makes timed: where a command's time
goes, in-process (no strace, whose overhead would swamp the figures).

    python3 bench/trace.py land KEY        # in the repository, as `git lane land KEY`

Prints, on stderr after the command's own output, one line per `guard.git.run` call:
the thread, its start (ms after this script started), how long it took (ms), and its
arguments; then the total. Imports before the first git call show as the first start.
Run it with the interpreter itself (a pyenv shim adds a shell start of its own)."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path
from typing import Any

T0 = time.perf_counter()
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import guard.git as g  # noqa: E402

_run = g.run
_calls: list[tuple[str, float, float, str]] = []


def _timed(args: Any, cwd: Any = None, **kw: Any) -> Any:
    s = time.perf_counter()
    try:
        return _run(args, cwd, **kw)
    finally:
        what = " ".join(map(str, args))[:110]
        _calls.append((threading.current_thread().name[:10], s - T0, time.perf_counter() - s, what))


def main() -> None:
    g.run = _timed  # type: ignore[assignment]
    from guard.entry import main as lane_main

    try:
        lane_main(sys.argv[1:])
    finally:
        total = time.perf_counter() - T0
        for th, s, d, a in sorted(_calls, key=lambda c: c[1]):
            print(f"{th:10} {s * 1000:8.1f} {d * 1000:8.1f}  {a}", file=sys.stderr)
        print(f"total {total * 1000:.1f} ms in this process", file=sys.stderr)


if __name__ == "__main__":
    main()
