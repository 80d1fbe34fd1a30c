"""Red team 13F: reproductions of findings against session 7's fixes (each failed then)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from conftest import Repo, git
from enginehelp import ready_lane
from test_shim_config_sources import ENV_PRELUDE, assert_held, run_bound


def _stale_lane_with_landed_work_elsewhere(repo: Repo) -> tuple[Path, str, str]:
    """alpha is made off main; beta lands (main moves to M1); alpha never syncs. Returns
    alpha's path, its tip, and M1."""
    repo.config("gate", "off")
    alpha = ready_lane(repo, "alpha")
    ready_lane(repo, "beta")
    r = repo.jlane("land", "beta")
    assert r.rc == 0, r.stdout
    m1 = repo.sha()
    assert m1 is not None
    tip = git(alpha, "rev-parse", "HEAD").stdout.strip()
    return alpha, tip, m1


def test_a_graft_file_in_the_callers_environment_never_lets_a_stale_lane_land(
    repo: Repo, tmp_path: Path
) -> None:
    """GIT_GRAFT_FILE naming `TIP M1` makes git read M1 as the parent of alpha's tip, so
    `merge-base --is-ancestor main TIP` says alpha is fresh and land fast-forwards main
    to TIP, a commit that does not contain beta's landed work."""
    _alpha, tip, m1 = _stale_lane_with_landed_work_elsewhere(repo)
    grafts = tmp_path / "grafts"
    grafts.write_text(f"{tip} {m1}\n")
    r = repo.jlane("land", "alpha", env={"GIT_GRAFT_FILE": str(grafts)})
    assert r.rc == 1 and r.code == "stale_lane", r.stdout
    assert repo.sha() == m1


def test_a_replacement_ref_written_past_the_hooks_never_lets_a_stale_lane_land(
    repo: Repo,
) -> None:
    """A replacement of alpha's tip by a commit whose parent is M1 (written with the
    hooks switched off for that one command, which a plain process can do) changes the
    ancestry every git reads: land fast-forwarded main to the real tip, dropping M1."""
    alpha, tip, m1 = _stale_lane_with_landed_work_elsewhere(repo)
    git(alpha, "-c", "core.hooksPath=/dev/null", "replace", "--graft", tip, m1)
    r = repo.jlane("land", "alpha")
    assert r.rc == 1 and r.code == "stale_lane", r.stdout
    assert repo.sha() == m1


def test_a_path_entry_written_through_a_link_and_dotdot_is_judged_as_the_kernel_reads_it(
    hub: Repo, tmp_path: Path
) -> None:
    """`LANE/L/../REL` is exec's shims directory as text (normpath drops `L/..`), but the
    kernel follows the link L first: once git holds the index lock the lane re-points L,
    and git's "safe" editor `vi` is the lane's program, past the shim."""
    lane_path = hub.create("alpha")
    main = hub.sha()
    shims = hub.lane(
        "exec", "alpha", "--", "sh", "-c", 'dirname "$(command -v git)"', cwd=lane_path
    ).stdout.strip()
    assert shims, "no shims directory"
    rel = os.path.relpath(shims, lane_path)
    common = os.path.commonpath([shims, str(lane_path)])
    ups = len(Path(lane_path).relative_to(common).parts)
    tail = Path(shims).relative_to(common)
    base = tmp_path / "evil"
    deep = base.joinpath(*[f"a{i}" for i in range(ups)])
    (deep / "c").mkdir(parents=True)
    (base / tail).mkdir(parents=True)
    entry = f"{lane_path}/L/../{rel}"
    assert os.path.normpath(entry) == shims
    script = (
        ENV_PRELUDE + f'cp evil.sh "{base / tail}/vi"; mkdir -p c; ln -sfn "$PWD/c" L; '
        "echo w2 > work.txt; GD=$(git rev-parse --absolute-git-dir); "
        '( while [ ! -e "$GD/index.lock" ]; do :; done; '
        f'ln -sfn "{deep / "c"}" L2 && mv -T L2 L ) & '
        f'PATH="{entry}:$PATH" GIT_EDITOR=vi git commit -a -q; kill $! 2>/dev/null; wait'
    )
    r = run_bound(hub, lane_path, script, tmp_path)
    assert_held(hub, main, tmp_path, r)
    assert "refused [unsafe_config]" in r.stderr, r.stderr


def test_a_gate_that_writes_its_own_gitignore_gets_a_next_that_lands(repo: Repo) -> None:
    """The gate writes a top .gitignore (and output it does not cover): the next once
    appended `/.gitignore` to it, so its `git add .gitignore` failed (an ignored path).
    Now it shows the file, appends patterns for the rest only, and lands."""
    gate = "[ -e .gitignore ] || printf 'build/\\n' > .gitignore; mkdir -p build out; touch build/x out/y"
    repo.config("gate_command", json.dumps(gate))
    ready_lane(repo, "alpha")
    r = repo.jlane("land", "alpha")
    assert r.rc == 1 and r.code == "lane_changed_during_gate", r.stdout
    next_ = list(r.json["next"])
    assert next_[0].startswith("cat "), next_
    res = subprocess.run(
        " && ".join(next_[:-1]), shell=True, cwd=repo.path, capture_output=True, text=True
    )
    assert res.returncode == 0, (next_, res.stderr)
    r = repo.jlane("land", "alpha")
    assert r.rc == 0, r.stdout
    shown = git(repo.path, "show", "main:.gitignore").stdout
    assert "build/" in shown and "/out/" in shown, shown
