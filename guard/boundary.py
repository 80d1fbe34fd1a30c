"""The one error boundary, for every entry point (the CLI, the hooks' Python step, the
install scripts): a Refusal becomes its line on stderr (and its JSON on stdout when asked),
an audit event, exit 1; Ctrl-C exit 130 (an Interrupted that cleaned up: its one
line, exit 128 + the signal); anything else is a bug: a crash file with the
git-lane, git and Python versions and the traceback, one line naming it, exit 3. No
traceback ever reaches the user. Standard library only: the hooks run through here."""

from __future__ import annotations

import errno
import json
import os
import shlex
import stat
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from guard.errors import GitError, Interrupted, Refusal

EXIT_OK, EXIT_REFUSED, EXIT_USAGE, EXIT_BUG, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


def dumps(obj: object) -> str:
    """One JSON object for stdout, strict UTF-8: a string holding bytes that are not UTF-8
    (a file name, a key given on the command line) is given as git quotes it
    (guard.git.json_safe), never as a lone-surrogate escape a strict decoder rejects."""
    from guard.git import json_safe

    return json.dumps(json_safe(obj), sort_keys=True, default=str)


StateDir = Callable[[], Path | None]
Pin = Callable[[dict[str, list[str]]], dict[str, list[str]]]


def guarded(
    body: Callable[[], int],
    argv: Sequence[str],
    want_json: Callable[[], bool],
    state_dir: StateDir,
    cli: bool = False,
    pin: Pin | None = None,
) -> int:
    """Run `body` (which returns an exit status) behind the boundary. `cli`: argv are the
    words of a `git lane` command (a refusal may name it again). `pin`: what the CLI
    does to the commands a refusal names before they are shown (cli.pinned)."""
    try:
        return body()
    except Refusal as r:
        refuse(_pinned(r, pin), argv, want_json(), state_dir())
        return EXIT_REFUSED
    except Interrupted as i:  # cleaned up and said so (the engine logged it)
        i.next, _ = _pin(pin, i.next, [])
        if want_json():
            sys.stdout.write(dumps(i.to_dict()) + "\n")
        sys.stderr.write(i.line() + "\n")
        return i.exit_status
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except OSError as exc:
        denied = sandbox_denied(exc, argv) if isinstance(exc, PermissionError) else None
        if denied is not None:
            refuse(denied, argv, want_json(), None)  # its state dir is what it cannot write
            return EXIT_REFUSED
        try:
            unwritable = state_write_failed(exc, argv, _peek(state_dir), cli)
        except OSError:  # a second error while looking at the first: a bug, never a traceback
            unwritable = None
        if unwritable is None:
            return _bug(exc, argv, want_json, state_dir)
        # the log is on the same full disk
        refuse(_pinned(unwritable, pin), argv, want_json(), None)
        return EXIT_REFUSED
    except Exception as exc:  # the one place a bug is caught: file it, say where
        return _bug(exc, argv, want_json, state_dir)


def _pin(pin: Pin | None, nxt: list[str], alts: list[str]) -> tuple[list[str], list[str]]:
    if pin is None:
        return nxt, alts
    try:
        got = pin({"next": nxt, "alternatives": alts})
    except Exception:  # a bug of the pinning must not hide the refusal itself
        return nxt, alts
    return got["next"], got["alternatives"]


def _pinned(r: Refusal, pin: Pin | None) -> Refusal:
    r.next, r.alternatives = _pin(pin, r.next, r.alternatives)
    return r


def _peek(state_dir: StateDir) -> Path | None:
    try:
        return state_dir()
    except Exception:
        return None


# what the machine refuses, never a bug of ours: no space, a quota, a read-only filesystem,
# a file too big; and a permission the state dir's owner did not give
_UNWRITABLE = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG, errno.EACCES, errno.EPERM)


def _main_moved(landing: Path) -> bool:
    """Had the land that left this record moved main already (its stage says so, or main
    is at its tip: a disk too full for the later stages leaves the record at "prepared")?"""
    from guard import git
    from guard.store import read_regular  # never blocks on a FIFO in its place

    try:
        rec = json.loads(read_regular(landing))
        stage, ref, tip = rec.get("stage"), rec.get("main_ref"), rec.get("tip")
    except (OSError, ValueError, AttributeError, RecursionError):
        return False
    if stage in ("main_moved", "hub_updated", "epoch_bumped"):
        return True
    if not (isinstance(ref, str) and ref.startswith("refs/heads/") and isinstance(tip, str)):
        return False
    try:
        return git.ref_sha(landing.parent.parent, ref) == tip
    except Exception:  # the refusal must not crash on a broken git
        return False


def state_write_failed(
    exc: OSError, argv: Sequence[str], state_dir: Path | None, cli: bool
) -> Refusal | None:
    """The operating system refused a write into git-lane's state directory (the disk or
    a quota full, a read-only mount, a directory this user may not write): a refusal that
    says so, not a bug. Every state file is written whole or not at all (temp file +
    rename), so what is there is still readable; the command is run again once the
    cause is gone (a land that stopped part way is finished by reconcile first)."""
    if state_dir is None or exc.errno not in _UNWRITABLE:
        return None
    names = [os.fsdecode(n) for n in (exc.filename, exc.filename2) if isinstance(n, (str, bytes))]
    root = os.path.realpath(state_dir)
    inside = [
        n
        for n in names
        if os.path.commonpath([root, os.path.realpath(os.path.dirname(os.path.abspath(n)))]) == root
    ]
    if not inside:
        return None
    words = [a for a in argv if a != "--json"]
    command = next((w for i, w in enumerate(words) if w[:1] != "-" and words[i - 1] != "-C"), "")
    here = _lane_cwd() if command and "-C" not in words[: words.index(command)] else None
    # run in a lane, the command again is printed `git -C ROOT lane ...` (cli.pinned): it
    # names the directory it ran in, which gave it its lane and its relative paths
    words = ["-C", here, *words] if here is not None else words
    again = "git lane " + " ".join(shlex.quote(a) for a in words) if cli and words else None
    nxt = []
    landing = state_dir / "landing.json"
    if os.path.lexists(landing) and command != "reconcile":  # lexists: never raises
        nxt.append("git lane reconcile")  # a land stopped part way: finished (or undone) first
        if command in ("land", "queue") and _main_moved(landing):
            again = None  # main moved for it: reconcile finishes that land, nothing is left
    if again is not None and again not in nxt:
        nxt.append(again)
    if not nxt:
        nxt.append("git lane doctor")
    space = exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
    why = "free space there" if space else "make it writable"
    return Refusal(
        "state_write_failed",
        f"git-lane could not write {inside[0]}: {exc.strerror or exc}; {why}, then run "
        "the command again (state files are written whole or not at all: none is half-written)",
        next=nxt,
        alternatives=[f"df -h {shlex.quote(str(state_dir))}"] if space else [],
        details={
            "path": inside[0],
            "errno": errno.errorcode.get(exc.errno or 0, str(exc.errno)),
            "state_dir": str(state_dir),
        },
    )


def _lane_cwd() -> str | None:
    """This process's cwd when it lies in a lane (the lanes directory's marker says so)."""
    from guard.repo import lane_repo

    try:
        here = os.getcwd()
    except OSError:
        return None
    return here if lane_repo(here) is not None else None


def sandbox_denied(exc: PermissionError, argv: Sequence[str]) -> Refusal | None:
    """Inside `git lane exec --sandbox` (GITLANE_SANDBOX set by exec) a git-lane command
    that must write what the sandbox keeps out (git-lane's state, another lane, main) is
    refused by the kernel: said as a refusal, with the owner's command, not as a bug."""
    from guard import binding

    if not os.environ.get(binding.SANDBOX):
        return None
    words = [a for a in argv if a != "--json"]
    cmd = "git lane " + " ".join(shlex.quote(a) for a in words)
    where = f" ({exc.filename})" if exc.filename else ""
    return Refusal(
        "sandbox_denied",
        f"`{cmd}` needs a write this process's sandbox does not grant{where}: it runs in "
        f"a sandboxed lane ({os.environ.get(binding.SANDBOX)}); the owner runs it outside",
        next=[f"{cmd}  # as the repository owner, outside the lane"],
        details={"argv": list(argv), "path": exc.filename, "errno": exc.errno},
    )


def _bug(
    exc: Exception, argv: Sequence[str], want_json: Callable[[], bool], state_dir: StateDir
) -> int:
    """The one place a bug is caught: file it, say where."""
    where = crash(exc, argv, state_dir)
    if want_json():
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        out = {
            "ok": False,
            "code": "internal_error",
            "message": first,
            "next": [f"cat {_q(where)}"],
            "details": {"crash_file": where},
        }
        sys.stdout.write(dumps(out) + "\n")
    sys.stderr.write(
        f"git-lane: internal error ({type(exc).__name__}); details written to {where}\n"
    )
    return EXIT_BUG


def refuse(r: Refusal, argv: Sequence[str], as_json: bool, state_dir: Path | None) -> None:
    if as_json:
        sys.stdout.write(dumps(r.to_dict()) + "\n")
        sys.stderr.write(r.line() + "\n")
    else:
        from guard.render import refused  # standard library only, like this module

        sys.stderr.write(refused(r.line(), sys.stderr) + "\n")
    if state_dir is not None and r.code != "not_a_git_repo":
        from guard.store import Store

        Store(state_dir).event(
            "refusal",
            lane=r.details.get("lane"),
            code=r.code,
            message=r.message,
            argv=list(argv),
            details=r.details,
        )


def _q(s: str) -> str:
    import shlex

    return shlex.quote(s)


def versions() -> str:
    from guard import __version__

    try:
        from guard.git import run

        git = run(["--version"], check=False).stdout.strip() or "git: no answer"
    except Exception as exc:  # the report must not crash on a broken git
        git = f"git: {type(exc).__name__}: {exc}"
    return f"git-lane {__version__}\n{git}\npython {sys.version.split()[0]} ({sys.executable})"


def crash(exc: BaseException, argv: Sequence[str], state_dir: StateDir) -> str:
    """Write the crash report; return its path (or why it could not be written)."""
    import tempfile
    import traceback

    try:
        sd = state_dir()
    except Exception:
        sd = None
    dirs = [sd / "crash"] if sd is not None else []
    shared = Path(tempfile.gettempdir()) / "git-lane-crash"
    dirs.append(shared)
    body = "".join(traceback.format_exception(exc))
    if isinstance(exc, GitError):
        body += "\n" + str(exc)
    try:
        cwd = os.getcwd()
    except OSError as e:
        cwd = f"(unknown: {e.strerror})"
    name = f"{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}.txt"
    text = f"argv: {list(argv)!r}\ncwd: {cwd}\n{versions()}\n\n{body}"
    problems = []
    for d in dirs:  # the state dir may be what is broken: never let the report itself crash
        try:
            d.mkdir(parents=True, exist_ok=True, mode=0o700)
            if d == shared:  # in the shared temp dir: ours alone, or not used
                st = os.lstat(d)
                if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
                    problems.append(f"{d}: not a directory of this user's alone (0700)")
                    continue
            fd = os.open(d / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(text)
            return str(d / name)
        except OSError as e:
            problems.append(f"{d}: {e.strerror}")
    return "nowhere (" + "; ".join(problems) + ")"
