"""`git lane install` / `git lane uninstall`: put git-lane's hooks (pre-commit, pre-rebase,
reference-transaction) into the hooks directory every worktree shares (`<common-dir>/hooks`,
or `core.hooksPath` with `--hooks-path`).

Our scripts are recognised by their `# ID: git-lane-hook` line. A foreign hook already in
place is kept as `<hook>.legacy` and chained (our script runs it with the same arguments
and input; its failure fails the hook); uninstall puts it back. The pre-commit framework's
own script is the exception: it runs `<hook>.legacy` itself, so behind it our script
takes the `.legacy` place (exactly what `pre-commit install` does when it finds ours) and
an older `.legacy` moves one step down the chain. Nothing is ever overwritten: a move
that would need to is refused (`hook_conflict`) unless `--force`, which renames the file
in the way to `<file>.bak` (never chained, listed in the result).

Also runnable without the CLI: `python -m guard install|uninstall`, which is
what `install/install-hooks` and `install/uninstall-hooks` call."""

from __future__ import annotations

import os
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from guard import git, lane
from guard.errors import Refusal
from guard.hookcheck import PY_LINE, render_hook
from guard.repo import Repo
from guard.results import InstallResult
from guard.store import atomic_write

HOOKS = ("pre-commit", "pre-rebase", "reference-transaction")
OUR_ID = "# ID: git-lane-hook"
# the `# ID:` line of the pre-commit framework's hook script (pre_commit/commands/install_uninstall.py)
FRAMEWORK_IDS = ("# ID: 138fd403232d2ddd5efb44317e38bf03",)
FRAMEWORK_TYPES = frozenset({"pre-commit", "pre-rebase"})  # of ours, the types it can own


# -- what a hook file is ----------------------------------------------------------------
def _text(path: Path) -> str | None:
    try:
        return path.read_bytes()[:65536].decode("utf-8", "replace")
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None
    except OSError:
        return ""


def kind(path: Path) -> str:
    """'absent', 'ours', 'framework' (the pre-commit framework's script) or 'foreign'."""
    if not os.path.lexists(path):
        return "absent"
    text = _text(path)
    if text is None:
        return "foreign" if os.path.lexists(path) else "absent"
    lines = set(text.splitlines())
    if OUR_ID in lines:
        return "ours"
    if any(i in lines for i in FRAMEWORK_IDS):
        return "framework"
    return "foreign"


def script_bytes(name: str, python: str | None = None) -> bytes:
    """The exact bytes install writes for hook `name`: its source rendered with
    hooks/common.sh (hookcheck.render_hook) and the Python that runs git-lane embedded."""
    return render_hook(name, python or sys.executable).encode("utf-8")


def _strip_python(text: str) -> str:
    embedded = ("GITLANE_PYTHON=", "GITLANE_PYPATH=")
    return "\n".join(ln for ln in text.splitlines() if not ln.startswith(embedded))


def embedded_python(text: str) -> str | None:
    for ln in text.splitlines():
        if ln.startswith("GITLANE_PYTHON="):
            words = shlex.split(ln[len("GITLANE_PYTHON=") :]) if ln != PY_LINE else []
            return words[0] if words else None
    return None


def same_but_python(installed: str, name: str) -> bool:
    """Is `installed` our script for `name` (rendered), up to the embedded Python and the
    directory it imports guard from?"""
    return _strip_python(installed) == _strip_python(script_bytes(name).decode("utf-8"))


def guarding(repo: Repo) -> bool:
    """Has git-lane been installed here: is the reference-transaction hook git runs
    (from core.hooksPath, else <common-dir>/hooks) git-lane's, on its own or behind the
    pre-commit framework's? Files only. Without it nothing guards main, and main moving
    by a plain commit is no news."""
    d = repo.hooks_dir or common_hooks_dir(repo)
    k = kind(d / "reference-transaction")
    if k == "framework":
        k = kind(d / "reference-transaction.legacy")
    return k == "ours"


def installed(d: Path) -> dict[str, str]:
    """What `git lane status` asks on every run, by reading files only (no git, no
    subprocess): each of our hooks in `d` as "ok", "missing" (no git-lane script where
    git looks), "not_executable" or "outdated" (not what install writes, up to the
    embedded Python)."""
    out: dict[str, str] = {}
    for name in HOOKS:
        path = d / name
        k = kind(path)
        if k == "framework":
            path, k = path.with_name(f"{name}.legacy"), kind(path.with_name(f"{name}.legacy"))
        if k != "ours":
            out[name] = "missing"
        elif not os.access(path, os.X_OK):
            out[name] = "not_executable"
        elif not same_but_python(_text(path) or "", name):
            out[name] = "outdated"
        else:
            out[name] = "ok"
    return out


# -- where hooks go ---------------------------------------------------------------------
@dataclass(frozen=True)
class HooksPath:
    value: str
    scope: str  # local, global, system, command, ...
    included: str = ""  # the file it came from, when an include pulled it into a scope


def hooks_path_setting(repo: Repo) -> HooksPath | None:
    """core.hooksPath as the common config (not a lane's worktree config) sees it."""
    res = git.run(
        ["config", "-z", "--show-origin", "--show-scope", "--type=path", "--get", "core.hooksPath"],
        repo.common_dir,
        check=False,
    )
    if not res.ok or not res.stdout.strip("\0"):
        return None
    scope, origin, value = [*res.stdout.split("\0"), "", "", ""][:3]
    f = os.path.join(repo.common_dir, origin[len("file:") :]) if origin.startswith("file:") else ""
    # `git config --unset` edits the scope's own file; a value an include.path (or
    # includeIf) pulled in lives in the included file, which must be named
    own = {"local": os.path.join(repo.common_dir, "config")}.get(scope)
    included = f if f and own is not None and os.path.realpath(f) != os.path.realpath(own) else ""
    return HooksPath(value=value, scope=scope, included=included)


def _unset_cmd(hp: HooksPath) -> str:
    if hp.scope in ("global", "system", "worktree"):
        return f"git config --{hp.scope} --unset core.hooksPath"
    if hp.scope == "command":
        # core.hooksPath comes from the environment: what follows runs without it
        return "unset GIT_CONFIG_COUNT GIT_CONFIG_PARAMETERS"
    if hp.included:
        return f"git config --file {git.q(hp.included)} --unset-all core.hooksPath"
    return "git config --unset core.hooksPath"


def _absolute_hooks_path(repo: Repo, hp: HooksPath, unset: str) -> list[str]:
    """Keep core.hooksPath, made absolute the way git resolves it in this worktree."""
    if hp.scope == "command" or repo.toplevel is None:
        return []
    where = git.q(str(Path(os.path.realpath(repo.toplevel)) / hp.value))
    set_ = unset.replace("--unset-all core.hooksPath", f"core.hooksPath {where}")
    set_ = set_.replace("--unset core.hooksPath", f"core.hooksPath {where}")
    return [f"{set_} && git lane install --hooks-path"]


def common_hooks_dir(repo: Repo) -> Path:
    return Path(os.path.realpath(repo.common_dir)) / "hooks"


def target_dir(repo: Repo, use_hooks_path: bool) -> Path:
    hp = hooks_path_setting(repo)
    if hp is None:
        return common_hooks_dir(repo)
    unset = _unset_cmd(hp)
    if not use_hooks_path:
        raise Refusal(
            "hooks_path_set",
            f"core.hooksPath is set to {hp.value} ({hp.scope} config), so git does not run the hooks "
            f"in {common_hooks_dir(repo)}",
            next=[f"{unset} && git lane install", "git lane install --hooks-path"],
            details={"hooks_path": hp.value, "scope": hp.scope},
        )
    path = Path(hp.value)
    if not path.is_absolute():
        raise Refusal(
            "hooks_path_relative",
            f"core.hooksPath is the relative path {hp.value}; git resolves it in each worktree, so "
            "lanes would not share the hooks installed there",
            next=[f"{unset} && git lane install"],
            alternatives=_absolute_hooks_path(repo, hp, unset),
            details={"hooks_path": hp.value, "scope": hp.scope},
        )
    if path.exists() and not path.is_dir():
        raise Refusal(
            "hooks_path_set",
            f"core.hooksPath is {hp.value} ({hp.scope} config), which is not a directory: git runs no hooks at all",
            next=[f"{unset} && git lane install"],
            details={"hooks_path": hp.value, "scope": hp.scope},
        )
    return path


# -- install ----------------------------------------------------------------------------
@dataclass
class Plan:
    name: str
    path: Path  # where our script goes
    chained: Path | None  # the hook our script runs after itself, if any
    moves: list[tuple[Path, Path]] = field(default_factory=list)  # (src, dst), in order
    conflicts: list[Path] = field(default_factory=list)  # files a move would overwrite


def _bak(path: Path) -> Path:
    cand = path.with_name(path.name + ".bak")
    n = 1
    while os.path.lexists(cand):
        n += 1
        cand = path.with_name(f"{path.name}.bak{n}")
    return cand


def plan(d: Path, name: str) -> Plan:
    h = d / name
    leg = d / f"{name}.legacy"
    leg2 = d / f"{name}.legacy.legacy"
    kh, kl = kind(h), kind(leg)
    if kh == "framework" and name in FRAMEWORK_TYPES:
        # pre-commit's script runs <hook>.legacy itself: we go there, behind it
        if kl in ("absent", "ours"):
            return Plan(name, leg, leg2 if os.path.lexists(leg2) else None)
        p = Plan(name, leg, leg2, moves=[(leg, leg2)])
        if os.path.lexists(leg2):
            p.conflicts.append(leg2)
        return p
    if kh == "ours" and kl == "framework" and name in FRAMEWORK_TYPES:
        # the framework chained behind us would run itself as its own legacy: swap
        return Plan(name, leg, None, moves=[(leg, h)])
    if kh in ("absent", "ours"):
        return Plan(name, h, leg if os.path.lexists(leg) else None)
    p = Plan(name, h, leg, moves=[(h, leg)])  # a foreign hook: keep it as .legacy
    if os.path.lexists(leg):
        p.conflicts.append(leg)
    return p


def run(repo: Repo, force: bool = False, use_hooks_path: bool = False) -> InstallResult:
    # Refused to workers even without --force: the hooks embed the Python that runs
    # them, so a worker re-installing "the same" hooks from its own interpreter (a venv
    # in its lane) would have every later hook run code the lane controls.
    lane.forbid_worker("install", "git lane install" + (" --hooks-path" if use_hooks_path else ""))
    d = target_dir(repo, use_hooks_path)
    plans = [plan(d, n) for n in HOOKS]
    conflicts = [c for p in plans for c in p.conflicts]
    if conflicts and not force:
        raise Refusal(
            "hook_conflict",
            "to chain the existing hooks git-lane would have to overwrite "
            + ", ".join(str(c) for c in conflicts)
            + "; merge those hooks by hand and remove the extra file, then install again, or let "
            "--force move the one in the way aside",
            next=[
                "git lane install --force  # renames "
                + ", ".join(c.name for c in conflicts)
                + " to *.bak"
            ],
            alternatives=["git lane install"],
            details={"conflicts": [str(c) for c in conflicts], "hooks_dir": str(d)},
        )
    d.mkdir(parents=True, exist_ok=True)
    displaced: list[dict[str, str]] = []
    results = []
    changed = False
    for p in plans:
        for c in p.conflicts:
            bak = _bak(c)
            os.replace(c, bak)
            displaced.append({"from": str(c), "to": str(bak)})
        for src, dst in p.moves:
            os.replace(src, dst)
        want = script_bytes(p.name)
        cur = p.path.read_bytes() if p.path.is_file() and not p.path.is_symlink() else None
        if cur == want and os.access(p.path, os.X_OK) and not p.moves:
            action = "unchanged"
        else:
            if p.path.is_symlink():
                p.path.unlink()
            atomic_write(p.path, want, mode=0o755)
            action = "created" if cur is None else "updated"
            changed = True
        changed = changed or bool(p.moves)
        results.append(
            {
                "name": p.name,
                "path": str(p.path),
                "action": action,
                "chained": str(p.chained)
                if p.chained is not None and os.path.lexists(p.chained)
                else None,
                "moved": [{"from": str(s), "to": str(t)} for s, t in p.moves],
            }
        )
    res: InstallResult = {
        "ok": True,
        "code": "installed" if changed or displaced else "unchanged",
        "hooks_dir": str(d),
        "python": sys.executable,
        "hooks": results,
        "displaced": displaced,
    }
    from guard import objects

    # an older git-lane listed sandboxed lanes' stores as alternates of the shared store
    # (a lane could shadow objects written later): installing again repairs that
    objects.forget(repo)
    pinned = _pin_master(repo)
    if pinned:
        res["pinned"] = pinned
        res["code"] = "installed"
    from guard import landed

    # where main stands as the hooks start guarding it: doctor and restore-main then see
    # a move of main past the hooks before the first land, as they do after one
    base = landed.record_baseline(repo)
    if base is not None:
        res["baseline"] = base
    if changed or displaced or pinned:
        repo.store.event(
            "install", hooks_dir=str(d), hooks=results, displaced=displaced, pinned=pinned
        )
    return res


def _pin_master(repo: Repo) -> dict[str, str] | None:
    """A repository whose protected branch is `master` only because no `main` exists yet
    gets `main_branch = "master"` written into its config. Unpinned, any way of creating a
    `main` branch would move the protection off master (main wins the auto choice), and
    `git branch -c <x> main` (and -m) writes the new branch outside a ref transaction,
    where no hook sees it."""
    from guard import config

    try:
        cfg = repo.reload_config()
        if cfg.sources.get("main_branch") != "default" or repo.main_branch != "master":
            return None
        config.write(repo.store.config_path, "main_branch", "master")
    except Refusal:
        return None  # no main branch yet, or a config the owner must fix first
    repo.reload_config()
    return {"key": "main_branch", "value": "master", "file": str(repo.store.config_path)}


# -- uninstall --------------------------------------------------------------------------
def _uninstall_dir(d: Path) -> list[dict[str, Any]]:
    out = []
    for name in HOOKS:
        h = d / name
        leg = d / f"{name}.legacy"
        leg2 = d / f"{name}.legacy.legacy"
        kh = kind(h)
        if kh == "ours":
            if os.path.lexists(leg):
                os.replace(leg, h)
                out.append({"name": name, "path": str(h), "action": "restored", "from": str(leg)})
            else:
                h.unlink()
                out.append({"name": name, "path": str(h), "action": "removed"})
        elif kh == "framework" and kind(leg) == "ours":
            if os.path.lexists(leg2):
                os.replace(leg2, leg)
                out.append(
                    {"name": name, "path": str(leg), "action": "restored", "from": str(leg2)}
                )
            else:
                leg.unlink()
                out.append({"name": name, "path": str(leg), "action": "removed"})
    return out


def uninstall(repo: Repo) -> InstallResult:
    lane.forbid_worker("uninstall")
    dirs = [common_hooks_dir(repo)]
    hp = hooks_path_setting(repo)
    if hp is not None and Path(hp.value).is_absolute() and Path(hp.value).is_dir():
        dirs.append(Path(hp.value))
    results: list[dict[str, Any]] = []
    seen = set()
    for d in dirs:
        key = os.path.realpath(d)
        if key in seen or not d.is_dir():
            continue
        seen.add(key)
        results.extend(_uninstall_dir(d))
    if results:
        repo.store.event("uninstall", hooks=results)
    return {
        "ok": True,
        "code": "uninstalled" if results else "not_installed",
        "hooks_dirs": [str(d) for d in dirs],
        "hooks": results,
    }
