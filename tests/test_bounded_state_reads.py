"""Bounded reads of the state files a process outside the sandbox can grow (red team 17 F1,
F3): the audit log read by the engine (store.events), config.toml read by the git shim's
slow path and by the hooks, the epoch and lock record read by the hooks. Each is read to
a bound and past it the reader says so (the engine: a warning) or refuses as it does for
a file it cannot read (the hooks: hook_facts_unknown; the shim: shim_facts_unknown),
never allows by default and never takes GBs of memory or minutes a ref update."""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import Repo

from guard import store as gstore
from guard.store import EVENT_LINE_MAX, EVENTS_READ_MAX, Store


def _limited(argv: list[str], cwd: Path, mem: int = 1 << 30, timeout: float = 120) -> Any:
    """ARGV with an address-space limit: a machine with less free memory than the file is
    large behaves the same way, only slower and with the OOM killer."""

    def pre() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (mem, mem))

    return subprocess.run(
        argv, cwd=cwd, text=True, capture_output=True, preexec_fn=pre, timeout=timeout
    )


# -- F1: the audit log ------------------------------------------------------------------
@pytest.mark.parametrize("name", ["events.jsonl", "events.jsonl.1"])
@pytest.mark.parametrize("cmd", [["doctor"], ["log"], ["gc"]])
def test_huge_audit_log_is_read_to_a_bound(hub: Repo, name: str, cmd: list[str]) -> None:
    """A sparse 3 GB audit log with no newline (one `truncate` by any process of the
    owner's uid outside the sandbox) made doctor, log and gc read it as one line:
    MemoryError, exit 3 (red team 17 F1). Now its end is read, to EVENTS_READ_MAX, and
    the command says the log was cut, under a 1 GiB address-space limit."""
    log = hub.state_dir / name
    with open(log, "ab") as f:
        f.truncate(3 * 1024**3)
    t0 = time.monotonic()
    res = _limited([sys.executable, "-m", "guard", *cmd, "--json"], hub.path)
    took = time.monotonic() - t0
    assert "internal error" not in res.stderr and "MemoryError" not in res.stderr, res.stderr
    assert res.returncode != 3, res.stderr
    out = json.loads(res.stdout)
    assert any(str(log) in w and "last" in w for w in out.get("warnings", [])), out
    assert took < 60, took


def test_events_after_a_huge_region_and_long_lines_are_read(tmp_path: Path) -> None:
    """The newest events, written after a grown region, are still read; a line longer
    than any event is skipped without being held, the lines around it are read; what was
    left is said in log_notes."""
    st = Store(tmp_path)
    tmp_path.mkdir(exist_ok=True)
    with open(st.events_path, "ab") as f:
        f.truncate(EVENTS_READ_MAX * 3)  # a grown region of NULs, no newline
        f.write(b"\n" + json.dumps({"kind": "first"}).encode() + b"\n")
        f.write(b"x" * (EVENT_LINE_MAX * 2) + b"\n")  # one line past the bound
        f.write(json.dumps({"kind": "last"}).encode() + b"\n")
    kinds = [e.get("kind") for e in st.events()]
    assert kinds == ["first", "last"], kinds
    note = st.log_notes[str(st.events_path)]
    assert "last" in note and "1 line(s)" in note, note
    # once the file is as rotation leaves it, nothing is said
    st.events_path.write_bytes(json.dumps({"kind": "again"}).encode() + b"\n")
    assert [e.get("kind") for e in st.events()] == ["again"]
    assert st.log_notes == {}


def test_an_event_too_long_is_written_cut(tmp_path: Path) -> None:
    """event() never writes a line the reader would skip: a value too large is left out
    and named under `cut`; the fields every reader needs stay."""
    st = Store(tmp_path)
    st.event("land", lane="alpha", epoch=3, main_after="a" * 40, paths=["p" * 4000] * 400)
    (ev,) = list(st.events())
    assert ev["kind"] == "land" and ev["epoch"] == 3 and ev["main_after"] == "a" * 40
    assert ev["cut"] == ["paths"] and "paths" not in ev
    assert st.events_path.stat().st_size <= gstore.EVENT_LINE_MAX
