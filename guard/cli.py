"""The click CLI: parses, calls one engine function, renders its result as text or JSON,
and is the single error boundary (refusal exit 1, usage exit 2, bug exit 3 with the
traceback written to a crash file)."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from datetime import UTC
from pathlib import Path
from typing import Any

import click

from guard.errors import GitError, Refusal
from guard.repo import Repo


class Ctx:
    def __init__(self, directory: str | None, as_json: bool) -> None:
        self.directory = directory
        self.json = as_json
        self._repo: Repo | None = None

    @property
    def repo(self) -> Repo:
        if self._repo is None:
            self._repo = Repo.discover(self.directory)
        return self._repo

    def peek_repo(self) -> Repo | None:
        if self._repo is not None:
            return self._repo
        try:
            return Repo.discover(self.directory)
        except Exception:
            return None


_state: dict[str, Ctx] = {}


def _color() -> bool:
    return sys.stdout.isatty() and "NO_COLOR" not in os.environ and os.environ.get("TERM") != "dumb"


def _style(text: str, **kw: Any) -> str:
    return click.style(text, **kw) if _color() else text


def emit(ctx: Ctx, result: dict[str, Any], render: Callable[[dict[str, Any]], str] | None = None) -> None:
    if ctx.json:
        sys.stdout.write(json.dumps(result, sort_keys=True, default=str) + "\n")
        return
    text = render(result) if render else _render_generic(result)
    if text:
        sys.stdout.write(text.rstrip("\n") + "\n")
    for w in result.get("warnings") or []:
        sys.stderr.write(f"git-lane: warning: {w}\n")


def _render_generic(r: dict[str, Any]) -> str:
    skip = {"ok", "code"}
    lines = [f"{r.get('code', 'ok')}"]
    for k, v in r.items():
        if k in skip or v in (None, [], {}):
            continue
        lines.append(f"  {k}: {v if not isinstance(v, (dict, list)) else json.dumps(v)}")
    return "\n".join(lines)


def json_option(f: Callable[..., Any]) -> Callable[..., Any]:
    def cb(c: click.Context, _p: click.Parameter, value: bool) -> None:
        if value:
            c.find_object(Ctx).json = True  # type: ignore[union-attr]

    return click.option("--json", "as_json", is_flag=True, expose_value=False, callback=cb, help="Print one JSON object.")(f)


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
    c.obj.json = c.obj.json or as_json


# -- lanes --------------------------------------------------------------------------------
def _render_status(r: dict[str, Any]) -> str:
    out = []
    hub = r["hub"]
    out.append(
        f"main {r['main']['branch']} at {r['main']['sha'][:12]}   epoch {r['epoch']}   "
        f"hub {hub['path'] or '(main is not checked out)'}"
        + (f" ({len(hub['dirty_paths'])} dirty)" if hub["dirty_paths"] else "")
    )
    lk = r.get("lock")
    if lk:
        out.append(f"lock: held by pid {lk['pid']} landing {lk['lane']} since {lk['since']}")
    if r.get("landing"):
        out.append("landing: an unfinished land is recorded; run `git lane reconcile`")
    if not r["lanes"]:
        out.append("no lanes yet: git lane create")
        return "\n".join(out)
    rows = [("LANE", "STATE", "FRESH", "DIRTY", "AHEAD", "BEHIND", "ADVICE")]
    for ln in r["lanes"]:
        if ln["state"] == "released":
            fresh = "-"
        else:
            fresh = "yes" if ln["fresh"] else ("SYNC" if ln["sync_required"] else "no")
        rows.append(
            (
                ln["key"],
                ln["state"] + (" (rebase)" if ln["rebase_in_progress"] else ""),
                fresh,
                "yes" if ln["dirty"] else "no",
                str(ln["ahead"]),
                str(ln["behind"]),
                ln["advice"],
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(6)]
    for n, row in enumerate(rows):
        cells = [row[i].ljust(widths[i]) for i in range(6)] + [row[6]]
        line = "  ".join(cells)
        if n == 0:
            line = _style(line, bold=True)
        elif row[2] == "SYNC" or row[1].startswith("orphaned"):
            line = _style(line, fg="yellow")
        out.append(line)
    return "\n".join(out)


@cli.command()
@click.argument("key", required=False)
@json_option
@pass_ctx
def status(ctx: Ctx, key: str | None) -> None:
    """Show main, the hub, the lock and every lane with the next command to run."""
    from guard import lanes

    emit(ctx, lanes.status(ctx.repo, key), _render_status)


def _render_lane_line(ln: dict[str, Any]) -> str:
    return f"lane {ln['key']}: branch {ln['branch']} at {ln['path']}\n  {ln['advice']}"


@cli.command()
@click.argument("key", required=False)
@click.option("--goal", metavar="ID", help="Goal id: the auto key becomes <goal>-<n>.")
@click.option("--owner-pid", type=int, help="Record this live process as the lane's owner.")
@json_option
@pass_ctx
def create(ctx: Ctx, key: str | None, goal: str | None, owner_pid: int | None) -> None:
    """Create a lane: branch lane/KEY off main, in its own worktree."""
    from guard import lanes

    emit(ctx, lanes.create(ctx.repo, key, goal, owner_pid), lambda r: "created " + _render_lane_line(r["lane"]))


@cli.command()
@click.argument("key", required=False)
@click.option("--confirm", metavar="yes-discard-lane", help="Discard unlanded or uncommitted work.")
@json_option
@pass_ctx
def release(ctx: Ctx, key: str | None, confirm: str | None) -> None:
    """Remove a lane's worktree and branch (refused while it holds unlanded work)."""
    from guard import lanes

    def render(r: dict[str, Any]) -> str:
        s = f"{r['code']}: lane {r['lane']}"
        if r.get("recover"):
            s += f"\n  discarded {len(r['discarded_commits'])} commit(s); to get them back: {r['recover']}"
        return s

    emit(ctx, lanes.release(ctx.repo, key, confirm), render)


@cli.command()
@json_option
@pass_ctx
def reconcile(ctx: Ctx) -> None:
    """Bring the lane registry, the lock and any half-done land in line with git."""
    from guard import lanes

    def render(r: dict[str, Any]) -> str:
        if not r["changes"]:
            return "nothing to reconcile"
        return "\n".join(
            "  " + " ".join(f"{k}={v}" for k, v in ch.items()) for ch in r["changes"]
        )

    emit(ctx, lanes.reconcile(ctx.repo), render)


# -- sync and land ------------------------------------------------------------------------
def _render_sync(r: dict[str, Any]) -> str:
    if r["state"] == "fresh":
        return f"lane {r['lane']} is fresh (on main {str(r.get('main') or '')[:12]})".replace(" (on main )", "")
    wl = r["worklist"]
    out = [
        f"lane {r['lane']}: conflicts at step {wl['step']} of {wl['total']}: "
        f"{(wl['commit'] or '')[:12]} {wl['subject']}"
    ]
    for f in wl["files"]:
        out.append(f"  {f['kind']:<16} {f['path']}")
    out.append("Next: " + " ; ".join(r["next"]))
    return "\n".join(out)


@cli.command()
@click.argument("key", required=False)
@json_option
@pass_ctx
def sync(ctx: Ctx, key: str | None) -> None:
    """Rebase the lane onto main's tip; on conflicts, print the worklist."""
    from guard import sync as mod

    emit(ctx, mod.sync(ctx.repo, key), _render_sync)


@cli.command("continue")
@click.argument("key", required=False)
@json_option
@pass_ctx
def continue_cmd(ctx: Ctx, key: str | None) -> None:
    """After resolving conflicts: check for markers, stage, continue the rebase."""
    from guard import sync as mod

    emit(ctx, mod.continue_(ctx.repo, key), _render_sync)


@cli.command()
@click.argument("key", required=False)
@json_option
@pass_ctx
def abort(ctx: Ctx, key: str | None) -> None:
    """Abort a sync: the lane goes back to its tip from before."""
    from guard import sync as mod

    emit(ctx, mod.abort(ctx.repo, key), lambda r: f"aborted: lane {r['lane']} back at {r['tip'][:12]} ({r['state']})")


@cli.command()
@click.argument("key", required=False)
@click.option("--wait", "wait", is_flag=False, flag_value=-1.0, type=float, default=None, metavar="[SECONDS]",
              help="Wait for the integration lock (for ever, or SECONDS).")
@json_option
@pass_ctx
def land(ctx: Ctx, key: str | None, wait: float | None) -> None:
    """Land the lane: locked, clean, fresh, gate passing, fast-forward of main."""
    from guard import land as mod

    def render(r: dict[str, Any]) -> str:
        g = r["gate"]
        gate = "gate off" if g["status"] == "off" else f"gate `{g['command']}` {g['status']} in {g['seconds']:.1f}s"
        return f"landed {r['lane']}: main {r['main_before'][:12]} -> {r['main_after'][:12]}, epoch {r['epoch']}, {gate}"

    if wait is not None and wait != wait:  # NaN: no deadline could ever be compared
        raise click.BadParameter("SECONDS must be a number", param_hint="--wait")
    w = None if wait is None else (10**9 if wait < 0 else wait)
    emit(ctx, mod.land(ctx.repo, key, w), render)


# -- config and log -----------------------------------------------------------------------
@cli.group()
def config() -> None:
    """Read and write owner settings (config.toml)."""


@config.command("get")
@click.argument("key")
@json_option
@pass_ctx
def config_get(ctx: Ctx, key: str) -> None:
    from guard.config import KEYS

    if key not in KEYS:
        raise Refusal("invalid_config", f"unknown key {key}", next=["git lane config list"], details={"key": key})
    cfg = ctx.repo.config
    res = {"ok": True, "code": "ok", "key": key, "value": cfg.get(key), "source": cfg.sources[key]}
    emit(ctx, res, lambda r: "" if r["value"] is None else (json.dumps(r["value"]) if not isinstance(r["value"], str) else r["value"]))


def _config_file(ctx: Ctx, user: bool) -> Path:
    from guard.config import user_config_path

    return user_config_path() if user else ctx.repo.store.config_path


@config.command("set")
@click.argument("key")
@click.argument("value")
@click.option("--user", is_flag=True, help="Write the user file, not the repository's.")
@json_option
@pass_ctx
def config_set(ctx: Ctx, key: str, value: str, user: bool) -> None:
    from guard import config as cfgmod
    from guard import procs

    procs.forbid_worker("config set")
    parsed = cfgmod.parse_value(key, value)
    path = _config_file(ctx, user)
    cfgmod.write(path, key, parsed)
    repo = ctx.peek_repo()  # `--user` works outside any repository: log only when inside one
    if repo is not None:
        repo.store.event("config_set", key=key, value=parsed, file=str(path))
    emit(ctx, {"ok": True, "code": "ok", "key": key, "value": parsed, "file": str(path)},
         lambda r: f"{r['key']} = {json.dumps(r['value'])}  ({r['file']})")


@config.command("unset")
@click.argument("key")
@click.option("--user", is_flag=True, help="Write the user file, not the repository's.")
@json_option
@pass_ctx
def config_unset(ctx: Ctx, key: str, user: bool) -> None:
    from guard import config as cfgmod
    from guard import procs

    procs.forbid_worker("config unset")
    cfgmod.parse_value(key, "x")  # unknown key refusal
    path = _config_file(ctx, user)
    cfgmod.write(path, key, None)
    repo = ctx.peek_repo()
    if repo is not None:
        repo.store.event("config_unset", key=key, file=str(path))
    emit(ctx, {"ok": True, "code": "ok", "key": key, "file": str(path)}, lambda r: f"unset {r['key']} ({r['file']})")


@config.command("list")
@json_option
@pass_ctx
def config_list(ctx: Ctx) -> None:
    from guard.config import KEYS

    cfg = ctx.repo.config
    items = {k: {"value": cfg.get(k), "source": cfg.sources[k], "help": KEYS[k].help} for k in KEYS}

    def render(r: dict[str, Any]) -> str:
        w = max(len(k) for k in r["config"])
        return "\n".join(
            f"{k.ljust(w)}  {json.dumps(v['value'])}   # {v['source']}" for k, v in r["config"].items()
        )

    emit(ctx, {"ok": True, "code": "ok", "config": items, "warnings": cfg.warnings}, render)


def _parse_since(text: str) -> float:
    import re
    from datetime import datetime

    m = re.fullmatch(r"(\d+)\s*([smhdw])", text.strip())
    if m:
        mult = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}[m.group(2)]
        return time.time() - int(m.group(1)) * mult
    try:
        dt = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise click.BadParameter("use a duration (30m, 2h, 1d) or an ISO time (2026-11-30T10:00)") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.timestamp()


@cli.command("log")
@click.option("--lane", "lane", metavar="KEY", help="Only this lane's events.")
@click.option("--since", metavar="WHEN", help="30m, 2h, 1d or an ISO time.")
@click.option("-n", "limit", type=int, default=None, help="Only the newest N events.")
@json_option
@pass_ctx
def log_cmd(ctx: Ctx, lane: str | None, since: str | None, limit: int | None) -> None:
    """The audit log: every action and every refusal."""
    t0 = _parse_since(since) if since else None
    evs = [
        e
        for e in ctx.repo.store.events()
        if (lane is None or e.get("lane") == lane) and (t0 is None or float(e.get("ts") or 0) >= t0)
    ]
    if limit is not None:
        evs = evs[-limit:] if limit > 0 else []

    def render(r: dict[str, Any]) -> str:
        out = []
        for e in r["events"]:
            extra = {k: v for k, v in e.items() if k not in ("time", "ts", "pid", "host", "kind", "lane", "code")}
            brief = " ".join(f"{k}={json.dumps(v)[:60]}" for k, v in list(extra.items())[:4])
            out.append(f"{e.get('time')}  {e.get('kind'):<12} {e.get('lane') or '-'!s:<14} {e.get('code'):<24} {brief}")
        return "\n".join(out) or "no events"

    emit(ctx, {"ok": True, "code": "ok", "events": evs}, render)


# -- hooks and health ---------------------------------------------------------------------
@cli.command()
@click.option("--force", is_flag=True, help="When a foreign <hook> and <hook>.legacy both exist, move the .legacy aside (.bak) and chain the hook.")
@click.option("--hooks-path", is_flag=True, help="Install into core.hooksPath when it is set.")
@json_option
@pass_ctx
def install(ctx: Ctx, force: bool, hooks_path: bool) -> None:
    """Install git-lane's hooks into the repository (shared by every worktree)."""
    from guard import hookinstall

    emit(ctx, hookinstall.install(ctx.repo, force=force, use_hooks_path=hooks_path), hookinstall.render)


@cli.command()
@json_option
@pass_ctx
def uninstall(ctx: Ctx) -> None:
    """Remove git-lane's hooks and restore the hooks they chained."""
    from guard import hookinstall

    emit(ctx, hookinstall.uninstall(ctx.repo), hookinstall.render)


@cli.command()
@json_option
@pass_ctx
def doctor(ctx: Ctx) -> None:
    """Check hooks, config and state; exit 1 when a check fails."""
    from guard import doctor as mod

    res = mod.doctor(ctx.repo)
    emit(ctx, res, mod.render)
    if not res["ok"]:
        raise SystemExit(1)


@cli.command()
@click.option("--keep", is_flag=True, help="Leave the throwaway repository behind.")
@json_option
@pass_ctx
def demo(ctx: Ctx, keep: bool) -> None:
    """Walk through lanes, a conflict, sync and land on a throwaway repository."""
    from guard import demo as mod

    emit(ctx, mod.run(keep=keep, quiet=ctx.json), lambda r: f"demo finished: {r['summary']}")


# -- the error boundary -------------------------------------------------------------------
def _crash(ctx: Ctx | None, exc: BaseException) -> str:
    import tempfile

    repo = ctx.peek_repo() if ctx is not None else None
    dirs = [repo.store.crash_dir] if repo is not None else []
    dirs.append(Path(tempfile.gettempdir()) / "git-lane-crash")
    import traceback

    body = "".join(traceback.format_exception(exc))
    if isinstance(exc, GitError):
        body += "\n" + str(exc)
    try:
        cwd = os.getcwd()
    except OSError as e:
        cwd = f"(unknown: {e.strerror})"
    name = f"{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}.txt"
    problems = []
    for d in dirs:  # the state dir may be what is broken: never let the report itself crash
        try:
            d.mkdir(parents=True, exist_ok=True)
            (d / name).write_text(f"argv: {sys.argv!r}\ncwd: {cwd}\n\n{body}")
            return str(d / name)
        except OSError as e:
            problems.append(f"{d}: {e.strerror}")
    return "nowhere (" + "; ".join(problems) + ")"


def main(argv: list[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    want_json = "--json" in args
    _state.clear()
    code = 0
    try:
        rv = cli.main(args=args, prog_name="git lane", standalone_mode=False)
        code = rv if isinstance(rv, int) else 0
    except Refusal as r:
        ctx = _state.get("ctx")
        if ctx is not None and (ctx.json or want_json):
            sys.stdout.write(json.dumps(r.to_dict(), sort_keys=True, default=str) + "\n")
        sys.stderr.write(r.line() + "\n")
        repo = ctx.peek_repo() if ctx is not None else None
        if repo is not None and r.code not in ("not_a_git_repo",):
            repo.store.event(
                "refusal", lane=r.details.get("lane"), code=r.code, message=r.message, argv=args, details=r.details
            )
        code = 1
    except click.exceptions.Exit as e:
        code = e.exit_code
    except click.exceptions.Abort:
        code = 130
    except click.ClickException as e:
        if want_json:
            sys.stdout.write(json.dumps({"ok": False, "code": "usage_error", "message": e.format_message(),
                                         "next": ["git lane --help"], "details": {}}) + "\n")
        e.show()
        code = 2
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    except KeyboardInterrupt:
        code = 130
    except Exception as exc:  # the one place a bug is caught: file it, say where
        where = _crash(_state.get("ctx"), exc)
        if want_json:
            sys.stdout.write(json.dumps({"ok": False, "code": "internal_error", "message": str(exc).splitlines()[0] if str(exc) else type(exc).__name__,
                                         "next": [f"cat '{where}'"], "details": {"crash_file": where}}) + "\n")
        sys.stderr.write(f"git-lane: internal error ({type(exc).__name__}); details written to {where}\n")
        code = 3
    sys.stdout.flush()
    raise SystemExit(code)
