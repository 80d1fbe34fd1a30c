"""The click CLI: parses, calls one command module's function, renders its result as text
(guard/render.py) or JSON (the result itself), behind the one error boundary
(guard/boundary.py: refusal exit 1, usage exit 2, bug exit 3 with a crash file)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import click

from guard import boundary, git, render
from guard.repo import Repo


class Ctx:
    def __init__(self, directory: str | None, as_json: bool) -> None:
        self.directory = directory
        self.json = as_json
        self.exit = 0
        self.command: str | None = None  # the subcommand (`check`: the shims' answer)
        self._repo: Repo | None = None
        self.notes: list[str] = []  # said once the command's result is (warnings)

    @property
    def repo(self) -> Repo:
        if self._repo is None:
            repo = Repo.discover(self.directory)
            # first of all: nothing below reads the state dir (owner_config) or a ref with
            # the modes a sandboxed lane's chmod left (red team 17 F6)
            self._give_back(repo)
            # before any git reads a ref: each would wait on a FIFO at packed-refs or at
            # main's loose ref for ever. doctor names it (reading no ref), restore-main
            # moves it into kept/
            if self.command not in ("doctor", "restore-main"):
                found = repo.ref_file_blocks()
                if found is not None:
                    from guard import lane

                    raise lane.packed_refs_refusal(repo, found)
            self._set_aside(repo)
            self._repo = repo
            from guard import lane  # roles: a lane owner's descendants are its workers

            lane.attach(self._repo)
        return self._repo

    def _give_back(self, repo: Repo) -> None:
        """The owner's bits back on the way to main and on git-lane's state (guard/modes.py),
        before anything reads them; said on stderr (in the result's warnings with --json)."""
        from guard import modes

        changed = modes.give_back(str(repo.common_dir), ["main", "master"])
        try:
            configured = repo.owner_config.get("main_branch")
        except Exception:
            configured = None  # unreadable: the command's own read of it says so
        if isinstance(configured, str) and configured not in ("main", "master"):
            changed += modes.give_back(str(repo.common_dir), [configured])
        if changed:
            repo.store.event("mode_restored", paths=[p for p, _ in changed])
            self._warn(modes.note(changed))

    def _set_aside(self, repo: Repo) -> None:
        """Before any git reads the repository's refs: a file a sandboxed lane may write
        that git reads whole, grown past any size git writes (a sparse 20 GB ref), goes
        into kept/ (guard/oversize.py); said on stderr (in the result's warnings with
        --json). One that cannot be moved: refused, git_file_oversized."""
        from guard import oversize

        m = oversize.set_aside(repo)
        if m.failed:
            raise oversize.refusal(repo, m)
        if m.moved:
            self._warn(oversize.note(m, oversize.restores(repo, m.moved)))

    def _warn(self, text: str) -> None:
        if self.json:
            self.notes.append(text)
        else:
            sys.stderr.write(f"git-lane: warning: {text}\n")

    def peek_repo(self) -> Repo | None:
        if self._repo is not None:
            return self._repo
        try:
            return Repo.discover(self.directory)
        except Exception:
            return None


_state: dict[str, Ctx] = {}


def _pin_root(ctx: Ctx | None) -> str | None:
    """The repository root (quoted for sh) that every `git ...` command this process
    prints is pinned to (`git -C ROOT ...`, errors.pin_git), or None: pinned when the owner
    runs git-lane with its cwd (or `-C`) inside a lane. A plain `git X` (`git lane X`
    too) run there starts git in the lane: git reads that repository's config before
    anything else (pager.<cmd> on a terminal), and a lane still running can repoint its
    `.git` at a repository of its own after this command printed it. Never for a worker
    (its commands are run in its lane, through its shims) nor for `check` (the shims' own
    answer)."""
    from guard import lane, policy
    from guard.errors import Refusal
    from guard.repo import lane_repo

    if policy.is_worker(os.environ) or (ctx is not None and ctx.command == "check"):
        return None
    try:
        here: str | None = os.getcwd()
    except OSError:
        here = None  # a directory that is gone: no `.git` is made in it again
    directory = ctx.directory if ctx is not None else None
    repo = ctx._repo if ctx is not None else None
    if repo is not None and lane.is_worker():  # attached (lane.attach): knows its lanes
        return None
    places = [p for p in (directory, here) if p]
    marked = {p: lane_repo(p) for p in places}
    inside = any(r is not None for r in marked.values())
    if not inside and repo is not None:  # a lane whose lanes directory has no marker
        try:
            paths = [os.path.realpath(r.path) for r in repo.store.lanes()]
        except Refusal:
            paths = ["/"]  # the lanes cannot be read: taken to hold the cwd
        reals = [os.path.realpath(p) for p in places]
        inside = any(
            r == p or r.startswith(p.rstrip(os.sep) + os.sep) for r in reals for p in paths
        )
    if not inside:
        return None
    # the repository the command acted on: the `-C` dir's lane's, the one it found, the cwd's
    found = marked.get(directory) if directory else None
    for other in (repo, marked.get(here) if here else None):
        found = other if found is None else found
    if found is None or lane.owned_by_ancestor(found) is not None:
        return None
    return git.q(found.repo_root())


def pinned(obj: Any) -> Any:
    """`obj` (a result, a refusal's next and alternatives) with its commands pinned for
    where they are printed (_pin_root); `obj` itself when nothing is pinned."""
    from guard.errors import pin_commands

    root = _pin_root(_state.get("ctx"))
    return obj if root is None else pin_commands(obj, root)


def emit(
    ctx: Ctx, result: Mapping[str, Any], how: Callable[[Mapping[str, Any]], str] = render.generic
) -> None:
    if ctx.notes:
        result = {**result, "warnings": [*(result.get("warnings") or []), *ctx.notes]}
    result = pinned(result)
    if ctx.json:
        sys.stdout.write(json.dumps(git.json_safe(result), sort_keys=True, default=str) + "\n")
        return
    text = how(result)
    if text:
        sys.stdout.write(text.rstrip("\n") + "\n")
    for w in result.get("warnings") or []:
        one_line = " ".join(str(w).splitlines())  # one warning, one line
        sys.stderr.write(f"git-lane: warning: {one_line}\n")


def json_option(f: Callable[..., Any]) -> Callable[..., Any]:
    def cb(c: click.Context, _p: click.Parameter, value: bool) -> None:
        if value:
            c.find_object(Ctx).json = True  # type: ignore[union-attr]

    return click.option(
        "--json",
        "as_json",
        is_flag=True,
        expose_value=False,
        callback=cb,
        help="Print one JSON object.",
    )(f)


pass_ctx = click.make_pass_decorator(Ctx)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-C", "directory", metavar="PATH", default=None, help="Run as if started in PATH.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.version_option(package_name="git-lane", prog_name="git lane")
@click.pass_context
def cli(c: click.Context, directory: str | None, as_json: bool) -> None:
    """git lane: one worktree per writer; main moves only by `git lane land`."""
    c.obj = _state.setdefault("ctx", Ctx(directory, as_json))
    c.obj.directory = directory
    c.obj.command = c.invoked_subcommand
    c.obj.json = c.obj.json or as_json


# -- lanes --------------------------------------------------------------------------------
@cli.command()
@click.argument("key", required=False)
@click.option("--all", "all_", is_flag=True, help="List released lanes too.")
@click.option(
    "--conflicts",
    "with_conflicts",
    is_flag=True,
    help="Predict what each lane would conflict with (main, other lanes): committed work.",
)
@json_option
@pass_ctx
def status(ctx: Ctx, key: str | None, all_: bool, with_conflicts: bool) -> None:
    """Show main, the hub, the lock and every lane with the next command to run."""
    from guard.commands import status as cmd

    emit(ctx, cmd.run(ctx.repo, key, all_, with_conflicts), render.status)


@cli.command()
@click.argument("keys", nargs=-1, metavar="[KEYS]...")
@click.option(
    "--include-dirty",
    is_flag=True,
    help="Merge each lane's uncommitted work too (untracked files included; its index is not touched).",
)
@json_option
@pass_ctx
def conflicts(ctx: Ctx, keys: tuple[str, ...], include_dirty: bool) -> None:
    """Predict which lanes conflict with main and with each other (nothing is changed).

    Every pair (main and each lane, each two lanes; with KEYS, the pairs of those lanes)
    is merged with `git merge-tree --write-tree`: conflicts with their paths, then pairs
    that merge cleanly but change the same paths. Exit 0 either way."""
    from guard.commands import conflicts as cmd

    emit(ctx, cmd.run(ctx.repo, list(keys), include_dirty), render.conflicts)


@cli.command()
@click.argument("key", required=False)
@click.option(
    "--goal", metavar="GOAL", help="What the lane is for: the auto key becomes <goal as a key>-<n>."
)
@click.option("--owner-pid", type=int, help="Record this live process as the lane's owner.")
@json_option
@pass_ctx
def create(ctx: Ctx, key: str | None, goal: str | None, owner_pid: int | None) -> None:
    """Create a lane: branch lane/KEY off main, in its own worktree."""
    from guard.commands import create as cmd

    res = cmd.run(ctx.repo, key, goal, owner_pid, _include_progress, _gate_output, _setup_tick)
    emit(ctx, res, render.create)


@cli.command()
@click.argument("key", required=False)
@json_option
@pass_ctx
def setup(ctx: Ctx, key: str | None) -> None:
    """Set a lane up again: copy missing .worktreeinclude files, run setup_command."""
    from guard.commands import setup as cmd

    res = cmd.run(ctx.repo, key, _include_progress, _gate_output, _setup_tick)
    emit(ctx, res, render.setup)


def _include_progress(files: int, size: int) -> None:
    sys.stderr.write(
        f"git-lane: copying .worktreeinclude files: {files:,} files, {size // 1_000_000:,} MB\n"
    )
    sys.stderr.flush()


def _setup_tick(seconds: float, command: str) -> None:
    # on stderr whatever it is, like the gate's: an agent reading a pipe wants to know
    shown = f" ({command})" if len(command) <= 40 and "\n" not in command else ""
    sys.stderr.write(f"git-lane: setup running {int(seconds)} s{shown}\n")
    sys.stderr.flush()


@cli.command()
@click.argument("key", required=False)
@click.option("--confirm", metavar="yes-discard-lane", help="Discard unlanded or uncommitted work.")
@json_option
@pass_ctx
def release(ctx: Ctx, key: str | None, confirm: str | None) -> None:
    """Remove a lane's worktree and branch (refused while it holds unlanded work)."""
    from guard.commands import release as cmd

    emit(ctx, cmd.run(ctx.repo, key, confirm), render.release)


@cli.command()
@json_option
@pass_ctx
def reconcile(ctx: Ctx) -> None:
    """Bring the lane registry, the lock and any half-done land in line with git."""
    from guard.commands import reconcile as cmd

    emit(ctx, cmd.run(ctx.repo), render.reconcile)


@cli.command()
@click.argument("key")
@click.option(
    "--move-aside",
    is_flag=True,
    help="A directory at the lane's .git (a repository of its own) is renamed aside (kept), "
    "and the pointer written in its place.",
)
@click.option(
    "--keep",
    "keep",
    multiple=True,
    metavar="PATH",
    help="Move PATH of the lane's worktree into git-lane's kept/ first (repeatable).",
)
@click.option(
    "--into",
    metavar="NAME",
    help="The kept/ directory --keep and --set-aside-submodule move into.",
)
@click.option(
    "--ignore",
    "ignore",
    multiple=True,
    metavar="PATTERN",
    help="Append PATTERN to the lane's top .gitignore (repeatable).",
)
@click.option(
    "--set-aside-submodule",
    "set_aside",
    multiple=True,
    metavar="PATH",
    help="Rename the submodule directory PATH of the lane beside it (PATH.moved-aside), or "
    "into kept/NAME with --into, and leave an empty one, unpopulated, in its place "
    "(repeatable).",
)
@json_option
@pass_ctx
def repair(
    ctx: Ctx,
    key: str,
    move_aside: bool,
    keep: tuple[str, ...],
    into: str | None,
    ignore: tuple[str, ...],
    set_aside: tuple[str, ...],
) -> None:
    """Put a lane back from git: its record, a deleted or moved branch, a deleted worktree."""
    from guard.commands import repair as cmd

    emit(ctx, cmd.run(ctx.repo, key, move_aside, keep, into, ignore, set_aside), render.repair)


# -- sync and land ------------------------------------------------------------------------
@cli.command()
@click.argument("key", required=False)
@json_option
@pass_ctx
def sync(ctx: Ctx, key: str | None) -> None:
    """Rebase the lane onto main's tip; on conflicts, print the worklist."""
    from guard.commands import sync as cmd

    res = cmd.sync(ctx.repo, key)
    emit(ctx, res, render.sync)
    if res["code"] == "sync_conflicts":  # like `git rebase`: stopped, exit 1
        ctx.exit = boundary.EXIT_REFUSED


@cli.command("continue")
@click.argument("key", required=False)
@json_option
@pass_ctx
def continue_cmd(ctx: Ctx, key: str | None) -> None:
    """After resolving conflicts: check for markers, stage, continue the rebase."""
    from guard.commands import sync as cmd

    res = cmd.continue_(ctx.repo, key)
    emit(ctx, res, render.sync)
    if res["code"] == "sync_conflicts":
        ctx.exit = boundary.EXIT_REFUSED


@cli.command()
@click.argument("key", required=False)
@json_option
@pass_ctx
def abort(ctx: Ctx, key: str | None) -> None:
    """Abort a sync: the lane goes back to its tip from before."""
    from guard.commands import sync as cmd

    emit(ctx, cmd.abort(ctx.repo, key), render.abort)


def _gate_output(chunk: bytes) -> None:
    sys.stderr.buffer.write(chunk)
    sys.stderr.flush()


def _gate_tick(seconds: float, command: str) -> None:
    # on stderr whatever it is: an agent reading a pipe wants to know the gate still runs
    shown = f" ({command})" if len(command) <= 40 and "\n" not in command else ""
    sys.stderr.write(f"git-lane: gate running {int(seconds)} s{shown}\n")
    sys.stderr.flush()


def _waiting(holder: Mapping[str, Any] | None, seconds: float) -> None:
    if holder is None:
        who = "another git lane process"
    else:
        host = "" if holder.get("host") in ("", None, _hostname()) else f" on {holder['host']}"
        who = f"lane {holder.get('lane') or '?'} (pid {holder.get('pid')}{host})"
        if holder.get("since"):
            who += f" since {holder['since']}"
    again = f" ({int(seconds)} s so far)" if seconds >= 1 else ""
    sys.stderr.write(f"git-lane: waiting for the integration lock held by {who}{again}\n")
    sys.stderr.flush()


def _hostname() -> str:
    import socket

    return socket.gethostname()


@cli.command()
@click.argument("key", required=False)
@click.option(
    "--wait",
    "wait",
    is_flag=False,
    flag_value=-1.0,
    type=float,
    default=None,
    metavar="[SECONDS]",
    help="Wait for the integration lock (for ever, or SECONDS).",
)
@click.option(
    "--sync", "sync", is_flag=True, help="Rebase a stale lane onto main first, under the lock."
)
@json_option
@pass_ctx
def land(ctx: Ctx, key: str | None, wait: float | None, sync: bool) -> None:
    """Land the lane: locked, clean, fresh, gate passing, fast-forward of main."""
    from guard.commands import land as cmd

    if wait is not None and wait != wait:  # NaN: no deadline could ever be compared
        raise click.BadParameter("SECONDS must be a number", param_hint="--wait")
    w = None if wait is None else (10**9 if wait < 0 else wait)
    from guard import landsock

    if landsock.routed():  # bound by exec: the supervisor lands, outside CMD (and its sandbox)
        from guard import lane

        own = lane.resolve_key(key, "land") or ""
        out, err = sys.stdout.buffer, sys.stderr.buffer
        ctx.exit = landsock.request(own, w, sync, ctx.json, out, err)
        return
    res = cmd.run(ctx.repo, key, w, _gate_output, _gate_tick, _waiting, sync=sync)
    emit(ctx, res, render.land)
    if res["code"] == "sync_conflicts":  # --sync stopped on conflicts, as `sync` does
        ctx.exit = boundary.EXIT_REFUSED


@cli.command()
@click.option(
    "--dry-run", is_flag=True, help="Say what would be released and locked; change nothing."
)
@json_option
@pass_ctx
def gc(ctx: Ctx, dry_run: bool) -> None:
    """Release landed clean lanes; lock and list the ones with work (owner only)."""
    from guard.commands import gc as cmd

    emit(ctx, cmd.run(ctx.repo, dry_run), render.gc)


# -- ready marks and the land queue (issue 12) ---------------------------------------------
@cli.command()
@click.argument("key", required=False)
@click.option("--unset", is_flag=True, help="Take the ready mark back.")
@json_option
@pass_ctx
def ready(ctx: Ctx, key: str | None, unset: bool) -> None:
    """Mark the lane's committed state ready for the land queue (a worker may mark its own)."""
    from guard import binding, landsock

    if landsock.routed() and os.environ.get(binding.SANDBOX):
        # a sandboxed CMD cannot write git-lane's state: its supervisor marks the lane
        from guard import lane

        own = lane.resolve_key(key, "ready") or ""
        out, err = sys.stdout.buffer, sys.stderr.buffer
        ctx.exit = landsock.request_ready(own, unset, ctx.json, out, err)
        return
    from guard.commands import ready as cmd

    emit(ctx, cmd.run(ctx.repo, key, unset), render.ready)


def _queue_progress(line: str) -> None:
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


@cli.command()
@click.argument("keys", nargs=-1)
@click.option("--all", "all_", is_flag=True, help="Every lane marked ready (the default).")
@click.option(
    "--batch",
    type=click.IntRange(min=1),
    default=1,
    metavar="N",
    help="Stack up to N lanes and run the gate once for them.",
)
@json_option
@pass_ctx
def queue(ctx: Ctx, keys: tuple[str, ...], all_: bool, batch: int) -> None:
    """Land the ready lanes, in ready order (or KEYS' order): sync, gate, fast-forward each."""
    from guard.commands import queue as cmd

    if all_ and keys:
        raise click.UsageError("give KEYS or --all, not both")
    tty = not ctx.json and sys.stderr.isatty()
    res = cmd.run(
        ctx.repo,
        list(keys),
        all_,
        batch,
        _gate_tick,
        _queue_progress if tty else None,
    )
    emit(ctx, res, render.queue)


@cli.command("path")
@click.argument("key", required=False)
@json_option
@pass_ctx
def path_cmd(ctx: Ctx, key: str | None) -> None:
    """Print the lane's worktree path (cd "$(git lane path KEY)")."""
    from guard.commands import path as cmd

    emit(ctx, cmd.run(ctx.repo, key), render.path)


@cli.command("export")
@click.argument("key", required=False)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["patch", "json"]),
    default=None,
    help="patch (an mbox for `git am -k --keep-cr`; default) or json (the result with `patch`).",
)
@click.option("-o", "output", metavar="FILE", help="Write FILE (atomically), not stdout.")
@json_option
@pass_ctx
def export_cmd(ctx: Ctx, key: str | None, fmt: str | None, output: str | None) -> None:
    """Write the lane's work as one mbox: its commits since main, then its uncommitted
    changes (untracked files included) as one more message; read-only.

    \b
    git lane export alpha -o alpha.mbox && git -C CLONE am -k --keep-cr < alpha.mbox
    git lane export alpha --format json | jq .files
    """
    import os

    from guard.commands import export as cmd

    if fmt is None:
        fmt = "json" if ctx.json and output is None else "patch"
    if output is None and ctx.json and fmt == "patch":
        raise click.UsageError("--json prints the result on stdout: give -o FILE for the patch")
    sink = sys.stdout.buffer if output is None else None
    cwd = ctx.directory or os.getcwd()
    sys.stdout.flush()
    try:
        res = cmd.run(ctx.repo, key, fmt, output, sink, cwd)
    except BrokenPipeError:  # `git lane export | head`: the reader left; end quietly, as git
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        ctx.exit = 141
        return
    if output is not None:
        emit(ctx, res, render.export)


@cli.command("checkpoint")
@click.argument("key", required=False)
@click.option("-m", "message", metavar="MSG", help="The commit message.")
@json_option
@pass_ctx
def checkpoint_cmd(ctx: Ctx, key: str | None, message: str | None) -> None:
    """Commit every current change of the lane (untracked included, ignored not) as one
    checkpoint commit, with the hooks running."""
    from guard.commands import checkpoint as cmd

    emit(ctx, cmd.run(ctx.repo, key, message), render.checkpoint)


@cli.command(
    "exec",
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
    epilog="Examples: git lane exec alpha -- claude ; git lane exec -c fix-login -- codex ; "
    "git lane exec alpha -- aider ; git lane exec alpha -- opencode",
)
@click.option("-c", "--create", "create_first", is_flag=True, help="Create the lane first.")
@click.option("--sandbox", is_flag=True, help="Run CMD confined by the kernel (Landlock).")
@click.option("--explain", is_flag=True, help="Print what --sandbox would grant CMD; run nothing.")
@click.option(
    "--own-objects",
    is_flag=True,
    help="CMD's git writes objects into the lane's own store, which exec copies, re-hashed, "
    "into the shared one (as --sandbox does): for a CMD that confines itself without the "
    "shared store (Codex, see agent-setup).",
)
@click.option("--goal", metavar="GOAL", help="With -c: what the lane is for.")
@click.argument("key")
@click.argument("command", nargs=-1, type=click.UNPROCESSED, metavar="-- CMD [ARGS]")
@json_option
@pass_ctx
def exec_cmd(
    ctx: Ctx,
    create_first: bool,
    sandbox: bool,
    explain: bool,
    own_objects: bool,
    goal: str | None,
    key: str,
    command: tuple[str, ...],
) -> None:
    """Run CMD bound to lane KEY: in its worktree, our shims first on PATH, GITLANE_* set.

    git lane stays CMD's parent and is the lane's recorded owner while CMD runs (another
    exec or shellenv of the lane is refused lane_owner_conflict); signals are passed on;
    the exit status is CMD's (128+N when signal N killed it, 127 when it is not found).
    CMD owns stdout: --json changes only a refusal, printed as one JSON object."""
    from guard.commands import exec as cmd

    if goal is not None and not create_first:
        raise click.UsageError("--goal goes with -c (it is recorded when the lane is created)")
    # `git lane exec KEY --sandbox -- CMD` (the issue's and the docs' order) as well as
    # `git lane exec --sandbox KEY -- CMD`: exec's own flags may stand between KEY and --
    rest = list(command)
    after_key = {"--sandbox", "--explain", "--own-objects", "--json"}
    cut = rest.index("--") if "--" in rest else (len(rest) if set(rest) <= after_key else 0)
    for opt in rest[:cut]:
        if opt not in after_key:
            break
        sandbox = sandbox or opt == "--sandbox"
        explain = explain or opt == "--explain"
        own_objects = own_objects or opt == "--own-objects"
        if opt == "--json":
            ctx.json = True
    else:
        rest = rest[cut:]
    argv = rest[1:] if rest and rest[0] == "--" else rest
    if explain:
        if create_first:
            raise click.UsageError("--explain needs an existing lane: it goes without -c")
        emit(ctx, cmd.explain(ctx.repo, key), render.sandbox_explain)
        return
    if "--" in argv and argv[0].startswith("-"):
        raise click.UsageError(
            f"{argv[0]} after KEY: only --sandbox, --explain, --own-objects and --json may "
            "stand between KEY and --; other options go before KEY"
        )
    if not argv:
        raise click.UsageError("no CMD after --")
    res = cmd.run(
        ctx.repo,
        key,
        argv,
        create_first=create_first,
        sandbox=sandbox,
        own_objects=own_objects,
        goal=goal,
        warn=_warn,
        progress=_include_progress,
        output=_gate_output,
        tick=_setup_tick,
    )
    if res["code"] == "command_not_found":
        sys.stderr.write(f"git-lane: exec: {argv[0]}: command not found\n")
    elif res["code"] == "not_runnable":
        sys.stderr.write(f"git-lane: exec: {argv[0]}: cannot run it (permission denied)\n")
    ctx.exit = res["exit_status"]


def _warn(line: str) -> None:
    sys.stderr.write(f"git-lane: warning: {line}\n")
    sys.stderr.flush()


@cli.command()
@click.argument("key", required=False)
@click.option(
    "--shell",
    type=click.Choice(["sh", "fish"]),
    default="sh",
    help="Output syntax (sh: bash, zsh...).",
)
@json_option
@pass_ctx
def shellenv(ctx: Ctx, key: str | None, shell: str) -> None:
    """Print the export lines that bind a shell to lane KEY: eval "$(git lane shellenv KEY)".

    Sets what exec sets (GITLANE_*, our shims first on PATH) and ends with a `# cd LANE`
    hint. It records no owner, since it cannot supervise the shell: an exec of the same
    lane is not refused beside it. To hold the lane, run `git lane exec KEY -- $SHELL`.
    With --json: the env as one object."""
    from guard.commands import exec as cmd

    res = cmd.shellenv(ctx.repo, key, shell)
    emit(ctx, res, render.shellenv)


@cli.command("restore-main")
@json_option
@pass_ctx
def restore_main(ctx: Ctx) -> None:
    """Put main back at the last landed tip (after a reflog rewind, branch copy or symref)."""
    from guard.commands import restore_main as cmd

    emit(ctx, cmd.run(ctx.repo), render.restore_main)


@cli.command("agent-setup")
@click.argument("key", required=False)
@click.option(
    "--for",
    "tool",
    required=True,
    type=click.Choice(["claude", "codex", "aider", "opencode"]),
    help="The agent CLI to set up for the lane.",
)
@click.option(
    "--move-aside",
    is_flag=True,
    help="First rename what is at the tool's file in the lane (or the link on its way) "
    "to NAME.git-lane-bak, kept.",
)
@click.option(
    "--enable-hooks",
    is_flag=True,
    help='Drop a "disableAllHooks" in the lane\'s claude settings (the other keys are kept).',
)
@json_option
@pass_ctx
def agent_setup(ctx: Ctx, key: str | None, tool: str, move_aside: bool, enable_hooks: bool) -> None:
    """Write what an agent CLI needs to keep to the lane; print the command that starts it."""
    from guard.commands import agent_setup as cmd

    emit(ctx, cmd.run(ctx.repo, key, tool, move_aside, enable_hooks), render.agent_setup)


# -- config and log -----------------------------------------------------------------------
def _format_keys(formatter: click.HelpFormatter) -> None:
    """The valid keys with type and default, from guard/config.py's one table."""
    from guard import config as cfgmod

    rows = [
        (name, f"{cfgmod.type_of(name)}, default {cfgmod.default_shown(name)}: {spec.help}")
        for name, spec in cfgmod.KEYS.items()
    ]
    with formatter.section("Keys (type, default: meaning)"):
        formatter.write_dl(rows)


class _KeysGroup(click.Group):
    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        _format_keys(formatter)
        super().format_epilog(ctx, formatter)


class _KeysCommand(click.Command):
    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        _format_keys(formatter)
        super().format_epilog(ctx, formatter)


@cli.group(cls=_KeysGroup)
def config() -> None:
    """Read and write owner settings (config.toml)."""


@config.command("get", cls=_KeysCommand)
@click.argument("key")
@json_option
@pass_ctx
def config_get(ctx: Ctx, key: str) -> None:
    """Print the value of KEY (and, with --json, the file it comes from)."""

    from guard.commands import config as cmd

    emit(ctx, cmd.get(ctx.repo, key), render.config_get)


# a value may start with `-` (`config set max_lanes -3` is a bad value, not an option)
@config.command("set", cls=_KeysCommand, context_settings={"ignore_unknown_options": True})
@click.argument("key")
@click.argument("value")
@click.option("--user", is_flag=True, help="Write the user file, not the repository's.")
@json_option
@pass_ctx
def config_set(ctx: Ctx, key: str, value: str, user: bool) -> None:
    """Set KEY to VALUE, read as TOML (true, 5, ["a"]), else as a string."""

    from guard.commands import config as cmd

    # `--user` works outside any repository: then there is nothing to log into
    repo = ctx.peek_repo() if user else ctx.repo
    emit(ctx, cmd.set_(repo, key, value, user), render.config_set)


@config.command("unset", cls=_KeysCommand)
@click.argument("key")
@click.option("--user", is_flag=True, help="Write the user file, not the repository's.")
@json_option
@pass_ctx
def config_unset(ctx: Ctx, key: str, user: bool) -> None:
    """Remove KEY from the file: its default (or the other file's value) applies."""

    from guard.commands import config as cmd

    repo = ctx.peek_repo() if user else ctx.repo
    emit(ctx, cmd.unset(repo, key, user), render.config_unset)


@config.command("list", cls=_KeysCommand)
@json_option
@pass_ctx
def config_list(ctx: Ctx) -> None:
    """Every key with its value and where the value comes from."""

    from guard.commands import config as cmd

    emit(ctx, cmd.list_(ctx.repo), render.config_list)


@cli.command("log")
@click.option("--lane", "lane", metavar="KEY", help="Only this lane's events.")
@click.option("--since", metavar="WHEN", help="30m, 2h, 1d or an ISO time.")
@click.option("-n", "limit", type=int, default=None, help="Only the newest N events.")
@json_option
@pass_ctx
def log_cmd(ctx: Ctx, lane: str | None, since: str | None, limit: int | None) -> None:
    """The audit log: every action and every refusal."""
    from guard.commands import log as cmd

    t0 = None
    if since is not None:
        t0 = cmd.parse_since(since)
        if t0 is None:
            raise click.BadParameter(
                "use a duration (30m, 2h, 1d) or an ISO time (2026-11-30T10:00)"
            )
    emit(ctx, cmd.run(ctx.repo, lane, t0, limit), render.log)


# -- hooks and health ---------------------------------------------------------------------
@cli.command()
@click.option(
    "--force",
    is_flag=True,
    help="When a foreign <hook> and <hook>.legacy both exist, move the .legacy aside (.bak) and chain the hook.",
)
@click.option("--hooks-path", is_flag=True, help="Install into core.hooksPath when it is set.")
@json_option
@pass_ctx
def install(ctx: Ctx, force: bool, hooks_path: bool) -> None:
    """Install git-lane's hooks into the repository (shared by every worktree)."""
    from guard.commands import install as cmd

    emit(ctx, cmd.run(ctx.repo, force=force, use_hooks_path=hooks_path), render.install)


@cli.command()
@json_option
@pass_ctx
def uninstall(ctx: Ctx) -> None:
    """Remove git-lane's hooks and restore the hooks they chained."""
    from guard.commands import install as cmd

    emit(ctx, cmd.uninstall(ctx.repo), render.install)


@cli.command()
@json_option
@pass_ctx
def doctor(ctx: Ctx) -> None:
    """Check hooks, config and state; exit 1 when a check fails."""
    from guard.commands import doctor as cmd
    from guard.errors import Refusal

    try:
        repo = ctx.repo
    except Refusal as r:
        if r.code != "git_file_not_plain":
            raise
        res = cmd.blocked(r)  # HEAD or config no file: one fail line, no git run
    else:
        res = cmd.run(repo)
    emit(ctx, res, render.doctor)
    if not res["ok"]:
        ctx.exit = boundary.EXIT_REFUSED


@cli.command()
@click.option("--keep", is_flag=True, help="Leave the throwaway repository behind.")
@click.option(
    "--agents",
    type=click.IntRange(min=2, max=12),
    default=None,
    metavar="N",
    help="N scripted agents on overlapping lines: conflicts predicted, the queue, gc.",
)
@json_option
@pass_ctx
def demo(ctx: Ctx, keep: bool, agents: int | None) -> None:
    """Walk through lanes, a conflict, sync and land on a throwaway repository."""
    from guard.commands import demo as cmd

    if agents is not None:
        emit(ctx, cmd.run_agents(agents, keep=keep, quiet=ctx.json), render.demo)
        return
    emit(ctx, cmd.run(keep=keep, quiet=ctx.json), render.demo)


# -- check: the shims' policy as a command ------------------------------------------------
@cli.group()
def check() -> None:
    """Would a lane's shim allow it? (the shims' own decision, nothing is run)"""


@check.command(
    "git", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False}
)
@click.argument("argv", nargs=-1, required=True, type=click.UNPROCESSED)
@json_option
@pass_ctx
def check_git(ctx: Ctx, argv: tuple[str, ...]) -> None:
    """Exit 0 when the lane's git shim would run `git ARGV`, else its refusal (exit 1).

    \b
    git lane check git -- checkout main      # refused [main_mutation_refused]
    git lane check git --json -- status      # {"ok": true, "code": "allowed", ...}
    """
    from guard.commands import check as cmd

    emit(ctx, cmd.git_(ctx.repo, list(argv), ctx.directory), render.check_git)


@check.command("write")
@click.argument("path")
@json_option
@pass_ctx
def check_write(ctx: Ctx, path: str) -> None:
    """Exit 0 when this process's lane may write PATH (the write and edit shims' checks:
    path_outside_lane, protected_path, sync_required), else the refusal (exit 1).

    \b
    Examples:
      git lane check write src/app.py
      git lane check write --json /abs/path/in/lane/notes.md
    """
    import os

    from guard.commands import check as cmd

    cwd = ctx.directory or os.getcwd()
    emit(ctx, cmd.write(ctx.peek_repo(), path, cwd), render.check_write)


# -- the entry point ----------------------------------------------------------------------
def _show_usage_error(e: click.ClickException) -> None:
    """click's error, with the hint naming `-h`: git turns `git lane --help` into
    `man git-lane`, which is not what the hint means."""
    if not isinstance(e, click.UsageError) or e.ctx is None:
        e.show()
        return
    hint = f"Try '{e.ctx.command_path} -h' for help.\n"
    click.echo(f"{e.ctx.get_usage()}\n{hint}", file=sys.stderr, color=e.ctx.color)
    click.echo(f"Error: {e.format_message()}", file=sys.stderr, color=e.ctx.color)


def _click(args: list[str], want_json: bool) -> int:
    try:
        cli.main(args=args, prog_name="git lane", standalone_mode=False)
    except click.exceptions.Exit as e:
        return e.exit_code
    except click.exceptions.Abort:
        return boundary.EXIT_INTERRUPTED
    except click.ClickException as e:
        if want_json:
            sys.stdout.write(
                boundary.dumps(
                    pinned(
                        {
                            "ok": False,
                            "code": "usage_error",
                            "message": e.format_message(),
                            "next": [
                                f"{e.ctx.command_path} -h"
                                if isinstance(e, click.UsageError) and e.ctx is not None
                                else "git lane -h"
                            ],
                            "details": {},
                        }
                    )
                )
                + "\n"
            )
        _show_usage_error(e)
        return boundary.EXIT_USAGE
    ctx = _state.get("ctx")
    return ctx.exit if ctx is not None else 0


def main(argv: list[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    _state.clear()

    own = args[: args.index("--")] if "--" in args else args  # exec's CMD has its own words

    def want_json() -> bool:
        ctx = _state.get("ctx")
        return "--json" in own or (ctx is not None and ctx.json)

    def state_dir() -> Path | None:
        ctx = _state.get("ctx")
        repo = ctx.peek_repo() if ctx is not None else None
        return repo.state_dir if repo is not None else None

    code = boundary.guarded(
        lambda: _click(args, "--json" in own), args, want_json, state_dir, cli=True, pin=pinned
    )
    sys.stdout.flush()
    raise SystemExit(code)
