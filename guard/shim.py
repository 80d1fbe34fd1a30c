"""The shims' Python slow path: `main(["git", *argv])` (and `write` / `edit`, which live in
guard/files.py). shims/git comes here only for what it does not decide in sh; this module
gathers the facts (GitFacts) from the binding `git lane exec` recorded and from the real
git, asks guard.shimpolicy.decide_git, and then execs the real git or refuses.

Standard library only (it runs before every such git call): guard.git, guard.config and
guard.errors are, and click, psutil and plumbum are never imported here. A fact it cannot
establish (git gives no answer, a config file cannot be read, the binding is incomplete)
refuses [shim_facts_unknown]; nothing passes by default."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from guard import binding, git, shimpolicy
from guard.errors import Refusal

VIA = "GITLANE_SHIM_VIA"  # what a shim last handed a call to (shims/common.sh gs_cand)
SELF = "GITLANE_SHIM_SELF"  # the sh shim that started this Python


def main(argv: Sequence[str]) -> int:
    """`main(["git", *args])` / `["write", ...]` / `["edit", ...]`: the shim's exit status."""
    tool, rest = (argv[0], list(argv[1:])) if argv else ("", [])
    if tool == "git":
        return _guarded(lambda: main_git(rest), ["git", *rest])
    if tool in ("write", "edit"):
        import importlib

        files = importlib.import_module("guard.files")  # write/edit: guard/files.py
        run = files.main_write if tool == "write" else files.main_edit
        return _guarded(lambda: int(run(rest)), [tool, *rest])
    sys.stderr.write("usage: python -m guard.shim git|write|edit ARGS...\n")
    return 2


def _guarded(body: Callable[[], int], argv: list[str]) -> int:
    from guard import boundary

    def state() -> Path | None:
        common = os.environ.get(binding.COMMON)
        return Path(common) / "git-lane" if common and os.path.isdir(common) else None

    return boundary.guarded(body, argv, lambda: False, state)


# -- the real git -------------------------------------------------------------------------
def _shim_dirs(env: Mapping[str, str]) -> list[str]:
    dirs = [env.get(binding.SHIMS_DIR, "")]
    me = env.get(SELF, "")
    if me:
        dirs.append(os.path.dirname(me) or ".")
    try:
        from guard.resources import data_dir

        dirs.append(str(data_dir("shims")))
    except FileNotFoundError:
        pass
    return [os.path.realpath(d) for d in dirs if d]


def is_shim(path: str, env: Mapping[str, str]) -> bool:
    real = os.path.realpath(path)
    me = env.get(SELF, "")
    if me and os.path.exists(me) and real == os.path.realpath(me):
        return True
    return os.path.dirname(real) in _shim_dirs(env) or os.path.realpath(
        os.path.dirname(path) or "."
    ) in _shim_dirs(env)


def _runnable(path: str) -> bool:
    return bool(path) and os.path.isfile(path) and os.access(path, os.X_OK)


def find_real(tool: str, recorded: str, env: Mapping[str, str]) -> str | None:
    """The program to run for `tool` (shims/common.sh gs_find, the same walk): `recorded`
    when it is a real one, else the first `tool` on PATH outside the shim directories;
    after GITLANE_SHIM_VIA's program, the one that follows it."""
    via = env.get(VIA, "")
    chosen: str | None = None
    last: str | None = None
    cands = [recorded] if recorded else []
    cands += [os.path.join(p or ".", tool) for p in env.get("PATH", "").split(":")]
    for c in cands:
        if chosen is not None and not via:
            break
        if not _runnable(c) or is_shim(c, env):
            continue
        last = c
        if via and os.path.exists(via) and os.path.samefile(c, via):
            chosen = None
            continue
        if chosen is None:
            chosen = c
    return chosen or last


# -- the facts ------------------------------------------------------------------------------
def _unknown(key: str, what: str, **details: object) -> Refusal:
    return Refusal(
        "shim_facts_unknown",
        f"lane {key}'s git shim cannot tell {what}, so it refuses rather than guess",
        next=["git-lane doctor"],
        details={"lane": key, "fact": what, **details},
    )


def _read_first_line(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="surrogateescape") as f:
            return f.readline().rstrip("\n")
    except OSError:
        return None


def gitfile_target(path: str) -> str | None:
    """What a `.git` file says, read as git reads it (the whole file, not a line): the
    text after `gitdir: ` when the file is exactly that with one optional trailing
    newline; None for anything else (a second line, a CR, a NUL), which git could read
    otherwise than the shim."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read(1 << 16)
    except OSError:
        return None
    text = raw.decode("utf-8", "surrogateescape")
    text = text[:-1] if text.endswith("\n") else text
    if not text.startswith("gitdir: ") or any(c in text for c in "\n\r\0"):
        return None
    return text[len("gitdir: ") :] or None


def lane_git_dir(key: str, lane_path: str) -> str:
    named = gitfile_target(os.path.join(lane_path, ".git"))
    if named is None:
        raise _unknown(key, f"the lane's git dir ({lane_path}/.git is not one line `gitdir: DIR`)")
    gd = os.path.realpath(os.path.join(lane_path, named))
    common = os.environ.get(binding.COMMON, "")
    if common and os.path.dirname(gd) != os.path.join(os.path.realpath(common), "worktrees"):
        raise _unknown(
            key, f"the lane's git dir ({lane_path}/.git points at {gd}, not a worktree of {common})"
        )
    back = _read_first_line(os.path.join(gd, "gitdir"))  # the worktree that git dir serves
    if not back or os.path.realpath(os.path.dirname(back)) != os.path.realpath(lane_path):
        raise _unknown(
            key, f"the lane's git dir ({lane_path}/.git points at {gd}, another worktree's)"
        )
    return gd


def owner_config(key: str, b: binding.Binding) -> dict[str, str]:
    """enabled, main_branch, sync_policy as the hooks read them (config.hook_view), plus
    worker_land, from the user file exec started with and the repository's (which wins)."""
    import tomllib

    from guard.config import CONFIG_MAX, hook_view, toml_loads

    base = b.xdg_config_home or (os.path.join(b.home, ".config") if b.home else "")
    files = [os.path.join(base, "git-lane", "config.toml")] if base else []
    files.append(os.path.join(b.state, "config.toml"))
    out = {"enabled": "true", "main_branch": "", "sync_policy": "on_land_mandatory"}
    out["worker_land"] = "deny"
    for path in files:
        if not os.path.lexists(path):
            continue
        try:  # to the engine's bound, past it EFBIG (red team 17 F3); a FIFO never opened
            raw = git.read_regular(path, limit=CONFIG_MAX)
        except OSError as exc:
            raise _unknown(key, f"what {path} says ({exc.strerror})", file=path) from None
        text = raw.decode("utf-8", "surrogateescape")
        seen = hook_view(text)
        if seen is None:  # a main_branch no branch can have: what to guard is not known
            raise _unknown(key, f"which branch {path} names as main", file=path)
        out.update(seen)
        try:
            wl = toml_loads(text).get("worker_land")
        except (tomllib.TOMLDecodeError, UnicodeDecodeError):
            wl = None
        if isinstance(wl, str):
            out["worker_land"] = wl
    return out


def _git(args: list[str], cwd: str, key: str, what: str) -> git.GitResult:
    try:
        return git.run(args, cwd, check=False)
    except OSError as exc:
        raise _unknown(key, f"{what} (git did not start: {exc.strerror})") from None


def _main_name(key: str, configured: str, common: str) -> str:
    if configured:
        return configured
    res = _git(
        ["for-each-ref", "--format=%(refname)", "refs/heads/main", "refs/heads/master"],
        common,
        key,
        "which branch is main",
    )
    if not res.ok:
        raise _unknown(key, "which branch is main (git for-each-ref failed)")
    found = set(res.lines())
    return "main" if "refs/heads/main" in found or not found else "master"


def _must_sync(key: str, policy: str, main: str, common: str) -> bool:
    from guard import policy as pol

    if policy not in pol.POLICIES:
        policy = "on_land_mandatory"  # what the hooks read as unknown: the safe answer
    if policy == "land_time_only":
        return False
    tip = f"refs/heads/lane/{key}"
    res = _git(["merge-base", "--is-ancestor", f"refs/heads/{main}", tip], common, key, "freshness")
    if res.returncode not in (0, 1):
        raise _unknown(key, f"whether lane {key} is fresh (git merge-base exited {res.returncode})")
    fresh = res.returncode == 0
    if fresh or policy == "on_land_mandatory":
        return pol.sync_required(policy, fresh)
    mb = git.merge_base(common, f"refs/heads/{main}", tip)
    if not mb:
        return True
    lane_paths = git.changed_paths(common, mb, tip)
    main_paths = git.changed_paths(common, mb, f"refs/heads/{main}")
    return pol.sync_required(policy, fresh, lane_paths, main_paths)


def gather_git(
    b: binding.Binding,
    argv: Sequence[str],
    env: Mapping[str, str],
    cwd: str,
    cfg: Mapping[str, str] | None = None,
) -> shimpolicy.GitFacts:
    """The facts decide_git needs for `git ARGV` in lane `b` (`cfg`: owner_config's, read
    again when not given). Raises shim_facts_unknown for what cannot be established."""
    key = b.lane
    check_binding(b)
    cfg = cfg if cfg is not None else owner_config(key, b)
    lane_path = os.path.realpath(b.lane_path)
    common = os.path.realpath(b.common)
    gd = lane_git_dir(key, lane_path)
    head_line = _read_first_line(os.path.join(gd, "HEAD"))
    if head_line is None:
        raise _unknown(key, f"which branch lane {key} has checked out ({gd}/HEAD)")
    head = head_line[5:] if head_line.startswith("ref: ") else None
    p = shimpolicy.parse(argv)
    here = cwd
    for d in p.chdirs:
        here = os.path.join(here, d) if d else here
    here = here if os.path.isdir(here) else cwd

    aliases: dict[str, str] = {}
    while (name := shimpolicy.alias_needed(argv, aliases)) is not None:
        cfg_args = [w for kv in p.configs for w in ("-c", kv)]
        cfg_args += [f"--config-env={kv}" for kv in p.config_env]
        other = p.git_dir if p.git_dir is not None else env.get("GIT_DIR")
        if other:  # the repository git will read the alias from (git.run scrubs GIT_DIR)
            cfg_args += ["--git-dir", os.path.join(here, other)]
        res = _git([*cfg_args, "config", "--get", f"alias.{name}"], here, key, "aliases")
        if res.returncode == 0:
            aliases[name.lower()] = res.stdout.rstrip("\n")
        elif res.returncode == 1:
            aliases[name.lower()] = ""  # no such alias: an external git-NAME, or a typo
            break
        else:
            raise _unknown(key, f"what git {name} is (git config exited {res.returncode})")
    aliases = {k: v for k, v in aliases.items() if v}

    main = _main_name(key, cfg["main_branch"], common)
    mutating = not (
        p.cmd is None
        or p.cmd == "lane"
        or (p.cmd.lower() not in aliases and shimpolicy.read_only(p.cmd, p.args))
    )
    must_sync = mutating and _must_sync(key, cfg["sync_policy"], main, common)
    exec_path = ""
    maybe_external = p.cmd not in shimpolicy.BUILTINS or p.cmd in shimpolicy.MAYBE_SCRIPTS
    if "GIT_EXEC_PATH" in env or p.exec_path is not None or (p.cmd and maybe_external):
        res = _git(["--exec-path"], common, key, "git's exec path")
        if not res.ok:
            raise _unknown(key, "the real git's exec path (git --exec-path failed)")
        exec_path = res.stdout.rstrip("\n")

    def is_rev(name: str) -> bool:
        res = git.run(["rev-parse", "-q", "--verify", f"{name}^{{commit}}"], here, check=False)
        return res.ok

    def long_options(cmd: str, sub: str | None) -> frozenset[str] | None:
        return _long_options(key, here, cmd, sub)

    def is_builtin(name: str) -> bool:
        if name in shimpolicy.BUILTINS and name not in shimpolicy.MAYBE_SCRIPTS:
            return True  # no question to git on the common path
        if not builtins:
            res = _git(["--list-cmds=builtins"], here, key, "git's own commands")
            if not res.ok:
                raise _unknown(key, "which commands are built into git (--list-cmds failed)")
            builtins.update(res.lines())
        return name in builtins

    def fetch_refspecs() -> list[str] | None:
        res = git.run(
            ["config", "--get-regexp", r"^remote\..*\.fetch$"], here, check=False, scrub=False
        )
        if res.returncode not in (0, 1):
            return None
        return [ln.split(" ", 1)[1] for ln in res.lines() if " " in ln]

    def remote_branch(name: str) -> str | None:
        res = _git(["for-each-ref", "--format=%(refname)", "refs/remotes/"], here, key, "remotes")
        if not res.ok:
            raise _unknown(key, "which remote-tracking branches there are (for-each-ref failed)")
        return next((r for r in res.lines() if r.endswith("/" + name)), None)

    def update_refs_config() -> bool:
        res = _git(["config", "--type=bool", "--get", "rebase.updateRefs"], here, key, "config")
        if res.returncode not in (0, 1):
            raise _unknown(
                key, f"whether rebase.updateRefs is on (git config exited {res.returncode})"
            )
        return res.stdout.strip() == "true"

    def config_value(name: str) -> str | None:
        res = _git(["config", "--get", name], here, key, "config")
        if res.returncode not in (0, 1):
            raise _unknown(key, f"the value of {name} (git config exited {res.returncode})")
        return res.stdout.rstrip("\n") if res.returncode == 0 else None

    builtins: set[str] = set()
    facts = shimpolicy.GitFacts(
        lane=key,
        lane_path=lane_path,
        lane_git_dir=gd,
        common=common,
        cwd=os.path.realpath(cwd),
        head=head,
        main=main,
        must_sync=must_sync,
        rebase_in_progress=os.path.isdir(os.path.join(gd, "rebase-merge"))
        or os.path.isdir(os.path.join(gd, "rebase-apply")),
        worker_land=cfg["worker_land"] == "allow",
        home=b.home,
        xdg_config_home=b.xdg_config_home,
        exec_path=exec_path,
        aliases=aliases,
        is_rev=is_rev,
        long_options=long_options,
        is_builtin=is_builtin,
        fetch_refspecs=fetch_refspecs,
        gitfile=gitfile,
        remote_branch=remote_branch,
        exec_env_path=env.get(binding.PATH_AT_EXEC),
        which=which,
        writable=writable,
        update_refs_config=update_refs_config,
        config_value=config_value,
        sandboxed=bool(env.get(binding.SANDBOX)),
    )
    return facts


def gitfile(path: str) -> str | None:
    """The git dir a `.git` file at PATH names (realpath), None when it is no such file."""
    if not os.path.isfile(path):
        return None
    named = gitfile_target(path)
    if named is None:
        return None
    return os.path.realpath(os.path.join(os.path.dirname(path), named))


def writable(path: str) -> bool:
    """Can this process write PATH, or make it or replace it: it or any parent writable
    (one not there yet counts by its parent)."""
    d = os.path.realpath(path)
    while True:
        if os.path.lexists(d) and os.access(d, os.W_OK):
            return True
        parent = os.path.dirname(d)
        if parent == d:
            return False
        d = parent


def which(name: str, search: str) -> str | None:
    """The file `name` is on the PATH-like `search` (realpath), as execvp finds it."""
    for d in search.split(":"):
        cand = os.path.join(d or ".", name)
        if os.path.isfile(cand) and os.access(cand, os.X_OK):
            return os.path.realpath(cand)
    return None


def _long_options(key: str, here: str, cmd: str, sub: str | None) -> frozenset[str] | None:
    """The long options `git CMD [SUB]` knows, from its --git-completion-helper-all (both
    forms of each: --x and --no-x), or None when it gives no such list."""
    if cmd == "fast-import":
        return None  # it takes no parse-options flags (and writes a crash report)
    argv = [cmd, *([sub] if sub else []), "--git-completion-helper-all"]
    res = _git(argv, here, key, f"git {cmd}'s options")
    words = {w.rstrip("=") for w in res.stdout.split() if w.startswith("--") and w != "--"}
    if not res.ok or not words:
        return None
    return frozenset(words)


def check_binding(b: binding.Binding) -> None:
    if not b.lane_path or not os.path.isdir(b.lane_path):
        raise _unknown(b.lane, f"the lane's worktree (GITLANE_LANE_PATH={b.lane_path!r})")
    if not b.common or not os.path.isdir(os.path.join(b.common, "refs")):
        raise _unknown(b.lane, f"the repository (GITLANE_COMMON={b.common!r})")


def main_git(argv: list[str]) -> int:
    env = os.environ
    b = binding.from_env(env)
    if b is None:  # shims/git execs unbound calls itself; here only when run by hand
        real = find_real("git", env.get(binding.REAL_GIT, ""), env)
        if real is None:
            sys.stderr.write("git-lane: git shim: no git on PATH outside the shims\n")
            return 127
        _exec(real, argv)
    assert b is not None
    if not _runnable(b.real_git) or is_shim(b.real_git, env):
        raise _unknown(b.lane, f"which git to run (GITLANE_REAL_GIT={b.real_git!r})")
    real = find_real("git", b.real_git, env) or b.real_git
    try:
        cwd = os.getcwd()
    except OSError as exc:
        raise _unknown(b.lane, f"where it runs ({exc.strerror})") from None
    check_binding(b)
    for name in (binding.HOME_AT_EXEC, binding.XDG_AT_EXEC):
        if name not in env:  # exec sets both, '' for an unset one
            raise _unknown(
                b.lane, f"which user configuration exec started with ({name} is not set)"
            )
    if binding.PATH_AT_EXEC not in env:
        raise _unknown(b.lane, f"which PATH exec started with ({binding.PATH_AT_EXEC} is not set)")
    cfg = owner_config(b.lane, b)
    if cfg["enabled"] != "false":  # enabled = false: everything passes
        refusal = shimpolicy.decide_git(argv, env, gather_git(b, argv, env, cwd, cfg))
        if refusal is not None:
            raise refusal
    _exec(real, argv)
    return 0  # not reached


def _exec(real: str, argv: Sequence[str]) -> None:
    os.environ[VIA] = real
    sys.stdout.flush()
    os.execv(real, [real, *argv])
