"""Every human rendering of a command's result (the JSON form is the result itself).
Colour only on a terminal, never with NO_COLOR or TERM=dumb."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from typing import Any

Result = Mapping[str, Any]


def color() -> bool:
    return sys.stdout.isatty() and "NO_COLOR" not in os.environ and os.environ.get("TERM") != "dumb"


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
        line = "  ".join([row[i].ljust(widths[i]) for i in range(6)] + [row[6]])
        if n == 0:
            line = _style(line, bold=True)
        elif row[2] == "SYNC" or row[1].startswith("orphaned"):
            line = _style(line, fg="yellow")
        out.append(line)
    return "\n".join(out)


def create(r: Result) -> str:
    ln = r["lane"]
    return f"created lane {ln['key']}: branch {ln['branch']} at {ln['path']}\n  {ln['advice']}"


def release(r: Result) -> str:
    s = f"{r['code']}: lane {r['lane']}"
    if r.get("recover"):
        s += f"\n  discarded {len(r['discarded_commits'])} commit(s); to get them back: {r['recover']}"
    if r.get("next"):
        s += f"\n  you were in the lane's worktree, which is gone; go to the hub: {r['next'][0]}"
    return s


def reconcile(r: Result) -> str:
    if not r["changes"]:
        return "nothing to reconcile"
    return "\n".join("  " + " ".join(f"{k}={v}" for k, v in ch.items()) for ch in r["changes"])


def sync(r: Result) -> str:
    if r["state"] == "fresh":
        main = str(r.get("main") or "")[:12]
        out = [f"lane {r['lane']} is fresh" + (f" (on main {main})" if main else "")]
        if r.get("next"):
            out.append("Next: " + " ; ".join(r["next"]))
        return "\n".join(out)
    wl = r["worklist"]
    out = [
        f"lane {r['lane']}: conflicts at step {wl['step']} of {wl['total']}: "
        f"{(wl['commit'] or '')[:12]} {wl['subject']}"
    ]
    for f in wl["files"]:
        out.append(f"  {f['kind']:<16} {f['path']}")
    out.append(f"resolve them in {r['path']}, then:")
    out.append("Next: " + " ; ".join(r["next"]))
    if r.get("alternatives"):
        out.append("  Or: " + " ; ".join(r["alternatives"]))
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
        else f"gate `{g['command']}` {g['status']} in {g['seconds']:.1f}s"
    )
    out = [
        f"landed {r['lane']}: main {r['main_before'][:12]} -> {r['main_after'][:12]}, epoch {r['epoch']}, {gate}"
    ]
    for k in r.get("made_stale") or []:
        out.append(f"  lane {k} is stale now: git lane sync {k}")
    return "\n".join(out)


def path(r: Result) -> str:
    return str(r["path"])


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
        f"{k.ljust(w)}  {json.dumps(v['value'])}   # {v['source']}" for k, v in r["config"].items()
    )


def log(r: Result) -> str:
    out = []
    for e in r["events"]:
        extra = {
            k: v
            for k, v in e.items()
            if k not in ("time", "ts", "pid", "host", "kind", "lane", "code")
        }
        brief = " ".join(
            f"{k}={json.dumps(v, default=str)[:60]}" for k, v in list(extra.items())[:4]
        )
        out.append(
            f"{e.get('time')}  {e.get('kind')!s:<12} {e.get('lane') or '-'!s:<14} {e.get('code')!s:<24} {brief}"
        )
    return "\n".join(out) or "no events"


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
