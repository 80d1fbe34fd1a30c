"""The Python slow path of the git hooks, and the entry point the pre-commit framework runs
(`git-lane-hook`, or `python -m guard.hookcheck`).

Standard library only (no click, psutil or plumbum): it runs inside `git commit`.

    git-lane-hook pre-commit        run hooks/pre-commit (the pre-commit framework's entry)
    git-lane-hook pre-rebase [UPSTREAM [BRANCH]]
                                    run hooks/pre-rebase; without arguments they are read
                                    from PRE_COMMIT_PRE_REBASE_UPSTREAM / _BRANCH
    git-lane-hook markers KEY       exit 10 (REFUSED) when the staged diff adds a conflict
                                    block; not 1, which a Python without guard also returns
    git-lane-hook notice KEY MAIN   print the sync notice when lane KEY must sync
"""

from __future__ import annotations

import os
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from collections.abc import Iterable, Iterator, Sequence

from guard import git
from guard.policy import MARKER_SIZE, conflict_blocks, marker_res, marker_sizes

_HUNK = re.compile(rb"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@")
# every line that could be a marker line of any conflict-marker-size (git takes any size
# from 1): an opener, a separator, a closer or diff3's base line, then a space, a CR or
# the end. A superset: the scan decides; a lane that adds only the `=======` between an
# opener and a closer main already holds makes a block too (s16-blobs)
_PICKAXE = "^(<+|=+|>+|[|]+)( |\r|$)"
REFUSED = 10
PY_LINE = "GITLANE_PYTHON=${GITLANE_PYTHON:-}"
PYPATH_LINE = "GITLANE_PYPATH=${GITLANE_PYPATH:-}"
# the line of each hook source that render_hook() replaces with hooks/common.sh's common block
COMMON_LINE = '. "${0%/*}/common.sh" # git-lane: install puts hooks/common.sh here'
COMMON_START = "# ---- git-lane common block"


@dataclass(frozen=True)
class MarkerHit:
    path: str
    line: int

    def __str__(self) -> str:
        return f"{self.path}:{self.line}"


def _unquote(raw: bytes) -> bytes:
    """A path as git prints it in a patch header: C-quoted when it has odd bytes."""
    if not raw.startswith(b'"'):
        return raw
    body = raw[1:-1] if raw.endswith(b'"') else raw[1:]
    out = bytearray()
    i = 0
    simple = {
        ord("n"): 10,
        ord("t"): 9,
        ord("r"): 13,
        ord("a"): 7,
        ord("b"): 8,
        ord("f"): 12,
        ord("v"): 11,
        ord('"'): 34,
        ord("\\"): 92,
    }
    while i < len(body):
        c = body[i]
        if c == 92 and i + 1 < len(body):  # backslash
            n = body[i + 1]
            if 48 <= n <= 55 and i + 3 < len(body):  # \ooo
                out.append(int(body[i + 1 : i + 4], 8))
                i += 4
                continue
            out.append(simple.get(n, n))
            i += 2
            continue
        out.append(c)
        i += 1
    return bytes(out)


def added_lines(patch: bytes) -> dict[bytes, set[int]]:
    """Per new path: the line numbers (in the staged file) that the patch adds."""
    out: dict[bytes, set[int]] = {}
    path: bytes | None = None
    lineno = 0
    for line in patch.split(b"\n"):
        if line.startswith(b"diff --git "):
            path = None
        elif line.startswith(b"+++ "):
            target = line[4:]
            if target.endswith(b"\t"):  # git appends a tab to a name with a space in it
                target = target[:-1]
            path = None if target == b"/dev/null" else _unquote(target)
            if path is not None and path.startswith(b"b/"):
                path = path[2:]
            if path is not None:
                out.setdefault(path, set())
        elif line.startswith(b"@@"):
            m = _HUNK.match(line)
            lineno = int(m.group(1)) if m else 0
        elif path is not None and line.startswith(b"+"):
            out[path].add(lineno)
            lineno += 1
        elif path is not None and line.startswith(b" "):
            lineno += 1
    return out


_HUNK_LINE = re.compile(rb"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@", re.M)
_HEAD_MAX = 256  # of a line of a patch, what a hunk header needs at most


def _hunks(chunks: Iterable[bytes]) -> Iterator[tuple[int, int]]:
    """(first, count) of the new side of each hunk of a -U0 patch of one file, streamed:
    a line that starts with `@@ ` is a hunk header wherever it is (a line of a hunk's body
    starts with `+`, `-`, ` ` or `\\`, so a body line is never taken for a header as an
    added `++ x`, shown `+++ x`, was by added_lines). Of a line that runs on past a chunk
    only its first _HEAD_MAX bytes are kept."""
    carry = b""
    for chunk in chunks:
        first = chunk.find(b"\n")
        if first < 0:
            carry += chunk[: _HEAD_MAX - len(carry)]
            continue
        head = carry + chunk[: min(first, max(0, _HEAD_MAX - len(carry)))]
        if m := _HUNK_LINE.match(head):
            yield int(m.group(1)), int(m.group(2) or b"1")
        last = chunk.rfind(b"\n")
        for m in _HUNK_LINE.finditer(chunk, first + 1, last):
            yield int(m.group(1)), int(m.group(2) or b"1")
        carry = chunk[last + 1 : last + 1 + _HEAD_MAX]
    if m := _HUNK_LINE.match(carry):
        yield int(m.group(1)), int(m.group(2) or b"1")


class AddedLines:
    """Was line n added? answered from a -U0 patch of one file read as it streams in
    (`chunks`), for n asked in increasing order (policy.AddedMarkerScan's questions):
    with no context lines, a hunk `+c,d` adds exactly lines c..c+d-1."""

    def __init__(self, chunks: Iterable[bytes]) -> None:
        self._hunks = _hunks(chunks)
        self._lo = self._hi = 0

    def __call__(self, n: int) -> bool:
        while n >= self._hi:
            nxt = next(self._hunks, None)
            if nxt is None:
                return False
            self._lo, self._hi = nxt[0], nxt[0] + nxt[1]
        return self._lo <= n

    def drain(self) -> None:
        """Read the patch to its end (so its git's exit status is known)."""
        for _ in self._hunks:
            pass


def added_blocks(data: bytes, added: set[int], size: int = MARKER_SIZE) -> list[int]:
    """Opening lines of the conflict blocks in `data` that have a marker line in `added`."""
    lines = data.split(b"\n")
    hits = []
    opener, base, mid, close = marker_res(size)
    for start in conflict_blocks(data, size):
        for n in range(start, len(lines) + 1):
            raw = lines[n - 1].rstrip(b"\r")
            if n in added and any(rx.match(raw) for rx in (opener, base, mid, close)):
                hits.append(start)
                break
            if n > start and close.match(raw):
                break
    return hits


def staged_marker_hits(cwd: str | None = None) -> list[MarkerHit]:
    """Conflict blocks the staged changes add (honours the hook's GIT_INDEX_FILE)."""
    diff = git.run(
        [
            "-c",
            "core.quotePath=false",
            "diff",
            "--cached",
            *git.PATCH_ARGS,
            f"-G{_PICKAXE}",
        ],
        cwd,
        scrub=False,
    )
    patch = diff.stdout.encode("utf-8", "surrogateescape")
    hits: list[MarkerHit] = []
    touched = {p.decode("utf-8", "surrogateescape"): a for p, a in added_lines(patch).items() if a}
    sizes: dict[str, int] = {}
    if touched:  # the index's .gitattributes: what git will check out, and merge, with
        attr = git.run(
            ["check-attr", "--cached", "-z", "conflict-marker-size", "--", *sorted(touched)],
            cwd,
            check=False,
            scrub=False,
        )
        sizes = marker_sizes(attr.stdout) if attr.ok else {}
    for name, added in sorted(touched.items()):
        blob = git.run(["cat-file", "blob", f":{name}"], cwd, check=False, scrub=False)
        if not blob.ok:
            continue
        data = blob.stdout.encode("utf-8", "surrogateescape")
        hits.extend(
            MarkerHit(name, n) for n in added_blocks(data, added, sizes.get(name, MARKER_SIZE))
        )
    return hits


def _state_dir(cwd: str | None) -> str | None:
    res = git.run(
        ["rev-parse", "--path-format=absolute", "--git-common-dir"], cwd, check=False, scrub=False
    )
    return os.path.join(res.stdout.strip(), "git-lane") if res.ok else None


def _event(cwd: str | None, lane: str | None, code: str, **data: Any) -> None:
    from pathlib import Path

    from guard.store import Store

    state = _state_dir(cwd)
    if state and os.path.isdir(state):
        Store(Path(state)).event("refusal", lane=lane, code=code, source="hook", **data)


def cmd_markers(key: str) -> int:
    hits = staged_marker_hits()
    if not hits:
        return 0
    from guard.errors import Refusal

    where = ", ".join(str(h) for h in hits[:10]) + (" ..." if len(hits) > 10 else "")
    files = sorted({h.path for h in hits})
    quoted = " ".join("'" + f.replace("'", "'\\''") + "'" for f in files)
    ref = Refusal(
        "conflict_markers_present",
        f"the commit adds conflict markers at {where}: remove those blocks, then stage and "
        "commit again",
        next=[f"git --literal-pathspecs add -- {quoted}", "git commit"],
        details={"lane": key, "markers": [str(h) for h in hits]},
    )
    sys.stderr.write(ref.line() + "\n")
    _event(
        None,
        key or None,
        ref.code,
        hook="pre-commit",
        message=ref.message,
        markers=[str(h) for h in hits[:50]],
    )
    return REFUSED


def cmd_notice(key: str, main: str) -> int:
    """overlap_mandatory: notice when the lane's changes, this commit's included, meet
    what main changed since their merge-base."""
    from guard import policy
    from guard.lane import overlap
    from guard.repo import Repo

    repo = Repo.discover(os.getcwd())
    main_sha = repo.ref_sha(f"refs/heads/{main}")
    head = git.run(["rev-parse", "-q", "--verify", "HEAD^{commit}"], None, check=False, scrub=False)
    tip = head.stdout.strip() if head.ok else None  # this worktree's HEAD, not the hub's
    if main_sha is None or tip is None:
        return 0
    lane_paths, main_paths = overlap(repo, main_sha, tip)
    staged = git.run(
        ["diff", "--cached", "--name-only", "--no-renames", "-z"], None, check=False, scrub=False
    )
    paths = set(lane_paths) | set(staged.z())
    if policy.sync_required(repo.owner_config["sync_policy"], False, paths, main_paths):
        shared = sorted(paths & set(main_paths))
        sys.stderr.write(
            f"git-lane: notice [sync_required]: main changed {', '.join(shared[:3])}"
            f"{' ...' if len(shared) > 3 else ''} too; lane {key} must sync before it is landed. "
            f"Next: git lane sync {key}\n"
        )
    return 0


# -- the hook scripts as they run ---------------------------------------------------------
def guard_parent() -> str:
    """The directory that holds this `guard` package: what a hook's isolated (-I) Python
    puts first on sys.path, so that neither the cwd nor PYTHONPATH picks the guard it runs."""
    return str(Path(__file__).resolve().parent.parent)


def render_hook(name: str, python: str, pypath: str | None = None) -> str:
    """Hook `name` as install writes it and the framework entry runs it: its source with the
    line COMMON_LINE replaced by hooks/common.sh from its COMMON_START line on, `python`
    embedded on the GITLANE_PYTHON= line and the directory of its guard package
    (guard_parent()) on the GITLANE_PYPATH= line. Rendered once, not sourced at run time: a
    hook runs hundreds of times in one rebase. Here rather than in hookinstall, which
    imports the engine: the framework entry renders on every commit."""
    from guard.resources import data_dir

    d = data_dir("hooks")
    src = (d / name).read_text(encoding="utf-8")
    common = (d / "common.sh").read_text(encoding="utf-8")
    block = common[common.index(COMMON_START) :]
    lines = src.splitlines(keepends=True)
    at = [i for i, ln in enumerate(lines) if ln.rstrip("\n") == COMMON_LINE]
    if len(at) != 1:
        raise ValueError(f"hooks/{name} must hold the line {COMMON_LINE!r} exactly once")
    lines[at[0]] = block if block.endswith("\n") else block + "\n"
    text = "".join(lines)
    text = text.replace(PY_LINE, f"GITLANE_PYTHON={shlex.quote(python)}", 1)
    pp = guard_parent() if pypath is None else pypath
    return text.replace(PYPATH_LINE, f"GITLANE_PYPATH={shlex.quote(pp)}", 1)


def _exec_hook(name: str, args: Sequence[str]) -> int:
    """Run hook `name` exactly as install writes it, this Python embedded. Its $0 is the
    shipped source's path: the hooks run `$0.legacy`, and behind the framework there is
    none to run (the framework chains legacy hooks itself)."""
    from guard.resources import data_dir

    text = render_hook(name, sys.executable)
    argv0 = str(data_dir("hooks") / name)
    os.execv("/bin/sh", ["/bin/sh", "-c", text, argv0, *args])
    return 3  # not reached


def _dispatch(cmd: str, rest: list[str]) -> int:
    if cmd == "markers":
        return cmd_markers(rest[0] if rest else "")
    if cmd == "notice" and len(rest) == 2:
        return cmd_notice(rest[0], rest[1])
    if cmd == "pre-commit":
        return _exec_hook("pre-commit", [])
    if cmd == "pre-rebase":
        if not rest:
            up = os.environ.get("PRE_COMMIT_PRE_REBASE_UPSTREAM", "")
            br = os.environ.get("PRE_COMMIT_PRE_REBASE_BRANCH", "")
            rest = [up, br] if br else [up]
        return _exec_hook("pre-rebase", rest)
    sys.stderr.write(f"git-lane-hook: unknown command {cmd!r}\n{__doc__}")
    return 2


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        sys.stderr.write(__doc__ or "")
        return 2
    from pathlib import Path

    from guard import boundary

    def state_dir() -> Path | None:
        sd = _state_dir(None)
        return Path(sd) if sd else None

    # a bug here exits 3 with a crash file: the sh hook treats any status but 0 and
    # REFUSED as "could not check"
    return boundary.guarded(
        lambda: _dispatch(args[0], args[1:]), ["git-lane-hook", *args], lambda: False, state_dir
    )


def entry() -> None:
    """Console script `git-lane-hook`."""
    sys.exit(main())


if __name__ == "__main__":
    entry()
