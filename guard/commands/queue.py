"""`git lane queue [KEYS...|--all] [--batch N]`: land the ready lanes, one after another
or N at a time (the engine is guard/queue.py). Owner only."""

from __future__ import annotations

from guard import gate, lane, ready
from guard import queue as engine
from guard.commands.land import gate_command
from guard.repo import Repo
from guard.results import QueueResult


def run(
    repo: Repo,
    keys: list[str],
    all_: bool = False,
    batch: int = 1,
    tick: gate.Tick | None = None,
    progress: engine.Progress | None = None,
) -> QueueResult:
    """KEYS in the order given; else (or with --all) every marked lane, oldest mark first."""
    lane.forbid_worker("queue", "git lane queue" + (f" --batch {batch}" if batch > 1 else ""))
    for k in keys:
        lane.check_key(k)
    command = gate_command(repo)
    if all_ or not keys:
        keys = [m.key for m in ready.all_marks(repo.state_dir)]
    keys = list(dict.fromkeys(keys))  # a lane named twice is tried once
    return engine.run_queue(repo, keys, command, batch, tick, progress)
