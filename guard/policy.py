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


# A chunk a streaming scan is fed at most (MarkerScan): a conflicted file of the lane's may be
# any size (a sparse 3 GB file takes no disk), so no reader holds more than this of it.
SCAN_CHUNK = 1 << 20


@functools.lru_cache(maxsize=16)
def _marker_lines(size: int) -> tuple[re.Pattern[bytes], ...]:
    """Per state of the scan (0 outside, 1 after open, 2 after base, 3 after mid), the
    marker lines that change it, found in a buffer of many lines (MULTILINE): marker_res's
    four on a line with its trailing CRs (`\\r*$`, as rstrip drops them), grouped open
    (1), then base and mid (2, 3) or close (2). Every other line changes nothing: the
    regex engine passes over it without a step of Python's."""
    n = str(size).encode()
    o = rb"(<{" + n + rb"}(?: |\r*$))"
    b = rb"(\|{" + n + rb"}(?: |\r*$))"
    m = rb"(={" + n + rb"}\r*$)"
    c = rb"(>{" + n + rb"}(?: |\r*$))"
    one = re.compile(rb"^(?:" + o + b"|" + b + b"|" + m + rb")", re.M)
    return (
        re.compile(rb"^" + o, re.M),
        one,
        one,
        re.compile(rb"^(?:" + o + b"|" + c + rb")", re.M),
    )


class MarkerScan:
    """conflict_blocks over a stream: fed chunks of any size (`feed`), `close` gives the
    same list conflict_blocks gives for their concatenation. Memory is bounded by the
    chunk, never the file: of a line that runs past a chunk only its first `size`+1 bytes
    are kept and whether anything but CR follows them, which is all the four marker
    regexes can tell apart (a marker line is `size` marker characters and then a space or
    nothing but CRs). `keep` bounds the blocks listed (`more` counts the others): a file
    of nothing but blocks is a block every 24 bytes."""

    def __init__(self, size: int = MARKER_SIZE, keep: int | None = None) -> None:
        self.size = size
        self.keep = keep  # at most this many blocks kept in `found`; the rest only counted
        self.more = 0
        self._res = marker_res(size)
        self._lines = _marker_lines(size)
        self._opener = b"\n" + b"<" * size
        self._head = b""  # the first size+1 bytes of the line not yet ended
        self._dirty = False  # ... and whether a byte other than CR follows them
        self._line = 1  # its number
        self._state = 0  # 0 outside, 1 after open, 2 after base, 3 after mid
        self._start = 0
        self.found: list[int] = []

    def _extend(self, data: bytes | memoryview) -> None:
        need = self.size + 1 - len(self._head)
        if need > 0:
            self._head += bytes(data[:need])
            data = data[need:]
        if not self._dirty and len(data) and bytes(data).strip(b"\r"):
            self._dirty = True

    def _take(self, n: int, raw: bytes) -> None:
        """The line numbered `n` (its bytes, no newline; a long one cut as _extend does)."""
        _open, _base, _mid, _close = self._res
        line = raw.rstrip(b"\r")
        if _open.match(line):
            self._state, self._start = 1, n
        elif self._state in (1, 2) and _base.match(line):
            self._state = 2
        elif self._state in (1, 2) and _mid.match(line):
            self._state = 3
        elif self._state == 3 and _close.match(line):
            self._block()
            self._state = 0

    def _block(self) -> None:
        if self.keep is None or len(self.found) < self.keep:
            self.found.append(self._start)
        else:
            self.more += 1

    def _end_line(self) -> None:
        self._take(self._line, self._head + (b"x" if self._dirty else b""))
        self._head, self._dirty = b"", False

    def _lines_of(self, chunk: bytes) -> tuple[int, int] | None:
        """The line `chunk` ends (or carries on) taken in; then (the offset of its first
        whole line, of its last newline), None when it holds no newline."""
        first = chunk.find(b"\n")
        if first < 0:
            self._extend(memoryview(chunk))
            return None
        self._extend(memoryview(chunk)[:first])
        self._end_line()
        return first + 1, chunk.rfind(b"\n")

    def feed(self, chunk: bytes) -> None:
        if (span := self._lines_of(chunk)) is None:
            return
        first, last = span[0] - 1, span[1]
        base, at = self._line + 1, first + 1  # the line number at offset `at`
        pos = first + 1
        while pos < last:
            if self._state == 0:  # most of a file: a memchr-speed look for an opener's start
                pos = chunk.find(self._opener, pos - 1, last) + 1
                if pos == 0:
                    break
                m = self._lines[0].match(chunk, pos, last)
                if m is None:
                    pos += 1  # (a run of `<` too long, or no space after it)
                    continue
            elif (m := self._lines[self._state].search(chunk, pos, last)) is None:
                break
            pos = m.end() + 1  # (past the newline or the space: no marker line starts there)
            kind = m.lastindex
            if kind == 1:
                base += chunk.count(b"\n", at, m.start())
                at = m.start()
                self._state, self._start = 1, base
            elif self._state == 3:
                self._block()
                self._state = 0
            else:
                self._state = 2 if kind == 2 else 3
        self._line += chunk.count(b"\n")
        self._extend(memoryview(chunk)[last + 1 :])

    def feed_zeros(self, n: int) -> None:
        """`n` NUL bytes (a hole of a sparse file), in constant time: no newline among them,
        and past size+1 bytes more of them tell nothing new."""
        self._extend(bytes(min(n, self.size + 2)))

    def close(self) -> list[int]:
        self._end_line()
        return self.found


@functools.lru_cache(maxsize=16)
def _any_marker_line(size: int) -> re.Pattern[bytes]:
    """Any of the four marker lines (groups 1-4: open, base, mid, close), as marker_res
    matches them on a line with its trailing CRs dropped."""
    n = str(size).encode()
    return re.compile(
        rb"^(?:(<{"
        + n
        + rb"}(?: |\r*$))|(\|{"
        + n
        + rb"}(?: |\r*$))|(={"
        + n
        + rb"}\r*$)|(>{"
        + n
        + rb"}(?: |\r*$)))",
        re.M,
    )


class AddedMarkerScan(MarkerScan):
    """hookcheck.added_blocks over a stream: the conflict blocks (as MarkerScan finds them)
    that have a marker line the diff added in their span, from the opener to the first
    close marker line after it. `added(n)`, asked of line numbers in increasing order
    only, says whether line n was added (a reader of the diff that reads on as it is
    asked: neither the blob nor its diff is held whole). Only while such a span is open
    and has no added marker line yet is every marker line looked at; the rest of the
    file passes as MarkerScan passes it. `found` is the blocks that hit, at most `keep`."""

    def __init__(
        self, added: Callable[[int], bool], size: int = MARKER_SIZE, keep: int | None = None
    ) -> None:
        super().__init__(size, keep)
        self._added = added
        self._span = False  # from an opener to the first close line after it
        self._hit = False  # a marker line of that span was added
        self._any = _any_marker_line(size)

    def _event(self, n: int, kind: int) -> None:
        """Line n is a marker line of `kind` (1 open, 2 base, 3 mid, 4 close)."""
        if kind == 1:
            self._state, self._start = 1, n
            self._span, self._hit = True, self._added(n)
            return
        if self._span:
            if not self._hit and self._added(n):
                self._hit = True
            if kind == 4:
                self._span = False
        if self._state in (1, 2) and kind in (2, 3):
            self._state = kind
        elif self._state == 3 and kind == 4:
            if self._hit:
                self._block()
            self._state = 0

    def _take(self, n: int, raw: bytes) -> None:
        line = raw.rstrip(b"\r")
        for kind, rx in enumerate(self._res, 1):
            if rx.match(line):
                self._event(n, kind)
                return

    def feed(self, chunk: bytes) -> None:
        if (span := self._lines_of(chunk)) is None:
            return
        first, last = span[0] - 1, span[1]
        line, at = self._line + 1, first + 1  # the line number at offset `at`
        pos = first + 1
        while pos < last:
            if self._span and not self._hit:
                if (m := self._any.search(chunk, pos, last)) is None:
                    break
                kind = m.lastindex or 0
            elif self._state == 0:  # as MarkerScan: a memchr-speed look for an opener
                pos = chunk.find(self._opener, pos - 1, last) + 1
                if pos == 0:
                    break
                m = self._lines[0].match(chunk, pos, last)
                if m is None:
                    pos += 1
                    continue
                kind = 1
            else:
                if (m := self._lines[self._state].search(chunk, pos, last)) is None:
                    break
                kind = m.lastindex or 0
                if self._state == 3 and kind == 2:
                    kind = 4  # the state-3 pattern is open or close
            pos = m.end() + 1
            line += chunk.count(b"\n", at, m.start())
            at = m.start()
            self._event(line, kind)
        self._line += chunk.count(b"\n")
        self._extend(memoryview(chunk)[last + 1 :])


def conflict_blocks(data: bytes, size: int = MARKER_SIZE) -> list[int]:
    """1-based line numbers where a real conflict block opens.

    A block is `<<<<<<< ` ... [`||||||| ` ...] `=======` ... `>>>>>>> ` (markers of `size`
    characters); a lone `=======` (a Markdown setext underline) or a stray opener is not
    one. (MarkerScan, fed `data` whole: one decision for a blob in memory and a file
    streamed from disk.)"""
    scan = MarkerScan(size)
    scan.feed(data)
    return scan.close()


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
