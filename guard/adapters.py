"""What `git lane agent-setup` wrote into a lane, remembered so that it is not mistaken
for work: `agents/KEY.json` in git-lane's state holds, per file it created in the lane, the sha256
it wrote. `release` (G11) leaves such a file out of the ignored work it asks about while
its content is still exactly that; a file it merged into (one that was there before) is
never recorded, so it is kept asking about."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from guard.store import atomic_write, atomic_write_json, read_regular


# the most git-lane reads of an agent's file in a lane (agent-setup's reads, and release's
# and gc's hashing of a file it wrote): a settings file is a few KiB; a lane's `/dev/zero`
# link, FIFO or grown file is never read past this (red team 14I F3, 15A F7)
FILE_MAX = 1 << 20


def record_path(state_dir: Path, key: str) -> Path:
    return state_dir / "agents" / f"{key}.json"


def instructions_path(state_dir: Path, key: str) -> Path:
    return state_dir / "agents" / key / "INSTRUCTIONS.md"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def written(state_dir: Path, key: str) -> dict[str, str]:
    """{lane-relative path: sha256} of the files agent-setup created in the lane."""
    try:
        obj = json.loads(read_regular(record_path(state_dir, key)))
    except (OSError, ValueError):
        return {}
    files = obj.get("files") if isinstance(obj, dict) else None
    if not isinstance(files, dict):
        return {}
    return {k: v for k, v in files.items() if isinstance(k, str) and isinstance(v, str)}


def remember(state_dir: Path, key: str, rel: str, digest: str | None) -> None:
    """Record (or with None, forget) one file agent-setup owns in the lane."""
    files = written(state_dir, key)
    if digest is None:
        files.pop(rel, None)
    else:
        files[rel] = digest
    path = record_path(state_dir, key)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(path, {"schema": 1, "lane": key, "files": files})


def unchanged(state_dir: Path, key: str, lane_path: str, entry: str) -> bool:
    """Is `entry` (a path `git ls-files --others --ignored --directory` printed, a
    directory with its trailing slash) only files agent-setup created and nobody changed?"""
    files = written(state_dir, key)
    if not files:
        return False
    full = os.path.join(lane_path, entry)
    if entry.endswith("/"):
        seen = False
        for root, dirs, names in os.walk(full):
            dirs.sort()
            for n in names:  # the first file that is not one of them ends the look
                if not _same(lane_path, os.path.relpath(os.path.join(root, n), lane_path), files):
                    return False
                seen = True
            for d in dirs:
                if os.path.islink(os.path.join(root, d)):
                    return False
        return seen
    return _same(lane_path, entry, files)


def _same(lane_path: str, rel: str, files: dict[str, str]) -> bool:
    """Is the lane's `rel` the file agent-setup wrote there: a regular file (no link)
    of at most FILE_MAX bytes with the recorded sha256? A file the lane grew (`truncate
    -s 3G`: no disk used) is never read whole: past FILE_MAX it is not one."""
    digest = files.get(rel.replace(os.sep, "/"))
    if digest is None:
        return False
    p = os.path.join(lane_path, rel)
    if os.path.islink(p) or not os.path.isfile(p):
        return False
    try:  # a swap since: no read through a link, never past FILE_MAX
        return sha256(read_regular(p, follow=False, limit=FILE_MAX)) == digest
    except OSError:
        return False


# -- the marked block of info/exclude agent-setup keeps its files out of git status with ----
EXCLUDE_BEGIN = "# git-lane agent-setup (begin): files agent adapters write in lanes"
EXCLUDE_END = "# git-lane agent-setup (end)"


def exclude_block(text: str) -> tuple[list[str], list[str], list[str]]:
    """(before, block entries, after) of an info/exclude text; no block: (all, [], [])."""
    lines = text.splitlines()
    if EXCLUDE_BEGIN in lines and EXCLUDE_END in lines[lines.index(EXCLUDE_BEGIN) :]:
        b = lines.index(EXCLUDE_BEGIN)
        e = lines.index(EXCLUDE_END, b)
        return lines[:b], lines[b + 1 : e], lines[e + 1 :]
    return lines, [], []


def prune_exclude(exclude: Path, in_use: set[str]) -> list[str]:
    """Drop from the block the entries (`/rel`) no active lane has a file at (`in_use`:
    the lane-relative paths that are), and the block when it is left empty: a hub's own
    file of that name is no longer ignored once the last lane with the adapter is gone.
    The entries dropped."""
    try:
        text = exclude.read_text()
    except (FileNotFoundError, NotADirectoryError):
        return []
    before, block, after = exclude_block(text)
    keep = [e for e in block if e.lstrip("/") in in_use]
    if keep == block:
        return []
    out = [*before, *([EXCLUDE_BEGIN, *keep, EXCLUDE_END] if keep else []), *after]
    atomic_write(exclude, ("\n".join(out) + "\n").encode() if out else b"")
    return [e for e in block if e not in keep]
