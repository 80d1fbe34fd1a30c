"""Repository facts, always asked of git: where the common dir is, which worktree is the
hub, what main is and where it points, which worktrees exist."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from guard import gitrun
from guard.config import Config, load
from guard.errors import GitError, Refusal
from guard.policy import choose_main
from guard.store import Store

ZERO = "0" * 40


@dataclass(frozen=True)
class Worktree:
    path: str
    head: str | None
    branch: str | None  # full ref, e.g. refs/heads/main; None when detached or bare
    bare: bool = False
    locked: bool = False
    prunable: bool = False

    @property
    def exists(self) -> bool:
        return os.path.isdir(self.path)


def parse_worktrees(z: str) -> list[Worktree]:
    """`git worktree list --porcelain -z`: records separated by an empty field."""
    out: list[Worktree] = []
    cur: dict[str, str] = {}

    def flush() -> None:
        if "worktree" in cur:
            out.append(
                Worktree(
                    path=cur["worktree"],
                    head=cur.get("HEAD"),
                    branch=cur.get("branch"),
                    bare="bare" in cur,
                    locked="locked" in cur,
                    prunable="prunable" in cur,
                )
            )
        cur.clear()

    for field_ in z.split("\0"):
        if not field_:
            flush()
            continue
        name, _, value = field_.partition(" ")
        cur[name] = value
    flush()
    return out


class Repo:
    """Facts about one repository, discovered from any directory inside it."""

    def __init__(self, common_dir: Path, git_dir: Path, toplevel: Path | None) -> None:
        self.common_dir = common_dir
        self.git_dir = git_dir
        self.toplevel = toplevel
        self.state_dir = common_dir / "git-lane"
        self.store = Store(self.state_dir)

    @classmethod
    def discover(cls, start: str | os.PathLike[str] | None = None) -> Repo:
        cwd = os.fspath(start) if start is not None else os.getcwd()
        if not os.path.isdir(cwd):
            raise Refusal(
                "not_a_git_repo",
                f"{cwd} is not a directory",
                next=["cd <your repository> && git lane status"],
                details={"path": cwd},
            )
        res = gitrun.run(
            ["rev-parse", "--path-format=absolute", "--git-common-dir", "--git-dir", "--is-bare-repository"],
            cwd,
            check=False,
        )
        if not res.ok:
            raise Refusal(
                "not_a_git_repo",
                f"{cwd} is not inside a git repository",
                next=["cd <your repository> && git lane status", "git init"],
                details={"path": cwd},
            )
        common, gdir, bare = res.stdout.splitlines()[:3]
        top: Path | None = None
        if bare != "true":
            t = gitrun.run(["rev-parse", "--show-toplevel"], cwd, check=False)
            if t.ok and t.stdout.strip():
                top = Path(t.stdout.rstrip("\n"))
        return cls(Path(common), Path(gdir), top)

    # -- config and main ---------------------------------------------------------
    @cached_property
    def config(self) -> Config:
        return load(self.store.config_path)

    def reload_config(self) -> Config:
        self.__dict__.pop("config", None)
        self.__dict__.pop("main_branch", None)
        return self.config

    def ref_sha(self, ref: str) -> str | None:
        res = gitrun.run(["rev-parse", "-q", "--verify", f"{ref}^{{commit}}"], self.common_dir, check=False)
        return res.stdout.strip() if res.ok else None

    @cached_property
    def main_branch(self) -> str:
        configured = self.config.get("main_branch")
        # facts the decision does not need are not asked for (one git call, not two)
        has_main = not configured and self.ref_sha("refs/heads/main") is not None
        has_master = not configured and not has_main and self.ref_sha("refs/heads/master") is not None
        name = choose_main(configured, has_main, has_master)
        if name is not None and (not configured or self.ref_sha(f"refs/heads/{name}")):
            return name
        raise Refusal(
            "no_main_branch",
            (
                f"the configured main branch {configured!r} does not exist"
                if configured
                else "this repository has neither a main nor a master branch with a commit"
            ),
            next=(
                ["git lane config set main_branch <branch>", "git commit --allow-empty -m init"]
                if configured
                else ["git commit --allow-empty -m init", "git lane config set main_branch <branch>"]
            ),
            details={"configured": configured},
        )

    @property
    def main_ref(self) -> str:
        return f"refs/heads/{self.main_branch}"

    def main_sha(self) -> str:
        sha = self.ref_sha(self.main_ref)
        if sha is None:
            raise Refusal(
                "no_main_branch",
                f"{self.main_ref} vanished",
                next=["git lane doctor"],
            )
        return sha

    # -- worktrees -----------------------------------------------------------------
    def worktrees(self) -> list[Worktree]:
        res = gitrun.run(["worktree", "list", "--porcelain", "-z"], self.common_dir)
        return parse_worktrees(res.stdout)

    def hub(self, wts: list[Worktree] | None = None) -> Worktree | None:
        for wt in wts if wts is not None else self.worktrees():
            if wt.branch == self.main_ref and not wt.bare:
                return wt
        return None

    def worktree_git_dir(self, path: str) -> Path | None:
        """The administrative dir of the worktree checked out at `path`."""
        dotgit = Path(path) / ".git"
        try:
            if dotgit.is_dir():
                return dotgit
            text = dotgit.read_text()
        except OSError:
            return None
        m = re.match(r"gitdir: (.*)", text.strip())
        if not m:
            return None
        gd = Path(m.group(1))
        return gd if gd.is_absolute() else (Path(path) / gd).resolve()

    # -- identity ------------------------------------------------------------------
    @cached_property
    def slug(self) -> str:
        """`<repo-name>-<8hex>`: stable per repository, unique per common dir."""
        common = os.path.realpath(self.common_dir)
        base = Path(common).parent.name if Path(common).name == ".git" else Path(common).name
        base = re.sub(r"[^a-z0-9]+", "-", base.lower().removesuffix(".git")).strip("-") or "repo"
        import hashlib

        digest = hashlib.sha256(common.encode("utf-8", "surrogateescape")).hexdigest()[:8]
        return f"{base[:40]}-{digest}"

    def repo_root(self) -> Path:
        """The directory that 'inside the repository' is measured against."""
        common = Path(os.path.realpath(self.common_dir))
        return common.parent if common.name == ".git" else common

    def git(self, args: list[str], cwd: str | os.PathLike[str] | None = None, check: bool = True) -> gitrun.GitResult:
        return gitrun.run(args, cwd if cwd is not None else self.common_dir, check=check)


def is_ancestor(repo: Repo, a: str, b: str, cwd: str | os.PathLike[str] | None = None) -> bool:
    res = repo.git(["merge-base", "--is-ancestor", a, b], cwd, check=False)
    if res.returncode not in (0, 1):
        raise GitError(res.argv, res.returncode, res.stdout, res.stderr)
    return res.returncode == 0
