"""The cache a confined gate gets (red team 17 gate F1). The land a sandboxed `git lane
exec` runs for its CMD (the land socket's land child, gate.CONFINE) confines the gate
under the lane's grants; it once pointed the gate's XDG_CACHE_HOME and PRE_COMMIT_HOME at
CMD's own private cache dir (sandbox.cache_env), which CMD writes as it likes before it
asks to land: a pre-commit hook repository planted there stood in for the real one, and a
tip the gate fails in any fresh environment landed. The confined gate now gets a fresh,
empty cache dir in its own private temp dir (which CMD cannot write), removed with it
after the gate whatever happened; CMD's cache dir is neither named to it nor granted.
The owner's own land (and queue) run the gate unconfined, with the owner's environment:
unchanged."""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import Repo, git, lane
from sandboxhelp import NEEDS_LANDLOCK

try:
    import pre_commit  # noqa: F401

    HAVE_PRE_COMMIT = True
except ImportError:
    HAVE_PRE_COMMIT = False


def _last_json(out: str) -> dict[str, object]:
    for line in reversed(out.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            return dict(json.loads(line))
    raise AssertionError(out)


def _said(text: str, tag: str) -> dict[str, str]:
    """The `TAG k=v k=v` line a script printed (the last one)."""
    lines = [ln for ln in text.splitlines() if ln.startswith(tag + " ")]
    assert lines, (tag, text[-3000:])
    return dict(w.split("=", 1) for w in lines[-1].split()[1:])


@NEEDS_LANDLOCK
@pytest.mark.skipif(not HAVE_PRE_COMMIT, reason="needs pre-commit in this python")
def test_socket_gate_does_not_read_cmds_private_cache(
    repo: Repo, gitlane_on_path: Path, tmp_path: Path
) -> None:
    """The red team's reproduction: CMD commits BROKEN, plants a hook repo whose
    `nobroken` is `true` in its own PRE_COMMIT_HOME with a db.db row naming it for the
    real (repo, rev), and lands. The gate (pre-commit run) must clone the real hook repo
    into a cache of its own, and fail."""
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    git(hooks, "init", "-q")
    (hooks / ".pre-commit-hooks.yaml").write_text(
        "- id: nobroken\n  name: nobroken\n  entry: ./check.sh\n  language: script\n"
    )
    (hooks / "check.sh").write_text(
        '#!/bin/sh\nif grep -l BROKEN "$@"; then echo found BROKEN; exit 1; fi\n'
    )
    (hooks / "check.sh").chmod(0o755)
    git(hooks, "add", "-A")
    git(hooks, "commit", "-qm", "hooks")
    rev = git(hooks, "rev-parse", "HEAD").stdout.strip()
    hub = repo
    hub.commit(hub.path, "a.txt", "base\n")
    hub.commit(
        hub.path,
        ".pre-commit-config.yaml",
        f"repos:\n- repo: {hooks}\n  rev: {rev}\n  hooks:\n  - id: nobroken\n",
    )
    assert hub.lane("install").rc == 0
    hub.config("gate_command", f"{sys.executable} -m pre_commit run --all-files")
    hub.config("worker_land", "allow")
    path = hub.create("alpha")
    before = hub.sha()
    plant = tmp_path / "plant.py"
    plant.write_text(
        textwrap.dedent(
            f"""
            import os, sqlite3
            d = os.environ["PRE_COMMIT_HOME"]
            fake = os.path.join(d, "fake")
            os.makedirs(fake, exist_ok=True)
            with open(os.path.join(fake, ".pre-commit-hooks.yaml"), "w") as f:
                f.write('- id: nobroken\\n  name: nobroken\\n  entry: "true"\\n  language: system\\n')
            db = sqlite3.connect(os.path.join(d, "db.db"))
            db.execute("CREATE TABLE IF NOT EXISTS repos (repo TEXT NOT NULL, ref TEXT NOT NULL,"
                       " path TEXT NOT NULL, PRIMARY KEY (repo, ref))")
            db.execute("CREATE TABLE IF NOT EXISTS configs (path TEXT NOT NULL, PRIMARY KEY (path))")
            db.execute("INSERT INTO repos VALUES (?, ?, ?)", ({str(hooks)!r}, {rev!r}, fake))
            db.commit()
            """
        )
    )
    script = tmp_path / "cmd.sh"
    script.write_text(
        "set -e\n"
        "echo BROKEN > a.txt\n"
        "git commit -qam broken\n"
        f"{sys.executable} {plant}\n"
        "git lane land --json || true\n"
    )
    r = lane("exec", "--sandbox", "alpha", "--", "sh", str(script), cwd=path, timeout=300)
    res = _last_json(r.stdout)
    assert res["code"] == "gate_failed", (res["code"], "a tip with BROKEN landed", r.stderr[-2000:])
    assert "found BROKEN" in r.stderr, r.stderr[-2000:]  # the real hook ran, and failed
    assert hub.sha() == before


# The gate reports what it was given and what it could do: its cache (named by both
# variables, empty when it starts), whether it can write there, and whether it can write
# CMD's cache dir (its path handed over in a file of the hub CMD cannot write).
GATE = textwrap.dedent(
    """\
    mine=$(ls -A "$XDG_CACHE_HOME" 2>&1 | tr '\\n' ,)
    touch "$XDG_CACHE_HOME/gate-was-here" && w=yes || w=no
    cmd=$(cat {where})
    touch "$cmd/from-gate" 2>/dev/null && c=yes || c=no
    echo GATE cache=$XDG_CACHE_HOME pc=$PRE_COMMIT_HOME tmp=$TMPDIR seen=$mine wrote=$w cmd=$c
    {end}
    """
)


@NEEDS_LANDLOCK
@pytest.mark.parametrize(
    ("worktree", "end"), [("lane", "true"), ("clean", "exit 1")], ids=["lane-pass", "clean-fail"]
)
def test_confined_gate_gets_a_fresh_cache_removed_after_it(
    repo: Repo, gitlane_on_path: Path, tmp_path: Path, worktree: str, end: str
) -> None:
    """Whatever the gate's worktree and outcome: XDG_CACHE_HOME and PRE_COMMIT_HOME name a
    new empty dir in the gate's private TMPDIR (what CMD left in its cache is not there),
    writable to the gate; CMD's cache dir is not writable to it; the dir is gone after."""
    hub = repo
    hub.commit(hub.path, "a.txt", "base\n")
    assert hub.lane("install").rc == 0
    hub.config("worker_land", "allow")
    hub.config("gate_worktree", worktree)
    handover = tmp_path / "cmd-cache-path"  # readable to all, writable to none of them
    hub.config("gate_command", GATE.format(where=handover, end=end))
    path = hub.create("alpha")
    before = hub.sha()
    script = (
        "set -e\n"
        "echo CMD cache=$XDG_CACHE_HOME pc=$PRE_COMMIT_HOME\n"
        'mkdir -p "$PRE_COMMIT_HOME" && echo planted > "$XDG_CACHE_HOME/planted"\n'
        "echo x > a.txt && git commit -qam edit\n"
        "git lane land --json || true\n"
    )
    # CMD's cache dir is known before exec makes it: ask a first exec
    first = lane("exec", "--sandbox", "alpha", "--", "sh", "-c", 'echo CMD cache=$XDG_CACHE_HOME',
                 cwd=path)  # fmt: skip
    cmd_cache = _said(first.stdout, "CMD")["cache"]
    assert cmd_cache and os.path.isdir(cmd_cache), first.stdout + first.stderr
    handover.write_text(cmd_cache)
    r = lane("exec", "--sandbox", "alpha", "--", "sh", "-c", script, cwd=path, timeout=300)
    res = _last_json(r.stdout)
    assert res["code"] == ("landed" if end == "true" else "gate_failed"), r.stderr[-2000:]
    assert (hub.sha() != before) == (end == "true")
    cmd = _said(r.stdout, "CMD")
    gate = _said(r.stdout + r.stderr, "GATE")
    assert cmd["cache"] == cmd_cache
    assert gate["cache"] != cmd_cache and not gate["cache"].startswith(cmd_cache + "/")
    assert gate["pc"] == os.path.join(gate["cache"], "pre-commit")
    assert gate["cache"].startswith(gate["tmp"] + "/"), gate  # in the gate's private dir
    assert gate["seen"] == "", gate  # fresh: nothing CMD planted
    assert gate["wrote"] == "yes", gate
    assert gate["cmd"] == "no", gate  # CMD's cache dir is not granted to the gate
    assert not os.path.exists(os.path.join(cmd_cache, "from-gate"))
    assert os.path.exists(os.path.join(cmd_cache, "planted"))  # CMD's own, left as it is
    assert not os.path.lexists(gate["cache"]) and not os.path.lexists(gate["tmp"])


def test_owners_gate_keeps_the_owners_cache(repo: Repo, gitlane_on_path: Path) -> None:
    """The owner's land runs the gate unconfined, in the owner's environment: its
    XDG_CACHE_HOME (and an unset PRE_COMMIT_HOME) as the owner has them."""
    hub = repo
    hub.commit(hub.path, "a.txt", "base\n")
    assert hub.lane("install").rc == 0
    hub.config("gate_command", "echo GATE cache=$XDG_CACHE_HOME pc=${PRE_COMMIT_HOME-unset}")
    path = hub.create("alpha")
    hub.commit(path, "b.txt", "b\n")
    r = hub.lane("land", "alpha")
    assert r.rc == 0, r.stderr
    gate = _said(r.stderr, "GATE")
    assert gate == {"cache": os.environ["XDG_CACHE_HOME"], "pc": "unset"}
