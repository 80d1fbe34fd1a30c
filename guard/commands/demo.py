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
