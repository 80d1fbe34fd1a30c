"""`git lane exec [-c] [--sandbox] KEY -- CMD ARGS...` and `git lane shellenv [KEY]`: bind a
process to a lane. exec runs CMD (argv as given, no shell) in the lane worktree with the
binding environment of guard/binding.py (our shims first on PATH, the real git resolved and
recorded), stays CMD's parent as the lane's recorded owner while it runs, forwards signals,
lands the lane when CMD's `git lane land` asks (its land socket, guard/landsock.py),
under --sandbox ends whatever CMD left running (guard/reap.py), and exits with CMD's
status. shellenv prints the same environment as `export` lines; it cannot supervise, so
it records no owner."""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

import guard
from typing import TYPE_CHECKING

from guard import (
    binding,
    dirfd,
    git,
    landsock,
    lane,
    linked,
    objects,
    oversize,
    policy,
    procs,
    reap,
    resources,
    sandbox,
    seccomp,
)
from guard.errors import Refusal
from guard.repo import Repo
from guard.store import LaneRecord

if TYPE_CHECKING:  # types only: not imported on the way to CMD (bench/sandbox.py start-up)
    from guard import hookwatch, include
    from guard.gate import Output, Tick
    from guard.results import ExecResult, SandboxExplainResult, ShellenvResult

# Signals a supervisor passes on (as a shell's `exec` would let CMD receive them).
FORWARDED = (
    signal.SIGINT,
    signal.SIGTERM,
    signal.SIGHUP,
    signal.SIGQUIT,
    signal.SIGUSR1,
    signal.SIGUSR2,
    signal.SIGWINCH,
)
# Never inherited by a bound process: git's own pointers at a repository (CMD works in the
# lane, not wherever they point) and our internal marker (it lets our own git calls past
# the hooks and shims).
DROPPED = (*git.REPO_POINTERS, "GITLANE_INTERNAL")
# Under --sandbox: CMD's temp dir (its private one) ...
PRIVATE_TMP = ("TMPDIR", "TMP", "TEMP")
# ... and no pointer at a server outside the sandbox that runs commands for whoever
# connects (Landlock cannot stop connect() to a pathname socket): well-behaved tools then
# do not find them. Not a barrier: a process that knows the path connects anyway.
UNSET_IN_SANDBOX = ("TMUX", "TMUX_PANE", "STY", "DBUS_SESSION_BUS_ADDRESS")
_PROBE_TRAP = 97  # what the trap `git` of the probe exits with
_SI_USER, _SI_QUEUE, _SI_TKILL = 0, -1, -6  # si_code of a signal some process sent


# -- the binding ------------------------------------------------------------------------
def shims_dir() -> str:
    return os.path.realpath(resources.data_dir("shims"))


def bound_path(path: str, shims: str, also: Sequence[str] = (), git_core: str = "") -> str:
    """PATH with `shims` first and exactly once: every other occurrence of it (or of the
    shims dir an outer binding named, `also`) is dropped, and so is git's exec path
    (`git_core`, which git puts first on PATH when it runs `git lane`) and every directory
    of dashed git commands (git-stash, git-update-ref: they would run without the shim);
    the rest keeps its order."""
    skip = {shims, *(os.path.realpath(a) for a in also if a)}
    if git_core:
        skip.add(os.path.realpath(git_core))
    rest = [
        p
        for p in path.split(os.pathsep)
        if not (p and (os.path.realpath(p) in skip or _git_core_like(p)))
    ]
    return os.pathsep.join([shims, *rest]) if path else shims


def _git_core_like(d: str) -> bool:
    """A directory holding git's dashed builtins (git-core, or a copy of it)."""
    return any(os.path.exists(os.path.join(d, f"git-{c}")) for c in _DASHED)


_DASHED = ("update-ref", "stash", "commit", "checkout", "branch", "reset")


def git_exec_path(real: str) -> str:
    """`real --exec-path`: git's own directory of commands ('' when it does not answer)."""
    try:
        res = subprocess.run(
            [real, "--exec-path"],
            env={"PATH": os.defpath, "LC_ALL": "C"},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return res.stdout.decode("utf-8", "surrogateescape").strip() if res.returncode == 0 else ""


def _is_shim(path: str) -> bool:
    """A copy of a git-lane shim (another installation's): a script naming our binding."""
    try:
        with open(path, "rb") as f:
            head = f.read(8192)
    except OSError:
        return True  # unreadable: not something we can vouch for
    return head.startswith(b"#!") and binding.REAL_GIT.encode() in head


def _answers_as_git(path: str, trap: str) -> bool:
    """Does `path --version` answer as git without running some other `git` off PATH? A
    wrapper that calls `git` through PATH would, under a binding, call our shim, which
    calls it again: the probe's PATH holds only a `git` that exits _PROBE_TRAP."""
    try:
        res = subprocess.run(
            [path, "--version"],
            env={"PATH": trap, "LC_ALL": "C"},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return res.returncode == 0 and res.stdout.startswith(b"git version ")


def resolve_real_git(path: str, shims: Sequence[str], recorded: str | None = None) -> str | None:
    """The real git for a binding: the first `git` on `path` that is not in a shims dir,
    does not resolve (symlinks) into one, is not a copy of a shim and answers as git
    without going back through PATH; then `recorded` (an outer binding's) on the same
    terms. Its realpath, or None when there is none."""
    skip = {os.path.realpath(s) for s in shims if s}
    cands = [os.path.join(d, "git") for d in path.split(os.pathsep) if d and os.path.isabs(d)]
    if recorded:
        cands.append(recorded)
    trap = tempfile.mkdtemp(prefix="git-lane-probe-")
    try:
        trap_git = Path(trap) / "git"
        trap_git.write_text(f"#!/bin/sh\nexit {_PROBE_TRAP}\n")
        trap_git.chmod(0o755)
        seen: set[str] = set()
        for cand in cands:
            if not (os.path.isfile(cand) and os.access(cand, os.X_OK)):
                continue
            real = os.path.realpath(cand)
            if real in seen or os.path.realpath(os.path.dirname(cand)) in skip:
                continue
            seen.add(real)
            if os.path.dirname(real) in skip or _is_shim(real):
                continue
            if _answers_as_git(real, trap):
                return real
        return None
    finally:
        shutil.rmtree(trap, ignore_errors=True)


def binding_env(repo: Repo, rec: LaneRecord, base: Mapping[str, str]) -> dict[str, str]:
    """The binding names of guard/binding.py, and PATH with our shims first, over `base`."""
    shims = shims_dir()
    outer = base.get(binding.SHIMS_DIR, "")
    path = base.get("PATH", os.defpath)
    real = resolve_real_git(path, [shims, outer], base.get(binding.REAL_GIT) or None)
    if real is None:
        raise Refusal(
            "real_git_unknown",
            "no git on PATH that is not a shim and runs without going back through PATH "
            f"(PATH={path}); put the real git's directory on PATH",
            next=["type -a git"],
            details={"lane": rec.key, "path": path},
        )
    env = {
        binding.LANE: rec.key,
        binding.ROLE: "worker",
        binding.REAL_GIT: real,
        binding.SHIMS_DIR: shims,
        binding.LANE_PATH: os.path.realpath(rec.path),
        binding.COMMON: os.path.realpath(repo.common_dir),
        binding.PYTHON: sys.executable,
        binding.PYPATH: str(Path(guard.__file__).resolve().parent.parent),
        binding.HOME_AT_EXEC: base.get("HOME", ""),
        binding.XDG_AT_EXEC: base.get("XDG_CONFIG_HOME", ""),
        binding.PORT: str(policy.lane_port(rec.key)),
        "PATH": bound_path(path, shims, [outer], git_exec_path(real)),
        binding.PROGRAM_ENV: binding.program_env_record(base),
    }
    env[binding.PATH_AT_EXEC] = env["PATH"]
    return env


def gits_own_exec_path(base: Mapping[str, str], real: str) -> bool:
    """Is GIT_EXEC_PATH in `base` git's own directory of commands (set by git itself for
    `git lane ...`, an external command)? It says nothing of the user's, and set, it sends
    every bound git call to the shim's Python: exec drops it. Another value is kept (the
    shim judges it)."""
    v = base.get("GIT_EXEC_PATH")
    if not v:
        return False
    own = git_exec_path(real)
    return bool(own) and os.path.realpath(v) == os.path.realpath(own)


# -- refusals shared by exec and shellenv ------------------------------------------------
def _lane(repo: Repo, key: str | None, action: str) -> LaneRecord:
    key = lane.current(repo, key, action)
    rec = lane.get(repo, key)
    if rec.status == "released":
        raise lane.not_active_refusal(repo, rec, "is released: it has no worktree")
    lane.check_pointers(repo, rec)  # CMD's git would use another repository
    wt = git.by_path(repo.worktrees()).get(os.path.realpath(rec.path))
    if rec.status == "orphaned" or wt is None or not wt.exists:
        raise lane.missing_worktree_refusal(key, rec.path, action)
    return rec


# exec --sandbox as root: CMD keeps uid 0 (without capabilities), the owner of every file
# root owns, and chmod needs no capability for a file's owner (Landlock has no chmod right)
ROOT_MODES = (
    "running as root: CMD can still change the mode bits (not setuid/setgid) of any file "
    "root owns, outside the lane too; run agents as a non-root user (docs/trust-boundary.md)"
)


def _sandbox(
    repo: Repo, key: str, asked: bool, retry: str, shell: bool = False
) -> tuple[bool, list[str]]:
    """(confine CMD?, warnings): `--sandbox` or `sandbox = "required"` without a usable
    Landlock is refused sandbox_unavailable; `best-effort` runs with the shims only, warned.
    shellenv (shell=True) confines nothing: it has no process of its own to start."""
    mode = repo.config["sandbox"]
    if not (asked or mode in ("required", "best-effort")):
        return False, []
    retry = retry.replace(" --sandbox", "", 1)  # no sandbox here: the retry is without it
    ver, why = sandbox.probe()
    why = sandbox.usable(ver) if ver else why
    if shell:
        why = "shellenv cannot confine the shell it prints for (git lane exec KEY -- $SHELL can)"
    if not why:
        return True, [ROOT_MODES] if os.geteuid() == 0 else []
    if not (asked or mode == "required") and sandbox.undetermined(why):
        raise Refusal(  # best-effort falls back only where Landlock is known to be missing
            "sandbox_unavailable",
            f'sandbox = "best-effort" is configured, and whether this kernel has Landlock '
            f"cannot be told: {why}; nothing was run",
            next=["git lane doctor"],
            alternatives=[f"git lane config set sandbox off && {retry}"],
            details={"lane": key, "sandbox": mode, "asked": asked, "abi": ver, "why": why},
        )
    if asked or mode == "required":
        what = "--sandbox was asked for" if asked else 'sandbox = "required" is configured'
        nxt = [retry]
        if mode == "required":  # retried without --sandbox, it still needs the owner's word
            nxt.insert(0, "git lane config set sandbox best-effort" + lane.OWNER_NOTE)
        raise Refusal(
            "sandbox_unavailable",
            f"{what}, but no sandbox is possible here: {why}; nothing was run",
            next=nxt,
            details={"lane": key, "sandbox": mode, "asked": asked, "abi": ver, "why": why},
        )
    return False, [f'sandbox = "best-effort": {why}; running with the shims only']


def _owner_check(repo: Repo, rec: LaneRecord, retry: str, action: str = "exec") -> None:
    """lane_owner_conflict when another live process (not this one or an ancestor)
    owns the lane; a dead owner is simply taken over."""
    why = "one supervisor per lane"
    if action == "shellenv":
        why = "a shell bound beside it would be a second writer"
    try:
        lane.owner_conflict(repo, rec, action)
    except Refusal as r:
        pid = rec.owner_pid
        raise Refusal(
            "lane_owner_conflict",
            f"lane {rec.key} is in use by live process {pid} (its recorded owner); {why}",
            next=[f"git lane status {rec.key}", f"ps -o pid,etime,args -p {pid}"],
            alternatives=[f"kill {pid} && {retry}"],
            details=r.details,
        ) from None


def _command(key: str, argv: Sequence[str], flags: str = "") -> str:
    return f"git lane exec{flags} {key} -- " + (shlex.join(argv) if argv else "$SHELL")


def _with_sandbox(retry: str) -> str:
    """`retry` (a _command) with --sandbox, once: it has it when --sandbox was asked for,
    not when the configured `sandbox` confines CMD."""
    if " --sandbox " in retry.split(" -- ", 1)[0] + " ":
        return retry
    return retry.replace("git lane exec ", "git lane exec --sandbox ", 1)


# -- exec -------------------------------------------------------------------------------
def run(
    repo: Repo,
    key: str,
    argv: Sequence[str],
    *,
    create_first: bool = False,
    sandbox: bool = False,
    own_objects: bool = False,
    goal: str | None = None,
    warn: Callable[[str], None] | None = None,
    progress: include.Progress | None = None,
    output: Output | None = None,
    tick: Tick | None = None,
) -> ExecResult:
    """Run argv bound to lane `key`; returns how it ended (CMD's exit status).
    `own_objects` (implied by a sandbox): CMD's git writes objects into the lane's own
    store, which exec absorbs into the shared one, verified (for a CMD that confines its
    own commands without the shared store: Codex, guard/commands/agent_setup.py)."""
    if not argv:
        raise ValueError("exec needs a command")  # the CLI requires one: a bug if missing
    lane.check_key(key, creating=create_first)
    # every next names the exec as it was asked for: a retry without --sandbox would run
    # CMD unconfined (red team 17 final, noticed with hook_mode_lost)
    own = (" --sandbox" if sandbox else "") + (" --own-objects" if own_objects else "")
    retry = _command(key, argv, own)
    try:
        if create_first:
            lane.forbid_worker("create", f"git lane create {key}")
        else:
            _lane(repo, key, "exec")
    except Refusal as r:
        _for_exec(r, key, argv)
        raise
    confine, warnings = _sandbox(
        repo, key, sandbox, _command(key, argv, own + (" -c" if create_first else ""))
    )
    if confine:
        flags = own + (" -c" if create_first else "")
        _main_plain(repo, _command(key, argv, flags))
    if create_first:
        from guard.commands import create

        try:
            create.run(repo, key, goal, None, progress, output, tick)
        except Refusal as r:
            if r.code != "lane_exists":
                raise
            raise Refusal("lane_exists", r.message, next=[retry], details=r.details) from None
    for w in warnings:
        if warn is not None:
            warn(w)
    return _supervise(repo, key, list(argv), retry, confine, warn, own_objects)


def _main_plain(repo: Repo, retry: str) -> None:
    """Refuse to confine CMD while main's loose ref is no plain ref: a symbolic link git
    reads through (Repo.foreign_main_link), or a symbolic ref. git reads main from what
    either leads to, and what it leads to may be a file the sandbox lets CMD write (its
    own admin `HEAD`, its branch's loose ref, a file in the lane): CMD would then move
    main with no ref transaction, which no layer sees. Either was made by a process
    outside the sandbox (CMD may not write refs/heads/), so this look before CMD starts
    holds for the whole run. doctor fails both; restore-main makes main plain again.
    Likewise a hard link at main's loose file, packed-refs or a landed ref's file
    (Foreign.hard): its other name may be one CMD may write, and CMD cannot make one
    (Landlock refuses a link to a name with more rights than the file's: EXDEV)."""
    link = repo.foreign_main_link()
    if link is not None and link.hard:
        raise Refusal(
            "main_not_plain",
            f"{link.words()}: CMD may write one of its other names (a ref file under "
            "refs/heads/lane/, a file of its admin dir) in place, with no ref transaction, "
            "so the sandbox cannot keep main; nothing was run (git lane doctor fails it)",
            next=["git lane restore-main", retry],
            details={"ref": link.path, "link": None, "names": link.names},
        )
    if link is not None:
        what = link.words()
        ref = link.path
    else:
        try:
            ref = repo.main_ref
        except Refusal:
            return  # no main to read: nothing leads it anywhere (the engine says so itself)
        target = git.symref(repo.common_dir, ref)
        if target is None:
            return
        what = f"{ref} is a symbolic ref to {target}"
    raise Refusal(
        "main_not_plain",
        f"{what}: main moves whenever what it leads to is written, and CMD may "
        "write some of that with no ref transaction (its admin HEAD, its branch's ref "
        "file), so the sandbox cannot keep main; nothing was run (git lane doctor fails it)",
        next=["git lane restore-main", retry],
        details={"ref": ref, "link": link.text if link is not None else None},
    )


def _for_exec(r: Refusal, key: str, argv: Sequence[str]) -> None:
    """A lane refusal worded for exec: a `git lane exec K` in it gets the command, and an
    unknown lane can be created by exec itself."""
    tail = " -- " + shlex.join(argv)
    r.next = [n + tail if n.startswith("git lane exec ") and " -- " not in n else n for n in r.next]
    if r.code == "unknown_lane":
        r.alternatives.append(_command(key, argv, " -c"))


def _claim(repo: Repo, key: str, retry: str) -> tuple[LaneRecord, LaneRecord]:
    """Record this process as the lane's owner (under the registry lock), and that an exec
    ran in the lane (exec_seen, never unset: every later land gates in a clean worktree,
    land.why_clean_gate), before CMD starts; returns the record as it was and as written."""
    with lane.registry_lock(repo):
        rec = _lane(repo, key, "exec")
        _owner_check(repo, rec, retry)
        me = os.getpid()
        mine = replace(rec, owner_pid=me, owner_start=procs.start_time(me), exec_seen=True)
        repo.store.write_lane(mine)
    return rec, mine


def _mark_exec_seen(repo: Repo, key: str) -> None:
    """shellenv: the lane's record says a bound process (a worker) may have run in it, as
    exec's claim does (land.why_clean_gate), before the binding is handed out; under the
    registry lock, read anew, so no other field of the record is written back stale."""
    with lane.registry_lock(repo):
        rec = lane.get(repo, key)
        if rec.exec_seen is not True:
            repo.store.write_lane(replace(rec, exec_seen=True))


def _unclaim(repo: Repo, before: LaneRecord, mine: LaneRecord) -> bool:
    """Give the lane back: the owner from before when it is still alive (an outer
    supervisor), else none. Only while the record still names us: CMD may have released
    the lane, or a reconcile moved on. True when the record was changed."""
    with lane.registry_lock(repo):
        now = repo.store.read_lane(before.key)
        if now is None or (now.owner_pid, now.owner_start) != (mine.owner_pid, mine.owner_start):
            return False
        keep = before.owner_pid is not None and procs.alive(before.owner_pid, before.owner_start)
        owner = (before.owner_pid, before.owner_start) if keep else (None, None)
        repo.store.write_lane(replace(now, owner_pid=owner[0], owner_start=owner[1]))
        return True


def _cwd(lane_path: str) -> str:
    """The lane directory CMD starts in: the caller's subdirectory when the caller is
    inside the lane already, else the lane's top."""
    root = os.path.realpath(lane_path)
    try:
        here = os.path.realpath(os.getcwd())
    except OSError:
        return root
    return here if here == root or here.startswith(root + os.sep) else root


def _supervise(
    repo: Repo,
    key: str,
    argv: list[str],
    retry: str,
    confine: bool,
    warn: Callable[[str], None] | None = None,
    own_objects: bool = False,
) -> ExecResult:
    before, mine = _claim(repo, key, retry)
    # GITLANE_SANDBOX says what this exec confined, never what an outer one did
    env = {
        k: v for k, v in os.environ.items() if k not in (*DROPPED, binding.SANDBOX, binding.OBJECTS)
    }
    result: ExecResult = {
        "ok": True,
        "code": "exited",
        "lane": key,
        "argv": argv,
        "cwd": "",
        "pid": None,
        "exit_status": 0,
        "signal": None,
        "ended": [],
    }
    server: landsock.Server | None = None
    watch: hookwatch.HookWatch | None = None
    absorber: Absorber | None = None
    ruleset: sandbox.Prepared | None = None
    seal: seccomp.Seal | None = None
    own_store = False  # CMD's git writes the lane's own store (exec absorbs it)
    private_tmp: str | None = None
    kept_cache = ""  # CMD's own cache dir under --sandbox (kept between runs: split too)
    reaping = False  # exec is a child subreaper: CMD's tree ends with it (guard/reap.py)
    mask: set[int | signal.Signals] | None = None  # the signal mask to go back to at the end
    try:
        owner_env = dict(env)  # what the land socket's lands run with: ours, unbound
        env.update(binding_env(repo, mine, env))
        if gits_own_exec_path(env, env[binding.REAL_GIT]):
            del env["GIT_EXEC_PATH"]
        cwd = _cwd(mine.path)
        env["PWD"] = cwd
        result["cwd"] = cwd
        server = _land_socket(repo, mine, owner_env, retry)
        if server is not None:
            env[binding.LAND_SOCKET] = server.path
        if confine:
            ruleset, seal, private_tmp, kept_cache = _confinement(repo, mine, env, retry)
            if server is not None:
                server.confine_gate = True  # CMD's land runs its gate confined too
            why = reap.hold()  # nothing CMD starts may outlive exec (and its hook watch)
            if why:
                raise _sandbox_failed(repo, key, why, retry)
            reaping = True
            own_store = True
        elif own_objects:
            _lane_objects(repo, mine, env, retry)
            own_store = True
        if server is not None and own_store:
            server.own_store = True  # its land never rebases the worktree CMD writes
        if own_store:  # before CMD starts: no granted name may be another file's too
            again = _with_sandbox(retry)
            _split_links(repo, mine, kept_cache, again if confine else retry, warn)
        if own_objects:  # how Codex starts: its sandbox resolves the roots it is given
            _hold_codex_roots(repo, mine, argv)
        repo.store.event("exec", lane=key, argv=argv, pid=os.getpid(), sandbox=bool(ruleset))
        cmd_pid: list[tuple[int, str]] = []  # CMD's pid and start ticks, once started

        def lost(path: str, why: str) -> None:  # the watcher's thread: CMD ends at once
            spare = [w.workers for w in (server, absorber) if w is not None]
            if cmd_pid:
                reap.kill_now(*cmd_pid[0], spare, below_me=reaping)

        watch = _hook_watch(repo, key, lost)  # its fds opened before CMD starts
        if own_store:
            absorber = Absorber(repo, mine)

        def started(pid: int) -> None:  # threads start after the fork (preexec_fn)
            cmd_pid.append((pid, procs.start_ticks(pid)))  # our child, not yet waited for
            if server is not None:
                server.start()
            watch.start()
            if absorber is not None:
                absorber.start()

        def orphans(cmd: int) -> bool:  # an orphan of CMD's tree ended: wait for it
            locks = [server.spawning] if server is not None else []
            if absorber is not None:
                locks.append(absorber.spawning)
            return reap.reap_orphans(cmd, *locks)

        if reaping and hasattr(signal, "sigwaitinfo"):  # else handlers pass them on
            # from CMD's end until its tree has ended, a SIGTERM or SIGHUP must not end exec
            # (their default) with the hooks unwatched: blocked, end_tree takes one as
            # "hurry"; one that comes after it acts once exec is done
            mask = signal.pthread_sigmask(signal.SIG_BLOCK, reap.HURRY)
        try:
            status, sig, pid = _spawn_and_wait(
                argv, cwd, env, ruleset, started, seal, orphans if reaping else None
            )
        except sandbox.SandboxError as exc:
            raise _sandbox_failed(repo, key, str(exc), retry) from None
        result["pid"] = pid
        if pid is None:
            result["ok"] = False
            result["code"] = "command_not_found" if status == 127 else "not_runnable"
        elif sig is not None:
            result["code"] = "signaled"
            result["signal"] = sig
        result["exit_status"] = status
    finally:
        # the order matters (docs/trust-boundary.md): what CMD left running ends first,
        # while the hooks are watched, sparing only exec's own workers (a socket land, the
        # Absorber's git): a land or absorb that hangs (git blocked on a FIFO CMD planted in
        # its store) cannot keep a daemon alive; then exec waits for them (their reads of
        # the lane's store are bounded), ends whatever is still below it, and only then
        # stops watching the hooks
        if server is not None:
            server.stop()  # no land starts from now on
        if absorber is not None:
            absorber.halt()  # no absorb starts from now on
        if reaping:
            spare = [w for w in (server, absorber) if w is not None]
            ended = reap.end_tree(spare=[w.workers for w in spare])
            result["ended"] = ended
        if server is not None:
            server.close()  # after a land in progress ends: it runs as this lane's owner
        if absorber is not None:
            absorber.stop()
        if reaping:  # a sandboxed gate of a land may have left one, re-parented to exec
            more = reap.end_tree()
            result["ended"] = [*result["ended"], *(p for p in more if p not in result["ended"])]
        if watch is not None:
            watch.stop()
        # CMD's tree is gone: the owner's bits back on the common dir and git-lane's state
        # (CMD may have chmodded them: no Landlock right covers modes) before anything
        # below reads them (red team 17 F2b)
        _give_back(repo, key, warn)
        # a ref or HEAD it grew past any size git writes goes into kept/ before the
        # absorb's git (or the owner's) reads it whole
        aside = _set_aside(repo, warn)
        if ruleset is not None:
            ruleset.close()
        if own_store:
            store = objects.lane_store(repo.common_dir, mine.path)
            if store is not None:  # sandboxed, CMD's tree is gone: nothing plants any more
                objects.sanitize(repo, store, key)
            if not aside:
                _absorb(repo, mine)
        if private_tmp is not None:
            dirfd.remove_tree(private_tmp)  # CMD's: fds only, bounded depth
        _unclaim(repo, before, mine)
        if mask is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    if watch is not None and watch.lost is not None:
        result["ok"] = False
        result["code"] = "hook_mode_lost"
    repo.store.event(
        "exec_end",
        lane=key,
        code=result["code"],
        exit_status=result["exit_status"],
        signal=result["signal"],
        ended=result["ended"],
    )
    if result["ended"] and warn is not None:
        warn(
            f"ended {len(result['ended'])} process(es) CMD left running "
            f"({' '.join(map(str, result['ended']))}): under --sandbox nothing CMD starts "
            "outlives exec"
        )
    if watch is not None and watch.lost is not None:
        raise _hook_mode_lost(key, *watch.lost, retry)
    return result


def _hook_mode_lost(key: str, path: str, why: str, retry: str) -> Refusal:
    return Refusal(
        "hook_mode_lost",
        f"exec stopped CMD of lane {key}: {git.shown(path)} changed mode and {why}, so git "
        "could have skipped that hook for every git process in the repository; doctor "
        "checks the hooks and says what to fix",
        next=["git lane doctor", retry],
        details={"lane": key, "path": path, "why": why},
    )


def _give_back(repo: Repo, key: str, warn: Callable[[str], None] | None) -> None:
    """guard/modes.py once CMD has ended: the owner's bits back on the way to main and on
    git-lane's state, said (warn) and logged."""
    from guard import modes

    changed = modes.give_back(str(repo.common_dir), ["main", "master"])
    if not changed:
        return
    if warn is not None:
        warn(modes.note(changed))
    repo.store.event("mode_restored", lane=key, paths=[p for p, _ in changed])


def _split_links(
    repo: Repo, rec: LaneRecord, cache: str, retry: str, warn: Callable[[str], None] | None
) -> None:
    """Give every file in the git dirs CMD may write (sandbox.git_dirs: the lane's admin
    dir, objects.own_admin's, the one the sandbox grants, and the lane refs) and in CMD's
    own cache dir `cache` (kept between runs: git-lane's choice; "" for none) that has a
    name outside them (a hard link planted beforehand, outside the sandbox: Landlock
    checks the name, so CMD would write the file outside through it) a file of its own
    (guard/linked.py). Under --own-objects too: Codex's own sandbox grants the same git
    dirs. The owner's `sandbox_writable` entries are the owner's choice, never walked.
    Refused git_dir_link_failed when that cannot be done: CMD is not started."""
    admin = objects.own_admin(repo, rec)
    dirs = sandbox.lane_git_dirs(os.path.realpath(repo.common_dir), admin)
    if cache:
        dirs.append(cache)
    # a name in the lane's worktree is CMD's own too (granted as the dirs are): a file
    # linked between the two is not linked "outside" (red team 17 F2)
    own = [os.path.realpath(rec.path)]
    files = linked.split_for(repo, dirs, rec.key, retry, "nothing was run", own)
    if files and warn is not None:
        warn(linked.note(files))


def _hold_codex_roots(repo: Repo, rec: LaneRecord, argv: Sequence[str]) -> None:
    """Right before CMD starts under --own-objects (how agent-setup starts Codex): every
    writable root agent-setup names for the lane (the git dirs of sandbox.lane_git_dirs
    but the store, which the admin dir holds, and Codex's temp dir, sandbox.codex_tmp) is
    what it names, each component opened through directory fds with O_NOFOLLOW
    (sandbox.hold_roots; a packed lane ref leaves no directory, and the temp dir is gone
    before agent-setup ran or after a release: each made, as agent-setup makes it: no
    sandboxed CMD can write where they are made). Codex's sandbox resolves its roots, following links: a root re-pointed at
    refs/heads since agent-setup looked would open main to it (red team 17 F4). A root
    named in CMD's argv or in Codex's config.toml that lies in CMD's own cache dir (where
    an older agent-setup put the temp dir; `exec --sandbox` grants it with the right to
    make links) is refused too. Refused sandbox_failed, CMD not started; the next is
    agent-setup, which makes the temp dir anew and prints the command and config."""
    from guard.config import cache_home

    common = os.path.realpath(repo.common_dir)
    admin = objects.own_admin(repo, rec)
    gits = [d for d in sandbox.lane_git_dirs(common, admin) if d != os.path.join(admin, "objects")]
    cache = os.path.realpath(cache_home())
    tmp = sandbox.codex_tmp(cache, repo.slug, rec.key)
    setup = f"git lane agent-setup {rec.key} --for codex"
    why = ""
    try:
        # missing (no agent-setup yet, or released): made, as it makes it; a link there is
        # left for hold_roots to refuse (agent-setup, the next, replaces it)
        sandbox.make_dir(tmp, replace=False)
        sandbox.hold_roots([*gits, tmp], make=gits[1:])
    except OSError as exc:
        why = f"Codex's temp dir {tmp} cannot be made ({exc.strerror or exc})"
    except sandbox.SandboxError as exc:
        why = str(exc)
    if not why:
        kept = sandbox.private_cache(cache, repo.slug, rec.key)
        stale = [r for r in _named_roots(argv) if r == kept or r.startswith(kept + "/")]
        if stale:
            why = (
                f"Codex is given the writable root {stale[0]}, in CMD's own cache dir (an older "
                "agent-setup's temp dir), which any sandboxed CMD of the lane can re-point; "
                "use the command and config agent-setup prints now (replace "
                "[sandbox_workspace_write] and [shell_environment_policy.set] in Codex's "
                "config.toml with its)"
            )
    if why:
        raise Refusal(
            "sandbox_failed",
            f"Codex's writable roots for lane {rec.key} do not hold: {why}; a sandbox that "
            "resolves its roots would grant what a link names; nothing was run",
            next=[setup],
            details={"lane": rec.key, "why": why},
        )


def _named_roots(argv: Sequence[str]) -> list[str]:
    """The writable roots CMD's argv (`-c sandbox_workspace_write.writable_roots=[...]`)
    and Codex's config.toml ($CODEX_HOME, else ~/.codex) name; what cannot be read names
    none (each named root that is one of agent-setup's is held anyway)."""
    import json

    key = "sandbox_workspace_write.writable_roots="
    out: list[str] = []
    for a in argv:
        if a.startswith(key):
            try:
                named = json.loads(a[len(key) :])
            except ValueError:
                continue
            if isinstance(named, list):
                out += [os.path.normpath(x) for x in named if isinstance(x, str)]
    home = os.environ.get("CODEX_HOME") or os.path.join(os.path.expanduser("~"), ".codex")
    try:
        raw = dirfd.read_file(os.path.realpath(home), "config.toml", 1 << 20)
    except OSError:
        return out
    import tomllib

    try:
        cfg = tomllib.loads(raw.decode("utf-8", "replace"))
    except ValueError:
        return out
    sww = cfg.get("sandbox_workspace_write")
    named = sww.get("writable_roots") if isinstance(sww, dict) else None
    if isinstance(named, list):
        out += [os.path.normpath(x) for x in named if isinstance(x, str)]
    return out


def _set_aside(repo: Repo, warn: Callable[[str], None] | None) -> bool:
    """guard/oversize.py when CMD has ended: what was moved is said (warn); True when a
    file could not be moved (nothing may read it: the next command refuses, naming it)."""
    try:
        m = oversize.set_aside(repo)
    except Exception as exc:  # cleanup goes on; the next command's own check refuses
        repo.store.event("oversized_kept", code="check_failed", why=repr(exc))
        return True
    if warn is not None and m.moved:
        warn(oversize.note(m, oversize.restores(repo, m.moved)))
    if warn is not None and m.failed:
        warn(oversize.refusal(repo, m).message)
    return bool(m.failed)


def _hook_watch(repo: Repo, key: str, lost: Callable[[str, str], None]) -> hookwatch.HookWatch:
    """CMD may `chmod -x` a hook, the hooks dir or the common dir (no Landlock right covers
    modes; a shim cannot see a chmod(2)): the supervisor puts the mode back at once
    (guard/hookwatch.py), through fds opened here, before CMD starts. A mode it cannot
    keep, or repairs faster than a person makes them (a CMD fighting the hooks): the
    event hook_mode_lost, and `lost` stops CMD. Repairs of one path are logged collapsed
    (at most one event a second, with a count), so a chmod loop cannot rotate the land
    events out of the audit log (red team 17 final F2). The hooks directory is asked
    of the common dir, never of the lane (its pointers are CMD's)."""
    res = git.run(
        ["rev-parse", "--path-format=absolute", "--git-path", "hooks"], repo.common_dir, check=False
    )
    hooks = res.stdout[:-1] if res.ok and res.stdout.endswith("\n") else ""
    hooks = hooks or os.path.join(repo.common_dir, "hooks")
    from guard import hookwatch
    from guard.commands.install import HOOKS

    def report(r: hookwatch.Repair) -> None:  # one path's repairs, collapsed by the watcher
        repo.store.event(
            "hook_mode_restored",
            lane=key,
            path=r.path,
            was=oct(r.was),
            mode=oct(r.mode),
            count=r.count,
            total=r.total,
            final=r.final,
        )

    def fatal(path: str, why: str) -> None:
        try:
            repo.store.event("hook_mode_lost", lane=key, path=path, why=why)
        except Exception:
            pass  # the state dir unwritable: exec's refusal says it all the same
        lost(path, why)

    common = Path(os.path.realpath(repo.common_dir))
    return hookwatch.HookWatch(
        Path(os.path.realpath(hooks)), HOOKS, report, f"lane {key}", common, fatal
    )


def _land_socket(
    repo: Repo, rec: LaneRecord, owner_env: dict[str, str], retry: str
) -> landsock.Server | None:
    """The socket CMD's `git lane land` goes through (guard/landsock.py); None where the
    supervisor could not tell who asks (no SO_PEERCRED): a bound land then runs as before."""
    if not landsock.available():
        return None
    try:
        return landsock.Server(rec.key, os.path.realpath(rec.path), owner_env, repo.store)
    except OSError as exc:
        raise Refusal(
            "land_via_supervisor_failed",
            f"exec could not open the land socket for lane {rec.key} "
            f"({exc.strerror or exc}); nothing was run",
            next=[retry],
            details={"lane": rec.key, "reason": "socket", "error": str(exc)},
        ) from None


def _confinement(
    repo: Repo, rec: LaneRecord, env: dict[str, str], retry: str
) -> tuple[sandbox.Prepared, seccomp.Seal, str | None, str]:
    """The Landlock ruleset for CMD and its seccomp filter (guard/seccomp.py), built here
    (the supervisor stays outside both), and the private temp dir made for CMD. Sets
    GITLANE_SANDBOX, TMPDIR/TMP/TEMP (the private dir) and XDG_CACHE_HOME/PRE_COMMIT_HOME
    (CMD's own cache dir, sandbox.cache_env, whose path is returned last) in env, and drops from it the
    names that point tools at servers outside the sandbox (UNSET_IN_SANDBOX)."""
    try:
        g = sandbox.grants(repo, rec, env)
    except sandbox.SandboxError as exc:
        again = _with_sandbox(retry)
        raise _sandbox_failed(repo, rec.key, str(exc), retry, _fix(exc, again)) from None
    try:  # CMD's own cache dir: the owner's is not writable (code the owner runs is there)
        env.update(sandbox.cache_env(g))
    except sandbox.SandboxError as exc:
        raise _sandbox_failed(repo, rec.key, str(exc), retry) from None
    store = _lane_objects(repo, rec, env, retry)
    if os.path.dirname(store) not in g.plain:  # the grant's and the store's: one admin dir
        why = f"the lane's object store {store} is not in a git dir the sandbox grants"
        raise _sandbox_failed(repo, rec.key, why, retry)
    private = None
    if g.private_tmp_under is not None:
        try:  # mkdtemp: 0700, a fresh name; the shared temp dir itself is not granted
            private = tempfile.mkdtemp(prefix=f"git-lane-{rec.key}-", dir=g.private_tmp_under)
        except OSError as exc:
            why = f"cannot make CMD's private temp dir in {g.private_tmp_under}: {exc.strerror}"
            raise _sandbox_failed(repo, rec.key, why, retry) from None
        for name in PRIVATE_TMP:
            env[name] = private
    for name in UNSET_IN_SANDBOX:  # not a barrier: see docs/trust-boundary.md
        env.pop(name, None)
    _cmd_config(env, "core.sharedRepository", "umask")
    _cmd_config(env, "core.fsyncMethod", "fsync")
    _cmd_config(env, "rerere.enabled", "false")
    try:
        ruleset = sandbox.prepare(g, [store, *([private] if private else [])])
        seal = seccomp.prepare()
    except sandbox.SandboxError as exc:
        if private is not None:
            dirfd.remove_tree(private)
        raise _sandbox_failed(repo, rec.key, str(exc), retry) from None
    env[binding.SANDBOX] = f"landlock-abi-{ruleset.abi}"
    return ruleset, seal, private, g.private_cache


def _cmd_config(env: dict[str, str], key: str, value: str) -> None:
    """Set `key = value` for CMD's git as a GIT_CONFIG_COUNT entry after any it has, so it
    wins over every file git reads. A GIT_CONFIG_COUNT git would reject is left for git to
    reject. Only _confinement sets keys this way (any GIT_CONFIG_COUNT sends every git
    command of CMD to the shim's Python: shims/git), three of them:

    - core.sharedRepository = umask: set to group/all, git chmods every directory it makes
      `g+s`, which the seccomp filter refuses (no setgid file from the sandbox), and
      add/commit fail. What CMD makes then has its umask's modes; the supervisor's own
      writes (absorb, land) keep the repository's setting.
    - core.fsyncMethod = fsync: with `batch`, git adds objects to a temp dir in the store
      and renames them into their fan-out dirs, across directories, which the sandbox
      refuses in the store (no REFER: guard/sandbox.py); git 2.39 then says nothing and
      `git add` leaves the index naming objects it never stored.
    - rerere.enabled = false: `<common>/rr-cache` is never granted (shared by every lane
      and the owner: what is recorded there is anyone's next resolution, red team 15B F4);
      on, by the owner's config or by the cache existing, git would fail to record a
      conflict's preimage there. Not a barrier (CMD may drop the entry, or pass `-c`):
      the kernel keeps rr-cache out of reach whatever CMD's git is told."""
    count = env.get("GIT_CONFIG_COUNT", "0")
    if not count.isdigit():
        return
    n = int(count)
    env[f"GIT_CONFIG_KEY_{n}"] = key
    env[f"GIT_CONFIG_VALUE_{n}"] = value
    env["GIT_CONFIG_COUNT"] = str(n + 1)


def _lane_objects(repo: Repo, rec: LaneRecord, env: dict[str, str], retry: str) -> str:
    """CMD's git writes objects only into the lane's private store (the shared one is not
    granted: guard/objects.py; under --own-objects CMD's own sandbox keeps it out),
    never an alternate of the shared store: the supervisor absorbs what CMD commits
    (Absorber, and once more when CMD ends)."""
    admin = objects.own_admin(repo, rec)  # the one the sandbox grants and the split walks
    try:
        store = objects.enroll(repo, rec.path)
        if os.path.realpath(store) != os.path.join(admin, "objects"):
            raise OSError(f"{store} is not in the lane's admin dir {admin}")
    except OSError as exc:
        raise _sandbox_failed(repo, rec.key, f"the lane's object store: {exc}", retry) from None
    env["GIT_OBJECT_DIRECTORY"] = store
    env["GIT_ALTERNATE_OBJECT_DIRECTORIES"] = objects.shared(repo.common_dir)
    env[binding.OBJECTS] = store
    return store


def _absorb(repo: Repo, rec: LaneRecord, tip: str | None = None) -> str:
    """CMD's commits into the shared store, verified, so the owner's git sees them and they
    outlive the lane's admin dir (guard/objects.py absorb); what does not verify stays
    where it is, logged. Returns why it did not, or ""."""
    why = objects.absorb(repo, rec.key, rec.path, rec.branch, tip)
    if why == "objects_unreadable":
        why = "timeout"  # reading the lane's store took too long (guard/git.py)
    if why:
        repo.store.event("objects_kept_in_lane", lane=rec.key, why=why, tip=tip)
    return why


class Absorber:
    """While a sandboxed CMD runs, its commits exist only in the lane's own store (the
    shared store never lists it: guard/objects.py). The supervisor looks at the lane's
    branch every POLL seconds and, when it moved, absorbs the new tip (verified), so the
    owner's plain `git log lane/KEY` or `git gc` in the hub sees it within seconds. A tip
    that does not verify is logged once and not tried again until the branch moves."""

    POLL = 1.0

    def __init__(self, repo: Repo, rec: LaneRecord) -> None:
        self.repo = repo
        self.rec = rec
        grown = oversize.ref_oversized(repo.common_dir, rec.branch)  # never read whole
        self.seen = None if grown else objects.branch_tip(repo, rec.branch)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        # held while its git runs: exec, a subreaper, must not wait for those children
        self.spawning = threading.Lock()
        self.workers = reap.Workers()  # its git, spared by end_tree's first pass

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="git-lane-absorb", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self.POLL):
            try:
                # a ref CMD grew past any size git writes is never read (whole, by git):
                # set aside when CMD ends
                if oversize.ref_oversized(self.repo.common_dir, self.rec.branch):
                    continue
                with self.spawning, git.recording(self.workers):
                    tip = objects.branch_tip(self.repo, self.rec.branch)
                    if tip is not None and tip != self.seen and not self._stop.is_set():
                        self.seen = tip
                        # objects.import_lane removes what is no object from the lane's
                        # store first, and its read of the store is bounded
                        _absorb(self.repo, self.rec, tip)
            except Exception as exc:  # the final absorb still runs; say why
                self.repo.store.event("objects_kept_in_lane", lane=self.rec.key, why=repr(exc))

    def halt(self) -> None:
        """No absorb starts from now on (one in progress goes on: stop() waits for it)."""
        self._stop.set()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


def _fix(exc: sandbox.SandboxError, retry: str) -> list[str]:
    """The grants could not be decided (so --explain cannot list them either): the
    commands that fix what was found, then the retry; else doctor."""
    if not exc.next:
        return ["git lane doctor"]
    if exc.next[0].startswith("env "):  # a variable for this run: the retry with it
        return [f"{exc.next[0]} {retry}"]
    return [*exc.next, retry]


def _sandbox_failed(
    repo: Repo, key: str, why: str, retry: str, nxt: list[str] | None = None
) -> Refusal:
    plain = retry.replace(" --sandbox", "")
    alts = [] if repo.config["sandbox"] == "required" or "--explain" in retry else [plain]
    return Refusal(
        "sandbox_failed",
        f"the sandbox for lane {key} could not be set up: {why}; nothing was run",
        next=nxt or ["git lane doctor", f"git lane exec {key} --sandbox --explain"],
        alternatives=alts,
        details={"lane": key, "why": why},
    )


def _spawn_and_wait(
    argv: list[str],
    cwd: str,
    env: dict[str, str],
    ruleset: sandbox.Prepared | None = None,
    started: Callable[[int], None] | None = None,
    seal: seccomp.Seal | None = None,
    orphans: Callable[[int], bool] | None = None,
) -> tuple[int, int | None, int | None]:
    """Start argv (looked up on env's PATH, no shell) and wait for it, passing on the
    signals in FORWARDED that some process sends us. Returns (exit status as a shell
    reports it, the signal that killed it, its pid); pid None when it could not start
    (127 not found, 126 not executable). `started(CMD's pid)` runs once CMD has started (threads
    start after the fork that preexec_fn makes unsafe with threads). `orphans(CMD's pid)`
    runs on each SIGCHLD (a subreaper's orphan ended), and again each second while it
    returns False (it could not wait for them yet)."""
    waitinfo = getattr(signal, "sigwaitinfo", None)
    watched = {*FORWARDED, signal.SIGCHLD}
    if waitinfo is not None:
        # blocked, the signals queue for sigwaitinfo, which says who sent each: one the
        # tty sent to the whole foreground group (Ctrl-C, a resize) reached CMD already
        old = signal.pthread_sigmask(signal.SIG_BLOCK, watched)
    try:
        try:
            child = subprocess.Popen(
                argv,
                cwd=cwd,
                env=env,
                preexec_fn=_in_child if ruleset is None else _confined_child(ruleset, seal),
                close_fds=True,
            )
        except subprocess.SubprocessError as exc:  # only our preexec_fn raises this
            raise sandbox.SandboxError(f"CMD's process could not confine itself ({exc})") from None
        except FileNotFoundError:
            return 127, None, None
        except (PermissionError, OSError):
            return 126, None, None
        if started is not None:
            started(child.pid)
        if waitinfo is not None:
            from_tty: dict[int, float] = {}
            later = False  # orphans() could not wait for them yet: try again each second
            while child.poll() is None:
                got = signal.sigtimedwait(watched, 1.0) if later else waitinfo(watched)
                if got is None or got.si_signo == signal.SIGCHLD:
                    later = orphans is not None and not orphans(child.pid)
                elif _pass_on(got, child.pid, from_tty):
                    _forward(child, got.si_signo)
        else:  # no sigwaitinfo (macOS): who sent it is unknown; in the foreground of a
            # terminal, the ones a terminal sends reached CMD already
            sent = set(FORWARDED) - (_TTY_SIGNALS if _foreground() else set())
            prev = {s: signal.signal(s, lambda n, _f: _forward(child, n)) for s in sent}
            try:
                child.wait()
            finally:
                for s, h in prev.items():
                    signal.signal(s, h)
        rc = child.wait()
    finally:
        if waitinfo is not None:
            # what came in after CMD ended (the tty's Ctrl-C that ended it) was for CMD:
            # let it not stop the supervisor on its way out
            while watched & signal.sigpending():
                signal.sigtimedwait(watched, 0)
            signal.pthread_sigmask(signal.SIG_SETMASK, old)
    if rc < 0:
        return 128 - rc, -rc, child.pid
    return rc, None, child.pid


_TTY_SIGNALS = {signal.SIGINT, signal.SIGQUIT, signal.SIGWINCH}


def _foreground() -> bool:
    try:
        return os.tcgetpgrp(0) == os.getpgrp()
    except OSError:  # stdin is not a terminal
        return False


def _pass_on(info: signal.struct_siginfo, cmd: int, from_tty: dict[int, float]) -> bool:
    """Is this signal for CMD? Not one the kernel sent (a terminal's Ctrl-C or resize goes
    to the whole foreground group: CMD has it already), nor one CMD sent; nor a process
    of our own group echoing the kernel's within a second: `git lane` runs us as git's
    child, and git passes its own Ctrl-C on to us (which CMD has too)."""
    now = time.monotonic()
    if info.si_code not in (_SI_USER, _SI_QUEUE, _SI_TKILL):
        from_tty[info.si_signo] = now
        return False
    if info.si_pid == cmd:
        return False
    try:
        same_group = os.getpgid(info.si_pid) == os.getpgrp()
    except OSError:  # the sender is gone already
        same_group = False
    return not (same_group and now - from_tty.get(info.si_signo, -10.0) < 1.0)


def _in_child() -> None:
    """In CMD's process before it execs: the signal mask a shell would give it, and (on
    Linux) SIGTERM when the supervisor dies, so a killed `git lane exec` leaves no CMD
    writing in a lane whose recorded owner is dead (which the next exec takes over)."""
    signal.pthread_sigmask(signal.SIG_SETMASK, set())
    if sys.platform.startswith("linux"):
        import ctypes

        pr_set_pdeathsig = 1
        ctypes.CDLL(None).prctl(pr_set_pdeathsig, signal.SIGTERM, 0, 0, 0)


def _confined_child(
    ruleset: sandbox.Prepared, seal: seccomp.Seal | None = None
) -> Callable[[], None]:
    def child() -> None:
        _in_child()
        ruleset()  # raises: CMD is not run (Popen reports it to the supervisor)
        if seal is not None:
            seal()  # after no_new_privs (set by ruleset()); raises likewise

    return child


def _forward(child: subprocess.Popen[bytes], signum: int) -> None:
    try:
        child.send_signal(signum)
    except ProcessLookupError:
        pass


# -- --explain ---------------------------------------------------------------------------
def explain(repo: Repo, key: str) -> SandboxExplainResult:
    """What `git lane exec KEY --sandbox` would grant CMD; runs nothing."""
    lane.check_key(key)
    rec = _lane(repo, key, "exec")
    ver, why = sandbox.probe()
    why = sandbox.usable(ver) if ver else why
    try:
        g = sandbox.grants(repo, rec)
        writable = sandbox.granted(g)  # what prepare() grants: the paths that exist, checked
    except sandbox.SandboxError as exc:
        again = f"git lane exec {key} --sandbox --explain"
        raise _sandbox_failed(repo, key, str(exc), again, _fix(exc, again)) from None
    return {
        "ok": True,
        "code": "explain",
        "lane": key,
        "abi": ver,
        "usable": not why,
        "why": why,
        "writable": writable,
        "readable": g.readable,
        "private_tmp_under": g.private_tmp_under,
        "notes": g.notes,
    }


# -- shellenv ---------------------------------------------------------------------------
def shellenv(repo: Repo, key: str | None, shell: str = "sh") -> ShellenvResult:
    """The binding for an interactive shell, as `export` lines (or fish's `set -gx`)."""
    rec = _lane(repo, key, "shellenv")
    retry = f"git lane shellenv {rec.key}"
    _, warnings = _sandbox(repo, rec.key, False, retry, shell=True)
    _owner_check(repo, rec, retry, "shellenv")
    _mark_exec_seen(repo, rec.key)  # the shell it binds is a worker, as exec's CMD is
    env = binding_env(repo, rec, os.environ)
    unset = list(DROPPED)
    if gits_own_exec_path(os.environ, env[binding.REAL_GIT]):
        unset.append("GIT_EXEC_PATH")
    cwd = _cwd(rec.path)
    return {
        "ok": True,
        "code": "ok",
        "lane": rec.key,
        "path": os.path.realpath(rec.path),
        "cwd": cwd,
        "shell": shell,
        "env": env,
        "unset": unset,
        "script": script(env, unset, cwd, shell),
        "warnings": warnings,
    }


def _fish_quote(s: str) -> str:
    return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"


def script(env: Mapping[str, str], unset: Sequence[str], cwd: str, shell: str) -> str:
    """What `eval` runs: the unsets, the exports (PATH last), then the cd hint."""
    names = [*sorted(k for k in env if k != "PATH"), "PATH"]
    if shell == "fish":
        lines = [f"set -e {name}" for name in unset]
        lines += [f"set -gx {k} {_fish_quote(env[k])}" for k in names if k != "PATH"]
        lines.append("set -gx PATH " + " ".join(_fish_quote(p) for p in env["PATH"].split(":")))
    else:
        lines = [f"unset {' '.join(unset)}"]
        lines += [f"export {k}={shlex.quote(env[k])}" for k in names]
    if not cwd.endswith("\n"):  # git.q: one line (printf escapes for a control character)
        lines.append(f"# cd {git.q(cwd)}")
    # else no hint: a newline would end the comment and eval would run the rest
    return "\n".join(lines) + "\n"
