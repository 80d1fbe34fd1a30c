"""Pure decisions, over facts gathered by the caller: which branch is main, lane key
validity, a process's role, whether a stale lane must sync before it writes, which paths
overlap, conflict-marker detection, the advice sentence. No git, no I/O: tested as tables."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

KEY_RE = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$")
POLICIES = ("on_land_mandatory", "overlap_mandatory", "land_time_only")


def choose_main(configured: str | None, has_main: bool, has_master: bool) -> str | None:
    """The protected branch: the configured name, else `main`, else `master`; None while the
    repository has neither. The hooks decide the same in sh (gl_main_name in
    hooks/common.sh); tests/test_shared_decisions.py feeds both the same cases."""
    if configured:
        return configured
    if has_main:
        return "main"
    if has_master:
        return "master"
    return None


def bound_lane(env: Mapping[str, str]) -> str | None:
    """The lane a process is bound to (`GITLANE_LANE`), if any."""
    return env.get("GITLANE_LANE") or None


def is_worker(env: Mapping[str, str]) -> bool:
    """A bound process is a worker, and so is one with GITLANE_ROLE set to anything but
    empty or `owner` (`WORKER`, ` worker`, a typo: a role we cannot read grants nothing);
    nothing in the environment makes a bound process the owner again."""
    role = env.get("GITLANE_ROLE") or ""
    return bound_lane(env) is not None or role not in ("", "owner")


def brief(text: str, width: int = 80) -> str:
    """One line for a message: a long or multi-line value (a gate command) is cut at a
    word boundary and says how long it was; the whole value stays in --json."""
    one = " ".join(text.split())
    if len(one) <= width and "\n" not in text:
        return text
    cut = one[:width].rsplit(" ", 1)[0] if " " in one[:width] else one[:width]
    return f"{cut} … ({len(text)} characters)"


def valid_key(key: str) -> bool:
    return bool(KEY_RE.fullmatch(key))


GOAL_SLUG_MAX = 55  # leaves room for `-<n>` within a key's 63 characters


def goal_slug(goal: str) -> str:
    """A goal as the prefix of a lane key: accents dropped, lowercase, every run of other
    characters one `-`, trimmed, at most GOAL_SLUG_MAX characters ("Fix Login" -> "fix-login");
    empty when nothing usable is left."""
    import unicodedata

    plain = unicodedata.normalize("NFKD", goal).encode("ascii", "ignore").decode().lower()
    slug = re.sub(r"[^a-z0-9]+", "-", plain).strip("-")
    return slug[:GOAL_SLUG_MAX].rstrip("-")


def auto_key(prefix: str, taken: Callable[[str], bool] | Iterable[str]) -> str:
    """`<prefix>-<n>` with the lowest free n >= 1; `taken` is a predicate or a collection."""
    is_taken = taken if callable(taken) else set(taken).__contains__
    n = 1
    while is_taken(f"{prefix}-{n}"):
        n += 1
    return f"{prefix}-{n}"


PORT_BASE = 20000
PORT_SPAN = 10  # ports per lane: GITLANE_PORT .. GITLANE_PORT + 9
PORT_SLOTS = 2000  # so every base is in 20000..39990


def lane_port(key: str) -> int:
    """The lane's port base (GITLANE_PORT): the same for a key on every machine and every
    run (crc32, not Python's salted hash), a multiple of 10, so a lane owns 10 ports."""
    import zlib

    return PORT_BASE + (zlib.crc32(key.encode("utf-8")) % PORT_SLOTS) * PORT_SPAN


def sync_required(
    policy: str,
    fresh: bool,
    lane_paths: Iterable[str] | None = None,
    main_paths: Iterable[str] | None = None,
) -> bool:
    """Must this lane sync before it writes again?

    on_land_mandatory: whenever it is stale. overlap_mandatory: when stale and the paths it
    changed since its merge-base meet the paths main changed since then. land_time_only:
    never (the land gate alone enforces freshness)."""
    if fresh or policy == "land_time_only":
        return False
    if policy == "overlap_mandatory":
        if lane_paths is None or main_paths is None:
            return True  # facts missing: the safe answer
        return bool(set(lane_paths) & set(main_paths))
    return True


def overlapping(a: Iterable[str], b: Iterable[str]) -> list[str]:
    """Paths in `a` that meet `b`: equal, or one a directory of the other."""
    bset = set(b)
    prefixes = {p.rstrip("/") + "/" for p in bset}
    hits = []
    for p in a:
        if (
            p in bset
            or any(p.startswith(x) for x in prefixes)
            or any(q.startswith(p.rstrip("/") + "/") for q in bset)
        ):
            hits.append(p)
    return hits


# -- conflict markers -----------------------------------------------------------------
# A marker is 7 characters long, or what the file's `conflict-marker-size` attribute says
# (git writes markers of that length, and only those, into a conflicted file).
MARKER_SIZE = 7


@functools.lru_cache(maxsize=16)
def marker_res(size: int = MARKER_SIZE) -> tuple[re.Pattern[bytes], ...]:
    """open, base, mid, close: the four marker lines of `size` characters."""
    n = str(size).encode()
    return (
        re.compile(rb"^<{" + n + rb"}(?: |$)"),
        re.compile(rb"^\|{" + n + rb"}(?: |$)"),
        re.compile(rb"^={" + n + rb"}$"),
        re.compile(rb"^>{" + n + rb"}(?: |$)"),
    )


def marker_sizes(check_attr_z: str) -> dict[str, int]:
    """Per path, its marker size, from `git check-attr -z conflict-marker-size -- PATHS`."""
    f = check_attr_z.split("\0")
    out: dict[str, int] = {}
    for i in range(0, len(f) - 2, 3):
        value = f[i + 2]
        out[f[i]] = int(value) if value.isdigit() and 0 < int(value) < 1000 else MARKER_SIZE
    return out


def conflict_blocks(data: bytes, size: int = MARKER_SIZE) -> list[int]:
    """1-based line numbers where a real conflict block opens.

    A block is `<<<<<<< ` ... [`||||||| ` ...] `=======` ... `>>>>>>> ` (markers of `size`
    characters); a lone `=======` (a Markdown setext underline) or a stray opener is not
    one."""
    _open, _base, _mid, _close = marker_res(size)
    found: list[int] = []
    state = 0  # 0 outside, 1 after open, 2 after base, 3 after mid
    start = 0
    for i, raw in enumerate(data.split(b"\n"), 1):
        line = raw.rstrip(b"\r")
        if _open.match(line):
            state, start = 1, i
        elif state in (1, 2) and _base.match(line):
            state = 2
        elif state in (1, 2) and _mid.match(line):
            state = 3
        elif state == 3 and _close.match(line):
            found.append(start)
            state = 0
    return found


@dataclass(frozen=True)
class LaneFacts:
    key: str
    path: str
    state: str
    exists: bool
    dirty: bool
    rebase: bool
    fresh: bool
    sync_required: bool
    ahead: int
    behind: int
    head: str | None = None  # the worktree's checked-out branch (full ref); None if detached
    branch: str | None = None  # the lane branch, lane/<key>
    branch_state: str = "ok"  # ok | missing | moved: deleted or moved outside the lane
    recorded: str | None = None  # the commit the worktree last had on the lane branch


def advice(f: LaneFacts) -> str:
    """The next step for a lane, in one short sentence: no paths (they are in the lane's
    `path`, the PATH column of status), so that status fits a 100-column terminal."""
    k = f.key
    if f.state == "released":
        return "Released; nothing to do."
    if f.branch_state == "missing" and not f.recorded:
        return f"Branch gone, and nothing records its commit: see `git lane repair {k}`."
    if f.branch_state == "missing":
        also = "" if f.exists else " and its worktree"
        return f"Branch deleted by hand: `git lane repair {k}` restores it at {(f.recorded or '')[:12]}{also}."
    if not f.exists or f.state == "orphaned":
        return f"Worktree missing: `git lane repair {k}` (or `git lane release {k} --confirm yes-discard-lane`)."
    if f.branch_state == "moved":
        return f"Branch moved by hand: `git lane repair {k}` puts it back at {(f.recorded or '')[:12]}."
    if f.rebase:
        return f"Sync stopped on conflicts: resolve them, then `git lane continue {k}`."
    if f.branch and f.exists and f.head != f"refs/heads/{f.branch}":
        shown = f.head.removeprefix("refs/heads/") if f.head else "a detached HEAD"
        return f"{shown} is checked out: `git switch {f.branch}` in the lane."
    if f.dirty:
        then = f"`git lane sync {k}`" if not f.fresh else f"`git lane land {k}`"
        return f"Uncommitted changes: commit them, then {then}."
    if not f.fresh:
        if f.sync_required:
            return f"Stale: `git lane sync {k}` before writing or landing."
        return f"Behind main by {f.behind}: `git lane sync {k}` before landing."
    if f.ahead > 0:
        return f"Ready: `git lane land {k}`."
    return f"Nothing to land yet: commit in the lane, or `git lane release {k}`."
