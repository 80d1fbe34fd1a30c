"""Benchmark git-lane's hooks against floors measured in the same run.

  rebase:  a --commits (default 50) commit `git rebase main` in a lane with our three
           hooks installed, against the same rebase with a reference-transaction hook
           that is only `#!/bin/sh` + `exit 0` (target <= 1.15x);
  commit:  a one-file `git commit` in a lane with our hooks, against the same commit in
           a twin repository without hooks (target <= 1.5x);
  guard:   the same lane commit with our pre-commit guard, against pre-commit-hooks'
           `no-commit-to-branch` run through the pre-commit framework (`repo: local`,
           `language: system`; needs `pip install pre-commit pre-commit-hooks`), and our
           guard through the framework too (`git-lane-hook pre-commit`). Printed, no target.
  (floor): the lane commit with a pre-commit and a reference-transaction hook that only
           `exit 0`: what starting the hooks costs before they do anything.

Runs alternate between the two sides of each pair so drift hits both; the figures are
medians of --runs runs. Nothing is asserted: it prints the ratios.

    python bench/hooks.py
    python bench/hooks.py --commits 50 --runs 9
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchlib import hermetic_env as _hermetic_env  # noqa: E402
from benchlib import alternate as compare_values  # noqa: E402
from benchlib import sh  # noqa: E402
from guard.commands import create as create_cmd  # noqa: E402
from guard.commands import install as hookinstall  # noqa: E402
from guard.repo import Repo  # noqa: E402

EXIT0 = "#!/bin/sh\nexit 0\n"


def hermetic_env(base: Path) -> dict[str, str]:
    env = _hermetic_env(base, GIT_EDITOR="true", GIT_SEQUENCE_EDITOR="true")
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    return env


def make_repo(path: Path, env: dict[str, str], files: int = 200) -> None:
    path.mkdir(parents=True)
    sh(["git", "init", "-q", "-b", "main"], path, env)
    for i in range(files):
        (path / f"f{i:04d}.txt").write_text(f"file {i}\n")
    sh(["git", "add", "-A"], path, env)
    sh(["git", "commit", "-q", "-m", "init"], path, env)


def make_lane(hub: Path, key: str, env: dict[str, str]) -> Path:
    old = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)  # lanes live under the bench's XDG_CACHE_HOME
    try:
        return Path(create_cmd.run(Repo.discover(hub), key)["lane"]["path"])
    finally:
        os.environ.clear()
        os.environ.update(old)


def install_ours(hub: Path) -> None:
    hookinstall.run(Repo.discover(hub))


def report(
    name: str, ours: float, floor: float, target: float | None, what: tuple[str, str]
) -> None:
    ratio = ours / floor
    verdict = "" if target is None else ("  ok" if ratio <= target else "  OVER TARGET")
    tgt = "" if target is None else f" (target <= {target:.2f}x)"
    print(
        f"{name:<8} {what[0]} {ours * 1000:8.1f} ms   {what[1]} {floor * 1000:8.1f} ms   "
        f"ratio {ratio:5.2f}x{tgt}{verdict}"
    )


# -- rebase ---------------------------------------------------------------------------------
def rebase_setup(base: Path, env: dict[str, str], commits: int, hooks: str) -> Callable[[], object]:
    hub = base / f"rebase-{hooks}"
    make_repo(hub, env)
    lane = make_lane(hub, "work", env)
    for i in range(commits):
        (lane / f"f{i:04d}.txt").write_text(f"lane edit {i}\n")
        sh(["git", "commit", "-q", "-am", f"lane {i}"], lane, env)
    (hub / "main-only.txt").write_text("main moved\n")
    sh(["git", "add", "main-only.txt"], hub, env)
    sh(["git", "commit", "-q", "-m", "main moves"], hub, env)  # before any hook is in place
    if hooks == "ours":
        install_ours(hub)
    else:
        p = Path(sh(["git", "rev-parse", "--git-common-dir"], hub, env).stdout.decode().strip())
        hook = (hub / p if not p.is_absolute() else p) / "hooks" / "reference-transaction"
        hook.parent.mkdir(exist_ok=True)
        hook.write_text(EXIT0)
        hook.chmod(0o755)
    orig = sh(["git", "rev-parse", "HEAD"], lane, env).stdout.decode().strip()

    def only_rebase() -> float:
        sh(["git", "reset", "-q", "--hard", orig], lane, env)  # not timed
        t = time.perf_counter()
        sh(["git", "rebase", "-q", "main"], lane, env)
        return time.perf_counter() - t

    return only_rebase


# -- commit ---------------------------------------------------------------------------------
def commit_setup(
    base: Path, env: dict[str, str], name: str, setup: Callable[[Path], None]
) -> Callable[[], float]:
    hub = base / f"commit-{name}"
    make_repo(hub, env)
    setup(hub)  # before the lane, so the lane has whatever setup committed
    lane = make_lane(hub, "work", env)
    counter = [0]

    def one() -> float:
        counter[0] += 1
        (lane / "f0001.txt").write_text(f"edit {counter[0]}\n")
        sh(["git", "add", "f0001.txt"], lane, env)
        t = time.perf_counter()
        sh(["git", "commit", "-q", "-m", f"edit {counter[0]}"], lane, env)
        return time.perf_counter() - t

    return one


def exit0_hooks(hub: Path) -> None:
    """What merely having a pre-commit and a reference-transaction hook costs."""
    for name in ("pre-commit", "reference-transaction"):
        hook = hub / ".git" / "hooks" / name
        hook.write_text(EXIT0)
        hook.chmod(0o755)


def framework_config(hub: Path, env: dict[str, str], hooks: list[dict[str, object]]) -> None:
    import yaml  # type: ignore[import-untyped]

    (hub / ".pre-commit-config.yaml").write_text(
        yaml.safe_dump({"repos": [{"repo": "local", "hooks": hooks}]})
    )
    sh(["git", "add", ".pre-commit-config.yaml"], hub, env)
    sh(["git", "commit", "-q", "-m", "pre-commit config"], hub, env)
    sh([sys.executable, "-m", "pre_commit", "install", "--hook-type", "pre-commit"], hub, env)


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--commits", type=int, default=50)
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--keep", action="store_true", help="leave the repositories behind")
    ns = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="hookbench-"))
    env = hermetic_env(base)
    try:
        print(
            f"git {sh(['git', '--version'], base, env).stdout.decode().split()[-1]}, "
            f"/bin/sh -> {os.path.realpath('/bin/sh')}, {os.cpu_count()} cpu(s), median of {ns.runs} runs"
        )
        ours = rebase_setup(base, env, ns.commits, "ours")
        floor = rebase_setup(base, env, ns.commits, "exit0")
        a, b = compare_values(ours, floor, ns.runs)
        report("rebase", a, b, 1.15, (f"{ns.commits}-commit rebase, our hooks", "exit-0 hook"))

        ours_c = commit_setup(base, env, "ours", lambda hub: install_ours(hub))
        none_c = commit_setup(base, env, "none", lambda hub: None)
        exit0_c = commit_setup(base, env, "exit0", exit0_hooks)
        a, b = compare_values(ours_c, none_c, ns.runs * 3)
        report("commit", a, b, 1.5, ("lane commit, our hooks", "no hooks"))
        a, b = compare_values(exit0_c, none_c, ns.runs * 3)
        report("(floor)", a, b, None, ("lane commit, exit-0 pre-commit + ref-tx", "no hooks"))

        have_fw = shutil.which("no-commit-to-branch", path=env["PATH"]) is not None
        try:
            import pre_commit  # noqa: F401
        except ImportError:
            have_fw = False
        if not have_fw:
            print("guard    skipped: pip install pre-commit pre-commit-hooks")
            return
        fw_ncb = commit_setup(
            base,
            env,
            "ncb",
            lambda hub: framework_config(
                hub,
                env,
                [
                    {
                        "id": "no-commit-to-branch",
                        "name": "no-commit-to-branch",
                        "entry": "no-commit-to-branch",
                        "language": "system",
                        "pass_filenames": False,
                        "always_run": True,
                    }
                ],
            ),
        )
        fw_ours = commit_setup(
            base,
            env,
            "fwours",
            lambda hub: framework_config(
                hub,
                env,
                [
                    {
                        "id": "git-lane-guard",
                        "name": "git-lane guard",
                        "entry": "git-lane-hook pre-commit",
                        "language": "system",
                        "pass_filenames": False,
                        "always_run": True,
                    }
                ],
            ),
        )
        a, b = compare_values(ours_c, fw_ncb, ns.runs * 2)
        report(
            "guard", a, b, None, ("our hooks (git lane install)", "framework + no-commit-to-branch")
        )
        a, b = compare_values(fw_ours, fw_ncb, ns.runs * 2)
        report(
            "guard", a, b, None, ("framework + git-lane-guard", "framework + no-commit-to-branch")
        )
    finally:
        if ns.keep:
            print(f"kept {base}")
        else:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
