"""What the sandbox tests share: they run only where Landlock can confine (this kernel,
this architecture), and say why they are skipped elsewhere."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from guard import sandbox

_ABI = sandbox.abi()
NEEDS_LANDLOCK = pytest.mark.skipif(
    bool(sandbox.usable(_ABI)),
    reason=f"no usable Landlock on this kernel: {sandbox.usable(_ABI)} ({sandbox.probe()[1]})",
)


def refused_then_planted(
    run: Callable[[], Any], body: str, cwd: Path, *args: str, tmp_path: Path
) -> None:
    """What a sandboxed CMD could once plant (a link, a FIFO) in the lane's admin dir or
    store: the kernel now refuses it (no MAKE_SYM / MAKE_FIFO there), checked with `run`
    (the sandboxed attempt); then a plain process in the lane (no sandbox, which the
    engine's own defences still face) plants it the same way, so those are still tested."""
    r = run()
    out = r.stdout + r.stderr
    assert r.rc != 0 and "ermission denied" in out, ("the sandbox let CMD plant it", out)
    script = tmp_path / "plant-unconfined.sh"
    script.write_text(body)
    done = subprocess.run(["sh", str(script), *args], cwd=cwd, capture_output=True, text=True)
    assert done.returncode == 0, (done.stdout, done.stderr)
