"""Every human rendering of a command's result (the JSON form is the result itself).
Colour only on a terminal, never with NO_COLOR (any non-empty value) or TERM=dumb; never in
JSON. Lines are laid out to fit 100 columns: long facts (paths, full shas, gate output)
belong in `--json`."""

from __future__ import annotations

import json
import os
import sys
import shlex
from collections.abc import Mapping, Sequence
from typing import Any, TextIO


from guard import policy
from guard.errors import join_next
from guard.git import shown

Result = Mapping[str, Any]
WIDTH = 100  # what a line of status or log is laid out to fit
KEY_WIDTH = 20  # a lane key's column in a table: a longer key (up to 63) is cut, with `…`


def key_cell(key: str) -> str:
    """A lane key for a table column: whole when it fits KEY_WIDTH, else its start and
    `…`, so one long key does not push every other row's columns (and log's summaries)
    off the line. The advice lines and `--json` carry the key whole."""
    return key if len(key) <= KEY_WIDTH else key[: KEY_WIDTH - 1] + "…"


def color(stream: TextIO | None = None) -> bool:
    """Colour for `stream` (stdout by default): a terminal, NO_COLOR empty or unset
    (no-color.org), TERM not dumb."""
    s = sys.stdout if stream is None else stream
    try:
        tty = s.isatty()
    except (AttributeError, ValueError):  # a closed or replaced stream
        return False
    return tty and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"


def refused(line: str, stream: TextIO) -> str:
    """A refusal line with `refused` in red when `stream` is a terminal."""
    if not color(stream):
        return line
    return line.replace("refused", "\033[31mrefused\033[0m", 1)


def tilde(path: str | None) -> str:
    """`path` with the home directory shown as `~` (for a person; JSON keeps it whole)."""
    if not path:
        return ""
    home = os.path.expanduser("~").rstrip("/")
    if home and (path == home or path.startswith(home + "/")):
        return "~" + path[len(home) :]
    return path


def table(rows: Sequence[Sequence[str]]) -> list[str]:
    """Rows as columns two spaces apart, each as wide as its widest cell; the last column
    is not padded."""
    if not rows:
        return []
    n = max(len(r) for r in rows)
    widths = [max((len(r[i]) for r in rows if i < len(r)), default=0) for i in range(n)]
    return [
        "  ".join(c.ljust(widths[i]) if i < len(r) - 1 else c for i, c in enumerate(r)).rstrip()
        for r in rows
    ]


_SGR = {"bold": "1", "red": "31", "yellow": "33"}


def _style(text: str, bold: bool = False, fg: str | None = None) -> str:
    codes = ([_SGR["bold"]] if bold else []) + ([_SGR[fg]] if fg else [])
    if not codes or not color():
        return text
    return f"\033[{';'.join(codes)}m{text}\033[0m"


def generic(r: Result) -> str:
    lines = [f"{r.get('code', 'ok')}"]
    for k, v in r.items():
        if k in ("ok", "code") or v in (None, [], {}):
            continue
        lines.append(f"  {k}: {v if not isinstance(v, (dict, list)) else json.dumps(v)}")
    return "\n".join(lines)


def status(r: Result) -> str:
    """`main at 9b98106 · epoch 2 · hub ~/src/project`, the lock and landing lines, then
    one row per lane (PATH with `~`) and its advice on the line below. A state this
    version does not know is shown as it is, its facts as `-`."""
    out = []
    hub = r["hub"]
    head = f"{r['main']['branch']} at {r['main']['sha'][:7]} · epoch {r['epoch']} · "
    if hub.get("path"):
        head += f"hub {tilde(hub['path'])}"
        if hub.get("dirty_paths"):
            head += f" ({len(hub['dirty_paths'])} dirty)"
    else:
        head += "no hub (main is not checked out)"
    out.append(head)
    lk = r.get("lock")
    if lk:
        out.append(f"lock: lane {lk['lane']} is landing (pid {lk['pid']}, since {lk['since']})")
    if r.get("landing"):
        out.append("landing: an unfinished land is recorded; run `git lane reconcile`")
    hidden = int(r.get("released_hidden") or 0)
    more = f"{hidden} released lane(s) hidden: git lane status --all" if hidden else ""
    if not r["lanes"]:
        out.append(more or "no lanes yet: git lane create")
        return "\n".join(out)
    # A/B: commits ahead of main / behind it
    asked = any(ln.get("would_conflict") is not None for ln in r["lanes"])
    rows = [("LANE", "STATE", "FRESH", "DIRTY", "A/B", *(("CONFLICTS",) if asked else ()), "PATH")]
    for ln in r["lanes"]:
        state = str(ln.get("state") or "?")
        if state not in ("active", "orphaned"):
            fresh = dirty = ab = "-"
        else:
            fresh = "yes" if ln.get("fresh") else ("SYNC" if ln.get("sync_required") else "no")
            dirty = "yes" if ln.get("dirty") else ("-" if state == "orphaned" else "no")
            ab = f"{ln.get('ahead', '-')}/{ln.get('behind', '-')}"
        if ln.get("rebase_in_progress") and state == "active":
            state = "rebasing"  # a sync stopped on conflicts
        wc = () if not asked else (_would_conflict(ln.get("would_conflict")),)
        rows.append(
            (key_cell(str(ln.get("key"))), state, fresh, dirty, ab, *wc, tilde(ln.get("path")))
        )
    lines = table(rows)
    out.append(_style(lines[0], bold=True))
    for ln, row, line in zip(r["lanes"], rows[1:], lines[1:], strict=True):
        warn = row[2] == "SYNC" or row[1] not in ("active", "released")
        out.append(_style(line, fg="yellow") if warn else line)
        if ln.get("advice"):
            out.append(f"  {ln['advice']}")
    if more:
        out.append(more)
    return "\n".join(out)


def create(r: Result) -> str:
    ln = r["lane"]
    return (
        f"created lane {ln['key']}: branch {ln['branch']} at {tilde(ln['path'])}"
        f" (GITLANE_PORT {ln['port']})" + _setup_lines(r) + f"\n  {ln['advice']}"
    )


def _setup_lines(r: Result) -> str:
    out = ""
    inc = r.get("included")
    if inc and (inc["files"] or inc["kept"]):
        out += f"\n  .worktreeinclude: {inc['files']:,} file(s), {inc['bytes']:,} bytes copied"
        out += f" ({inc['reflinked']:,} copy-on-write)" if inc["reflinked"] else ""
        out += f", {inc['kept']:,} already there" if inc["kept"] else ""
    run = r.get("setup")
    if run:
        out += (
            f"\n  setup `{policy.brief(run['command'])}` {run['status']} in {run['seconds']:.1f}s"
        )
    return out


def setup(r: Result) -> str:
    return f"lane {r['lane']['key']} set up" + (_setup_lines(r) or "\n  nothing to do")


def release(r: Result) -> str:
    s = f"{r['code']}: lane {r['lane']}"
    if r.get("recover"):
        s += f"\n  discarded {len(r['discarded_commits'])} commit(s); to get them back: {r['recover']}"
    if r.get("lost_commits"):
        s += f"\n  lost for good (their objects could not be kept): {' '.join(r['lost_commits'])}"
    if r.get("kept_modules"):
        # (the path is the owner's common dir and the key; the skipped names are the
        # lane's to write, so only counted here: --json lists them)
        s += f"\n  kept its submodule and nested repositories' git dirs in {_one_line(r['kept_modules'])}"
        if r.get("kept_modules_skipped"):
            s += f" ({len(r['kept_modules_skipped'])} link(s) or special file(s) left out: --json lists them)"
    if r.get("next"):
        s += f"\n  you were in the lane's worktree, which is gone; go to the hub: {r['next'][0]}"
    return s


def reconcile(r: Result) -> str:
    if not r["changes"]:
        return "nothing to reconcile"
    return "\n".join("  " + " ".join(f"{k}={v}" for k, v in ch.items()) for ch in r["changes"])


def repair(r: Result) -> str:
    if not r["changes"]:
        return f"lane {r['lane']}: nothing to repair"
    lines = [f"repaired lane {r['lane']}:"]
    lines += ["  " + " ".join(f"{k}={v}" for k, v in ch.items()) for ch in r["changes"]]
    return "\n".join(lines)


def _one_line(text: str) -> str:
    """Text the lane wrote (a commit subject) as it is when every character prints, else
    quoted with escapes: a newline cannot forge a line of advice, an ESC cannot reach the
    terminal."""
    return text if text.isprintable() else json.dumps(text, ensure_ascii=False)


def sync(r: Result) -> str:
    if r["state"] == "fresh":
        main = str(r.get("main") or "")[:12]
        out = [f"lane {r['lane']} is fresh" + (f" (on main {main})" if main else "")]
        if r.get("next"):
            out.append("Next: " + join_next(r["next"]))
        return "\n".join(out)
    wl = r["worklist"]
    out = [
        f"lane {r['lane']}: conflicts at step {wl['step']} of {wl['total']}: "
        f"{(wl['commit'] or '')[:12]} {_one_line(wl['subject'])}"
    ]
    for f in wl["files"]:  # the lane's names and subject: one line each, no escapes
        out.append(f"  {f['kind']:<16} {shown(f['path'])}")
    out.append(f"resolve them in {r['path']}, then:")
    out.append("Next: " + join_next(r["next"]))
    out.extend(f"  Or: {a}" for a in r.get("alternatives") or [])
    return "\n".join(out)


def abort(r: Result) -> str:
    return f"aborted: lane {r['lane']} back at {r['tip'][:12]} ({r['state']})"


def land(r: Result) -> str:
    if "gate" not in r:  # land --sync stopped on conflicts: the sync's worklist
        return sync(r)
    g = r["gate"]
    gate = (
        "gate off"
        if g["status"] == "off"
        else f"gate `{policy.brief(g['command'])}` {g['status']} in {g['seconds']:.1f}s"
    )
    if g.get("worktree") == "clean" and g.get("why"):
        gate += f" in a clean worktree of the tip ({g['why']})"
    out = [
        f"landed {r['lane']}: main {r['main_before'][:12]} -> {r['main_after'][:12]}, epoch {r['epoch']}, {gate}"
    ]
    out.extend(gate_included_lines(g))
    auto = r.get("auto_sync")
    synced = set(auto["synced"]) if auto else set()
    for k in r.get("made_stale") or []:
        if k not in synced:
            out.append(f"  lane {k} is stale now: git lane sync {k}")
    if auto:
        out.extend(auto_sync_lines(auto))
    return "\n".join(out)


def gate_included_lines(g: Result) -> list[str]:
    """What `.worktreeinclude` copied into a clean gate's worktree, when it copied anything."""
    inc = g.get("included")
    if not inc or not (inc["files"] or inc["skipped"]):
        return []
    line = (
        f"  .worktreeinclude: {inc['files']:,} file(s), {inc['bytes']:,} bytes copied into "
        "the gate's worktree"
    )
    line += f" ({inc['reflinked']:,} copy-on-write)" if inc["reflinked"] else ""
    line += f", {len(inc['skipped']):,} not copied" if inc["skipped"] else ""
    return [line]


def path(r: Result) -> str:
    return str(r["path"])


def sandbox_explain(r: Result) -> str:
    if r["usable"]:
        head = f"sandbox for lane {r['lane']}: Landlock ABI {r['abi']}"
    else:
        head = f"sandbox for lane {r['lane']}: cannot be applied here ({r['why']})"
    lines = [head, "writable (every right):"]
    lines += [f"  {tilde(w)}" for w in r["writable"]]
    if r["private_tmp_under"]:
        lines.append(f"  a private TMPDIR made under {tilde(r['private_tmp_under'])}")
    lines.append("read and execute: " + ", ".join(r["readable"]))
    lines += [f"note: {n}" for n in r["notes"]]
    return "\n".join(lines)


def shellenv(r: Result) -> str:
    return str(r["script"])


def restore_main(r: Result) -> str:
    m, ld = r["main"], r["landed"]
    if r["code"] == "unchanged":
        return f"{m['branch']} is at the last landed tip {m['after'][:12]} (land {ld['epoch']}): nothing to restore"
    was = f" (it was a symbolic ref to {m['was_symref_to']})" if m["was_symref_to"] else ""
    hub = " ; hub carried along" if r["hub"]["state"] == "updated" else ""
    return f"restored {m['branch']}: {m['before'][:12]} -> {m['after'][:12]}, the tip of land {ld['epoch']}{was}{hub}"


def config_get(r: Result) -> str:
    v = r["value"]
    return "" if v is None else (v if isinstance(v, str) else json.dumps(v))


def config_set(r: Result) -> str:
    return f"{r['key']} = {json.dumps(r['value'])}  ({r['file']})"


def config_unset(r: Result) -> str:
    return f"unset {r['key']} ({r['file']})"


def config_list(r: Result) -> str:
    w = max(len(k) for k in r["config"])
    return "\n".join(
        f"{k.ljust(w)}  {json.dumps(v['value'])}   # {v['source']}"
        + (f" ({v['file']})" if v.get("file") else "")
        for k, v in r["config"].items()
    )


# fields every event has (shown in columns) or that say nothing to a reader of the log
_LOG_SKIP = frozenset(
    ("time", "ts", "pid", "host", "kind", "lane", "code", "token", "message", "details", "argv")
)
_LOG_VALUE = 40  # a longer value is left to --json, never cut in the middle


def _brief(v: Any) -> str | None:
    """A value as the log shows it whole, or None to leave it to --json."""
    if v is None or v == [] or v == {} or v is False:
        return None
    if isinstance(v, bool | int | float):
        return str(v).lower() if isinstance(v, bool) else str(v)
    if isinstance(v, str):
        if len(v) == 40 and all(c in "0123456789abcdef" for c in v):
            return v[:12]  # a sha, abbreviated as git does
        return shlex.quote(tilde(v)) if len(tilde(v)) <= _LOG_VALUE else None
    if isinstance(v, list):
        return f"{len(v)} item(s)" if len(v) > 1 else _brief(v[0])
    return None


def _log_code(e: Mapping[str, Any]) -> str:
    """The code, with the one number that says most: a gate's exit status."""
    code = str(e.get("code"))
    gate = (e.get("details") or {}).get("gate") if isinstance(e.get("details"), dict) else None
    if isinstance(gate, dict) and code == "gate_failed" and isinstance(gate.get("exit"), int):
        return f"{code} (exit {gate['exit']})"
    if isinstance(gate, dict) and code == "landed" and gate.get("status"):
        return f"{code} (gate {gate['status']})"
    return code


def _log_summary(e: Mapping[str, Any]) -> list[str]:
    parts = []
    argv = e.get("argv")
    if e.get("kind") == "refusal" and isinstance(argv, list):
        cmd = "git lane " + shlex.join(str(a) for a in argv if a != "--json")
        if len(cmd) <= 2 * _LOG_VALUE:
            parts.append(cmd)
    for k, v in e.items():
        if k in _LOG_SKIP:
            continue
        if k == "gate" and isinstance(v, dict):
            v = v.get("status")
        b = _brief(v)
        if b is not None:
            parts.append(f"{k}={b}")
    return parts


def log(r: Result) -> str:
    """TIME KIND LANE CODE in aligned columns, then as many whole values of a summary as
    fit in 100 columns; the rest of each event is in `git lane log --json`."""
    events = r["events"]
    if not events:
        return "no events"
    head = ("TIME", "KIND", "LANE", "CODE")
    rows = [
        (str(e.get("time")), str(e.get("kind")), key_cell(str(e.get("lane") or "-")), _log_code(e))
        for e in events
    ]
    used = sum(max(len(row[i]) for row in [head, *rows]) + 2 for i in range(4))
    room = WIDTH - used  # long lane keys can leave none: then only the count of fields
    out: list[tuple[str, ...]] = [(*head, "SUMMARY")]
    for e, row in zip(events, rows, strict=True):
        parts = _log_summary(e)
        said: list[str] = []
        if len(" ".join(parts)) <= room:
            said = parts
        else:  # what fits, whole, with room left for the count of the rest: `(+2)`
            for p in parts:
                if len(" ".join([*said, p])) <= room - 5:
                    said.append(p)
            said.append(f"(+{len(parts) - len(said)})")
        out.append((*row, " ".join(said)))
    return "\n".join(table(out))


def install(r: Result) -> str:
    lines = [str(r["code"])]
    for h in r.get("hooks", []):
        extra = f" (runs {h['chained']} too)" if h.get("chained") else ""
        extra += f" (from {h['from']})" if h.get("from") else ""
        lines.append(f"  {h['name']:<22} {h['action']:<9} {h['path']}{extra}")
    for dp in r.get("displaced", []):
        lines.append(f"  moved aside: {dp['from']} -> {dp['to']}")
    if r.get("pinned"):
        p = r["pinned"]
        lines.append(f'  pinned: {p["key"]} = "{p["value"]}" in {p["file"]}')
    return "\n".join(lines)


def doctor(r: Result) -> str:
    marks = {"ok": "ok  ", "warn": "warn", "fail": "FAIL"}
    width = max((len(c["name"]) for c in r["checks"]), default=0)
    lines = []
    for c in r["checks"]:
        mark = marks.get(c["status"], c["status"])
        if c["status"] == "fail":
            mark = _style(mark, fg="red")
        lines.append(f"{mark}  {c['name'].ljust(width)}  {c['message']}")
        if c["fix"] and c["status"] != "ok":
            lines.append(f"      {''.ljust(width)}  fix: {c['fix']}")
    failed = sum(c["status"] == "fail" for c in r["checks"])
    warned = sum(c["status"] == "warn" for c in r["checks"])
    lines.append(
        "doctor: ok" + (f" ({warned} warning(s))" if warned else "")
        if r["ok"]
        else f"doctor: {failed} check(s) failed"
    )
    return "\n".join(lines)


def demo(r: Result) -> str:
    return f"demo finished: {r['summary']}"


def check_git(r: Result) -> str:
    how = "" if r.get("enabled", True) else " (git-lane is disabled: enabled = false)"
    return f"allowed in lane {r['lane']}: git {shlex.join(r['argv'])}{how}"


def check_write(r: Result) -> str:
    return f"allowed: {r['path']} (lane {r['lane']})"


def agent_setup(r: Result) -> str:
    """What was written, then the one command that starts the tool in the lane."""
    out = [f"lane {r['lane']}: {r['tool']} set up at {tilde(r['path'])}"]
    for f in r["files"]:
        out.append(f"  {f['action']:<9} {tilde(f['path'])}")
    if r.get("exclude_file"):
        out.append(f"  ignored   via {tilde(r['exclude_file'])} (git status does not show them)")
    out.append(f"  instructions {tilde(r['instructions_file'])}")
    out.append("start it:")
    out.append(f"  {r['command']}")
    out.append("not enforced: " + "; ".join(r["not_enforced"]))
    return "\n".join(out)


def export(r: Result) -> str:
    n = sum(1 for c in r["commits"] if not c["empty"]) + (1 if r["uncommitted"] else 0)
    extra = " (the last: uncommitted changes)" if r["uncommitted"] else ""
    where = r["output"] or "stdout"
    return (
        f"lane {r['lane']}: {n} message(s){extra}, {len(r['files'])} file(s), "
        f"{r['patch_bytes']:,} bytes -> {tilde(where)}\n"
        + (
            f"apply onto {r['base'][:12]}: {r['apply']} < {shlex.quote(tilde(where))}"
            if r["format"] == "patch"
            else f"a JSON object (the result, with the mbox as `patch`, {r['patch_encoding']}); "
            f"apply onto {r['base'][:12]}: its `patch` with {r['apply']}"
        )
    )


def checkpoint(r: Result) -> str:
    if r["code"] == "nothing_to_checkpoint":
        return f"lane {r['lane']}: nothing to checkpoint (clean at {r['parent'][:12]})"
    return (
        f"lane {r['lane']}: checkpoint {r['commit'][:12]} ({r['paths_count']} path(s)): "
        f"{r['message'].splitlines()[0] if r['message'] else ''}"
    )


# -- gc and cross-rebase ----------------------------------------------------------------------
def size(n: int) -> str:
    """Bytes for a person: B, KB, MB, GB (powers of 1024, one decimal from MB)."""
    if n < 1024:
        return f"{n} B"
    if n < 1024**2:
        return f"{n // 1024} KB"
    if n < 1024**3:
        return f"{n / 1024**2:.1f} MB"
    return f"{n / 1024**3:.1f} GB"


def auto_sync_lines(a: Result) -> list[str]:
    """One line per lane auto_sync synced or left (land, queue)."""
    out = [f"  auto_sync: lane {k} synced onto main" for k in a["synced"]]
    for x in a["left"]:
        paths = x.get("paths") or []
        shown = f": {', '.join(paths[:3])}{', ...' if len(paths) > 3 else ''}" if paths else ""
        out.append(f"  auto_sync: lane {x['lane']} left [{x['code']}]{shown}")
    if a.get("error"):
        out.append(f"  auto_sync: stopped: {' '.join(str(a['error']).splitlines())[:200]}")
    return out


def gc(r: Result) -> str:
    verb = "would release" if r["dry_run"] else "released"
    out = [
        f"gc: {verb} {len(r['released'])} lane(s), {size(r['reclaimed_bytes'])}"
        + (" reclaimable" if r["dry_run"] else " reclaimed")
        + f"; kept {len(r['kept'])} ({size(r['kept_bytes'])})"
    ]
    rows = [[verb, key_cell(x["lane"]), size(x["bytes"]), tilde(x["path"])] for x in r["released"]]
    rows += [
        ["kept", key_cell(x["lane"]), size(x["bytes"]), f"[{x['code']}] {x['message']}"]
        for x in r["kept"]
    ]
    out += ["  " + line for line in table(rows)]
    for x in r["kept"]:
        if x["locked"] is not None:
            who = "by someone else, left as it is" if x["locked_by_other"] else "by git-lane"
            why = shown(x["locked"]) if x["locked"] else "(no reason)"  # the lane can write it
            out.append(f"  {x['lane']}: worktree locked {who}: {why}")
        if x["next"]:
            out.append(f"  {x['lane']}: next: {join_next(x['next'])}")
    for a in r["archives"]:
        out.append(f"  kept: {tilde(a['path'])} ({size(a['bytes'])})")
    return "\n".join(out)


# -- conflicts (issue 12 C) -----------------------------------------------------------------
def _would_conflict(w: list[str] | None) -> str:
    """status --conflicts' cell: `no`, `main,beta`, `-` (the lane cannot be predicted)."""
    if w is None:
        return "-"
    if not w:
        return "no"
    return ",".join(key_cell(k) for k in w[:3]) + (f" (+{len(w) - 3})" if len(w) > 3 else "")


def _paths_cell(paths: Sequence[str], room: int) -> str:
    """Paths on one line, as many whole ones as fit `room`, then `(+N)`."""
    shown_: list[str] = []
    used = 0
    for i, p in enumerate(paths):
        one = json.dumps(p, ensure_ascii=False) if not p.isprintable() or ", " in p else p
        more = f" (+{len(paths) - i - 1})" if i < len(paths) - 1 else ""
        if shown_ and used + len(one) + 2 + len(more) > room:
            return ", ".join(shown_) + f" (+{len(paths) - i})"
        shown_.append(one)
        used += len(one) + 2
    return ", ".join(shown_)


def conflicts(r: Result) -> str:
    """`main at 9b98106 · 3 lanes · 6 pairs: 1 conflict, 1 overlap, 4 clean`, then one row
    per conflicting pair and one per overlapping clean pair, and the lanes left out."""
    c = r["counts"]
    lanes = [v for v in r["lanes"] if v["skipped"] is None]
    out = [
        f"{r['main']['branch']} at {r['main']['sha'][:7]} · {len(lanes)} lane(s) · "
        f"{c['pairs']} pair(s): {c['conflict']} conflict, {c['overlap']} overlap, {c['clean']} clean"
    ]
    rows: list[tuple[str, ...]] = []
    for p in r["pairs"]:
        if p["state"] == "clean":
            continue
        a, b = p["lanes"]
        rows.append(("CONFLICT" if p["conflict"] else "overlap", key_cell(a), key_cell(b)))
    if rows:
        lines = table(rows)
        width = max(len(ln) for ln in lines)
        kept = [p for p in r["pairs"] if p["state"] != "clean"]
        for line, p in zip(lines, kept, strict=True):
            cell = _paths_cell(p["paths"], max(20, WIDTH - width - 2))
            text = line.ljust(width) + "  " + cell
            out.append(_style(text, fg="red") if p["conflict"] else text)
    elif lanes:
        out.append("no pair conflicts, and no two change the same paths")
    for v in r["lanes"]:
        if v["skipped"] is not None:
            sk = v["skipped"]
            nxt = f" Next: {join_next(sk['next'])}" if sk["next"] else ""
            out.append(f"left out: {v['key']} [{sk['code']}]: {sk['message']}.{nxt}")
    if not r["include_dirty"]:
        out.append("(committed work only: --include-dirty adds uncommitted work)")
    return "\n".join(out)


def ready(r: Result) -> str:
    m = r.get("mark")
    if m is None:
        return f"lane {r['lane']} is not marked ready"
    return f"lane {r['lane']} marked ready at {m['tip'][:12]}; the queue lands it: git lane queue"


def queue(r: Result) -> str:
    """One line per landed lane, one per skipped lane with its code, then the counts."""
    out = []
    for ln in r["lanes"]:
        batch = f", batch of {len(ln['batch'])}" if ln.get("batch") else ""
        out.append(
            f"landed  {ln['lane']}: main -> {ln['main_after'][:12]}, epoch {ln['epoch']}{batch}"
        )
        out.extend(gate_included_lines(ln.get("gate") or {}))
    for s in r["skipped"]:
        nxt = f" Next: {' && '.join(s['next'])}" if s.get("next") else ""
        out.append(f"skipped {s['lane']} [{s['code']}]: {s['message']}.{nxt}")
    saved = f", {r['gate_runs_saved']} saved by batching" if r["batch"] > 1 else ""
    out.append(
        f"{len(r['landed'])} landed, {len(r['skipped'])} skipped; main "
        f"{r['main_before'][:12]} -> {r['main_after'][:12]}; {r['gate_runs']} gate run(s){saved}"
    )
    for k in r.get("made_stale") or []:
        out.append(f"  lane {k} is stale now: git lane sync {k}")
    return "\n".join(out)
