"""`git lane demo`: the whole story on a throwaway repository: two lanes whose commits
conflict, a land through a real gate, the second lane refused as stale, a sync that
stops on the conflict, the resolution, the second land, and the final history."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from guard.results import DemoResult

GREET_V0 = 'def greet(name):\n    return "Hello, " + name\n'
GREET_A = 'def greet(name):\n    return f"Hello, {name}!"\n'
GREET_B = 'def greet(name):\n    return "Hello, " + name.title()\n'
GREET_AB = 'def greet(name):\n    return f"Hello, {name.title()}!"\n'
CHECK = (
    "from greet import greet\n"
    "assert greet('ada').startswith('Hello, '), greet('ada')\n"
    "print('check passed:', greet('ada'))\n"
)


class DemoStepFailed(Exception):
    """A step of the demo did not end as the story says: a bug, reported with a crash file."""


class Demo:
    def __init__(self, root: Path, quiet: bool) -> None:
        self.root = root
        self.hub = root / "project"
        self.out = sys.stderr if quiet else sys.stdout
        self.env = dict(os.environ)
        for k in list(self.env):
            if k.startswith("GITLANE_") or k in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE"):
                del self.env[k]
        self.env.update(
            {
                "GIT_AUTHOR_NAME": "git-lane demo",
                "GIT_AUTHOR_EMAIL": "demo@git-lane.invalid",
                "GIT_COMMITTER_NAME": "git-lane demo",
                "GIT_COMMITTER_EMAIL": "demo@git-lane.invalid",
                "GIT_CONFIG_NOSYSTEM": "1",
                "GIT_EDITOR": "true",
                "NO_COLOR": "1",
            }
        )
        self.steps: list[dict[str, Any]] = []

    def say(self, text: str) -> None:
        self.out.write(f"\n# {text}\n")
        self.out.flush()

    def sh(
        self, argv: list[str], cwd: Path, expect: int = 0, show: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        shown = show or " ".join(shlex.quote(a) for a in argv)
        where = "" if cwd == self.hub else f"(in {cwd.name}) "
        self.out.write(f"{where}$ {shown}\n")
        res = subprocess.run(
            argv, cwd=cwd, env=self.env, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
        if res.stdout.strip():
            self.out.write("".join(f"  {ln}\n" for ln in res.stdout.rstrip("\n").splitlines()))
        self.out.flush()
        self.steps.append({"cmd": shown, "exit": res.returncode})
        if res.returncode != expect:
            raise DemoStepFailed(
                f"demo step `{shown}` exited {res.returncode}, expected {expect}:\n{res.stdout}"
            )
        return res

    def git(
        self, *args: str, cwd: Path | None = None, expect: int = 0
    ) -> subprocess.CompletedProcess[str]:
        from guard.git import real_git

        return self.sh(
            [real_git(), *args],
            cwd or self.hub,
            expect,
            show="git " + " ".join(shlex.quote(a) for a in args),
        )

    def lane(
        self, *args: str, cwd: Path | None = None, expect: int = 0
    ) -> subprocess.CompletedProcess[str]:
        return self.sh(
            [sys.executable, "-m", "guard", *args],
            cwd or self.hub,
            expect,
            show="git lane " + shlex.join(args),
        )

    def jlane(self, *args: str, cwd: Path | None = None) -> dict[str, Any]:
        """`git lane ARGS --json`: its one JSON object (exit 0 or 1 both answer)."""
        import json

        shown = "git lane " + shlex.join(args)
        self.out.write(f"$ {shown}\n")
        res = subprocess.run(
            [sys.executable, "-m", "guard", *args, "--json"],
            cwd=cwd or self.hub,
            env=self.env,
            text=True,
            capture_output=True,
        )
        self.steps.append({"cmd": shown, "exit": res.returncode})
        try:
            out: dict[str, Any] = json.loads(res.stdout)
        except ValueError:
            raise DemoStepFailed(f"demo step `{shown}` printed no JSON:\n{res.stderr}") from None
        return out

    def write(self, path: Path, text: str) -> None:
        path.write_text(text)
        self.out.write(f"  (wrote {path.name})\n")


def run(keep: bool = False, quiet: bool = False) -> DemoResult:
    root = Path(tempfile.mkdtemp(prefix="git-lane-demo-"))
    d = Demo(root, quiet)
    ok = False
    try:
        d.hub.mkdir()
        d.say("A throwaway repository with one function and a check for it.")
        d.git("init", "-q", "-b", "main")
        (d.hub / "greet.py").write_text(GREET_V0)
        (d.hub / "check.py").write_text(CHECK)
        # bytecode a gate without -B would write; .env is the hub's, never committed
        (d.hub / ".gitignore").write_text("__pycache__/\n.env\n")
        (d.hub / ".worktreeinclude").write_text(".env\n")  # copy it into every new lane
        (d.hub / "README.md").write_text("# greet\n")
        d.git("add", "greet.py", "check.py", ".gitignore", ".worktreeinclude", "README.md")
        d.git("commit", "-q", "-m", "greet: first version")
        (d.hub / ".env").write_text("GREETING_SECRET=not-in-git\n")
        d.lane("config", "set", "worktrees_root", str(root / "lanes"))
        d.lane("config", "set", "gate_command", f"{shlex.quote(sys.executable)} -B check.py")
        d.say(
            "Each new lane gets the hub's .env (named by .worktreeinclude) and runs the setup "
            "command, with its own port."
        )
        d.lane(
            "config",
            "set",
            "setup_command",
            'test -f .env && echo "lane $GITLANE_LANE ready, dev server port $GITLANE_PORT"',
        )
        d.say("Install the hooks: from now on nothing but `git lane land` moves main.")
        d.lane("install")
        (d.hub / "greet.py").write_text(GREET_A)
        d.git("commit", "-q", "-am", "sneak onto main", expect=1)
        d.git("checkout", "-q", "--", "greet.py")

        d.say("Three writers, three lanes: each its own worktree on its own branch.")
        d.lane("create", "alpha")
        d.lane("create", "beta")
        d.lane("create", "gamma")
        alpha = root / "lanes"
        alpha = next(p for p in alpha.rglob("alpha") if p.is_dir())
        beta = alpha.parent / "beta"
        d.say(
            "A third writer, an agent CLI started with `git lane exec`, changes the README: "
            "the shims (git, write, edit) are first on its PATH."
        )
        agent = "printf '# greet\\n\\nSays hello.\\n' | write README.md && git commit -q -am 'readme: say what it does'"
        d.lane("exec", "gamma", "--", "sh", "-c", agent)
        d.say("The same agent may not touch main, nor write outside its lane.")
        d.lane("exec", "gamma", "--", "git", "checkout", "main", expect=1)
        d.lane("exec", "gamma", "--", "sh", "-c", "echo x | write ../../notes.txt", expect=1)

        d.say("alpha and beta change the same line, differently.")
        d.write(alpha / "greet.py", GREET_A)
        d.git("commit", "-q", "-am", "greet: exclaim", cwd=alpha)
        d.write(beta / "greet.py", GREET_B)
        d.git("commit", "-q", "-am", "greet: title-case the name", cwd=beta)
        d.lane("status")

        d.say("alpha lands: locked, fresh, the gate runs at the exact tip, main fast-forwards.")
        d.lane("land", "alpha")

        d.say("beta is now stale: land refuses it and names the next command.")
        d.lane("land", "beta", expect=1)

        d.say("sync rebases beta onto main and stops on the conflict with a worklist.")
        d.lane("sync", "beta", expect=1)
        d.say("continue refuses while conflict markers are left in the file.")
        d.lane("continue", "beta", expect=1)
        d.say("Resolve it by keeping both ideas, then continue.")
        d.write(beta / "greet.py", GREET_AB)
        d.lane("continue", "beta")

        d.say("beta lands on top: history stays linear, no merge commits.")
        d.lane("land", "beta")
        d.say("gamma is stale too, but its rebase is clean: land --sync rebases, gates, lands.")
        d.lane("land", "gamma", "--sync")
        d.lane("status")
        d.git("log", "--oneline", "--graph")
        d.say("Every lane is landed and clean (the copied .env is the hub's), so they can go.")
        for key in ("alpha", "beta", "gamma"):
            d.lane("release", key)
        d.lane("log", "-n", "6")
        ok = True
    finally:
        if keep:
            d.out.write(f"\nkept: {root}\n")
        else:
            shutil.rmtree(root, ignore_errors=True)
    summary = f"{len(d.steps)} steps, three lanes landed" + (
        f", kept at {root}" if keep else ", nothing left behind"
    )
    return {
        "ok": ok,
        "code": "ok",
        "summary": summary,
        "path": str(root) if keep else None,
        "steps": d.steps,
    }


# -- git lane demo --agents N: many scripted agents, conflicts predicted, the queue ----------
def _shared(lines: list[str]) -> str:
    return "".join(f"{ln}\n" for ln in lines)


def _lane_dir(root: Path, key: str) -> Path:
    return next(p for p in (root / "lanes").rglob(key) if p.is_dir())


def run_agents(n: int, keep: bool = False, quiet: bool = False) -> DemoResult:
    """N scripted agents, each in its own lane under `git lane exec`: each adds a file of
    its own and rewrites one line of a shared file, two agents per line, so neighbours
    conflict and the rest merge cleanly. `git lane conflicts` predicts which pairs
    conflict before anything lands; `git lane queue --batch` lands what it can and skips
    the lanes whose sync would conflict; their own sync then stops on exactly the
    predicted paths (checked), they are resolved, marked ready again, and the queue lands
    the rest. Nothing is left behind."""
    root = Path(tempfile.mkdtemp(prefix="git-lane-demo-"))
    d = Demo(root, quiet)
    keys = [f"agent-{i + 1}" for i in range(n)]
    rows = (n + 1) // 2  # agents 2k and 2k+1 both rewrite row k
    ok = False
    predicted: dict[tuple[str, str], list[str]] = {}  # conflicting pair -> its paths
    confirmed: set[tuple[str, str]] = set()
    try:
        d.hub.mkdir()
        d.say(f"A throwaway repository and {n} scripted agents, each in a lane of its own.")
        d.git("init", "-q", "-b", "main")
        # rows apart by two untouched lines: edits of different rows merge cleanly
        base = [ln for k in range(rows) for ln in (f"line {k}: unchanged", "", "")]
        (d.hub / "shared.txt").write_text(_shared(base))
        (d.hub / "check.py").write_text(
            "import pathlib\n"
            "text = pathlib.Path('shared.txt').read_text()\n"
            "assert '<<<<<<<' not in text and text.count('\\n') >= 1, text\n"
            "print('check passed:', len(text.splitlines()), 'lines')\n"
        )
        (d.hub / ".gitignore").write_text("__pycache__/\n")
        d.git("add", "shared.txt", "check.py", ".gitignore")
        d.git("commit", "-q", "-m", "shared: first version")
        d.lane("config", "set", "worktrees_root", str(root / "lanes"))
        d.lane("config", "set", "max_lanes", str(n))
        d.lane("config", "set", "worker_land", "deny")
        d.lane("config", "set", "gate_command", f"{shlex.quote(sys.executable)} -B check.py")
        d.lane("install")
        for key in keys:
            d.lane("create", key)

        d.say(
            "Each agent, under `git lane exec` (shims first on PATH), adds its own file, "
            "rewrites its line of shared.txt, commits, and marks its lane ready."
        )
        for i, key in enumerate(keys):
            mine = list(base)
            mine[3 * (i // 2)] = f"line {i // 2}: rewritten by {key}"
            script = (
                f"printf 'notes of {key}\\n' | write {key}.md && "
                f"printf {shlex.quote(_shared(mine))} | write shared.txt && "
                f"git add {key}.md shared.txt && git commit -q -m '{key}: its line and notes' && "
                "git lane ready"
            )
            d.lane("exec", key, "--", "sh", "-c", script)

        d.say("Before anything lands: which lanes would conflict, with main and each other?")
        pred = d.jlane("conflicts")
        for p in pred["pairs"]:
            if p["conflict"]:
                a, b = sorted(p["lanes"])
                predicted[(a, b)] = sorted(p["paths"])
        d.out.write(
            "  predicted conflicts: "
            + (
                ", ".join(f"{a} x {b} ({', '.join(ps)})" for (a, b), ps in predicted.items())
                or "none"
            )
            + "\n"
        )
        d.say(
            "The queue lands the ready lanes, three per gate run: a lane whose sync onto the "
            "new main would conflict is skipped, and left exactly as it was."
        )
        q = d.jlane("queue", "--batch", "3")
        skipped = [s["lane"] for s in q["skipped"]]
        why = ", ".join(f"{x['lane']} [{x['code']}]" for x in q["skipped"])
        d.out.write(f"  landed {', '.join(q['landed']) or 'none'}; skipped {why or 'none'}\n")

        d.say("Each skipped lane syncs: the rebase stops on the conflict that was predicted.")
        landed = set(q["landed"])
        for key in skipped:
            sync = d.jlane("sync", key)
            hit = sorted({f["path"] for f in (sync.get("worklist") or {}).get("files", [])})
            pairs = [pr for pr in predicted if key in pr and (set(pr) - {key}) & landed]
            if sync.get("state") != "conflicts" or not pairs or predicted[pairs[0]] != hit:
                raise DemoStepFailed(
                    f"sync of {key} hit {hit or 'no conflict'}; predicted: "
                    f"{[(pr, predicted[pr]) for pr in pairs] or 'none'}"
                )
            confirmed.add(pairs[0])
            d.out.write(f"  {key}: stopped on {', '.join(hit)}, as predicted\n")
            path = Path(sync["path"]) if sync.get("path") else _lane_dir(root, key)
            main_lines = d.git("show", "main:shared.txt", cwd=path).stdout.splitlines()
            i = keys.index(key)
            main_lines[3 * (i // 2)] = f"{main_lines[3 * (i // 2)]}, then by {key}"
            d.write(path / "shared.txt", _shared(main_lines))
            d.lane("continue", key)
            d.lane("ready", key)
            landed.add(key)
        if skipped:
            d.say("The resolved lanes land in one more queue run.")
            q2 = d.jlane("queue", "--batch", "3")
            d.out.write(f"  landed {', '.join(q2['landed'])}; {q2['gate_runs']} gate run(s)\n")
            if q2["skipped"]:
                raise DemoStepFailed(f"the second queue run skipped lanes: {q2['skipped']}")
        d.git("log", "--oneline", "-n", str(n + 1))
        d.say("Everything landed and clean: gc releases every lane.")
        gc = d.jlane("gc")
        d.out.write(f"  released {', '.join(x['lane'] for x in gc['released'])}\n")
        if gc["kept"]:
            raise DemoStepFailed(f"gc kept lanes: {gc['kept']}")
        ok = True
    finally:
        if keep:
            d.out.write(f"\nkept: {root}\n")
        else:
            shutil.rmtree(root, ignore_errors=True)
    summary = (
        f"{len(d.steps)} steps, {n} agents landed; {len(predicted)} conflicting pair(s) "
        f"predicted, {len(confirmed)} hit by a sync"
        + (f", kept at {root}" if keep else ", nothing left behind")
    )
    return {
        "ok": ok,
        "code": "ok",
        "summary": summary,
        "path": str(root) if keep else None,
        "steps": d.steps,
    }
