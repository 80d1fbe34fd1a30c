"""The kernel sandbox (`git lane exec --sandbox`, Landlock): real kernel, real processes.

Inside the sandbox every vector the shims stop only on PATH (the real git by its path with
hooks off, `printf > ref`, Python's open(), truncate) is stopped by the kernel with EACCES,
and normal lane work (edit, add, commit, rebase onto main, git lane sync/status, Python)
still works. Skipped only where the kernel has no usable Landlock."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from enginehelp import hard_link_planted, link_on_mains_way
from sandboxhelp import NEEDS_LANDLOCK
from conftest import Repo, git, lane
from test_exec_agent import FRESH, SCRIPT, _cases, _check

from guard import sandbox
from guard.commands.exec import ROOT_MODES

_ABI = sandbox.abi()
pytestmark = NEEDS_LANDLOCK
REAL_GIT = os.path.realpath(shutil.which("git") or "/usr/bin/git")

# try NAME CMD...: "CASE NAME RC" and the output, for each attempt
TRY = r"""
try() {
	name=$1
	shift
	out=$("$@" 2>&1 </dev/null)
	printf 'CASE %s %s\n' "$name" "$?"
	printf '%s\n' "$out" | sed 's/^/    | /'
}
"""


def _run(hub: Repo, tmp_path: Path, body: str, *args: str, key: str = "alpha") -> Any:
    script = tmp_path / f"script-{key}.sh"
    script.write_text(TRY + body)
    return hub.lane("exec", "--sandbox", key, "--", "sh", str(script), *args)


def _rcs(out: str) -> dict[str, int]:
    return {ln.split()[1]: int(ln.split()[2]) for ln in out.splitlines() if ln.startswith("CASE ")}


def _main_move(hub: Repo, name: str) -> str:
    """The owner moves main (hooks off for one command: the owner's escape hatch)."""
    (hub.path / name).write_text(name + "\n")
    hub.git("add", name)
    hub.git("-c", "core.hooksPath=/dev/null", "commit", "-q", "-m", f"main: {name}")
    return hub.sha() or ""


ESCAPES = r"""
RG=$1 HUB=$2 COMMON=$3 BETA=$4 SHA=$5
try update_ref_main "$RG" -c core.hooksPath=/dev/null update-ref refs/heads/main HEAD
try tag_main "$RG" -c core.hooksPath=/dev/null tag -f main HEAD
try symref_main "$RG" -c core.hooksPath=/dev/null symbolic-ref refs/heads/main refs/heads/lane/alpha
try commit_in_hub "$RG" -C "$HUB" -c core.hooksPath=/dev/null commit -q --allow-empty -m x
try config_hookspath "$RG" config core.hooksPath /dev/null
try printf_main sh -c 'printf "%s\n" "$1" > "$2/refs/heads/main"' - "$SHA" "$COMMON"
try packed_refs sh -c 'printf "%s refs/heads/main\n" "$1" >> "$2/packed-refs"' - "$SHA" "$COMMON"
try config sh -c 'printf "[core]\n\thooksPath = /dev/null\n" >> "$1/config"' - "$COMMON"
try hook_edit sh -c 'printf "exit 0\n" > "$1/hooks/reference-transaction"' - "$COMMON"
try hook_new sh -c 'printf "exit 0\n" > "$1/hooks/post-checkout"' - "$COMMON"
try shallow sh -c 'printf "%s\n" "$1" > "$2/shallow"' - "$SHA" "$COMMON"
try grafts sh -c 'printf "%s\n" "$1" > "$2/info/grafts"' - "$SHA" "$COMMON"
try hub_file sh -c 'printf x >> "$1/a.txt"' - "$HUB"
try hub_new sh -c 'printf x > "$1/planted.txt"' - "$HUB"
try hub_rm rm -f "$HUB/a.txt"
try truncate_hub truncate -s 0 "$HUB/a.txt"
try other_lane sh -c 'printf x > "$1/planted.txt"' - "$BETA"
try state_event sh -c 'printf "{}\n" >> "$1/git-lane/events.jsonl"' - "$COMMON"
try state_new sh -c 'printf x > "$1/git-lane/planted"' - "$COMMON"
try state_lane_rm rm -f "$COMMON/git-lane/lanes/beta.json"
try landed_ref sh -c 'mkdir -p "$1/refs/git-lane/landed" && printf "%s\n" "$2" > "$1/refs/git-lane/landed/99"' - "$COMMON" "$SHA"
try python_open python3 -c 'import sys; open(sys.argv[1] + "/refs/heads/main", "w").write(sys.argv[2] + "\n")' "$COMMON" "$SHA"
try python_replace python3 -c 'import os, sys; p = sys.argv[1] + "/refs/heads/main.new"; open(p, "w").write(sys.argv[2] + "\n"); os.replace(p, sys.argv[1] + "/refs/heads/main")' "$COMMON" "$SHA"
"""

DENIED = [
    "update_ref_main",
    "tag_main",
    "symref_main",
    "commit_in_hub",
    "config_hookspath",
    "printf_main",
    "packed_refs",
    "config",
    "hook_edit",
    "hook_new",
    "shallow",
    "grafts",
    "hub_file",
    "hub_new",
    "hub_rm",
    "truncate_hub",
    "other_lane",
    "state_event",
    "state_new",
    "state_lane_rm",
    "landed_ref",
    "python_open",
    "python_replace",
]


def _snapshot(hub: Repo, beta: Path) -> dict[str, Any]:
    common = hub.common_dir
    files = [
        common / "config",
        common / "hooks" / "reference-transaction",
        hub.path / "a.txt",
        common / "git-lane" / "lanes" / "beta.json",
    ]
    return {
        "refs": git(hub.path, "for-each-ref", "--format=%(refname) %(objectname)").stdout,
        "files": {str(f): f.read_bytes() for f in files},
        "absent": [
            p.exists()
            for p in (
                common / "shallow",
                common / "info" / "grafts",
                common / "hooks" / "post-checkout",
                common / "packed-refs",
                hub.path / "planted.txt",
                beta / "planted.txt",
                common / "git-lane" / "planted",
            )
        ],
    }


def test_kernel_stops_every_escape(hub: Repo, tmp_path: Path) -> None:
    lane_path = hub.create("alpha")
    beta = hub.create("beta")
    hub.commit(lane_path, "work.txt", "lane work\n")
    before = _snapshot(hub, beta)
    main = hub.sha() or ""
    r = _run(hub, tmp_path, ESCAPES, REAL_GIT, str(hub.path), str(hub.common_dir), str(beta), main)
    assert r.rc == 0, r.stderr
    rcs = _rcs(r.stdout)
    assert sorted(rcs) == sorted(DENIED), r.stdout
    allowed = [name for name in DENIED if rcs[name] == 0]
    assert not allowed, r.stdout
    # the kernel said no: EACCES (git wraps it in its own words, naming the lock or file)
    for block in r.stdout.split("CASE ")[1:]:
        name = block.split()[0]
        if name not in ("config_hookspath",):  # git says "could not lock config file"
            assert "ermission denied" in block, block
    assert hub.sha() == main
    assert _snapshot(hub, beta) == before


@pytest.mark.parametrize("shape", ["read_through_link", "symbolic_ref"])
def test_exec_sandbox_refuses_to_start_while_main_is_no_plain_ref(
    hub: Repo, tmp_path: Path, shape: str
) -> None:
    """Red team 14G F6: main made, by an earlier plain write, a symbolic link git reads
    through to the lane's admin HEAD (or a symbolic ref to the lane's branch, unseen on
    git 2.39): the sandbox grants CMD that file, so a plain write of it moved main with
    no ref transaction at all. exec --sandbox refuses to start (main_not_plain, nothing
    run) until restore-main has made main plain; then CMD runs."""
    lane_path = hub.create("alpha")
    main = hub.sha() or ""
    admin = Path(git(lane_path, "rev-parse", "--absolute-git-dir").stdout.strip())
    evil = git(hub.path, "commit-tree", "-p", main, "-m", "evil", f"{main}^{{tree}}").stdout.strip()
    link = hub.common_dir / "refs" / "heads" / "main"
    if shape == "read_through_link":
        git(lane_path, "switch", "-q", "--detach", "main")
        target = admin / "HEAD"
        link.unlink()
        os.symlink(os.path.relpath(target, link.parent), link)
    else:
        target = hub.common_dir / "refs" / "heads" / "lane" / "alpha"
        git(hub.path, "update-ref", "refs/heads/lane/alpha", main)
        git(hub.path, "symbolic-ref", "refs/heads/main", "refs/heads/lane/alpha")  # unseen
    assert hub.sha() == main
    ran = lane_path / "attempted"  # (in the lane: CMD may write there)
    cmd = f"printf '%s\\n' {evil} > {shlex.quote(str(target))}; touch {shlex.quote(str(ran))}"
    r = hub.lane("exec", "--sandbox", "alpha", "--", "sh", "-c", cmd)
    assert r.rc == 1 and "refused [main_not_plain]" in r.stderr, r.stderr
    assert "Next: git lane restore-main && git lane exec --sandbox alpha -- sh -c " in r.stderr
    assert not ran.exists() and hub.sha() == main
    assert hub.lane("restore-main").rc == 0
    r = hub.lane("exec", "--sandbox", "alpha", "--", "touch", str(lane_path / "ran"))
    assert r.rc == 0 and (lane_path / "ran").exists(), r.stderr


@NEEDS_LANDLOCK
@pytest.mark.parametrize("shape", ["parent_directory", "packed_refs"])
def test_exec_sandbox_refuses_to_start_while_main_is_read_through_a_link_on_its_way(
    hub: Repo, shape: str
) -> None:
    """Red team 14H-A F2, F4: git reads main through a link made by hand (outside every
    layer) that is not at main's own loose ref: at its parent directory (main_branch
    `team/main`, `refs/heads/team -> lane/x`: main read from refs/heads/lane/x/main, in
    the lane namespace CMD may write), or `packed-refs` (main packed) a link into the
    lane's admin dir. exec --sandbox started, and CMD moved main by a file write with no
    ref transaction. It refuses main_not_plain, nothing run; restore-main (or the next
    its refusal names, run as written) makes main plain; then CMD runs."""
    common = hub.common_dir
    lane_path = hub.create("alpha")
    new = hub.commit(lane_path, "w.txt", "work\n")
    tip = hub.sha()
    assert tip is not None
    main, target = link_on_mains_way(hub, shape, tip)
    if shape == "parent_directory":
        cmd = f'echo {new} > "$1"'
    else:
        cmd = f'sed -i "s/^{tip} refs\\/heads\\/main$/{new} refs\\/heads\\/main/" "$1"'
    assert hub.sha(main) == tip
    ran = lane_path / "attempted"
    script = f"{cmd}; touch {shlex.quote(str(ran))}"
    r = lane(
        "exec", "--sandbox", "alpha", "--", "sh", "-c", script, "sh", str(target), cwd=lane_path
    )
    assert r.rc == 1 and "refused [main_not_plain]" in r.stderr, r.stderr
    assert not ran.exists() and hub.sha(main) == tip
    fixed = hub.jlane("restore-main")
    if shape == "parent_directory":
        assert fixed.rc == 0, fixed.stdout
        assert not (common / "refs" / "heads" / "team").is_symlink()
        (kept,) = (hub.state_dir / "kept").glob("refs-heads-team.*")
        assert os.readlink(kept) == "lane/x"
        assert hub.sha("refs/heads/lane/x/main") == tip  # what was read through it: kept too
    else:
        assert (fixed.rc, fixed.code) == (1, "main_not_plain"), fixed.stdout
        way = subprocess.run(
            " && ".join(fixed.json["next"]),
            shell=True,
            cwd=hub.path,
            capture_output=True,
            text=True,
        )
        assert way.returncode == 0, (fixed.json["next"], way.stdout, way.stderr)
        assert (common / "packed-refs").is_file() and not (common / "packed-refs").is_symlink()
    assert hub.sha(main) == tip
    r = hub.lane("exec", "--sandbox", "alpha", "--", "touch", str(lane_path / "ran"))
    assert r.rc == 0 and (lane_path / "ran").exists(), r.stderr


@pytest.mark.parametrize("shape", ["loose_main", "packed_refs", "admin_head", "landed"])
def test_exec_sandbox_refuses_to_start_while_a_protected_ref_file_has_a_second_name(
    hub: Repo, shape: str
) -> None:
    """Red team 15B F3: a hard link made beforehand, outside the sandbox, gives main's loose
    file (or packed-refs, main packed, or a landed ref's loose file) a second name the
    sandbox grants CMD: one under refs/heads/lane/, or the lane's own admin HEAD. `[ -L ]`
    and foreign_main_link saw nothing, exec --sandbox started, and CMD's in-place write of
    that name moved main (or the landed ref) with no ref transaction. exec refuses
    main_not_plain, nothing run; restore-main gives the protected file an inode of its
    own (the second name keeps the old file, content and all); then CMD runs, and its
    write moves nothing of git-lane's."""
    ref, planted, lane_path = hard_link_planted(hub, shape)
    before = hub.sha(ref)
    assert before is not None
    held = planted.read_bytes()
    evil = git(hub.path, "commit-tree", "-p", before, "-m", "evil", f"{before}^{{tree}}").stdout
    line = f"{evil.strip()} refs/heads/main" if shape == "packed_refs" else evil.strip()
    ran = lane_path / "attempted"
    cmd = f"printf '%s\\n' {shlex.quote(line)} > {shlex.quote(str(planted))}; touch {shlex.quote(str(ran))}"
    r = hub.lane("exec", "--sandbox", "alpha", "--", "sh", "-c", cmd)
    assert r.rc == 1 and "refused [main_not_plain]" in r.stderr, r.stderr
    assert "Next: git lane restore-main && git lane exec --sandbox alpha -- sh -c " in r.stderr
    assert not ran.exists() and hub.sha(ref) == before and planted.read_bytes() == held
    fixed = hub.jlane("restore-main")
    assert fixed.rc == 0, fixed.stdout
    assert planted.read_bytes() == held and planted.stat().st_nlink == 1
    assert hub.sha(ref) == before and hub.sha() is not None
    r = hub.lane("exec", "--sandbox", "alpha", "--", "sh", "-c", cmd)
    assert r.rc == 0 and ran.exists(), r.stderr
    assert hub.sha(ref) == before, f"CMD moved {ref} through {planted}"


def test_lane_work_works_inside(hub: Repo, tmp_path: Path) -> None:
    lane_path = hub.create("alpha")
    body = r"""
printf 'SANDBOX=%s\n' "$GITLANE_SANDBOX"
try edit sh -c 'printf "new\n" > new.txt && printf "changed\n" > a.txt'
try add git add -A
try commit git commit -q -m "sandboxed work"
try commit_real "$1" commit -q --allow-empty -m "by the real git"
try status git lane status
try python python3 -c 'import json, tempfile; tempfile.NamedTemporaryFile().close(); print(json.dumps(1))'
try tmp sh -c 'printf x > "${TMPDIR:-/tmp}/sandboxed.txt"'
try cache sh -c 'mkdir -p "$XDG_CACHE_HOME/pip" 2>/dev/null; test -d "$XDG_CACHE_HOME"'
try devnull sh -c 'printf x > /dev/null'
"""
    r = _run(hub, tmp_path, body, REAL_GIT)
    assert r.rc == 0, r.stderr
    assert f"SANDBOX=landlock-abi-{_ABI}" in r.stdout
    rcs = _rcs(r.stdout)
    assert rcs and all(rc == 0 for rc in rcs.values()), r.stdout
    log = git(lane_path, "log", "--format=%s", "-3").stdout.splitlines()
    assert log[:2] == ["by the real git", "sandboxed work"]
    assert (lane_path / "new.txt").read_text() == "new\n"


def test_rebase_and_sync_inside(hub: Repo, tmp_path: Path) -> None:
    lane_path = hub.create("alpha")
    hub.commit(lane_path, "lane.txt", "one\n")
    hub.commit(lane_path, "lane2.txt", "two\n")
    main1 = _main_move(hub, "m1.txt")
    r = _run(hub, tmp_path, "try sync git lane sync\ntry status git status\n")
    assert r.rc == 0, r.stderr
    assert _rcs(r.stdout) == {"sync": 0, "status": 0}, r.stdout
    assert "cherry-pick" not in r.stdout  # the stale CHERRY_PICK_HEAD is cleared
    assert git(lane_path, "merge-base", "--is-ancestor", main1, "HEAD", check=False).returncode == 0
    gd = Path(git(lane_path, "rev-parse", "--absolute-git-dir").stdout.strip())
    assert not (gd / "CHERRY_PICK_HEAD").exists()

    main2 = _main_move(hub, "m2.txt")
    r = _run(hub, tmp_path, 'try rebase "$1" rebase main\n', REAL_GIT)
    assert r.rc == 0, r.stderr
    assert _rcs(r.stdout) == {"rebase": 0}, r.stdout
    assert git(lane_path, "merge-base", "--is-ancestor", main2, "HEAD", check=False).returncode == 0
    assert git(lane_path, "log", "--format=%s", "-2").stdout.split("\n")[:2] == [
        "edit lane2.txt",
        "edit lane.txt",
    ]
    # git could not delete CHERRY_PICK_HEAD (deletes lock packed-refs): the next sync clears it
    r = _run(hub, tmp_path, "try sync git lane sync\n")
    assert _rcs(r.stdout) == {"sync": 0}, r.stdout
    assert not (gd / "CHERRY_PICK_HEAD").exists()
    assert hub.sha() == main2


@pytest.mark.parametrize("how", ["sync", "land --sync"])
def test_a_sandboxed_lane_never_writes_another_lanes_sync_resolution_through_rr_cache(
    hub: Repo, tmp_path: Path, how: str
) -> None:
    """Red team 15B F4: `git lane sync` rebased with rerere on, so the first conflicted
    sync made `<common>/rr-cache`, and from then on exec --sandbox granted it to every
    lane. A sandboxed lane replays another lane's rebase in a scratch clone of its own,
    records a resolution of its choosing and copies it into the shared rr-cache: the
    owner's `git lane sync beta` (or `land beta --sync`) had git resolve beta's conflict
    with it, found no markers, continued by itself and reported `synced`. rr-cache is never
    granted, and sync never takes a recorded resolution (rerere off)."""
    hub.config("gate", "off")
    paths = {k: hub.create(k) for k in ("alpha", "beta", "gamma")}
    for k, p in paths.items():
        hub.commit(p, "a.txt", f"{k}\n")
    assert hub.jlane("land", "alpha").rc == 0
    hub.jlane("sync", "gamma")  # conflicts: with rerere on, this made rr-cache
    common = hub.common_dir
    (common / "rr-cache").mkdir(exist_ok=True)  # as the owner's own rerere would
    main = hub.sha()
    beta_tip = hub.sha("refs/heads/lane/beta")
    script = f"""set -e
R={shlex.quote(REAL_GIT)}
$R clone -q --no-local {shlex.quote(str(hub.path))} "$TMPDIR/s"
cd "$TMPDIR/s"
$R checkout -q -b v {beta_tip}
$R -c rerere.enabled=true -c merge.conflictStyle=zdiff3 rebase -q {main} >/dev/null 2>&1 || true
echo 'chosen by alpha' > a.txt
$R -c rerere.enabled=true rerere
cp -R .git/rr-cache/. {shlex.quote(str(common / "rr-cache"))}/
"""
    r = hub.lane("exec", "--sandbox", "alpha", "--", "sh", "-c", script)
    assert r.rc != 0 and "Permission denied" in r.stderr, (r.stdout, r.stderr)
    assert not [*(common / "rr-cache").iterdir()], "the sandboxed lane wrote rr-cache"
    # what a lane could still put there outside the sandbox (shims stop no plain cp)
    scratch = tmp_path / "scratch"
    git(tmp_path, "clone", "-q", "--no-local", str(hub.path), str(scratch))
    git(scratch, "checkout", "-q", "-b", "v", beta_tip)
    git(scratch, "-c", "rerere.enabled=true", "rebase", "-q", main, check=False)
    (scratch / "a.txt").write_text("chosen by alpha\n")
    git(scratch, "-c", "rerere.enabled=true", "rerere")
    shutil.copytree(scratch / ".git" / "rr-cache", common / "rr-cache", dirs_exist_ok=True)
    if how == "sync":
        r = hub.jlane("sync", "beta")
        content = git(hub.path, "show", "refs/heads/lane/beta:a.txt").stdout
    else:  # the owner lands beta, syncing it first: main would take alpha's resolution
        r = hub.jlane("land", "beta", "--sync")
        content = git(hub.path, "show", "refs/heads/main:a.txt").stdout
    assert content != "chosen by alpha\n", (
        f"the owner's {how} of lane beta committed a resolution lane alpha wrote",
        r.stdout,
    )
    assert r.rc == 1 and r.code == "sync_conflicts", r.stdout
    assert "chosen by alpha" not in (paths["beta"] / "a.txt").read_text()


def test_cmds_git_and_sync_stop_on_a_conflict_and_abort_with_rr_cache_there(
    hub: Repo, tmp_path: Path
) -> None:
    """rr-cache (the owner's, or one an older sync made) is not writable from the sandbox,
    and git takes it as rerere on: CMD's conflicted merge could not record its preimage,
    and its `rebase --abort` crashed (git 2.39), leaving MERGE_RR.lock in the lane. exec
    turns rerere off for CMD's git: its merge, rebase and git lane sync stop on the
    conflict and abort as anywhere else, and nothing is written to rr-cache."""
    hub.config("gate", "off")
    lane_path, beta = hub.create("alpha"), hub.create("beta")
    hub.commit(lane_path, "a.txt", "alpha\n")
    hub.commit(beta, "a.txt", "beta\n")
    assert hub.jlane("land", "beta").rc == 0
    (hub.common_dir / "rr-cache").mkdir()
    body = """
try merge "$1" merge -q main
try merge_abort "$1" merge --abort
try rebase "$1" rebase -q main
try rebase_abort "$1" rebase --abort
try sync git lane sync
try sync_abort git lane abort
"""
    r = _run(hub, tmp_path, body, REAL_GIT)
    assert r.rc == 0, r.stderr
    assert _rcs(r.stdout) == {
        "merge": 1,
        "merge_abort": 0,
        "rebase": 1,
        "rebase_abort": 0,
        "sync": 1,
        "sync_abort": 0,
    }, r.stdout
    assert "could not write" not in r.stdout and "conflicts at step 1" in r.stdout, r.stdout
    assert not [*(hub.common_dir / "rr-cache").iterdir()]
    gd = Path(git(lane_path, "rev-parse", "--absolute-git-dir").stdout.strip())
    assert not [*gd.glob("*.lock")] and not (gd / "MERGE_RR").exists()
    assert git(lane_path, "status", "--porcelain").stdout == ""


def test_scripted_agent_under_sandbox(hub: Repo, tmp_path: Path) -> None:
    """The shims' scripted agent answers the same inside the sandbox (their refusals,
    and the work they allow)."""
    hub.create("alpha")
    main = hub.sha()
    script = tmp_path / "agent.sh"
    script.write_text(SCRIPT)
    r = hub.lane("exec", "--sandbox", "alpha", "--", "sh", str(script), str(hub.path), "fresh")
    assert "Traceback" not in r.stdout + r.stderr, r.stdout + r.stderr
    _check(_cases(r.stdout), FRESH, r.stdout)
    assert hub.sha() == main


def test_explain(hub: Repo) -> None:
    lane_path = hub.create("alpha")
    common = str(hub.common_dir)
    r = hub.lane("--json", "exec", "--sandbox", "--explain", "alpha")
    assert r.rc == 0, r.stderr
    j = r.json
    assert (j["code"], j["abi"], j["usable"], j["readable"]) == ("explain", _ABI, True, ["/"])
    w = j["writable"]
    assert str(lane_path.resolve()) in w
    for sub in ("worktrees/alpha", "refs/heads/lane", "logs/refs/heads/lane"):
        assert os.path.join(common, sub) in w
    for never in (
        "",
        "objects",
        "refs",
        "refs/heads",
        "hooks",
        "info",
        "git-lane",
        "refs/git-lane",
    ):
        assert os.path.join(common, never).rstrip("/") not in w
    assert str(hub.path) not in w
    # tmp_path is under the temp dir: CMD gets a private one, not all of /tmp
    assert "/tmp" not in w and j["private_tmp_under"]
    assert any("other lanes' branches" in n for n in j["notes"])
    text = hub.lane("exec", "--explain", "alpha")
    assert text.rc == 0 and f"Landlock ABI {_ABI}" in text.stdout
    assert "refs/heads/lane" in text.stdout and "note: " in text.stdout


def test_config_modes_confine_without_the_flag(hub: Repo) -> None:
    hub.create("alpha")
    for mode in ("required", "best-effort"):
        hub.config("sandbox", mode)
        r = hub.lane("exec", "alpha", "--", "sh", "-c", 'printf "%s" "$GITLANE_SANDBOX"')
        # as root, exec warns of the chmod a root CMD keeps (test_sandbox_rt3_modes.py)
        warned = f"git-lane: warning: {ROOT_MODES}\n" if os.geteuid() == 0 else ""
        assert (r.rc, r.stdout, r.stderr) == (0, f"landlock-abi-{_ABI}", warned), mode


def test_sandbox_writable(hub: Repo, tmp_path: Path) -> None:
    hub.create("alpha")
    extra = tmp_path / "agent-state"
    extra.mkdir()
    hub.config("sandbox_writable", f"{extra},~/.codex")
    r = hub.lane(
        "exec", "--sandbox", "alpha", "--", "sh", "-c", f"printf x > {shlex.quote(str(extra))}/s"
    )
    assert r.rc == 0, r.stderr
    assert (extra / "s").read_text() == "x"
    for bad in ("relative/dir", str(hub.path), str(hub.common_dir / "refs"), str(tmp_path)):
        hub.config("sandbox_writable", bad)
        r = hub.lane("--json", "exec", "--sandbox", "alpha", "--", "touch", str(tmp_path / "ran"))
        assert (r.rc, r.code) == (1, "sandbox_failed"), (bad, r.stdout)
        assert not (tmp_path / "ran").exists()
        for cmd in r.json["next"]:
            assert "<" not in cmd


def test_ruleset_failure_in_child_runs_nothing(
    hub: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CMD's process cannot confine itself: CMD is never run unconfined."""
    from guard.commands import exec as exec_cmd
    from guard.errors import Refusal
    from guard.repo import Repo as GRepo

    hub.create("alpha")
    monkeypatch.chdir(hub.path)

    def broken(self: sandbox.Prepared) -> None:
        raise sandbox.SandboxError("landlock_restrict_self: simulated")

    monkeypatch.setattr(sandbox.Prepared, "__call__", broken)
    marker = tmp_path / "ran"
    with pytest.raises(Refusal) as exc:
        exec_cmd.run(GRepo.discover(hub.path), "alpha", ["touch", str(marker)], sandbox=True)
    assert exc.value.code == "sandbox_failed"
    assert not marker.exists()
    st = json.loads(hub.lane("status", "--json").stdout)
    assert [ln["owner_pid"] for ln in st["lanes"] if ln["key"] == "alpha"] == [None]


def test_decide_is_narrow() -> None:
    f = sandbox.Facts(
        lane_path="/w/lanes/a",
        admin_dir="/r/.git/worktrees/a",
        common="/r/.git",
        main_ref="refs/heads/main",
        protected=["/r", "/w/lanes/b", "/r/.git"],
        tmp="/tmp",
        cache="/w",
        extra=[],
        private_cache="/w/git-lane-sandbox/r-1/a",
    )
    g = sandbox.decide(f)
    assert g.writable[:6] == [
        "/w/lanes/a",
        "/r/.git/worktrees/a",
        "/r/.git/worktrees/a/objects",
        "/r/.git/refs/heads/lane",
        "/r/.git/logs/refs/heads/lane",
        "/w/git-lane-sandbox/r-1/a",  # never rr-cache (shared by every lane and the owner)
    ]
    assert not [w for w in g.writable if "rr-cache" in w]
    # never the owner's cache dir nor an entry of it: CMD gets its own
    assert "/w/git-lane-sandbox/r-1/a" in g.writable and "/w/pip" not in g.writable
    # never the shared temp dir: CMD gets a private one under it
    assert "/tmp" not in g.writable and g.private_tmp_under == "/tmp"
    assert "/w" not in g.writable and "/w/lanes" not in g.writable
    with pytest.raises(sandbox.BadGrant):
        sandbox.decide(sandbox.Facts(**{**f.__dict__, "extra": ["/r/.git/refs"]}))
    with pytest.raises(sandbox.BadGrant):
        sandbox.decide(sandbox.Facts(**{**f.__dict__, "extra": ["/"]}))
    with pytest.raises(sandbox.SandboxError):
        sandbox.decide(sandbox.Facts(**{**f.__dict__, "main_ref": "refs/heads/lane/x"}))
    # nothing that holds code the owner runs (refused), no /dev/shm holding the temp dir
    for bad in ("/opt", "/opt/py/lib"):
        with pytest.raises(sandbox.BadGrant, match="code the owner runs"):
            sandbox.decide(sandbox.Facts(**{**f.__dict__, "code": ["/opt/py"], "extra": [bad]}))
    shm = sandbox.decide(sandbox.Facts(**{**f.__dict__, "tmp": os.path.realpath("/dev/shm")}))
    assert os.path.realpath("/dev/shm") not in shm.writable, shm.writable
    assert "/dev/null" in shm.writable
    assert sandbox.handled(1) == (1 << 13) - 1
    assert sandbox.handled(3) & sandbox.TRUNCATE and not sandbox.handled(3) & sandbox.IOCTL_DEV
    assert sandbox.handled(7) & sandbox.IOCTL_DEV and sandbox.handled(2) & sandbox.REFER


def test_flags_may_follow_the_key(hub: Repo) -> None:
    """`git lane exec KEY --sandbox -- CMD` (the order the docs and the issue use) confines
    CMD as `git lane exec --sandbox KEY -- CMD` does; any other option there is a usage
    error, never a silently unconfined run."""
    hub.create("alpha")
    r = hub.lane("exec", "alpha", "--sandbox", "--", "sh", "-c", 'printf "%s" "$GITLANE_SANDBOX"')
    assert (r.rc, r.stdout) == (0, f"landlock-abi-{_ABI}"), r.stderr
    j = hub.lane("exec", "alpha", "--sandbox", "--explain", "--json")
    assert j.rc == 0 and j.json["code"] == "explain", j.stderr
    bad = hub.lane("exec", "alpha", "--sandbx", "--", "true")
    assert bad.rc == 2 and "only --sandbox, --explain, --own-objects and --json" in bad.stderr
    own = hub.lane(
        "exec", "alpha", "--own-objects", "--", "sh", "-c", 'printf "%s" "$GITLANE_OBJECTS"'
    )
    assert own.rc == 0 and own.stdout.endswith("/worktrees/alpha/objects"), own.stderr


# -- the gate of a land CMD asks its supervisor for runs under the lane's sandbox ------------
GATE_ESCAPE = (
    "printf '%s\\n' \"$(git rev-parse HEAD)\" > {common}/refs/heads/main || echo DENIED-main; "
    "printf x > {hub}/gate-was-here || echo DENIED-hub; "
    "printf x > {common}/git-lane/gate-was-here"
)


def _socket_land(hub: Repo, *flags: str) -> Any:
    return hub.lane("exec", "--sandbox", "alpha", "--", "git", "lane", "land", *flags)


def test_socket_land_runs_its_gate_sandboxed(hub: Repo) -> None:
    """A worker allowed to land cannot get out through its gate: the land the supervisor
    runs for a sandboxed CMD runs the gate under the lane's grants (the gate's writes of
    main, the hub and git-lane's state fail), and refuses gate_failed."""
    from enginehelp import ready_lane

    hub.config("worker_land", "allow")
    common = hub.common_dir
    q = shlex.quote
    hub.config("gate_command", GATE_ESCAPE.format(common=q(str(common)), hub=q(str(hub.path))))
    ready_lane(hub, "alpha")
    main, ref = hub.sha(), (common / "refs" / "heads" / "main").read_bytes()
    r = _socket_land(hub, "--json")
    assert (r.rc, r.code) == (1, "gate_failed"), r.stdout + r.stderr
    assert "DENIED-main" in r.stderr and "DENIED-hub" in r.stderr, r.stderr
    assert hub.sha() == main and (common / "refs" / "heads" / "main").read_bytes() == ref
    assert not (hub.path / "gate-was-here").exists()
    assert not (common / "git-lane" / "gate-was-here").exists()
    # the owner's own land of the same lane is the owner's: its gate runs as they chose
    hub.config("gate_command", "true")
    assert hub.lane("land", "alpha").rc == 0


@pytest.mark.parametrize("where", ["lane", "clean"])
def test_socket_land_sandboxed_gate_passes_and_lands(hub: Repo, where: str) -> None:
    """A normal gate works confined: it reads the tip, runs git (which refreshes the index
    in the lane's or the clean worktree's admin dir) and Python with a temp file, writes
    the fresh clean worktree; it still cannot write the hub."""
    from enginehelp import head, ready_lane

    hub.config("worker_land", "allow")
    hub.config("gate_worktree", where)
    hub.config(
        "gate_command",
        "test -f alpha.txt && git status --porcelain >/dev/null && "
        + ("touch built && " if where == "clean" else "")  # in the lane: lane_changed_during_gate
        + "python3 -c 'import tempfile; tempfile.mkstemp()' && "
        f"! (printf x > {shlex.quote(str(hub.path / 'h'))}) 2>/dev/null",
    )
    path = ready_lane(hub, "alpha")
    r = _socket_land(hub)
    assert r.rc == 0, r.stderr
    assert r.stdout.startswith("landed alpha: main "), r.stdout
    assert hub.sha() == head(path)
    assert not (hub.path / "h").exists()


GATE_PLANTS = r"""
gd=$(git rev-parse --absolute-git-dir)
mkfifo "$gd/HEAD.fifo" 2>/dev/null && exit 11
ln -s /etc/hostname "$gd/link" 2>/dev/null && exit 12
mkdir -p d && python3 -c 'import os, sys; os.rename(*sys.argv[1:])' d "$gd/d" 2>/dev/null && exit 13
rm -f .git && mkfifo .git && mkfifo a.fifo && ln -s / a.link || exit 14
rm -f "$gd/gitdir"
"""


def test_a_sandboxed_gate_cannot_hang_the_land_through_its_clean_worktree(
    hub: Repo, tmp_path: Path
) -> None:
    """Red team 13U (finding 5, MED: the land hung for ever, the integration lock held).
    With gate_worktree = "clean", the confined gate was granted the clean worktree's admin
    dir (`worktrees/git-lane-gate-*`) with every right: it replaced `gitdir` there with a
    FIFO, and the land's `git worktree remove` blocked opening it. That admin dir is now
    granted as the lane's own (no link, FIFO, socket or device made there, nothing renamed
    in), and the land removes the clean worktree and its admin dir through directory fds,
    no git run (the worktree itself, `.git` included, is the gate's to fill with FIFOs):
    the land lands, and no gate worktree is left."""

    hub.config("worker_land", "allow")
    hub.config("gate_worktree", "clean")
    hub.config("gate_command", "sh ci.sh")
    lane_path = hub.create("alpha")
    tip = hub.commit(lane_path, "ci.sh", GATE_PLANTS)
    proc = subprocess.Popen(
        [sys.executable, "-m", "guard", "exec", "--sandbox", "alpha", "--", "git", "lane", "land"],
        cwd=lane_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    assert proc.returncode == 0, (out, err)
    assert hub.sha() == tip
    assert not list((hub.common_dir / "worktrees").glob("git-lane-gate-*"))
    assert "git-lane-gate-" not in hub.git("worktree", "list", "--porcelain").stdout


def _land_then_linger(lane_path: Path) -> tuple[int, str, str]:
    """A sandboxed CMD lands through the socket, then stays 8 s: the supervisor reaps what
    the gate left running only when CMD ends, so that process outlives the land."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "guard", "exec", "--sandbox", "alpha", "--", "sh", "-c",
         "git lane land; rc=$?; sleep 8; exit $rc"],
        cwd=lane_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        out, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    return proc.returncode, out, err


# The confined gate of a socket land (gate_worktree = "clean") makes a tree deeper than
# dirfd.TREE_DEPTH in its admin dir (granted plain: mkdir allowed), so the land's removal
# through fds leaves that admin dir (after removing gitdir and HEAD), and starts a process
# in a session of its own (the land's killpg misses it; exec reaps it only when CMD ends)
# that writes gitdir, HEAD and commondir back, naming @TARGET@ (red team 14C).
GATE_LEAVES_ADMIN = r"""
gd=$(git rev-parse --absolute-git-dir)
python3 - "$gd" <<'PY'
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)
for _ in range(260):
    os.mkdir("d", dir_fd=fd)
    nfd = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
    os.close(fd)
    fd = nfd
PY
head=$(git rev-parse HEAD)
setsid sh -c 'sleep 4; printf "%s\n" "$1" > "$2/gitdir"; printf "%s\n" "$3" > "$2/HEAD"; printf "../..\n" > "$2/commondir"' \
  sh "@TARGET@" "$gd" "$head" </dev/null >/dev/null 2>&1 &
sleep 1
exit 0
"""


def test_a_confined_gate_leaves_no_worktree_whose_git_the_owner_runs(
    hub: Repo, tmp_path: Path
) -> None:
    """Red team 14C (finding 1, HIGH: the owner ran code the lane chose). After the socket
    land the clean gate worktree's admin dir was left in `worktrees/` (too deep for
    remove_tree), and a process the confined gate left running wrote its gitdir and HEAD,
    naming a repository CMD made in its private cache dir with core.fsmonitor set.
    Repo.owned_worktrees() took that admin dir, no lane's, for the owner's, so
    `git lane agent-setup beta --for claude` ran plain `git ls-files` there and the
    fsmonitor ran as the owner. A gate admin dir is never trusted (by its name), and one
    that cannot be removed is moved into git-lane's kept/, out of git's list."""
    hub.config("worker_land", "allow")
    hub.config("gate_worktree", "clean")
    hub.config("gate_command", "sh ci.sh")
    lane_path = hub.create("alpha")
    hub.create("beta")
    marker = tmp_path / "PWNED"
    from guard.repo import Repo as GRepo

    cache = Path(os.environ["XDG_CACHE_HOME"]).resolve()
    own = Path(sandbox.private_cache(str(cache), GRepo.discover(hub.path).slug, "alpha"))
    bare_git = (
        "env -u GIT_DIR -u GIT_WORK_TREE -u GIT_OBJECT_DIRECTORY -u GIT_INDEX_FILE "
        "-u GIT_COMMON_DIR -u GIT_CONFIG_COUNT -u GIT_ALTERNATE_OBJECT_DIRECTORIES /usr/bin/git"
    )
    # CMD, confined, prepares the repository in its own cache dir (kept between runs)
    prep = (
        f'cd "$XDG_CACHE_HOME" && rm -rf evil && mkdir evil && cd evil && {bare_git} init -q . && '
        "mkdir -p .claude && echo '{}' > .claude/settings.local.json && echo x > f && "
        f"{bare_git} add f && "
        f"/usr/bin/git config -f .git/config core.fsmonitor 'touch {marker}; false' && echo PREPARED"
    )
    r = hub.lane("exec", "--sandbox", "alpha", "--", "sh", "-c", prep, cwd=lane_path)
    assert "PREPARED" in r.stdout, (r.stdout, r.stderr)
    assert (own / "evil" / ".git" / "index").exists()
    hub.commit(lane_path, "ci.sh", GATE_LEAVES_ADMIN.replace("@TARGET@", f"{own}/evil/.git"))
    rc, out, err = _land_then_linger(lane_path)
    assert rc == 0, (out, err)
    assert not marker.exists()
    hub.lane("agent-setup", "beta", "--for", "claude")
    assert not marker.exists(), "the owner's git ran a program a confined gate named"
    left = list((hub.common_dir / "worktrees").glob("git-lane-gate-*"))
    assert not left, f"the clean gate worktree's admin dir outlived the land: {left}"
    assert "git-lane-gate-" not in hub.git("worktree", "list", "--porcelain").stdout


def test_a_confined_gate_never_fences_every_lanes_sandbox_shut(hub: Repo) -> None:
    """Red team 14C (finding 3, MED: every lane's sandbox denied, a refusal whose next did
    not fix it). The same leftover admin dir, its gitdir `/tmp/.git`: git listed a
    worktree at /tmp, which sandbox.facts() took as another worktree to fence, and the
    temp dir every private TMPDIR is made in lies in it: `git lane exec --sandbox` of any
    lane was refused sandbox_failed ("the temp dir /tmp lies in or holds /tmp"), next
    `git lane doctor`, which said ok; reconcile said nothing to reconcile. The land moves
    the admin dir it cannot remove out of `worktrees/`, and no gate admin dir's entry is
    a worktree to fence."""
    hub.config("worker_land", "allow")
    hub.config("gate_worktree", "clean")
    hub.config("gate_command", "sh ci.sh")
    lane_path = hub.create("alpha")
    hub.create("beta")
    before = hub.lane("exec", "--sandbox", "beta", "--", "true")
    assert before.rc == 0, before.stderr
    hub.commit(lane_path, "ci.sh", GATE_LEAVES_ADMIN.replace("@TARGET@", "/tmp/.git"))
    rc, out, err = _land_then_linger(lane_path)
    assert rc == 0, (out, err)
    hub.lane("reconcile")
    hub.lane("doctor")
    after = hub.lane("exec", "--sandbox", "beta", "--", "true", env={"TMPDIR": "/tmp"})
    assert after.rc == 0, after.stderr
    kept = hub.common_dir / "git-lane" / "kept"
    assert [p.name for p in kept.glob("git-lane-gate-*")], "the admin dir was not kept"


def test_what_a_confined_gate_leaves_running_ends_with_the_gate(hub: Repo) -> None:
    """Red team 14C (finding 1's means): a process the confined gate started in a session
    of its own (`setsid`) escaped the land's killpg and, re-parented to exec, ran on until
    CMD ended, writing the gate's admin dir after the land had looked at it. The land is a
    child subreaper for its gate and ends what the gate left as soon as the gate ends."""
    hub.config("worker_land", "allow")
    hub.config("gate_worktree", "clean")
    hub.config("gate_command", "sh ci.sh")
    lane_path = hub.create("alpha")
    late = lane_path / "late"  # the lane's worktree: the confined gate may write it
    hub.commit(
        lane_path,
        "ci.sh",
        f"setsid sh -c 'sleep 3; touch {shlex.quote(str(late))}' </dev/null >/dev/null 2>&1 &\n"
        "exit 0\n",
    )
    rc, out, err = _land_then_linger(lane_path)
    assert rc == 0, (out, err)
    assert not late.exists(), "a process the gate left ran on after the land"


def test_socket_land_gate_that_cannot_be_confined_is_not_run(hub: Repo, tmp_path: Path) -> None:
    """The grants cannot be decided when the land runs (the owner made sandbox_writable
    name the hub since exec started): the gate is not run unconfined, the land refuses
    sandbox_failed and main stays."""
    import subprocess
    import sys
    import time

    from enginehelp import ready_lane

    hub.config("worker_land", "allow")
    marker = tmp_path / "gate-ran"
    hub.config("gate_command", f"touch {shlex.quote(str(marker))}")
    ready_lane(hub, "alpha")
    main = hub.sha()
    go = tmp_path / "go"
    script = f"while [ ! -e {shlex.quote(str(go))} ]; do sleep 0.1; done; git lane land --json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "guard", "exec", "--sandbox", "alpha", "--", "sh", "-c", script],
        cwd=hub.path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not any(e.get("kind") == "exec" for e in _events(hub)):
            assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
            time.sleep(0.1)
        hub.config("sandbox_writable", str(hub.path))
        go.touch()
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, out + err
    j = json.loads(out.strip().splitlines()[-1])
    assert j["code"] == "sandbox_failed" and "could not be confined" in j["message"], j
    assert not marker.exists()
    assert hub.sha() == main


def _events(hub: Repo) -> list[dict[str, Any]]:
    p = hub.common_dir / "git-lane" / "events.jsonl"
    return [json.loads(ln) for ln in p.read_text().splitlines()] if p.exists() else []


# -- what --explain lists is what is granted; what cannot be granted is refused -------------
def test_explain_lists_the_real_grants_with_one_lane(hub: Repo) -> None:
    """The only lane lives in the cache dir (the default worktrees_root): neither the
    cache dir nor an entry of it is granted (it would open lanes made later, other
    repositories' lanes, and code the owner's tools keep there), only CMD's own cache dir
    once exec made it, and --explain lists exactly that."""
    cache = Path(os.environ["XDG_CACHE_HOME"]).resolve()
    (cache / "pip").mkdir(parents=True)
    lane_path = hub.create("alpha").resolve()
    r = hub.lane(
        "exec", "--sandbox", "alpha", "--", "sh", "-c",
        f"touch {shlex.quote(str(cache / 'new'))} || "
        f"touch {shlex.quote(str(cache / 'pip/new'))} || "
        f"mkdir {shlex.quote(str(cache / 'git-lane/worktrees/later'))} || echo DENIED",
    )  # fmt: skip
    assert r.stdout.strip() == "DENIED", r.stdout + r.stderr
    assert not (cache / "new").exists() and not (cache / "pip/new").exists()
    j = hub.lane("--json", "exec", "--sandbox", "--explain", "alpha").json
    w = j["writable"]
    from guard.repo import Repo as GRepo

    own = cache / "git-lane-sandbox" / GRepo.discover(hub.path).slug / "alpha"
    assert str(own) in w and str(cache / "pip") not in w, w
    for p in w:
        assert os.path.exists(p), p  # nothing listed that prepare() leaves out
        assert p == str(lane_path) or not lane_path.is_relative_to(p), p
    assert str(cache) not in w and str(cache / "git-lane") not in w
    assert "private TMPDIR" in hub.lane("exec", "alpha", "--explain").stdout


def test_temp_dir_in_the_repository_or_root_is_refused(hub: Repo) -> None:
    """TMPDIR that is `/`, the hub, in the hub or in the git dir cannot be granted (nor a
    private dir made in it): refused, CMD not run; `next` runs it with TMPDIR=/tmp."""
    ran = hub.create("alpha").resolve() / "ran"
    (hub.path / "sub").mkdir()
    for tmp in ("/", hub.path, hub.path / "sub", hub.common_dir / "refs"):
        r = hub.lane(
            "--json",
            "exec",
            "--sandbox",
            "alpha",
            "--",
            "touch",
            str(ran),
            env={"TMPDIR": str(tmp)},
        )
        assert (r.rc, r.code) == (1, "sandbox_failed"), (tmp, r.stdout, r.stderr)
        assert not ran.exists()
        assert not [p for p in hub.path.iterdir() if p.name.startswith("git-lane-")]
        (fix,) = r.json["next"]
        assert fix == f"env TMPDIR=/tmp git lane exec --sandbox alpha -- touch {ran}"
    assert not list((hub.path / "sub").iterdir())
    done = hub.lane("exec", "--sandbox", "alpha", "--", "touch", str(ran), env={"TMPDIR": "/tmp"})
    assert done.rc == 0 and ran.exists(), done.stderr


def test_sandbox_writable_near_the_lanes_is_refused(hub: Repo, tmp_path: Path) -> None:
    """An entry enclosing the lane (its neighbours, lanes made later) or in git-lane's
    lanes dir is refused; `next` keeps the other entries."""
    lane_path = hub.create("alpha").resolve()
    ok = tmp_path / "agent"
    ok.mkdir()
    for bad in (lane_path.parent, Path(os.environ["XDG_CACHE_HOME"]) / "git-lane"):
        hub.config("sandbox_writable", f"{ok},{bad}")
        r = hub.lane("--json", "exec", "--sandbox", "alpha", "--", "true")
        assert (r.rc, r.code) == (1, "sandbox_failed"), (bad, r.stdout)
        assert r.json["next"][0] == f"git lane config set sandbox_writable {ok}"
    inside = lane_path / "build"
    inside.mkdir()
    hub.config("sandbox_writable", str(inside))  # inside the lane: harmless
    assert hub.lane("exec", "--sandbox", "alpha", "--", "true").rc == 0


def test_a_grant_that_is_a_symlink_is_refused(tmp_path: Path) -> None:
    """prepare() grants a path only when the kernel's name for what it opened is that
    path: a symlink (or a path swapped for one after the decision) is refused."""
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    g = sandbox.Grants(writable=[str(real.resolve())])
    assert sandbox.granted(g) == [str(real.resolve())]
    for bad in (str(link), "relative"):
        with pytest.raises(sandbox.SandboxError):
            sandbox.granted(sandbox.Grants(writable=[bad]))
        with pytest.raises(sandbox.SandboxError):
            sandbox.prepare(sandbox.Grants(writable=[bad]))
    assert sandbox.granted(sandbox.Grants(writable=[str(tmp_path / "absent")])) == []


def test_a_lane_git_file_naming_another_lanes_admin_dir_is_refused(hub: Repo) -> None:
    """The lane's `.git` file is writable from inside: a sandboxed process could point it
    at another lane's admin dir, and the next exec would grant that dir. git's back
    pointer there (`gitdir`) names the worktree that owns it: refused, nothing run."""
    alpha = hub.create("alpha")
    hub.create("beta")
    beta_admin = hub.common_dir / "worktrees" / "beta"
    dotgit = alpha / ".git"
    dotgit.write_text(f"gitdir: {beta_admin}\n")
    planted = beta_admin / "planted"
    r = hub.lane(
        "--json",
        "exec",
        "--sandbox",
        "alpha",
        "--",
        "sh",
        "-c",
        f"printf x > {shlex.quote(str(planted))}",
    )
    # refused before any grant is computed: the lane's pointers do not match its record
    assert (r.rc, r.code) == (1, "lane_pointers_tampered"), r.stdout + r.stderr
    assert ".git does not name" in r.json["message"]
    assert not planted.exists()


def test_decide_refuses_a_lane_that_encloses_the_repository() -> None:
    f = sandbox.Facts(
        lane_path="/w",
        admin_dir="/w/r/.git/worktrees/a",
        common="/w/r/.git",
        main_ref="refs/heads/main",
        protected=["/w/r", "/w/r/.git"],
        tmp="/tmp",
        cache="/c",
        extra=[],
    )
    with pytest.raises(sandbox.SandboxError, match="encloses"):
        sandbox.decide(f)


RAW_REQUEST = r"""
import json, os, socket
s = socket.socket(socket.AF_UNIX)
s.connect(os.environ["GITLANE_LAND_SOCKET"])
req = {"lane": "alpha", "sync": False, "wait": None, "json": True, "confine": False}
s.sendall(json.dumps(req).encode() + b"\n")
buf = b""
while chunk := s.recv(65536):
    buf += chunk
print(buf[5:].decode())
"""


def test_a_worker_cannot_ask_for_an_unconfined_gate(hub: Repo, tmp_path: Path) -> None:
    """The request holds exactly lane/sync/wait/json: one that asks for anything about the
    gate is refused, and nothing is landed."""
    from enginehelp import ready_lane

    hub.config("worker_land", "allow")
    marker = tmp_path / "gate-ran"
    hub.config("gate_command", f"touch {shlex.quote(str(marker))}")
    ready_lane(hub, "alpha")
    main = hub.sha()
    script = tmp_path / "raw.py"
    script.write_text(RAW_REQUEST)
    r = hub.lane("exec", "--sandbox", "alpha", "--", "python3", str(script))
    assert r.rc == 0, r.stderr
    refusal = json.loads(r.stdout)
    assert refusal["code"] == "land_via_supervisor_failed", refusal
    assert refusal["details"]["reason"] == "bad_request"
    assert not marker.exists() and hub.sha() == main


def test_no_link_fifo_or_socket_can_be_made_where_the_owners_git_runs(
    hub: Repo, tmp_path: Path
) -> None:
    """The owner's engine git runs in the lane's admin dir (checkpoint's commit, a sync's
    rebase, worktree lock) and opens its files by path: a link a running CMD plants there
    after the engine's walk is written through (the owner's file appended to), a FIFO
    blocks it (red team 13Q). git makes none of these in a git dir: CMD may make none in
    its admin dir, its object store or the lane refs, by creation or by a rename from the
    lane, where it still may (tools make sockets and links in a project)."""
    hub.create("alpha")
    body = r"""
A=$(git rev-parse --path-format=absolute --git-dir)
C=$(git rev-parse --path-format=absolute --git-common-dir)
try sym_admin ln -s /etc/hostname "$A/logs/HEAD.x"
try sym_msg ln -s /etc/hostname "$A/COMMIT_EDITMSG"
try fifo_admin mkfifo "$A/HEAD.fifo"
try sym_store ln -s /etc/hostname "$A/objects/x"
try fifo_store mkfifo "$A/objects/f"
try sym_ref ln -s ../main "$C/refs/heads/lane/evil"
try sock_admin python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' "$A/s"
ln -s /etc/hostname ./moved-link && mkfifo ./moved-fifo
try mv_sym mv ./moved-link "$A/logs/moved"
try mv_fifo mv ./moved-fifo "$A/moved"
try lane_sym ln -s /etc/hostname ./inlane-link
try lane_fifo mkfifo ./inlane-fifo
try commit sh -c 'printf x > w.txt && git add w.txt && git commit -q -m w'
"""
    r = _run(hub, tmp_path, body)
    assert r.rc == 0, r.stderr
    rcs = _rcs(r.stdout)
    refused = ["sym_admin", "sym_msg", "fifo_admin", "sym_store", "fifo_store", "sym_ref"]
    refused += ["sock_admin", "mv_sym", "mv_fifo"]
    assert {k: rcs[k] for k in refused if rcs[k] == 0} == {}, r.stdout
    assert rcs["lane_sym"] == 0 and rcs["lane_fifo"] == 0 and rcs["commit"] == 0, r.stdout


def test_the_store_moved_within_the_admin_dir_lets_no_lane_directory_in(
    hub: Repo, tmp_path: Path
) -> None:
    """Red team 13U (finding 1, HIGH: a write outside the lane). A Landlock rule follows
    its directory's inode, and a rename within one directory needs no REFER: CMD renamed
    its store `<admin>/objects` (which kept REFER: git moves objects into it) to
    `<admin>/modules`, then renamed a directory it made in the lane, holding a link
    `config` to a file outside, into it; the owner's `release --confirm` rewrote that file
    (tests/test_release.py has the engine's side). The store has no REFER now (git
    renames only within one directory there): the move into it is refused, under any
    name, and CMD's git still stores objects (a small file, a big one, a repack)."""
    lane_path = hub.create("alpha")
    victim = tmp_path / "outside-config"
    body = r"""
A=$(git rev-parse --path-format=absolute --git-dir)
ren() { python3 -c 'import os, sys; os.rename(sys.argv[1], sys.argv[2])' "$@"; }
mkdir -p ./d/sub ./e && ln -s "$1" ./d/sub/config && printf 'ref: refs/heads/main\n' > ./d/sub/HEAD
try mv_store ren ./e "$A/objects/e"
try relocate ren "$A/objects" "$A/modules"
try mv_modules ren ./d/sub "$A/modules/sub"
try back ren "$A/modules" "$A/objects"
try commit sh -c 'printf x > w.txt && head -c 3000000 /dev/urandom > big.bin && git add w.txt big.bin && git commit -q -m w && git repack -adq'
"""
    r = _run(hub, tmp_path, body, str(victim))
    assert r.rc == 0, r.stderr
    rcs = _rcs(r.stdout)
    admin = Path(hub.git("-C", str(lane_path), "rev-parse", "--absolute-git-dir").stdout.strip())
    assert rcs["mv_store"] != 0 and rcs["mv_modules"] != 0, r.stdout
    assert not (admin / "objects" / "e").exists() and not (admin / "objects" / "sub").exists()
    assert rcs["relocate"] == 0 and rcs["back"] == 0 and rcs["commit"] == 0, r.stdout


RENAME_IN = r"""
A=$(git rev-parse --path-format=absolute --git-dir)
mkdir -p ./d && ln -s "$1" ./d/HEAD
while [ ! -e "$2" ]; do sleep 0.02; done
mv "$A/logs" "$A/logs-aside" && mv ./d "$A/logs"
sleep 30
"""


def test_a_directory_with_a_link_renamed_over_logs_after_the_walk_brings_no_link(
    hub: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Red team 13T (HIGH, a write outside the lane): 13Q finding 2 again, through the
    first form of SPECIALS: CMD cannot make a link in its admin dir, but it renames a directory it
    made in the lane, holding a link named HEAD, over `<admin>/logs` (Landlock checks only
    the moved directory: MAKE_DIR and REFER, fewer rights at the destination). It does so
    right after the owner's admin walk (here: as Repo.worktrees returns, as 13Q's test):
    the owner's `git lane sync alpha` (not owner-gated: it runs while exec does) then
    rebases, and git appends the lane's HEAD reflog to the file the link names. Now no
    REFER is granted in the admin dir, its store included: the rename is refused (mv falls
    back to a copy, whose link the kernel refuses too), and nothing is written outside."""
    from guard import cli
    from guard.repo import Repo as GRepo

    lane_path = hub.create("alpha")
    admin = Path(hub.git("-C", str(lane_path), "rev-parse", "--absolute-git-dir").stdout.strip())
    victim = tmp_path / "owner-file"
    text = "the owner's file, outside every lane\n"
    victim.write_text(text)
    go = tmp_path / "go"
    script = tmp_path / "rename-in.sh"
    script.write_text(RENAME_IN)
    argv = [sys.executable, "-m", "guard", "exec", "--sandbox", "alpha", "--"]
    proc = subprocess.Popen(
        [*argv, "sh", str(script), str(victim), str(go)],
        cwd=lane_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.time() + 30
        while not (lane_path / "d" / "HEAD").is_symlink():
            assert proc.poll() is None and time.time() < deadline, proc.communicate()
            time.sleep(0.05)
        hub.commit(lane_path, "w.txt", "work\n")
        _main_move(hub, "m.txt")
        real = GRepo.worktrees

        def worktrees(self: GRepo) -> Any:
            out = real(self)
            go.touch()
            end = time.time() + 5
            while not (admin / "logs" / "HEAD").is_symlink() and time.time() < end:
                time.sleep(0.02)
            return out

        monkeypatch.setattr(GRepo, "worktrees", worktrees)
        monkeypatch.chdir(hub.path)
        try:
            cli.main(["sync", "alpha"])
        except SystemExit:
            pass
        assert not (admin / "logs" / "HEAD").is_symlink(), "the kernel let the link in"
        assert victim.read_text(errors="replace") == text, (
            "the owner's sync appended through a link a sandboxed CMD renamed in",
            victim.read_text(errors="replace"),
        )
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_the_next_of_a_refused_prune_works_in_the_sandbox(hub: Repo, tmp_path: Path) -> None:
    """`git prune` (and `gc --prune=now`) in a sandboxed lane is refused with a next; that
    next was `git gc`, which fails there: gc takes `<common>/gc.pid.lock`, and the common
    dir is not granted (red team 13U, 3). In the sandbox the next is `git repack -d`,
    which packs the lane's own store, and it runs as printed."""
    lane_path = hub.create("alpha")
    (lane_path / "f.txt").write_text("x\n")
    git(lane_path, "add", "f.txt")
    script = tmp_path / "prune.sh"
    script.write_text(
        'e="$TMPDIR/err"; git commit -qm loose; git prune 2>"$e"; echo "PRUNE $?"\n'
        'nxt=$(sed -n "s/.*Next: //p" "$e" | head -n 1)\n'
        'echo "NEXT $nxt"\n'
        'sh -c "$nxt" >"$e.out" 2>&1; echo "RAN $?"; cat "$e.out"\n'
    )
    r = hub.lane("exec", "--sandbox", "alpha", "--", "sh", str(script), cwd=lane_path)
    assert "PRUNE 1" in r.stdout and "NEXT git repack -d" in r.stdout, (r.stdout, r.stderr)
    assert "RAN 0" in r.stdout, ("the printed next fails in the sandbox", r.stdout)


# a child that applies a ruleset built for ABI sys.argv[1] (this kernel has a newer one),
# then tries each way in to the file of its name in sys.argv[3], outside its one grant
# sys.argv[2]
_TRUNCATE_AT_ABI = r"""
import os, sys
from guard import sandbox
ver = int(sys.argv[1])
sandbox.abi = lambda: ver
sandbox.usable = lambda v: ""
sandbox.prepare(sandbox.Grants(writable=[sys.argv[2]]))()
ways = {
    "write": lambda p: open(p, "w"),
    "truncate": lambda p: os.truncate(p, 0),
    "rdonly-trunc": lambda p: os.close(os.open(p, os.O_RDONLY | os.O_TRUNC)),
}
for name, how in ways.items():
    try:
        how(os.path.join(sys.argv[3], name))
        print(name, "passed")
    except PermissionError:
        print(name, "refused")
"""


def test_a_kernel_that_cannot_deny_truncation_has_no_sandbox(tmp_path: Path) -> None:
    """Below Landlock ABI 3 (Linux 6.2) the kernel cannot deny truncation: a ruleset built
    with ABI 2's rights (on this kernel) refuses a write outside the grants but lets
    truncate(2) and open(O_RDONLY|O_TRUNC) through, and packed-refs, a hook or another
    lane's file would be emptied. So an ABI below 3 is no sandbox: usable() says why, and
    exec --sandbox refuses sandbox_unavailable (next test)."""
    lane = tmp_path / "lane"
    lane.mkdir()
    ways = ("write", "truncate", "rdonly-trunc")
    seen = {}
    for ver in (2, _ABI):
        outside = tmp_path / f"outside-{ver}"
        outside.mkdir()
        for name in ways:
            (outside / name).write_text("kept\n")
        out = subprocess.run(
            [sys.executable, "-c", _TRUNCATE_AT_ABI, str(ver), str(lane), str(outside)],
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        seen[ver] = out.split(), [(outside / name).read_text() for name in ways]
    assert seen[2] == (
        ["write", "refused", "truncate", "passed", "rdonly-trunc", "passed"],
        ["kept\n", "", ""],
    )
    assert seen[_ABI] == (
        ["write", "refused", "truncate", "refused", "rdonly-trunc", "refused"],
        ["kept\n"] * 3,
    )
    for ver in (1, 2):
        assert "truncat" in sandbox.usable(ver)
    assert sandbox.usable(3) == ""


def test_exec_sandbox_refuses_a_kernel_below_abi_3(
    hub: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """exec --sandbox on an ABI 2 kernel (simulated in-process) is sandbox_unavailable,
    with the reason and the unsandboxed command as the next; nothing runs."""
    from guard.commands import exec as exec_cmd
    from guard.errors import Refusal
    from guard.repo import Repo as GRepo

    hub.create("alpha")
    monkeypatch.chdir(hub.path)
    monkeypatch.setattr(sandbox, "probe", lambda: (2, ""))
    marker = hub.path.parent / "ran"
    with pytest.raises(Refusal) as exc:
        exec_cmd.run(GRepo.discover(hub.path), "alpha", ["touch", str(marker)], sandbox=True)
    assert exc.value.code == "sandbox_unavailable"
    assert "cannot deny truncating" in exc.value.message
    assert exc.value.next == [f"git lane exec alpha -- touch {marker}"]
    assert not marker.exists()
