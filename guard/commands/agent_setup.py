"""`git lane agent-setup [KEY] --for claude|codex|aider|opencode`: write, in the lane, what
an agent CLI needs to keep to it, and say the one command that starts it there.

An agent's own file tools do not go through PATH, so the shims alone do not confine them:
- claude: `.claude/settings.local.json` gets a PreToolUse hook (guard/agents.py) that asks
  `git lane check write PATH` before Edit/Write/MultiEdit/NotebookEdit and `git lane
  check git -- ARGV` before every git command of a Bash call, and a SessionStart hook
  that gives the model the lane's instructions; other keys of the file are kept;
- codex: no file; the command line carries the workspace-write sandbox with the git dirs
  a commit in a linked worktree writes (its users report `index.lock: Operation not
  permitted` without them), those `git lane exec --sandbox` grants and never the shared
  object store (git does not re-hash what it reads: a writer there rewrites main's
  commits), so Codex's git writes objects into the lane's own store (`exec
  --own-objects`, and Codex's shell environment), and the instructions
  (`developer_instructions`);
- aider: `.aider.conf.yml` with the hooks on (`git-commit-verify: true`: aider passes
  `--no-verify` by default) and the instructions as a read-only file;
- opencode: `opencode.json` (merged) with `external_directory: deny`, git denials for
  bash, and the instructions.
The files written in the lane are kept out of `git status` by a marked block of
root-anchored paths in the repository's `info/exclude` (shared by every worktree: git
has no per-worktree exclude file), so land is not refused `lane_dirty` for them; the
files agent-setup created are recorded (guard/adapters.py) so release does not count them
as work. The instructions live in git-lane's state, outside every lane."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

import guard
from guard import adapters, agents, binding, dirfd, git, lane, linked, objects, sandbox
from guard.errors import Refusal
from guard.repo import Repo
from guard.results import AgentFile, AgentSetupResult
from guard.store import LaneRecord, atomic_write

TOOLS = ("claude", "codex", "aider", "opencode")
FILES = {
    "claude": ".claude/settings.local.json",
    "aider": ".aider.conf.yml",
    "opencode": "opencode.json",
}
BEGIN = adapters.EXCLUDE_BEGIN
END = adapters.EXCLUDE_END
AIDER_HEAD = "# git-lane agent-setup"
BOOT = (
    "import sys; sys.path.insert(0, sys.argv[1]); from guard.agents import main; "
    "sys.exit(main(sys.argv[2:]))"
)
FILE_MATCHER = "Edit|MultiEdit|Write|NotebookEdit"
FILE_MAX = adapters.FILE_MAX  # the most agent-setup reads of a file in the lane

ENFORCED = {
    "claude": [
        "Edit/Write/MultiEdit/NotebookEdit: git lane check write PATH (PreToolUse hook)",
        "Bash: every git command in it, git lane check git -- ARGV (PreToolUse hook)",
        "git lane exec: the git, write and edit shims on PATH; the repository's git hooks",
    ],
    "codex": [
        "writes outside the lane and its git dirs: codex's workspace-write sandbox",
        "the shared object store: not writable there; its git writes the lane's own store "
        "(exec --own-objects), which exec and land copy into the shared one, re-hashed",
        "git lane exec: the git shim for every git its shell runs; the git hooks",
        "its roots: exec --own-objects refuses one that is (or lies behind) a symlink, no "
        "directory or another user's, right before codex starts; its temp dir is where no "
        "sandboxed process can re-point it",
    ],
    "aider": [
        "aider's own commits run the git hooks (git-commit-verify) and, under exec, the git shim",
        "git lane exec: the shims for /run commands; the git hooks",
    ],
    "opencode": [
        "tools touching paths outside the lane: external_directory deny",
        "git lane exec: the git shim for its bash tool; the git hooks",
    ],
}
NOT_ENFORCED = {
    "claude": [
        "MCP tools and other tools than these (the hook sees only what its matchers name)",
        "a Bash command that writes files without git (`cat > f`): only the sandbox stops it",
    ],
    "codex": [
        "apply_patch inside the writable roots (another lane's branch ref dir is one)",
        "links, FIFOs and renames from the lane into its git dirs (exec --sandbox denies "
        "them; codex's sandbox grants all or nothing)",
        "git lane sync/land inside codex's sandbox: git-lane's state is not writable there",
    ],
    "aider": ["aider's own edits are not checked file by file (it edits files in the repo)"],
    "opencode": ["its edit tool inside the lane (the .git file included) is not checked"],
}


def run(
    repo: Repo,
    key: str | None,
    tool: str,
    move_aside: bool = False,
    enable_hooks: bool = False,
) -> AgentSetupResult:
    """`move_aside`: what sits at the tool's file in the lane (the file, or the first name
    on its way that is a link or no directory: never what a link names) is renamed to
    `<name>.git-lane-bak` (or `.1`, ...) in its own directory first, kept. `enable_hooks`:
    a `disableAllHooks` in the lane's claude settings is dropped (the owner's consent)
    instead of refused; the write goes through directory fds as every other."""
    key = lane.current(repo, key, "agent-setup", f" --for {tool}")
    rec = lane.get(repo, key)
    # git in the lane would use another repository: its ls-files and check-ignore (and a
    # plain `--git-path info/exclude`, resolved through links) would answer from the lane's
    lane.check_pointers(repo, rec)
    wt = git.by_path(repo.worktrees()).get(os.path.realpath(rec.path))
    if rec.status != "active" or wt is None or not wt.exists:
        raise lane.not_active_refusal(
            repo, rec, f"is {rec.status}" if rec.status != "active" else "has no worktree"
        )
    path = os.path.realpath(rec.path)
    text = agents.instructions(key, path)
    ipath = adapters.instructions_path(repo.state_dir, key)
    ipath.parent.mkdir(parents=True, exist_ok=True)
    if not ipath.is_file() or ipath.read_text(errors="replace") != text:
        atomic_write(ipath, text.encode())
    python, pypath = sys.executable, str(Path(guard.__file__).resolve().parent.parent)
    files: list[AgentFile] = []
    warnings: list[str] = []
    excluded: list[str] = []
    exclude_file: str | None = None
    config: str | None = None
    argv = ["git", "lane", "exec", *(["--own-objects"] if tool == "codex" else []), key]
    argv += ["--", tool]
    if tool in FILES:
        rel = FILES[tool]
        _give_way(path, rel)
        if move_aside:
            moved = _move_aside(path, rel, key, tool)
            if moved is not None:
                warnings.append(f"{moved[0]} in lane {key} was moved aside to {moved[1]}")
        target = _target(path, rel, key, tool)
        old = _read(path, rel, key, tool)
        if tool == "claude":
            new = _claude(old, target, key, tool, path, python, pypath, enable_hooks)
            new, said = _hooks_on(new, path)
            warnings.extend(said)
        elif tool == "aider":
            new = _aider(old, target, key, ipath)
        else:
            new = _opencode(old, target, key, ipath, repo.main_branch)
        _not_elsewhere(repo, path, rel, key, tool)
        exclude_file, excluded = _exclude(path, rel, key, tool)
        if old != new:
            # from the lane's root through directory fds: a directory on the way swapped
            # for a link since _target looked fails the write instead of leading out
            try:
                dirfd.write_file(path, rel, new, 0o644, create=True)
            except OSError as exc:
                raise Refusal(
                    "agent_file_conflict",
                    f"{rel} in lane {key} could not be written inside the lane "
                    f"({exc.strerror or exc}): a directory on its way is a symlink or no "
                    "directory; nothing was written",
                    next=[f"ls -la -- {git.q(str(target.parent))}"],
                    alternatives=[f"git lane agent-setup {key} --for {tool}"],
                    details={
                        "lane": key,
                        "file": str(target),
                        "why": "not a plain file in the lane",
                    },
                ) from None
        mine = adapters.written(repo.state_dir, key).get(rel)
        if old is None or (mine is not None and mine == adapters.sha256(old)):
            adapters.remember(repo.state_dir, key, rel, adapters.sha256(new))
        action = "created" if old is None else "unchanged" if old == new else "updated"
        files.append({"path": str(target), "action": action})
    else:  # codex: everything on its command line
        roots, env = codex_sandbox(repo, rec)
        argv += ["--sandbox", "workspace-write"]
        argv += ["-c", "sandbox_workspace_write.writable_roots=" + _toml_list(roots)]
        argv += ["-c", "sandbox_workspace_write.exclude_slash_tmp=true"]
        argv += ["-c", "sandbox_workspace_write.exclude_tmpdir_env_var=true"]
        for name, value in env.items():
            argv += ["-c", f"shell_environment_policy.set.{name}={json.dumps(value)}"]
        argv += ["-c", "developer_instructions=" + json.dumps(text)]
        config = (
            'sandbox_mode = "workspace-write"\n'
            f"developer_instructions = {json.dumps(text)}\n\n"
            "[sandbox_workspace_write]\n"
            f"writable_roots = {_toml_list(roots)}\n"
            "exclude_slash_tmp = true\n"
            "exclude_tmpdir_env_var = true\n"
            "network_access = false\n\n"
            "[shell_environment_policy.set]\n"
            + "".join(f"{name} = {json.dumps(value)}\n" for name, value in env.items())
        )
    repo.store.event("agent_setup", lane=key, tool=tool, files=[f["path"] for f in files])
    return {
        "ok": True,
        "code": "ok",
        "lane": key,
        "path": path,
        "tool": tool,
        "files": files,
        "excluded": excluded,
        "exclude_file": exclude_file,
        "instructions_file": str(ipath),
        "instructions": text,
        "command": " ".join(git.q(a) for a in argv),
        "argv": argv,
        "config": config,
        "enforced": ENFORCED[tool],
        "not_enforced": NOT_ENFORCED[tool],
        "warnings": [*repo.config.warnings, *warnings],
    }


# -- where the file goes ----------------------------------------------------------------
def _give_way(lane_path: str, rel: str) -> None:
    """Each directory on the way to `rel` in the lane gets its owner's u+rwx back, as
    release and the oversize check give them, through directory fds from the lane's root
    (never through a link: one on the way ends it): a lane can `chmod 0400 .claude`, which
    the owner may then list but neither look into nor write (red team 15A F8). What cannot
    be given (another user's directory, a link, gone) is left to the checks that follow."""
    fd = os.open(lane_path, dirfd.DIR)
    try:
        for part in rel.split("/")[:-1]:
            if not dirfd.give_owner(fd, part, 0o700):
                return
            nfd = os.open(part, dirfd.DIR | os.O_NONBLOCK, dir_fd=fd)
            os.close(fd)
            fd = nfd
    except OSError:
        return
    finally:
        os.close(fd)


def _unreachable(lane_path: str, rel: str, key: str, tool: str, exc: OSError) -> Refusal:
    """A name on the way to the tool's file that the owner may not look at even after
    `_give_way` (another user's): `--move-aside` could not move it either."""
    full = os.path.join(lane_path, rel)
    return Refusal(
        "agent_file_conflict",
        f"{rel} in lane {key} cannot be looked at ({exc.strerror or exc}): a directory on its "
        "way is another user's, or its mode could not be given back; nothing was written",
        next=[f"ls -ld -- {git.q(os.path.dirname(full))}"],
        alternatives=[f"git lane exec {key} -- {tool}"],
        details={"lane": key, "file": full, "why": "not reachable", "error": str(exc)},
    )


def _target(lane_path: str, rel: str, key: str, tool: str) -> Path:
    """The file in the lane, refused when it is tracked (writing it would make the lane
    dirty) or when a symlink on the way would take the write out of the lane."""
    full = Path(lane_path, rel)
    again = f"git lane agent-setup {key} --for {tool}"
    if git.run(["ls-files", "-z", "--", rel], lane_path).stdout:
        raise Refusal(
            "agent_file_conflict",
            f"{rel} is tracked in lane {key}: writing it would make the lane dirty and land "
            f"refuse it; start {tool} without the adapter (the shims and hooks still apply)",
            next=[f"git lane exec {key} -- {tool}"],
            details={"lane": key, "file": str(full), "why": "tracked"},
        )
    try:
        parent = os.path.realpath(full.parent)
        st = os.lstat(full)
    except PermissionError as exc:  # a directory on the way _give_way could not open
        raise _unreachable(lane_path, rel, key, tool, exc) from None
    except OSError:
        st = None  # nothing there, or a name on the way no directory: _read refuses that
    if (st is not None and not stat.S_ISREG(st.st_mode)) or not (
        parent == lane_path or parent.startswith(lane_path + os.sep)
    ):
        raise Refusal(
            "agent_file_conflict",
            f"{rel} in lane {key} is a symlink, not a file, or lies behind a symlink out of "
            "the lane: agent-setup writes only regular files inside the lane",
            next=[f"{again} --move-aside"],
            details={"lane": key, "file": str(full), "why": "not a plain file in the lane"},
        )
    return full


def _lane_file(lane_path: str, rel: str) -> bytes | None:
    """The bytes of the regular file `rel` in the lane, reached from the lane's root through
    directory fds (dirfd.read_file: no link followed on the way or at the end, O_NONBLOCK
    so a FIFO never blocks, at most FILE_MAX bytes); None when nothing is there. OSError
    for a link, a FIFO, a device, a directory, a file past FILE_MAX or one the owner may
    not read: never read through, the lane's process can re-point any of those names."""
    try:
        return dirfd.read_file(lane_path, rel, FILE_MAX)
    except FileNotFoundError:
        return None


def _read(lane_path: str, rel: str, key: str, tool: str) -> bytes | None:
    """The tool's file in the lane as `_lane_file` reads it; what is no plain file there
    (a link, FIFO or grown file put there since `_target` looked) is refused with the
    `--move-aside` that renames it (never what it names)."""
    try:
        return _lane_file(lane_path, rel)
    except OSError as exc:
        full = Path(lane_path, rel)
        raise Refusal(
            "agent_file_conflict",
            f"{full} could not be read as a plain file of the lane ({exc.strerror or exc}): "
            f"it is a symlink, no regular file or larger than {FILE_MAX} bytes, or a name on "
            "its way is; agent-setup reads only regular files inside the lane, never through "
            "a link; `--move-aside` keeps it beside (`.git-lane-bak`) and writes a new one",
            next=[f"git lane agent-setup {key} --for {tool} --move-aside"],
            details={"lane": key, "file": str(full), "why": "not a plain file in the lane"},
        ) from None


def _foreign(full: Path, key: str, tool: str, why: str) -> Refusal:
    return Refusal(
        "agent_file_conflict",
        f"{full} {why}; agent-setup does not overwrite it: `--move-aside` keeps it beside "
        "(`.git-lane-bak`) and writes a new one",
        next=[f"git lane agent-setup {key} --for {tool} --move-aside"],
        details={"lane": key, "file": str(full), "why": why},
    )


def _move_aside(lane_path: str, rel: str, key: str, tool: str) -> tuple[str, str] | None:
    """Rename, within the lane, the first name on the way to `rel` that is no directory
    (a link out of the lane: the link itself, never what it names), else what is at `rel`,
    to the first free `<name>.git-lane-bak`, `.1`, ... beside it; (from, to) relative to
    the lane, or None when nothing is there. Each directory is reached from the lane's
    root through descriptors (O_NOFOLLOW): the nexts that did this with `mv` on a path
    moved, through a link the lane put on the way, a file of the owner's (red team 14H-B
    F6). Nothing is ever replaced or deleted."""
    parts = rel.split("/")
    fd = os.open(lane_path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for i, part in enumerate(parts):
            try:
                mode = os.stat(part, dir_fd=fd, follow_symlinks=False).st_mode
            except FileNotFoundError:
                return None
            if i == len(parts) - 1 or not stat.S_ISDIR(mode):
                got = dirfd.move_aside(fd, part, f"{part}.git-lane-bak")
                at = "/".join(parts[:i])
                return "/".join(parts[: i + 1]), f"{at}/{got}" if at else got
            nfd = os.open(part, dirfd.DIR, dir_fd=fd)
            os.close(fd)
            fd = nfd
    except PermissionError as exc:  # not a change meanwhile: the same again would loop
        raise _unreachable(lane_path, rel, key, tool, exc) from None
    except OSError as exc:
        raise Refusal(
            "agent_file_conflict",
            f"{rel} in lane {key} could not be moved aside ({exc.strerror or exc}): a name on "
            "its way changed meanwhile; nothing was moved past it",
            next=[f"git lane agent-setup {key} --for {tool} --move-aside"],
            details={"lane": key, "file": os.path.join(lane_path, rel), "why": "move aside"},
        ) from None
    finally:
        os.close(fd)
    return None


def _not_elsewhere(repo: Repo, lane_path: str, rel: str, key: str, tool: str) -> None:
    """The exclude entry is shared by every worktree: refused when the hub (or another
    worktree that is no lane) has an untracked file of its own at `rel`, which the entry
    would hide from `git add -A` and hand to `git clean -X`. Only the worktrees no lane can
    have named (Repo.owned_worktrees): git is run plain there, never at a path a lane's
    admin dir `gitdir` says."""
    lanes = {os.path.realpath(r.path) for r in repo.store.lanes() if r.status == "active"}
    for wt in repo.owned_worktrees():
        other = os.path.realpath(wt.path)
        if wt.bare or other == lane_path or other in lanes or not wt.exists:
            continue
        full = os.path.join(other, rel)
        if not os.path.lexists(full):
            continue
        if git.run(["ls-files", "-z", "--", rel], other, check=False).stdout:
            continue  # tracked there: an exclude entry does not hide a tracked file
        why = git.run(["check-ignore", "-v", "--no-index", "--", rel], other, check=False)
        if why.ok and not why.stdout.split("\t", 1)[0].endswith(":/" + rel):
            continue  # ignored there already by its own rule (.gitignore, core.excludesFile)
        raise Refusal(
            "agent_file_conflict",
            f"{full} is an untracked file of that worktree: the info/exclude entry /{rel} "
            f"that agent-setup adds (shared by every worktree) would hide it from git add -A "
            f"and let git clean -X delete it",
            next=[f"git lane exec {key} -- {tool}"],
            alternatives=[
                f"{git.mv_aside(full, full + '.git-lane-bak')} && "
                f"git lane agent-setup {key} --for {tool}"
            ],
            details={"lane": key, "file": full, "why": "untracked in another worktree"},
        )


def _exclude(lane_path: str, rel: str, key: str, tool: str) -> tuple[str, list[str]]:
    """Add `/rel` to the marked block of the shared info/exclude; then make sure git
    really ignores it in the lane (a `.gitignore` may un-ignore it: then refuse)."""
    res = git.run(["rev-parse", "--path-format=absolute", "--git-path", "info/exclude"], lane_path)
    exclude = Path(res.stdout.rstrip("\n"))
    try:
        current = exclude.read_text()
    except FileNotFoundError:
        current = ""
    lines = current.splitlines()
    if BEGIN in lines and END in lines[lines.index(BEGIN) :]:
        b = lines.index(BEGIN)
        e = lines.index(END, b)
        block, before, after = lines[b + 1 : e], lines[:b], lines[e + 1 :]
    else:
        block, before, after = [], lines, []
    entry = "/" + rel
    if entry not in block:
        block.append(entry)
        out = [*before, BEGIN, *block, END, *after]
        exclude.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(exclude, ("\n".join(out) + "\n").encode())
    if git.run(["check-ignore", "-q", "--", rel], lane_path, check=False).returncode != 0:
        raise Refusal(
            "agent_file_conflict",
            f"{rel} is not ignored in lane {key} although {exclude} names it (a .gitignore "
            f"un-ignores it): the file would make the lane dirty and land refuse it",
            next=[f"{git.owner_git(lane_path)} check-ignore -v --no-index -- {git.q(rel)}"],
            alternatives=[f"git lane exec {key} -- {tool}"],
            details={"lane": key, "file": rel, "exclude_file": str(exclude)},
        )
    return str(exclude), block


# -- claude -----------------------------------------------------------------------------
def claude_hook_command(key: str, lane_path: str, python: str, pypath: str) -> str:
    """The PreToolUse command: exit 0 allows, 2 denies; anything else (the interpreter
    missing, a crash) is turned into 2, because Claude Code runs the tool on any other
    exit status."""
    py, pp = git.q(python), git.q(pypath)
    failed = (
        "echo 'git-lane: refused [adapter_facts_unknown]: the git-lane hook could not run "
        f"(exit '\"$s\"'). Next: git lane agent-setup {key} --for claude' >&2"
    )
    return (
        f"{py} -I -S -c {git.q(BOOT)} {pp} claude-hook {git.q(key)} {git.q(lane_path)} {py} {pp}; "
        f's=$?; [ "$s" -eq 0 ] || {{ [ "$s" -eq 2 ] || {failed}; exit 2; }} # {agents.MARK}'
    )


def claude_context_command(key: str, lane_path: str, python: str, pypath: str) -> str:
    return (
        f"{git.q(python)} -I -c {git.q(BOOT)} {git.q(pypath)} claude-context {git.q(key)} "
        f"{git.q(lane_path)} # {agents.MARK}"
    )


def _claude(
    old: bytes | None,
    target: Path,
    key: str,
    tool: str,
    lane_path: str,
    python: str,
    pypath: str,
    enable_hooks: bool = False,
) -> bytes:
    settings: dict[str, Any] = {}
    if old is not None:
        try:
            loaded = json.loads(old)
        except ValueError:
            raise _foreign(target, key, tool, "is not JSON") from None
        if not isinstance(loaded, dict) or not isinstance(loaded.get("hooks", {}), dict):
            raise _foreign(target, key, tool, "is not a settings object")
        settings = loaded
    if enable_hooks:
        settings.pop("disableAllHooks", None)
    if settings.get("disableAllHooks") not in (None, False):
        # Claude Code would run none of the hooks written below: refused, never reported
        # as enforced; the owner drops the key with `--enable-hooks` (the engine's write,
        # through directory fds: never a command that writes the lane's path, which a
        # process of the lane can make a link to a file of the owner's meanwhile)
        raise Refusal(
            "agent_file_conflict",
            f'{target} says "disableAllHooks": {json.dumps(settings.get("disableAllHooks"))}: '
            "Claude Code would run none of the lane's hooks, so nothing would be enforced; "
            "`--enable-hooks` drops that key (the others are kept)",
            next=[f"git lane agent-setup {key} --for {tool} --enable-hooks"],
            details={"lane": key, "file": str(target), "why": "disableAllHooks"},
        )
    pre: dict[str, Any] = {
        "type": "command",
        "command": claude_hook_command(key, lane_path, python, pypath),
        "timeout": 60,
    }
    ctx = {"type": "command", "command": claude_context_command(key, lane_path, python, pypath)}
    wanted: dict[str, list[dict[str, Any]]] = {
        "PreToolUse": [
            {"matcher": FILE_MATCHER, "hooks": [pre]},
            {"matcher": "Bash", "hooks": [pre]},
        ],
        "SessionStart": [{"hooks": [ctx]}],
    }
    hooks = dict(settings.get("hooks") or {})
    for event, groups in wanted.items():
        current = hooks.get(event, [])
        if not isinstance(current, list):
            raise _foreign(target, key, tool, f"has hooks.{event} that is not a list")
        hooks[event] = [*_without_ours(current), *groups]
    settings["hooks"] = hooks
    return (json.dumps(settings, indent=2) + "\n").encode()


def _hooks_on(new: bytes, lane_path: str) -> tuple[bytes, list[str]]:
    """Claude Code runs no hook at all where a settings file says `"disableAllHooks":
    true`. The lane's own settings.local.json saying so was refused by `_claude`; when
    the project's .claude/settings.json or the user's ~/.claude/settings.json says so,
    settings.local.json (which takes precedence over both) gets `"disableAllHooks":
    false`, and a warning says which file had it. The lane's file is read as `_lane_file`
    reads (never through a link, never a FIFO, never past FILE_MAX); one that cannot be
    read so may say anything to Claude Code: it gets the same `false`, and a warning."""
    said = []
    project = Path(lane_path, ".claude", "settings.json")
    try:
        data = _lane_file(lane_path, ".claude/settings.json")
    except OSError as exc:
        data = None
        said.append(
            f"{project} was not read ({exc.strerror or exc}: a symlink, no regular file or "
            f"larger than {FILE_MAX} bytes); the lane's .claude/settings.local.json says "
            '"disableAllHooks": false (it takes precedence) whatever it says, so the hook runs'
        )
    home = Path(os.path.expanduser("~"), ".claude", "settings.json")
    for where in (project, home):
        try:
            raw = data if where is project else _home_file(home)
            if raw is None:
                continue
            loaded = json.loads(raw)
        except (OSError, ValueError):
            continue
        if isinstance(loaded, dict) and loaded.get("disableAllHooks") is True:
            said.append(
                f'{where} sets "disableAllHooks": true; the lane\'s .claude/settings.local.json '
                'now says "disableAllHooks": false (it takes precedence), so the hook runs'
            )
    if not said:
        return new, []
    settings = json.loads(new)
    settings["disableAllHooks"] = False
    return (json.dumps(settings, indent=2) + "\n").encode(), said


def _home_file(where: Path) -> bytes:
    """The owner's own settings file (a dotfiles link is followed: no lane writes there),
    opened O_NONBLOCK, a regular file only, at most FILE_MAX bytes."""
    real = os.path.realpath(where)
    return dirfd.read_file(os.path.dirname(real), os.path.basename(real), FILE_MAX)


def _without_ours(groups: list[Any]) -> list[Any]:
    """The matcher groups with every hook agent-setup wrote taken out (so a second run
    replaces them, never doubles them); a group left empty by that goes too."""
    kept = []
    for g in groups:
        hs = g.get("hooks") if isinstance(g, dict) else None
        if not isinstance(hs, list) or not hs:
            kept.append(g)
            continue
        mine = [h for h in hs if isinstance(h, dict) and agents.MARK in str(h.get("command", ""))]
        if len(mine) == len(hs):
            continue
        kept.append({**g, "hooks": [h for h in hs if h not in mine]} if mine else g)
    return kept


# -- aider ------------------------------------------------------------------------------
def _aider(old: bytes | None, target: Path, key: str, ipath: Path) -> bytes:
    if old is not None and not old.startswith(AIDER_HEAD.encode()):
        raise _foreign(target, key, "aider", "exists and was not written by git lane agent-setup")
    lines = [
        f"{AIDER_HEAD}: lane {key}. Rewritten by `git lane agent-setup {key} --for aider`.",
        "git: true",
        "# aider commits with --no-verify unless told: keep the lane's git hooks on",
        "git-commit-verify: true",
        "auto-commits: true",
        "read:",
        f"  - {json.dumps(str(ipath))}",
    ]
    return ("\n".join(lines) + "\n").encode()


# -- opencode ---------------------------------------------------------------------------
def _opencode(old: bytes | None, target: Path, key: str, ipath: Path, main: str) -> bytes:
    cfg: dict[str, Any] = {"$schema": "https://opencode.ai/config.json"}
    if old is not None:
        try:
            loaded = json.loads(old)
        except ValueError:
            raise _foreign(target, key, "opencode", "is not plain JSON") from None
        if not isinstance(loaded, dict):
            raise _foreign(target, key, "opencode", "is not a config object")
        cfg = loaded
    perm = cfg.get("permission", {})
    if isinstance(perm, str):
        perm = {"*": perm}
    if not isinstance(perm, dict):
        raise _foreign(target, key, "opencode", "has a permission that is not an object")
    bash = perm.get("bash", {})
    if isinstance(bash, str):
        bash = {"*": bash}
    if not isinstance(bash, dict):
        raise _foreign(target, key, "opencode", "has a permission.bash that is not an object")
    for pattern in (
        "git push*",
        "git worktree*",
        "git stash*",
        f"git checkout {main}*",
        f"git switch {main}*",
        "*--no-verify*",
        "*core.hooksPath*",
    ):
        bash.pop(pattern, None)
        bash[pattern] = "deny"  # last match wins: ours go at the end
    perm["bash"] = bash
    perm["external_directory"] = "deny"
    cfg["permission"] = perm
    instr = cfg.get("instructions", [])
    if not isinstance(instr, list):
        raise _foreign(target, key, "opencode", "has instructions that are not a list")
    if str(ipath) not in instr:
        instr = [*instr, str(ipath)]
    cfg["instructions"] = instr
    return (json.dumps(cfg, indent=2) + "\n").encode()


# -- codex ------------------------------------------------------------------------------
def codex_sandbox(repo: Repo, rec: LaneRecord) -> tuple[list[str], dict[str, str]]:
    """(writable roots, shell environment) of Codex's workspace-write sandbox for lane
    `rec`. The roots are what `git lane exec --sandbox` grants of git's directories
    (sandbox.git_dirs, decided from the same facts: the lane's admin dir as git's own
    `gitdir` names it, never as the lane's `.git` file alone says), and no more: the
    admin dir (index, HEAD, reflog, rebase state, and the lane's private object store in
    it), the directories of lane branches and their reflogs. Not rr-cache (shared by every
    lane and the owner: a resolution recorded there is anyone's next one; sync never uses
    rerere). Never the shared `objects/` (guard/objects.py: git does not re-hash what it
    reads, so a writer there rewrites main's commits), nor refs/heads itself (main),
    packed-refs, config, hooks or git-lane's state. The environment points Codex's git at
    the lane's store (as `exec --own-objects` does for Codex itself: its shell commands
    get it even where its shell_environment_policy inherits less); exec and land copy
    what it holds into the shared store, re-hashed. Refused `sandbox_failed` when the
    grants cannot be decided."""
    again = f"git lane agent-setup {rec.key} --for codex"
    try:
        admin = objects.own_admin(repo, rec)  # refused when another gitdir names the lane
        f = sandbox.lane_facts(repo, rec, extra=())
        if f.admin_dir != admin:
            raise sandbox.SandboxError(
                f"the lane's .git names {f.admin_dir}, its record {admin}: not one admin dir"
            )
        dirs = sandbox.git_dirs(f)
        store = os.path.realpath(objects.enroll(repo, rec.path))
        if store != os.path.join(f.admin_dir, "objects"):
            raise sandbox.SandboxError(
                f"the lane's object store {store} is not in its git dir {f.admin_dir}"
            )
        for d in dirs:  # a packed lane ref leaves no directory
            if not os.path.lexists(d):
                os.makedirs(d, exist_ok=True)
            if os.path.realpath(d) != d or not os.path.isdir(d):  # Codex would follow it
                raise sandbox.SandboxError(f"{d} is a symlink or no directory")
    except (sandbox.SandboxError, OSError) as exc:
        fix = exc.next if isinstance(exc, sandbox.SandboxError) else []
        why = str(exc) if isinstance(exc, sandbox.SandboxError) else f"{exc.strerror or exc}"
        raise Refusal(
            "sandbox_failed",
            f"Codex's sandbox for lane {rec.key} could not be decided: {why}; nothing was "
            "printed for Codex",
            next=[*fix, again] if fix else ["git lane doctor"],
            details={"lane": rec.key, "why": why},
        ) from None
    # a hard link planted there beforehand to a file outside (the repository's config, a
    # hook) would let Codex's sandbox write that file: each gets a file of its own first
    # (exec --own-objects, which runs Codex, does so again before every start)
    own = [os.path.realpath(rec.path)]  # Codex's sandbox grants the worktree too
    linked.split_for(repo, dirs, rec.key, again, "nothing was printed for Codex", own)
    roots = [d for d in dirs if d != store]  # the admin dir holds the store
    env = {
        "GIT_OBJECT_DIRECTORY": store,
        "GIT_ALTERNATE_OBJECT_DIRECTORIES": objects.shared(repo.common_dir),
        binding.OBJECTS: store,
    }
    # Codex would grant the shared /tmp and $TMPDIR too (its exclude_* keys are set): the
    # owner's clean gate worktrees and land sockets are made there, so a command of
    # Codex's could change a gate's files before it runs unconfined. Its commands get a
    # temp dir of the lane's own instead, made by the owner where no grant reaches it or
    # its parent (sandbox.codex_tmp: never in CMD's cache dir, which `exec --sandbox`
    # grants with the right to make links: a sandboxed CMD re-pointed a root there at
    # refs/heads, red team 17 F4), removed by release. A link or file at its name (put
    # there by a process outside every sandbox) is removed, never followed, and the dir
    # made anew; then every root is looked at through directory fds (sandbox.hold_roots),
    # as exec --own-objects does again right before Codex starts.
    tmp = sandbox.codex_tmp(f.cache, repo.slug, rec.key)
    try:
        sandbox.make_dir(tmp)
        sandbox.hold_roots([*roots, tmp])
    except (OSError, sandbox.SandboxError) as exc:
        why = (
            f"Codex's temp dir: {exc}"
            if isinstance(exc, sandbox.SandboxError)
            else (f"Codex's temp dir {tmp}: {exc.strerror or exc}")
        )
        raise Refusal(
            "sandbox_failed",
            f"Codex's sandbox for lane {rec.key} could not be decided: {why}; nothing was "
            "printed for Codex",
            next=["git lane doctor"],
            details={"lane": rec.key, "why": why},
        ) from None
    roots.append(tmp)
    env.update({name: tmp for name in ("TMPDIR", "TMP", "TEMP")})
    return roots, env


def _toml_list(items: list[str]) -> str:
    return "[" + ", ".join(json.dumps(i) for i in items) + "]"
