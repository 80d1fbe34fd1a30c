"""guard.shimpolicy.decide_git as a table: argv x environment x lane state -> a code or a
pass; and hypothesis-generated command lines and environments, which may only ever get
a pass or a registered code (never a crash)."""

from __future__ import annotations

import dataclasses
import os
import functools
import shlex
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import Repo

from guard import shim
from guard.errors import CODES
from guard.shimpolicy import GitFacts, alias_needed, decide_git, parse, read_only

LANE = "/w/lanes/alpha"
GD = "/w/repo/.git/worktrees/alpha"
COMMON = "/w/repo/.git"
HOME = "/home/u"
XDG = "/home/u/.config"
REVS = {"main", "master", "lane/alpha", "lane/beta", "HEAD", "v1", "abc123"}


@functools.cache
def real_long_options(cmd: str, sub: str | None) -> frozenset[str] | None:
    """What the shim asks the real git (guard/shim.py _long_options), asked once."""
    return shim._long_options("alpha", str(Path(__file__).parent), cmd, sub)


def facts(**over: Any) -> GitFacts:
    base = GitFacts(
        long_options=real_long_options,
        lane="alpha",
        lane_path=LANE,
        lane_git_dir=GD,
        common=COMMON,
        cwd=LANE,
        head="refs/heads/lane/alpha",
        main="main",
        must_sync=False,
        home=HOME,
        xdg_config_home=XDG,
        exec_path="/usr/lib/git-core",
        is_rev=lambda n: n in REVS,
        realpath=lambda p: __import__("os").path.normpath(p),
    )
    return dataclasses.replace(base, **over)


ENV = {"HOME": HOME, "XDG_CONFIG_HOME": XDG}
# rerere off in the environment, as exec sets it for a sandboxed CMD
OFF = {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "rerere.enabled", "GIT_CONFIG_VALUE_0": "false"}


def first_on_path(name: str, search: str) -> str:
    """A `which` where the first PATH entry has every program."""
    return f"{search.split(':')[0]}/{name}"


STALE = {"must_sync": True}
DETACHED = {"head": None}
REBASING = {"head": None, "rebase_in_progress": True}
OTHER_HEAD = {"head": "refs/heads/feature"}

# what a bare repository the lane wrote at LANE/nest, and a linked one at LANE/wt, hold
BARE_NEST = {f"{LANE}/nest/{n}" for n in ("HEAD", "refs", "objects", "config")}
LINKED_NEST = {f"{LANE}/wt/HEAD", f"{LANE}/wt/commondir"}

# (command line, extra environment, lane state, expected code or None for a pass)
TABLE: list[tuple[str, dict[str, str], dict[str, Any], str | None]] = [
    # read-only, anywhere and in any state
    ("status", {}, {}, None),
    ("status --porcelain=v2 -z", {}, STALE, None),
    ("-P log --oneline main", {}, {}, None),
    ("--no-pager diff main...HEAD", {}, {}, None),
    ("-C /elsewhere log", {}, {}, None),
    ("show main:README.md", {}, OTHER_HEAD, None),
    ("rev-parse HEAD", {"GIT_DIR": "/elsewhere/.git"}, {}, None),
    ("branch", {}, {}, None),
    ("branch -a -vv", {}, {}, None),
    ("branch --list 'lane/*'", {}, {}, None),
    ("branch --contains HEAD", {}, {}, None),
    ("branch --show-current", {}, {}, None),
    ("tag", {}, {}, None),
    ("tag -l 'v*'", {}, {}, None),
    ("stash list", {}, {}, None),
    ("stash show -p", {}, {}, None),
    ("worktree list --porcelain", {}, {}, None),
    ("config --get user.name", {}, {}, None),
    ("config core.hooksPath", {}, {}, None),
    ("symbolic-ref HEAD", {}, {}, None),
    ("reflog", {}, {}, None),
    ("notes list", {}, {}, None),
    ("remote -v", {}, {}, None),
    # ... but git reads its configuration first: only exec's, and the lane's own repository
    ("status", {"HOME": "/tmp/fake"}, {}, "unsafe_config"),
    ("log", {"GIT_CONFIG_GLOBAL": "/dev/null"}, {}, "unsafe_config"),
    ("config --get a.b", {"GIT_CONFIG": "/tmp/x"}, {}, "unsafe_config"),
    ("lane status", {"XDG_CONFIG_HOME": "/tmp/x"}, {}, "unsafe_config"),
    (f"--git-dir={LANE}/b.git log", {}, {}, "unsafe_config"),
    ("log", {"GIT_DIR": f"{LANE}/sub/.git"}, {}, "unsafe_config"),
    ("log", {"GIT_DIR": f"{LANE}/.git"}, {}, None),
    (f"--git-dir={LANE}/b.git add x", {}, {}, "unsafe_config"),
    (
        "log",
        {"PATH": "/lane/.bin:/usr/bin"},
        {"exec_env_path": "/usr/bin", "which": first_on_path},
        "unsafe_config",
    ),
    ("log", {"PATH": "/usr/bin"}, {"exec_env_path": "/usr/bin", "which": first_on_path}, None),
    # programs and other refs named in config, writes of config outside the lane
    ("config trailer.x.command foo", {}, {}, "unsafe_config"),
    ("-c trailer.x.cmd=foo interpret-trailers", {}, {}, "unsafe_config"),
    ("config rebase.updateRefs true", {}, {}, "unsafe_config"),
    ("rebase --update-refs main", {}, {}, "main_mutation_refused"),
    ("rebase main", {}, {"update_refs_config": lambda: True}, "main_mutation_refused"),
    ("rebase --no-update-refs main", {}, {"update_refs_config": lambda: True}, None),
    ("rebase --continue", {}, {"update_refs_config": lambda: True}, None),
    ("config --global a.b c", {}, {}, "path_outside_lane"),
    ("config --global --get a.b", {}, {}, None),
    ("config --file=/tmp/x a.b c", {}, {}, "path_outside_lane"),
    ("maintenance register", {}, {}, "path_outside_lane"),
    ("config a.b c", {"GIT_CONFIG": "/tmp/x"}, {}, "hooks_disabled"),
    (
        "checkout foo",
        {},
        {"remote_branch": lambda n: f"refs/remotes/origin/{n}"},
        "main_mutation_refused",
    ),
    ("checkout --no-guess foo", {}, {"remote_branch": lambda n: f"refs/remotes/origin/{n}"}, None),
    ("lane sync alpha", {}, STALE, None),
    ("lane land alpha", {}, {}, None),
    ("--version", {}, {}, None),
    ("", {}, {}, None),
    # the lane's own work
    ("add -A", {}, {}, None),
    ("add -A", {}, STALE, None),
    ("rm old.txt", {}, STALE, None),
    ("commit -m work", {}, {}, None),
    ("commit -m work", {}, STALE, None),
    ("commit --amend --no-edit", {}, {}, None),
    ("commit -m fix", {}, REBASING, None),
    ("rebase main", {}, STALE, None),
    ("rebase --onto main HEAD~2", {}, STALE, None),
    ("rebase --continue", {}, {**STALE, **REBASING}, None),
    ("rebase --abort", {}, REBASING, None),
    ("rebase --skip", {}, {**STALE, **REBASING}, None),
    ("merge main", {}, {}, None),
    ("reset --hard HEAD~1", {}, {}, None),
    ("reset -- file.txt", {}, OTHER_HEAD, None),
    ("cherry-pick abc123", {}, {}, None),
    ("checkout -- README.md", {}, {}, None),
    ("checkout main -- README.md", {}, {}, None),
    ("checkout README.md", {}, {}, None),
    ("checkout HEAD", {}, {}, None),
    ("checkout main README.md", {}, {}, None),
    ("checkout .", {}, {}, None),
    ("checkout HEAD", {}, DETACHED, "main_mutation_refused"),
    ("checkout lane/alpha", {}, OTHER_HEAD, None),
    ("switch lane/alpha", {}, DETACHED, None),
    ("restore --staged x", {}, {}, None),
    ("fetch origin", {}, {}, None),
    ("fetch origin main:refs/remotes/origin/main", {}, {}, None),
    ("fetch origin", {}, STALE, None),
    ("pull --rebase origin main", {}, {}, None),
    ("update-ref refs/heads/lane/alpha HEAD~1", {}, {}, None),
    ("update-ref refs/worktree/keep HEAD", {}, {}, None),
    ("update-ref HEAD abc123", {}, {}, None),
    ("branch -f lane/alpha HEAD~1", {}, {}, None),
    ("branch -u origin/main", {}, {}, None),
    ("symbolic-ref HEAD refs/heads/lane/alpha", {}, DETACHED, None),
    ("reflog expire --expire=now lane/alpha", {}, {}, None),
    ("gc", {}, {}, None),
    ("gc --auto", {}, {}, None),
    ("config user.name Me", {}, {}, None),
    ("config --worktree core.sparseCheckout true", {}, {}, None),
    ("-c user.name=Me commit -m x", {}, {}, None),
    ("-c core.editor=true commit -m x", {}, {}, None),
    ("stash apply", {}, {}, None),
    ("commit -m x", {"GIT_INDEX_FILE": GD + "/index"}, {}, None),
    ("--git-dir=" + GD + " --work-tree=" + LANE + " commit -m x", {}, {"cwd": "/tmp"}, None),
    ("--git-dir=" + LANE + "/.git commit -m x", {}, {}, None),
    ("-C sub commit -m x", {}, {}, None),
    ("commit -m x", {"GIT_EXEC_PATH": "/usr/lib/git-core"}, {}, None),
    ("commit -m x", {"GIT_OBJECT_DIRECTORY": COMMON + "/objects"}, {}, None),
    ("commit -m x", {"GIT_COMMON_DIR": COMMON}, {}, None),
    ("init sub", {}, {}, None),
    ("clone https://example.com/x.git", {}, {}, None),
    # main_mutation_refused
    ("checkout main", {}, {}, "main_mutation_refused"),
    ("checkout master", {}, {"main": "master"}, "main_mutation_refused"),
    ("switch main", {}, {}, "main_mutation_refused"),
    ("switch lane/beta", {}, {}, "main_mutation_refused"),
    ("switch -c feature", {}, {}, "main_mutation_refused"),
    ("checkout -b feature", {}, {}, "main_mutation_refused"),
    ("checkout -B main origin/main", {}, {}, "main_mutation_refused"),
    ("switch --detach HEAD~1", {}, {}, "main_mutation_refused"),
    ("checkout --detach", {}, {}, "main_mutation_refused"),
    ("checkout abc123", {}, {}, "main_mutation_refused"),
    ("checkout -", {}, {}, "main_mutation_refused"),
    ("branch -f main HEAD", {}, {}, "main_mutation_refused"),
    ("branch -D main", {}, {}, "main_mutation_refused"),
    ("branch -d lane/beta", {}, {}, "main_mutation_refused"),
    ("branch -d lane/alpha", {}, {}, "main_mutation_refused"),
    ("branch -m main old", {}, {}, "main_mutation_refused"),
    ("branch -M newname", {}, {}, "main_mutation_refused"),
    ("branch -c lane/alpha copy", {}, {}, "main_mutation_refused"),
    ("branch -C main", {}, {}, "main_mutation_refused"),
    ("branch feature", {}, {}, "main_mutation_refused"),
    ("branch --delete lane/beta", {}, {}, "main_mutation_refused"),
    ("tag v2", {}, {}, "main_mutation_refused"),
    ("tag -d v1", {}, {}, "main_mutation_refused"),
    ("update-ref refs/heads/main HEAD", {}, {}, "main_mutation_refused"),
    ("update-ref -d refs/heads/lane/beta", {}, {}, "main_mutation_refused"),
    ("update-ref --stdin", {}, {}, "main_mutation_refused"),
    ("update-ref --no-deref HEAD abc123", {}, {}, "main_mutation_refused"),
    ("symbolic-ref refs/heads/main refs/heads/lane/alpha", {}, {}, "main_mutation_refused"),
    ("symbolic-ref HEAD refs/heads/main", {}, {}, "main_mutation_refused"),
    ("symbolic-ref -d HEAD", {}, {}, "main_mutation_refused"),
    ("reflog expire --updateref --expire=now lane/alpha", {}, {}, "main_mutation_refused"),
    ("reflog delete --updateref lane/alpha@{0}", {}, {}, "main_mutation_refused"),
    ("reflog delete main@{1}", {}, {}, "main_mutation_refused"),
    ("reflog expire --expire=now --all", {}, {}, "main_mutation_refused"),
    ("push", {}, {}, "main_mutation_refused"),
    ("push origin lane/alpha", {}, {}, "main_mutation_refused"),
    ("push . HEAD:main", {}, {}, "main_mutation_refused"),
    ("fetch origin main:main", {}, {}, "main_mutation_refused"),
    ("fetch . HEAD:refs/heads/main", {}, {}, "main_mutation_refused"),
    ("fetch --depth=1 origin", {}, {}, "main_mutation_refused"),
    ("fetch --unshallow", {}, {}, "main_mutation_refused"),
    ("fetch --deepen 3 origin", {}, {}, "main_mutation_refused"),
    ("fetch --shallow-since=2020-01-01 origin", {}, {}, "main_mutation_refused"),
    ("pull origin main:main", {}, {}, "main_mutation_refused"),
    ("replace abc123 HEAD", {}, {}, "main_mutation_refused"),
    ("notes add -m hi main", {}, {}, "main_mutation_refused"),
    ("worktree add ../x", {}, {}, "main_mutation_refused"),
    ("worktree remove ../x", {}, {}, "main_mutation_refused"),
    ("worktree move a b", {}, {}, "main_mutation_refused"),
    ("worktree prune", {}, {}, "main_mutation_refused"),
    ("worktree lock " + LANE, {}, {}, "main_mutation_refused"),
    ("worktree unlock " + LANE, {}, {}, "main_mutation_refused"),
    ("gc --prune=now", {}, {}, "main_mutation_refused"),
    ("prune", {}, {}, "main_mutation_refused"),
    ("filter-branch -f HEAD", {}, {}, "main_mutation_refused"),
    ("commit -m x", {}, OTHER_HEAD, "main_mutation_refused"),
    ("commit -m x", {}, DETACHED, "main_mutation_refused"),
    ("merge lane/beta", {}, OTHER_HEAD, "main_mutation_refused"),
    ("rebase main", {}, OTHER_HEAD, "main_mutation_refused"),
    ("rebase main other", {}, {}, "main_mutation_refused"),
    ("reset --hard abc123", {}, OTHER_HEAD, "main_mutation_refused"),
    ("cherry-pick abc123", {}, OTHER_HEAD, "main_mutation_refused"),
    ("revert HEAD", {}, OTHER_HEAD, "main_mutation_refused"),
    ("am x.patch", {}, DETACHED, "main_mutation_refused"),
    # hooks_disabled
    ("-c core.hooksPath=/dev/null commit -m x", {}, {}, "hooks_disabled"),
    ("-c core.hookspath=/dev/null status", {}, {}, "hooks_disabled"),
    ("-ccore.hooksPath=/dev/null commit", {}, {}, "hooks_disabled"),
    ("-c hook.pre-commit.command=true commit", {}, {}, "hooks_disabled"),
    ("-c include.path=/tmp/x.cfg commit", {}, {}, "hooks_disabled"),
    ("-c includeIf.onbranch:lane.path=/tmp/x commit", {}, {}, "hooks_disabled"),
    ("--config-env=core.hooksPath=EVIL commit", {}, {}, "hooks_disabled"),
    ("--config-env core.hooksPath=EVIL commit", {}, {}, "hooks_disabled"),
    (
        "commit",
        {
            "GIT_CONFIG_COUNT": "1",
            "GIT_CONFIG_KEY_0": "core.hooksPath",
            "GIT_CONFIG_VALUE_0": "/dev/null",
        },
        {},
        "hooks_disabled",
    ),
    ("commit", {"GIT_CONFIG_COUNT": "x"}, {}, "hooks_disabled"),
    ("commit", {"GIT_CONFIG_PARAMETERS": "'core.hooksPath'='/dev/null'"}, {}, "hooks_disabled"),
    ("status", {"GIT_CONFIG_PARAMETERS": "'core.hookspath'='/x'"}, {}, "hooks_disabled"),
    ("commit", {"GIT_CONFIG_GLOBAL": "/tmp/evil"}, {}, "hooks_disabled"),
    ("commit", {"GIT_CONFIG_SYSTEM": "/tmp/evil"}, {}, "hooks_disabled"),
    ("--exec-path=/tmp/fakegit commit", {}, {}, "hooks_disabled"),
    ("commit", {"GIT_EXEC_PATH": "/tmp/fakegit"}, {}, "hooks_disabled"),
    ("config core.hooksPath /dev/null", {}, {}, "hooks_disabled"),
    ("config --global core.hooksPath /dev/null", {}, {}, "hooks_disabled"),
    ("config --worktree core.hooksPath /dev/null", {}, {}, "hooks_disabled"),
    ("config --system hook.x.command true", {}, {}, "hooks_disabled"),
    ("config --add include.path /tmp/x", {}, {}, "hooks_disabled"),
    ("config includeIf.gitdir:/x.path /tmp/y", {}, {}, "hooks_disabled"),
    ("config extensions.worktreeConfig true", {}, {}, "hooks_disabled"),
    ("config --unset core.hooksPath", {}, {}, "hooks_disabled"),
    ("config --remove-section core", {}, {}, "hooks_disabled"),
    ("config set core.hooksPath /dev/null", {}, {}, "hooks_disabled"),
    ("config --edit", {}, {}, "hooks_disabled"),
    ("commit -m x", {"HOME": "/tmp/fake"}, {}, "hooks_disabled"),
    ("commit -m x", {"XDG_CONFIG_HOME": "/tmp/fake"}, {}, "hooks_disabled"),
    ("add x", {"XDG_CONFIG_HOME": ""}, {}, "hooks_disabled"),
    # path_outside_lane
    ("-C /w/repo commit -m x", {}, {}, "path_outside_lane"),
    ("-C .. add x", {}, {}, "path_outside_lane"),
    ("--git-dir=/w/repo/.git commit -m x", {}, {}, "path_outside_lane"),
    ("--git-dir /elsewhere/.git commit", {}, {}, "path_outside_lane"),
    ("--work-tree=/w/repo commit -m x", {}, {}, "path_outside_lane"),
    ("commit -m x", {"GIT_DIR": "/w/repo/.git"}, {}, "path_outside_lane"),
    ("add x", {"GIT_WORK_TREE": "/w/repo"}, {}, "path_outside_lane"),
    ("add x", {"GIT_INDEX_FILE": "/tmp/index"}, {}, "path_outside_lane"),
    ("commit -m x", {"GIT_COMMON_DIR": "/elsewhere/.git"}, {}, "path_outside_lane"),
    ("commit -m x", {"GIT_OBJECT_DIRECTORY": "/tmp/objects"}, {}, "path_outside_lane"),
    ("commit -m x", {}, {"cwd": "/w/repo"}, "path_outside_lane"),
    ("init /tmp/other", {}, {}, "path_outside_lane"),
    ("clone https://example.com/x.git /tmp/x", {}, {}, "path_outside_lane"),
    ("diff --output=/tmp/x.patch", {}, {}, "path_outside_lane"),
    ("log -p --output ../x.patch", {}, {}, "path_outside_lane"),
    ("archive -o /tmp/x.tar HEAD", {}, {}, "path_outside_lane"),
    ("diff --output=x.patch main", {}, {}, None),
    ("grep -o foo", {}, {}, None),
    # a file a reading command writes outside the lane, stash list/show's log/diff options
    # too (before stash's own options are judged); fsck --lost-found (<common>/lost-found)
    ("stash list --output=/tmp/x", {}, {}, "path_outside_lane"),
    ("stash show --output /tmp/x", {}, {}, "path_outside_lane"),
    ("log --ou=/tmp/x", {}, {}, "path_outside_lane"),
    ("fsck --lost-found", {}, {}, "path_outside_lane"),
    ("fsck --full --l", {}, {}, "path_outside_lane"),
    ("fsck --full", {}, {}, None),
    # parse-options takes `--` as the value of the option before it and goes on
    ("format-patch --subject-prefix -- -o /tmp/x -1", {}, {}, "path_outside_lane"),
    ("config --default -- --file /tmp/x a.b c", {}, {}, "path_outside_lane"),
    ("log -- x", {}, {}, None),
    ("commit -a -m x -- x", {}, {}, None),
    # a git dir whose index is not the lane's: git status refreshes (writes) it
    ("status", {"GIT_DIR": COMMON}, {}, "path_outside_lane"),
    ("--git-dir=/w/repo/.git log", {}, {}, "path_outside_lane"),
    ("status", {"GIT_DIR": "/w/repo/.git/worktrees/beta"}, {}, "path_outside_lane"),
    ("status", {"GIT_DIR": GD}, {}, None),
    # sparse-checkout turns on extensions.worktreeConfig in the shared config first
    ("sparse-checkout init", {}, {}, "unsafe_config"),
    ("sparse-checkout set a", {}, {"config_value": lambda _k: "false"}, "unsafe_config"),
    ("sparse-checkout set a", {}, {"config_value": lambda _k: "true"}, "unsafe_config"),
    ("sparse-checkout list", {}, {}, None),
    # stash_shared
    ("stash", {}, {}, "stash_shared"),
    ("stash push -m wip", {}, {}, "stash_shared"),
    ("stash -u", {}, {}, "stash_shared"),
    ("stash save wip", {}, {}, "stash_shared"),
    ("stash pop", {}, {}, "stash_shared"),
    ("stash drop stash@{1}", {}, {}, "stash_shared"),
    ("stash clear", {}, {}, "stash_shared"),
    ("stash branch b", {}, {}, "stash_shared"),
    # sync_required
    ("merge main", {}, STALE, "sync_required"),
    ("checkout -- README.md", {}, STALE, "sync_required"),
    ("restore x", {}, STALE, "sync_required"),
    ("reset --hard", {}, STALE, "sync_required"),
    ("cherry-pick abc123", {}, STALE, "sync_required"),
    ("rebase lane/beta", {}, STALE, "sync_required"),
    ("mv a b", {}, STALE, "sync_required"),
    ("clean -fd", {}, STALE, "sync_required"),
    ("apply x.patch", {}, STALE, "sync_required"),
    ("stash apply", {}, STALE, "sync_required"),
    # red team: a prefix of a long option is that option to git (unknown_option, or the
    # refusal of the command with it spelled out)
    (
        "reflog expire --expire=now --expire-unreachable=now --al lane/alpha",
        {},
        {},
        "main_mutation_refused",
    ),
    ("gc -q --prun=now", {}, {}, "main_mutation_refused"),
    ("fetch --dept=1 origin", {}, {}, "main_mutation_refused"),
    ("branch --del --forc lane/alpha victim", {}, {}, "main_mutation_refused"),
    ("branch --cop lane/alpha newb", {}, {}, "main_mutation_refused"),
    ("checkout --orph x", {}, {}, "main_mutation_refused"),
    ("checkout --det", {}, {}, "main_mutation_refused"),
    ("config --glo --unset-al core.fsmonitor", {}, {}, "unsafe_config"),
    ("commit --amen --no-edit", {}, {}, "unknown_option"),
    ("commit --frobnicate", {}, {}, "unknown_option"),
    ("branch --sort=-committerdate --list", {}, {}, None),
    # red team: init / clone writing outside the lane, or re-initialising it
    ("init --separate-git-dir=/tmp/sep", {}, {}, "path_outside_lane"),
    ("init --separate-git-dir /tmp/sep sub", {}, {}, "path_outside_lane"),
    ("init", {}, {"exists": lambda p: True}, "path_outside_lane"),
    ("init sub", {}, {"exists": lambda p: p.endswith("/.git")}, None),
    ("init newdir", {"GIT_DIR": GD}, {}, "path_outside_lane"),
    ("clone --separate-git-dir=/tmp/sep https://example.com/x.git", {}, {}, "path_outside_lane"),
    ("clone --separate-git-dir /tmp/sep https://example.com/x.git y", {}, {}, "path_outside_lane"),
    ("clone -b main https://example.com/x.git y", {}, {}, None),
    # red team: options and arguments that name a file git writes
    ("checkout-index -a -f --prefix=/w/repo/", {}, {}, "path_outside_lane"),
    ("checkout-index -a -f --prefix=out/", {}, {}, None),
    ("format-patch -o /tmp/x HEAD~1", {}, {}, "path_outside_lane"),
    ("format-patch -o/tmp/x HEAD~1", {}, {}, "path_outside_lane"),
    ("format-patch --output-directory=/tmp/x HEAD~1", {}, {}, "path_outside_lane"),
    ("format-patch -o patches HEAD~1", {}, {}, None),
    ("bundle create /tmp/x.bundle HEAD", {}, {}, "path_outside_lane"),
    ("config --file /tmp/x k.v v", {}, {}, "path_outside_lane"),
    ("config -f /tmp/x k.v v", {}, {}, "path_outside_lane"),
    ("archive --output=/tmp/x.tar HEAD", {}, {}, "path_outside_lane"),
    ("log --outp=/tmp/x", {}, {}, "path_outside_lane"),
    ("bugreport -o /tmp/x", {}, {}, "path_outside_lane"),
    ("diagnose -o /tmp/x", {}, {}, "path_outside_lane"),
    ("fast-export --export-marks=/tmp/m HEAD", {}, {}, "path_outside_lane"),
    ("pack-objects /tmp/pk", {}, {}, "path_outside_lane"),
    ("apply --unsafe-paths x.patch", {}, {}, "path_outside_lane"),
    ("fast-import", {}, {}, "main_mutation_refused"),
    # red team: a .git inside the lane makes git use another repository
    (
        "add x",
        {},
        {"cwd": LANE + "/s", "exists": lambda p: p == LANE + "/s/.git"},
        "path_outside_lane",
    ),
    (
        "commit -m x",
        {},
        {"cwd": LANE + "/s/t", "exists": lambda p: p == LANE + "/s/.git"},
        "path_outside_lane",
    ),
    ("-C s commit -m x", {}, {"exists": lambda p: p == LANE + "/s/.git"}, "path_outside_lane"),
    ("add x", {}, {"cwd": LANE + "/s", "exists": lambda p: p == LANE + "/.git"}, None),
    # red team: config that makes git run a program (unsafe_config)
    ("config core.fsmonitor /tmp/p", {}, {}, "unsafe_config"),
    ("config --global core.fsmonitor /tmp/p", {}, {}, "unsafe_config"),
    ("config --global core.sshCommand 'ssh -v'", {}, {}, "unsafe_config"),
    ("config core.pager less", {}, {}, "unsafe_config"),
    ("config diff.x.textconv cat", {}, {}, "unsafe_config"),
    ("config filter.lfs.clean 'x %f'", {}, {}, "unsafe_config"),
    ("config alias.st status", {}, {}, "unsafe_config"),
    ("config core.worktree /tmp", {}, {}, "unsafe_config"),
    ("config set credential.helper store", {}, {}, "unsafe_config"),
    ("config --remove-section filter.x", {}, {}, "unsafe_config"),
    ("config url.ext::sh.insteadOf https://", {}, {}, "unsafe_config"),
    ("-c core.fsmonitor=/tmp/p status", {}, {}, "unsafe_config"),
    ("-c diff.external=/tmp/p diff", {}, {}, "unsafe_config"),
    ("-c core.sshCommand=/tmp/p fetch origin", {}, {}, "unsafe_config"),
    ("--config-env=core.pager=EVIL log", {}, {}, "unsafe_config"),
    ("--config-env=alias.x=EVIL x", {}, {}, "unsafe_config"),
    ("status", {"GIT_CONFIG_PARAMETERS": "'core.fsmonitor'='/tmp/p'"}, {}, "unsafe_config"),
    ("-c core.pager=cat log", {}, {}, None),
    ("-c core.pager=/tmp/p log", {}, {}, "unsafe_config"),
    ("ls-remote --upload-pack=/tmp/p .", {}, {}, "unsafe_config"),
    ("ls-remote --upl=/tmp/p .", {}, {}, "unsafe_config"),
    # git completes any unique prefix: ls-remote --u/--e, push --e, fetch --upl...
    ("ls-remote --u=/tmp/p .", {}, {}, "unsafe_config"),
    ("ls-remote --up /tmp/p .", {}, {}, "unsafe_config"),
    ("ls-remote --e=/tmp/p .", {}, {}, "unsafe_config"),
    ("ls-remote --sort -- --upload-pack=/tmp/p .", {}, {}, "unsafe_config"),
    ("push --e=/tmp/p origin", {}, {}, "unsafe_config"),
    ("push --rec=/tmp/p origin", {}, {}, "unsafe_config"),
    ("fetch --upl=/tmp/p origin", {}, {}, "unsafe_config"),
    ("archive --remote=. --e=/tmp/p HEAD", {}, {}, "unsafe_config"),
    ("ls-remote --heads .", {}, {}, None),
    ("fetch --upload-pack /tmp/p origin", {}, {}, "unsafe_config"),
    ("archive --remote=. --exec=/tmp/p HEAD", {}, {}, "unsafe_config"),
    # red team 13H: git-upload-archive runs in a repository the lane made in its worktree
    ("archive --remote=nest --format=evil HEAD", {}, {}, "unsafe_config"),
    ("archive --remote ./nest/ HEAD", {}, {}, "unsafe_config"),
    ("archive --remote=file:///w/lanes/alpha/nest HEAD", {}, {}, "unsafe_config"),
    ("archive --rem=nest HEAD", {}, {}, "unsafe_config"),
    ("-C sub archive --remote=../nest HEAD", {}, {}, "unsafe_config"),
    ("archive --remote=. HEAD", {}, {}, None),
    ("archive --remote=/w/lanes/alpha/.git HEAD", {}, {}, None),
    ("-C sub archive --remote=.. HEAD", {}, {}, None),
    ("archive --remote=/elsewhere/repo HEAD", {}, {}, None),
    ("archive --remote=host:nest HEAD", {}, {}, None),
    ("archive --remote=ssh://host/w/lanes/alpha/nest HEAD", {}, {}, None),
    ("archive HEAD -- --remote=nest", {}, {}, None),
    # and a bare repository (HEAD, and refs or commondir) is the cwd's repository
    (
        "diff HEAD~ HEAD",
        {},
        {"cwd": LANE + "/nest", "exists": BARE_NEST.__contains__},
        "unsafe_config",
    ),
    ("log", {}, {"cwd": LANE + "/nest/refs", "exists": BARE_NEST.__contains__}, "unsafe_config"),
    ("-C nest/refs log", {}, {"exists": BARE_NEST.__contains__}, "unsafe_config"),
    ("-C nest add x", {}, {"exists": BARE_NEST.__contains__}, "path_outside_lane"),
    ("log", {}, {"cwd": LANE + "/wt", "exists": LINKED_NEST.__contains__}, "unsafe_config"),
    ("log", {}, {"cwd": LANE + "/half", "exists": {LANE + "/half/HEAD"}.__contains__}, None),
    ("log", {}, {"cwd": LANE + "/sub", "exists": BARE_NEST.__contains__}, None),
    ("clone -u /tmp/p /w/repo sub", {}, {}, "unsafe_config"),
    # red team 3 (F1-F4): programs git runs with its own directory first on PATH
    ("rebase --exec 'make test' main", {}, {}, "unsafe_config"),
    ("rebase -x 'make test' main", {}, {}, "unsafe_config"),
    ("rebase -ix true main", {}, {}, "unsafe_config"),
    ("grep -Oevil -e a", {}, {}, "unsafe_config"),
    ("grep -O -e a", {}, {}, "unsafe_config"),
    ("grep --open-files-in-pager=x -e a", {}, {}, "unsafe_config"),
    ("grep --open=x -e a", {}, {}, "unsafe_config"),
    ("grep --op=x -e a", {}, {}, "unsafe_config"),
    ("grep -e -- -Ox", {}, {}, "unsafe_config"),
    ("grep -e a -- x", {}, {}, None),
    ("grep -e a", {}, {}, None),
    ("diff -Oorder HEAD", {}, {}, None),
    ("difftool -y -x 'sh -c x'", {}, {}, "unsafe_config"),
    ("difftool -y --extcmd=x", {}, {}, "unsafe_config"),
    ("difftool -y --tool vimdiff", {}, {}, "unsafe_config"),
    ("clone -q --template=/tmp/t /w/o.git sub", {}, {}, "unsafe_config"),
    # red team 13R: a strategy is git-merge-NAME (a lane's file for a NAME with `/`); -X
    # values resolve/octopus hand to read-tree as options (index-output=F writes F)
    ("rebase -s a/x HEAD~1", {}, {}, "unsafe_config"),
    ("rebase -fsa/x HEAD~1", {}, {}, "unsafe_config"),
    ("rebase --strategy a/x HEAD~1", {}, {}, "unsafe_config"),
    ("rebase --strat=a/x HEAD~1", {}, {}, "unknown_option"),
    ("merge --strategy-opt=index-output=/tmp/x main", {}, {}, "unsafe_config"),
    ("rebase -s ORT HEAD~1", {}, {}, "unsafe_config"),
    ("cherry-pick --strategy=a/x abc123", {}, {}, "unsafe_config"),
    ("cherry-pick -sn abc123", {}, {}, None),
    ("revert --strategy a/x abc123", {}, {}, "unsafe_config"),
    ("merge -qsa/x main", {}, {}, "unsafe_config"),
    ("merge -m -s -s a/x main", {}, {}, "unsafe_config"),
    ("pull --rebase -s a/x . main", {}, {}, "unsafe_config"),
    ("pull -s resolve . main", {}, {}, None),
    ("merge -s ort -X theirs -Xdiff-algorithm=patience main", {}, {}, None),
    ("merge -s recursive --strategy-option=find-renames=50% main", {}, {}, None),
    ("rebase -s subtree -X subtree=a/b HEAD~1", {}, {}, None),
    ("merge -s resolve -X index-output=/tmp/x main", {}, {}, "unsafe_config"),
    ("cherry-pick --strategy=resolve -Xindex-output=/tmp/x abc123", {}, {}, "unsafe_config"),
    ("cherry-pick -nX index-output=/tmp/x abc123", {}, {}, "unsafe_config"),
    ("merge --strategy-option 'ours --index-output=/tmp/x' main", {}, {}, "unsafe_config"),
    ("merge -X 'subtree=*' main", {}, {}, "unsafe_config"),
    ("-c pull.twohead=a/x pull . main", {}, {}, "unsafe_config"),
    ("-c pull.octopus='octopus a/x' merge main", {}, {}, "unsafe_config"),
    ("-c pull.twohead=resolve pull . main", {}, {}, None),
    (
        "merge main",
        {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "pull.twohead", "GIT_CONFIG_VALUE_0": "a/x"},
        {},
        "unsafe_config",
    ),
    ("config pull.twohead a/x", {}, {}, "unsafe_config"),
    ("config pull.octopus octopus", {}, {}, None),
    ("config branch.lane/alpha.mergeOptions '-s a/x'", {}, {}, "unsafe_config"),
    ("-c branch.lane/alpha.mergeoptions=-Xindex-output=/x merge main", {}, {}, "unsafe_config"),
    # git hook run NAME runs <hooks dir>/NAME: only a plain hook name
    ("hook run ../../x/evil.sh", {}, {}, "unsafe_config"),
    ("hook run --ignore-missing -- ../a -- x", {}, {}, "unsafe_config"),
    ("hook run a/b", {}, {}, "unsafe_config"),
    ("hook run --ignore-missing pre-commit", {}, {}, None),
    ("hook run pre-commit -- a", {}, {}, None),
    ("hook run --ignore=x pre-commit", {}, {}, "unknown_option"),
    # a remote named as an option word: every later fetch --all hands it to a child fetch
    ("remote add -f -t main -- --upload-pack=bin/evil .", {}, {}, "unsafe_config"),
    ("remote -v add -ft main -- -x .", {}, {}, "unsafe_config"),
    ("remote rename o -- --x", {}, {}, "unsafe_config"),
    ("config remote.--x.url .", {}, {}, "unsafe_config"),
    ("remote add -t main o .", {}, {}, None),
    ("remote rename -- -o x", {}, {}, None),
    # rerere switched on while <common>/rr-cache does not exist: git makes it (shared)
    ("-c rerere.enabled=true merge main", {}, {}, "path_outside_lane"),
    ("-c rerere.autoupdate commit -m x", {}, {}, "path_outside_lane"),
    ("config rerere.enabled true", {}, {}, "path_outside_lane"),
    ("rerere", {}, {"config_value": {"rerere.enabled": "true"}.get}, "path_outside_lane"),
    ("rerere status", {}, {"config_value": {"rerere.enabled": "yes"}.get}, "path_outside_lane"),
    ("rerere status", {}, {}, None),  # unset and no cache: git rerere does nothing
    ("rerere diff", {"GIT_CONFIG_PARAMETERS": "'rerere.enabled'='true'"}, {}, "path_outside_lane"),
    ("-c rerere.enabled=false merge main", {}, {}, None),
    # by value in the environment too: exec sets rerere.enabled=false for a sandboxed CMD
    ("merge main", {**OFF, "GIT_CONFIG_PARAMETERS": "'rerere.enabled'"}, {}, "path_outside_lane"),
    ("merge main", {**OFF, "GIT_CONFIG_VALUE_0": "on"}, {}, "path_outside_lane"),
    ("merge main", {**OFF, "GIT_CONFIG_COUNT": "x"}, {}, "hooks_disabled"),
    ("merge main", OFF, {}, None),
    ("rerere", {}, {"exists": f"{COMMON}/rr-cache".__eq__}, None),
    # git config stops at its first non-option word: a value may start with `-`
    ("config core.fsmonitor '-x; touch /tmp/p'", {}, {}, "unsafe_config"),
    ("config -- core.hooksPath -h", {}, {}, "hooks_disabled"),
    ("config user.name --get", {}, {}, None),
    ("init --template /tmp/t sub", {}, {}, "unsafe_config"),
    ("diff", {"GIT_EXTERNAL_DIFF": "/tmp/x"}, {}, "unsafe_config"),
    ("fetch origin", {"GIT_SSH_COMMAND": "/tmp/x"}, {}, "unsafe_config"),
    ("fetch origin", {"GIT_SSH": "/tmp/x"}, {}, "unsafe_config"),
    ("fetch origin", {"GIT_PROXY_COMMAND": "/tmp/x"}, {}, "unsafe_config"),
    ("init sub", {"GIT_TEMPLATE_DIR": "/tmp/t"}, {}, "unsafe_config"),
    (
        "commit -e -m x",
        {"EDITOR": "git update-ref refs/heads/main HEAD; true"},
        {},
        "unsafe_config",
    ),
    ("commit -e -m x", {"VISUAL": "/tmp/ed"}, {}, "unsafe_config"),
    ("commit -m x", {"GIT_EDITOR": "vim"}, {}, None),
    ("log", {"PAGER": "less"}, {}, None),
    ("log", {"GIT_PAGER": "/tmp/p"}, {}, "unsafe_config"),
    # red team: fetch refspecs from -c or from the configuration
    (
        "-c remote.s.url=. -c remote.s.fetch=+refs/heads/lane/alpha:refs/heads/v2 fetch s",
        {},
        {},
        "unsafe_config",
    ),
    (
        "fetch s",
        {},
        {"fetch_refspecs": lambda: ["+refs/heads/*:refs/heads/*"]},
        "main_mutation_refused",
    ),
    ("pull s", {}, {"fetch_refspecs": lambda: ["+refs/*:refs/*"]}, "main_mutation_refused"),
    (
        "fetch --all",
        {},
        {"fetch_refspecs": lambda: ["+refs/heads/lane/alpha:refs/heads/v2"]},
        "main_mutation_refused",
    ),
    ("fetch s", {}, {"fetch_refspecs": lambda: None}, "shim_facts_unknown"),
    ("fetch origin main --refmap=+refs/heads/*:refs/heads/*", {}, {}, "main_mutation_refused"),
    ("fetch . :x", {}, {}, "main_mutation_refused"),
    ("fetch s", {}, {"fetch_refspecs": lambda: ["+refs/heads/*:refs/remotes/s/*"]}, None),
    # red team: an external git-NAME, a git script, a git command not judged here
    ("foo --bar", {}, {}, "external_command"),
    ("submodule update", {}, {"is_builtin": lambda n: n != "submodule"}, "external_command"),
    ("for-each-repo --config=x gc", {}, {"is_builtin": lambda n: True}, "shim_facts_unknown"),
    ("patch-id", {}, {"is_builtin": lambda n: True}, None),
    # red team 13D: what makes any command (read-only too) write outside the lane or run
    # a program: a trace file, another transport, the safe editors' environment,
    # alternates and an index other than exec's, a PATH entry the lane can fill
    ("status", {"GIT_TRACE": COMMON + "/git-lane/config.toml"}, {}, "unsafe_config"),
    ("status", {"GIT_TRACE2_EVENT": "/tmp/t"}, {}, "unsafe_config"),
    ("status", {"GIT_TRACE_NEW_KIND": "/tmp/t"}, {}, "unsafe_config"),
    ("lane status", {"GIT_TRACE_PACKET": "/tmp/t"}, {}, "unsafe_config"),
    ("status", {"GIT_TRACE": "1", "GIT_TRACE2": "2", "GIT_TRACE_SETUP": "true"}, {}, None),
    ("ls-remote ext::sh", {"GIT_ALLOW_PROTOCOL": "ext"}, {}, "unsafe_config"),
    ("ls-remote x", {"GIT_PROTOCOL_FROM_USER": "1"}, {}, "unsafe_config"),
    ("ls-remote evil::x", {}, {}, "unsafe_config"),
    ("fetch --upload-pack=x ext::x", {}, {}, "unsafe_config"),
    ("commit -m a::b", {}, {}, None),
    ("commit -m x", {"GIT_EDITOR": "vi", "VIMINIT": ":!sh x"}, {}, "unsafe_config"),
    ("log", {"GIT_PAGER": "less", "LESSOPEN": "|-sh x %s"}, {}, "unsafe_config"),
    ("log", {"LESS": "+!sh x"}, {}, "unsafe_config"),
    ("log", {"LESS": "-R", "GITLANE_PROGRAM_ENV": '{"LESS": "-R"}'}, {}, None),
    ("log", {"LESSSECURE": "1"}, {}, None),
    ("log", {"GITLANE_PROGRAM_ENV": '{"LESSSECURE": "1"}'}, {}, "unsafe_config"),
    ("repack -a -d -l", {"GIT_ALTERNATE_OBJECT_DIRECTORIES": LANE + "/o"}, {}, "unsafe_config"),
    ("status", {"GIT_ALTERNATE_OBJECT_DIRECTORIES": COMMON + "/objects"}, {}, "unsafe_config"),
    (
        "status",
        {
            "GIT_OBJECT_DIRECTORY": GD + "/objects",
            "GIT_ALTERNATE_OBJECT_DIRECTORIES": COMMON + "/objects",
        },
        {},
        None,
    ),
    ("status", {"GIT_OBJECT_DIRECTORY": "/tmp/objects"}, {}, "path_outside_lane"),
    ("status", {"GIT_INDEX_FILE": COMMON + "/index"}, {}, "path_outside_lane"),
    ("status", {"GIT_INDEX_FILE": GD + "/index.tmp"}, {}, None),
    ("commit -m x", {"PATH": "bin:/usr/bin"}, {"exec_env_path": "/usr/bin"}, "unsafe_config"),
    ("commit -m x", {"PATH": ":/usr/bin"}, {"exec_env_path": "/usr/bin"}, "unsafe_config"),
    (
        "lane status",
        {"PATH": LANE + "/bin:/usr/bin"},
        {"exec_env_path": "/usr/bin"},
        "unsafe_config",
    ),
    (
        "help status",
        {"PATH": "/opt/x/bin:/usr/bin"},
        {"exec_env_path": "/usr/bin", "writable": lambda p: True},
        "unsafe_config",
    ),
    ("log", {"PATH": "/opt/x/bin:/usr/bin"}, {"exec_env_path": "/usr/bin"}, None),
    ("log", {"PATH": "/bin:/usr/bin"}, {"exec_env_path": "/usr/bin:/bin"}, None),
    # the global options git-lane does not know
    ("--frobnicate commit", {}, {}, "shim_facts_unknown"),
    ("-C", {}, {}, "shim_facts_unknown"),
    # red team 13D: keys that name a program, a todo list made of commit messages
    ("-c gpg.ssh.defaultKeyCommand=/tmp/p commit -m x", {}, {}, "unsafe_config"),
    ("config gpg.ssh.defaultKeyCommand /tmp/p", {}, {}, "unsafe_config"),
    ("-c tar.evil.command=/tmp/p archive --format=evil HEAD", {}, {}, "unsafe_config"),
    ("config --rename-section x tar.evil", {}, {}, "unsafe_config"),
    ("-c rebase.instructionFormat=%B rebase -i main", {}, {}, "unsafe_config"),
    ("-c rebase.instructionFormat=%x0aexec rebase main", {}, {}, "unsafe_config"),
    ("-c rebase.instructionFormat=%(trailers) rebase main", {}, {}, "unsafe_config"),
    ("-c 'rebase.instructionFormat=%s\nexec p' rebase main", {}, {}, "unsafe_config"),
    ("-c 'rebase.instructionFormat=%s by %an <%ae> %h' rebase -i main", {}, {}, None),
    ("--config-env=rebase.instructionFormat=F rebase main", {}, {}, "unsafe_config"),
    (
        "rebase main",
        {"GIT_CONFIG_PARAMETERS": "'rebase.instructionFormat'='%s'"},
        {},
        "unsafe_config",
    ),
    ("config rebase.instructionFormat %B", {}, {}, "unsafe_config"),
    ("config set rebase.instructionFormat '%w(0)%B'", {}, {}, "unsafe_config"),
    ("config rebase.instructionFormat '%s %h'", {}, {}, None),
    ("config --unset rebase.instructionFormat", {}, {}, None),
    ("config --rename-section x rebase", {}, {}, "unsafe_config"),
    ("rebase main", {}, {"config_value": lambda k: "%B"}, "unsafe_config"),
    ("rebase -i main", {}, {"config_value": lambda k: "%s%n%b"}, "unsafe_config"),
    ("pull --rebase origin", {}, {"config_value": lambda k: "%b"}, "unsafe_config"),
    ("-c rebase.instructionFormat=%s rebase main", {}, {"config_value": lambda k: "%B"}, None),
    ("rebase --continue", {}, {"config_value": lambda k: "%B"}, None),
    ("rebase main", {}, {"config_value": lambda k: "%s [%an]"}, None),
    # clone's own -c / --config, judged as git -c
    ("clone -c core.hooksPath=/tmp/h /w/repo sub", {}, {}, "hooks_disabled"),
    ("clone --config=filter.x.smudge=/tmp/p /w/repo sub", {}, {}, "unsafe_config"),
    ("clone --config filter.x.smudge=/tmp/p /w/repo sub", {}, {}, "unsafe_config"),
    ("clone -qcfilter.x.smudge=/tmp/p /w/repo sub", {}, {}, "unsafe_config"),
    ("clone -q -c core.fsmonitor=/tmp/p /w/repo sub", {}, {}, "unsafe_config"),
    ("clone -c user.name=x /w/repo sub", {}, {}, None),
    ("clone -o c /w/repo sub", {}, {}, None),
    # settings that make gc or fetch delete what others keep, as gc --prune=now
    ("-c gc.pruneExpire=now gc", {}, {}, "main_mutation_refused"),
    ("-c gc.pruneExpire=now commit -m x", {}, {}, "main_mutation_refused"),
    ("-c gc.reflogExpireUnreachable=now gc", {}, {}, "main_mutation_refused"),
    ("-c gc.refs/heads/*.reflogExpire=now gc", {}, {}, "main_mutation_refused"),
    ("-c gc.worktreePruneExpire=now gc", {}, {}, "main_mutation_refused"),
    ("-c core.logAllRefUpdates=false commit -m x", {}, {}, "main_mutation_refused"),
    ("-c fetch.pruneTags=true fetch -p origin", {}, {}, "main_mutation_refused"),
    ("gc", {"GIT_CONFIG_PARAMETERS": "'gc.pruneexpire'='now'"}, {}, "main_mutation_refused"),
    ("config gc.pruneExpire now", {}, {}, "main_mutation_refused"),
    ("config --add gc.reflogExpire now", {}, {}, "main_mutation_refused"),
    ("config --rename-section x gc", {}, {}, "main_mutation_refused"),
    ("config --unset gc.pruneExpire", {}, {}, None),
    ("-c gc.auto=0 commit -m x", {}, {}, None),
    ("maintenance run --task=gc", {}, {}, None),
    # branch's options as git parses them: -t/--track take no value
    ("branch -f -t feature lane/alpha", {}, {}, "main_mutation_refused"),
    ("branch -f --track feature lane/alpha", {}, {}, "main_mutation_refused"),
    ("branch -ft feature lane/alpha", {}, {}, "main_mutation_refused"),
    ("branch -f -- feature lane/alpha", {}, {}, "main_mutation_refused"),
    ("branch -f -t lane/alpha main", {}, {}, None),
    ("branch -u origin/main", {}, {}, None),
    ("branch -fu origin/main lane/alpha", {}, {}, None),
    # fetch writes refs/remotes/*, the lane's branch and refs/worktree/*; nothing else
    ("fetch . +lane/alpha:refs/tags/v1", {}, {}, "main_mutation_refused"),
    ("fetch . lane/alpha:v2", {}, {}, "main_mutation_refused"),
    ("fetch . HEAD:refs/notes/commits", {}, {}, "main_mutation_refused"),
    ("fetch . HEAD:refs/git-lane/landed/x", {}, {}, "main_mutation_refused"),
    ("fetch . 'refs/tags/*:refs/tags/*'", {}, {}, "main_mutation_refused"),
    ("fetch . 'refs/heads/*:refs/remote*'", {}, {}, "main_mutation_refused"),
    (
        "fetch s",
        {},
        {"fetch_refspecs": lambda: ["+refs/tags/*:refs/tags/*"]},
        "main_mutation_refused",
    ),
    ("fetch --prune-tags origin", {}, {}, "main_mutation_refused"),
    ("fetch -pP origin", {}, {}, "main_mutation_refused"),
    ("fetch --tags --force origin", {}, {}, "main_mutation_refused"),
    ("fetch --tags origin", {}, {}, None),
    ("fetch origin tag v2", {}, {}, "main_mutation_refused"),
    ("fetch . HEAD:refs/worktree/mine", {}, {}, None),
    ("fetch . 'refs/heads/*:refs/remotes/here/*'", {}, {}, None),
    ("push . HEAD:refs/tags/v9", {}, {}, "main_mutation_refused"),
    # red team 13K: a `--` after an option word may be its value (parse-options reads on),
    # for every command but those whose value-taking options are all known (_DASH_ENDS)
    ("range-diff -S -- --output=/tmp/F A...B", {}, {}, "path_outside_lane"),
    ("blame -L -- --output=/tmp/F f", {}, {}, "path_outside_lane"),
    ("annotate -L -- --output=/tmp/F f", {}, {}, "path_outside_lane"),
    ("checkout-index -a --prefix -- --pref=/tmp/D/", {}, {}, "path_outside_lane"),
    ("bugreport --suffix -- --output-d=/tmp/D", {}, {}, "path_outside_lane"),
    ("fetch -o -- --prune-tags origin", {}, {}, "main_mutation_refused"),
    (
        "archive --format -- --remote=nest HEAD",
        {},
        {"exists": BARE_NEST.__contains__},
        "unsafe_config",
    ),
    ("blame -L 1,2 -- --output=/tmp/F", {}, {}, None),
    ("rm --cached -- --exec=x", {}, {}, None),
    ("rm -r -- --output=/tmp/x", {}, {}, None),
    ("restore --staged -- --exec=x", {}, {}, None),
    ("restore -s -- --exec=x", {}, {}, "unknown_option"),
    ("checkout -fb -- --upload-pack=x", {}, {}, "unknown_option"),
    ("commit -m -- --upload-pack=x", {}, {}, "unknown_option"),
    ("commit -a -- --upload-pack=x", {}, {}, None),
    ("log -S -- --exec=x", {}, {}, None),
    # the names after the `--` that ends the options are the same names to git
    ("symbolic-ref -- refs/heads/main refs/heads/lane/alpha", {}, {}, "main_mutation_refused"),
    ("symbolic-ref -m -- HEAD refs/heads/lane/alpha", {}, {}, None),
    ("bundle create -- /tmp/x.bundle HEAD", {}, {}, "path_outside_lane"),
    ("pack-objects -q -- /tmp/pk", {}, {}, "path_outside_lane"),
    ("fetch -q -- . lane/alpha:refs/tags/v9", {}, {}, "main_mutation_refused"),
    ("rebase -q -- lane/alpha main", {}, {}, "main_mutation_refused"),
    ("rebase -q -- main", {}, STALE, None),
    ("update-ref -- refs/heads/lane/alpha HEAD", {}, {}, None),
    ("reset -q --hard main --", {}, OTHER_HEAD, "main_mutation_refused"),
    ("reset -q main -- x", {}, OTHER_HEAD, None),
    # --bare: GIT_DIR is the cwd when git reads it, before a later -C
    (
        "--bare -C .. --work-tree=. status",
        {},
        {"cwd": LANE + "/nest", "exists": BARE_NEST.__contains__},
        "unsafe_config",
    ),
    ("--bare status", {}, {}, "unsafe_config"),
    ("--bare -C nest status", {}, {"exists": BARE_NEST.__contains__}, "unsafe_config"),
    ("-C /elsewhere --bare log", {}, {}, None),
    ("--git-dir=/elsewhere/.git --bare log", {}, {}, None),
    ("--bare log", {"GIT_DIR": "/elsewhere/.git"}, {}, None),
    # a value-taking short option inside a group of short flags is that option to git
    # (parse-options: the rest of the word, or the next word)
    ("config -zf /tmp/x a.b c", {}, {}, "path_outside_lane"),
    ("config -zf/tmp/x a.b c", {}, {}, "path_outside_lane"),
    ("config -zf /w/repo/.git/config rebase.instructionFormat %B", {}, {}, "unsafe_config"),
    ("config -ze", {}, {}, "hooks_disabled"),
    ("config -zt bool a.b true", {}, {}, None),
    ("config -zf mine.cfg a.b c", {}, {}, None),
    ("format-patch -qko /tmp/x HEAD~1", {}, {}, "path_outside_lane"),
    ("format-patch -ko/tmp/x HEAD~1", {}, {}, "path_outside_lane"),
    ("format-patch -kvo /tmp/x HEAD~1", {}, {}, None),  # -v takes "o": /tmp/x is a revision
    ("format-patch -qko patches HEAD~1", {}, {}, None),
    ("archive -9o /tmp/x.tar HEAD", {}, {}, "path_outside_lane"),
    ("archive -vo/tmp/x.tar HEAD", {}, {}, "path_outside_lane"),
    ("bugreport -so /tmp/x", {}, {}, None),  # -s takes "o"
    ("clone -qu 'sh evil.sh' src dst", {}, {}, "unsafe_config"),
    ("clone -qo up src dst", {}, {}, None),
    ("checkout -qb newb", {}, {}, "main_mutation_refused"),
    ("checkout -fB main HEAD", {}, {}, "main_mutation_refused"),
    ("switch -qc newb", {}, {}, "main_mutation_refused"),
    ("update-ref -dm refs/heads/lane/alpha refs/heads/main", {}, {}, "main_mutation_refused"),
    ("update-ref -dm x refs/heads/lane/alpha", {}, {}, None),
    # read-tree's --index-output FILE (the next word too) writes FILE
    ("read-tree --index-output /tmp/x HEAD", {}, {}, "path_outside_lane"),
    ("read-tree --index-output=a/../../../x HEAD", {}, {}, "path_outside_lane"),
    ("read-tree --index-output=idx HEAD", {}, {}, None),
    # notes refs named in the environment: only refs/notes/* (commit --amend writes them)
    ("commit --amend -m x", {"GIT_NOTES_REWRITE_REF": "refs/heads/main"}, {}, "unsafe_config"),
    ("commit --amend -m x", {"GIT_NOTES_REWRITE_REF": "refs/notes/x:refs/*"}, {}, "unsafe_config"),
    ("commit --amend -m x", {"GIT_NOTES_REWRITE_REF": "refs/notes/commits"}, {}, None),
    ("log", {"GIT_NOTES_REF": "refs/heads/main"}, {}, "unsafe_config"),
    ("log", {"GIT_NOTES_DISPLAY_REF": "refs/notes/*"}, {}, None),
    # what man and the groff it starts read to run a program
    ("help status", {"GROFF_BIN_PATH": LANE + "/gb"}, {}, "unsafe_config"),
    ("help status", {"GROFF_FONT_PATH": LANE + "/f"}, {}, "unsafe_config"),
    ("help status", {"MANPATH": LANE + "/man"}, {}, "unsafe_config"),
    # red team 13M: a `--` a command drops and hands on (to fetch, log, setup_revisions)
    # ends no option
    ("pull -- --upload-pack=/tmp/p .", {}, {}, "unsafe_config"),
    ("pull -- --u=/tmp/p .", {}, {}, "unsafe_config"),
    ("pull -- --exec=/tmp/p .", {}, {}, "unsafe_config"),
    ("pull -- --refmap=+refs/heads/*:refs/heads/* . feature", {}, {}, "main_mutation_refused"),
    ("pull -- . lane/alpha", {}, {}, None),
    ("remote update -- --upload-pack=/tmp/p", {}, {}, "unsafe_config"),
    ("stash list -- --output=/tmp/F", {}, {}, "path_outside_lane"),
    ("stash show -- --output=/tmp/F", {}, {}, "path_outside_lane"),
    ("cherry-pick -- --output=/tmp/F HEAD", {}, {}, "path_outside_lane"),
    ("revert -- --output=/tmp/F HEAD", {}, {}, "path_outside_lane"),
    ("fast-export -- --output=/tmp/F HEAD", {}, {}, "path_outside_lane"),
    ("bundle create -- b.bundle --output=/tmp/F HEAD", {}, {}, "path_outside_lane"),
    ("bundle create -- b.bundle HEAD", {}, {}, None),
    ("cherry-pick -- HEAD", {}, {}, None),
    # merge-file writes its result into its first file (unless -p/--stdout)
    ("merge-file /tmp/cur b o", {}, {}, "path_outside_lane"),
    ("merge-file -L a -L b -L c /tmp/cur b o", {}, {}, "path_outside_lane"),
    ("merge-file -Lp /tmp/cur b o", {}, {}, "path_outside_lane"),  # -L takes "p"
    ("merge-file -q --marker-size 9 /tmp/cur b o", {}, {}, "path_outside_lane"),
    ("merge-file .git b o", {}, {}, "path_outside_lane"),
    ("merge-file -p /tmp/cur b o", {}, {}, None),
    ("merge-file -qp /tmp/cur b o", {}, {}, None),
    ("merge-file cur b o", {}, {}, None),
    # the lane's own .git is no file git may write
    ("read-tree --index-output=.git HEAD", {}, {}, "path_outside_lane"),
    ("read-tree --index-output .git HEAD", {}, {}, "path_outside_lane"),
    ("bundle create .git HEAD", {}, {}, "path_outside_lane"),
    # -S/--gpg-sign[=KEY] never takes the next word
    ("rebase -S lane/alpha feature", {}, {}, "main_mutation_refused"),
    ("rebase -qS lane/alpha feature", {}, {}, "main_mutation_refused"),
    ("rebase -S main", {}, {}, None),
    # --empty, -C and --whitespace take the next word (rebase.c): no UPSTREAM BRANCH pair
    ("rebase --empty keep HEAD", {}, {}, None),
    ("rebase --empty keep lane/alpha feature", {}, {}, "main_mutation_refused"),
    ("rebase --empty drop main", {}, STALE, None),
    ("rebase -C 3 main", {}, STALE, None),
    ("rebase --whitespace fix main", {}, STALE, None),
    ("rebase -C 3 lane/alpha", {}, STALE, "sync_required"),
]


@pytest.mark.parametrize(("line", "env", "state", "want"), TABLE)
def test_decide_git_table(
    line: str, env: dict[str, str], state: dict[str, Any], want: str | None
) -> None:
    r = decide_git(shlex.split(line), {**ENV, **env}, facts(**state))
    got = r.code if r is not None else None
    assert got == want, (line, env, state, r.line() if r else None)
    if r is not None:
        assert r.code in CODES
        assert r.next, f"{line}: a refusal names the command that recovers"
        for cmd in r.next:
            shlex.split(cmd)  # each runs as written: it parses as a shell line
            assert "<" not in cmd.replace("<<", ""), cmd
        assert r.details.get("lane") == "alpha"


def test_the_table_has_every_rule() -> None:
    codes = {row[3] for row in TABLE}
    assert codes >= {
        None,
        "main_mutation_refused",
        "hooks_disabled",
        "path_outside_lane",
        "stash_shared",
        "sync_required",
        "shim_facts_unknown",
    }
    assert len(TABLE) >= 150


def test_aliases_are_resolved_or_refused() -> None:
    f = facts(
        aliases={"co": "checkout", "st": "status", "sw": "switch main", "sh": "!git checkout main"}
    )
    assert decide_git(["st"], ENV, f) is None
    r = decide_git(["co", "main"], ENV, f)
    assert r is not None and r.code == "main_mutation_refused"
    r = decide_git(["sw"], ENV, f)
    assert r is not None and r.code == "main_mutation_refused"
    r = decide_git(["sh"], ENV, f)
    assert r is not None and r.code == "shell_alias"
    assert r.next == ["sh -c 'git checkout main'"]
    r = decide_git(["sh", "x y"], ENV, f)
    assert r is not None and r.next == [
        "sh -c 'git checkout main \"$@\"' 'git checkout main' 'x y'"
    ]
    # an alias can never stand for a builtin (git ignores it), nor loop
    assert decide_git(["status"], ENV, facts(aliases={"status": "!rm -rf /"})) is None
    loop = facts(aliases={"a": "b", "b": "a"})
    r = decide_git(["a"], ENV, loop)
    assert r is None or r.code in CODES
    # -c alias.x=... is an alias too: the caller asks git with the same -c
    assert alias_needed(["-c", "alias.x=checkout", "x", "main"], {}) == "x"
    assert alias_needed(["status"], {}) is None
    assert alias_needed(["co", "main"], {"co": "checkout"}) is None


def test_settings_an_alias_carries_are_judged_after_expansion() -> None:
    f = facts(
        aliases={
            "x": "-c core.hooksPath=/dev/null commit",
            "y": "--exec-path=/tmp commit",
            "z": "-c core.fsmonitor=/tmp/p status",
            "w": "-C /w/repo commit",
        }
    )
    for name, code in (
        ("x", "hooks_disabled"),
        ("y", "hooks_disabled"),
        ("z", "unsafe_config"),
        ("w", "path_outside_lane"),
    ):
        r = decide_git([name], ENV, f)
        assert r is not None and r.code == code, (name, r)


def test_a_prefixed_long_option_is_spelled_out_in_next() -> None:
    r = decide_git(shlex.split("commit --amen --no-edit"), ENV, facts())
    assert r is not None and r.code == "unknown_option"
    assert r.next == ["git commit --amend --no-edit"]
    r = decide_git(shlex.split("commit --no-verif -m x"), ENV, facts())
    assert r is not None and r.next == ["git commit --no-verify -m x"]
    r = decide_git(shlex.split("commit --zzz"), ENV, facts())
    assert r is not None and r.next == ["git help commit"]
    r = decide_git(shlex.split("commit --amend"), ENV, facts(long_options=lambda c, s: None))
    assert r is not None and r.code == "unknown_option"  # no list: fail closed


def test_external_command_next_runs_the_program_itself() -> None:
    r = decide_git(["foo", "a b"], ENV, facts())
    assert r is not None and r.code == "external_command"
    assert r.next == ["git-foo 'a b'"]


@pytest.mark.parametrize(
    "line",
    [
        "merge-resolve --index-output=/home/u/.bashrc -- HEAD main",
        "merge-octopus --index-output=/home/u/.bashrc -- HEAD main lane/beta",
        "merge-resolve HEAD -- HEAD '--index-output=/home/u/.bashrc main'",
    ],
)
def test_a_read_tree_scripts_refusal_hands_no_option_word_to_the_owner(line: str) -> None:
    """git-merge-resolve and git-merge-octopus hand their words, unquoted, to `git
    read-tree -u -m --aggressive`: `--index-output=F` among them writes the index to F
    (git 2.39). The owner's next kept it, so following it overwrote the file the lane
    chose (red team 13T). No owner's command is printed for any of git's scripts now
    (red team 14A): the next is the lane's status."""
    r = decide_git(shlex.split(line), ENV, facts())
    assert r is not None and r.code == "external_command", r
    assert r.next == ["git lane status alpha"], r.next
    assert not [n for n in [*r.next, *r.alternatives] if "index-output" in n], r


def test_a_next_is_never_refused_in_turn() -> None:
    """A command with two faults: the first check's next left the second in, and running
    it as printed was refused again (red team 13T: `rebase --exec X -X index-output=F`).
    The next printed is one that runs."""
    for line in (
        "rebase --exec true -X index-output=/tmp/f main",
        "-c core.hooksPath=/dev/null rebase --exec true main",
    ):
        r = decide_git(shlex.split(line), ENV, facts())
        assert r is not None and len(r.next) == 1, (line, r)
        nxt = shlex.split(r.next[0])
        assert nxt[0] == "git" and decide_git(nxt[1:], ENV, facts()) is None, (line, r.next)


def test_small_messages() -> None:
    r = decide_git(["checkout", "-b"], ENV, facts())
    assert r is not None and "check out a branch with no name" in r.message
    r = decide_git(shlex.split("reflog expire --all"), ENV, facts())
    assert r is not None and "  " not in r.message
    r = decide_git(shlex.split("fetch . :x"), ENV, facts())
    assert r is not None and r.next == ["git lane status alpha"]
    r = decide_git(shlex.split("tag --cont HEAD t"), ENV, facts())
    assert r is not None and r.code == "unknown_option"
    assert r.next == ["git tag --contains HEAD t"]  # a listing: it runs
    assert decide_git(shlex.split("tag --contains HEAD t"), ENV, facts()) is None


def test_nexts_name_the_words_git_parses() -> None:
    """A next changes the word git took a value from, never a value of another option
    (red team 13M's lows): tag's name past -m MSG / -F FILE / -u KEY, fetch without
    --depth's value, the output directory and not --subject-prefix's value, a fresh
    name in the lane (never its .git, nor a name already there: a link out)."""

    def nxt(line: str, **state: Any) -> list[str]:
        r = decide_git(shlex.split(line), ENV, facts(**state))
        assert r is not None, line
        return r.next

    for line in ("tag -m msg v9", "tag -fm msg v9", "tag -F f v9", "tag -u k v9", "tag -a v9"):
        assert nxt(line) == ["git update-ref refs/worktree/tags/v9 HEAD"], line
    assert nxt("fetch --depth 1 . HEAD") == ["git fetch . HEAD"]
    assert nxt("fetch --shallow-since 2020-01-01 --unshallow . HEAD") == ["git fetch . HEAD"]
    assert nxt("format-patch --subject-prefix=../x -o ../x HEAD~1") == [
        f"cd {LANE} && git format-patch --subject-prefix=../x -o {LANE}/x 'HEAD~1'"
    ]
    assert nxt("format-patch -qko/tmp/x HEAD~1") == [
        f"cd {LANE} && git format-patch -qko{LANE}/x 'HEAD~1'"
    ]
    assert nxt("read-tree --index-output=/tmp/e/.git HEAD") == [
        f"cd {LANE} && git read-tree --index-output={LANE}/out HEAD"
    ]
    taken = {f"{LANE}/pp", f"{LANE}/out"}
    assert nxt("format-patch -o /tmp/pp HEAD~1", exists=taken.__contains__) == [
        f"cd {LANE} && git format-patch -o {LANE}/out-1 'HEAD~1'"
    ]
    assert nxt("merge-file /tmp/cur b o") == ["git merge-file -p /tmp/cur b o"]
    assert nxt("stash list -- --output=/tmp/F") == ["git stash list --"]
    assert nxt("pull -- --upload-pack=/tmp/p .") == ["git pull -- ."]
    # an abbreviation past a `--` git drops is another parser's (fetch's --e is no --edit)
    assert nxt("pull -- --e=/tmp/p .") == ["git help pull"]
    assert nxt("stash list -- --oneline") == ["git help stash"]


def test_hooks_disabled_next_is_the_command_without_the_setting() -> None:
    r = decide_git(shlex.split("-c core.hooksPath=/dev/null commit -m 'a b'"), ENV, facts())
    assert r is not None and r.next == ["git commit -m 'a b'"]
    r = decide_git(shlex.split("commit -m x"), {**ENV, "HOME": "/tmp/h"}, facts())
    assert r is not None and r.next == [f"HOME={HOME} git commit -m x"]


def test_read_only_forms() -> None:
    assert read_only("branch", ["-a"]) and not read_only("branch", ["new"])
    assert read_only("branch", ["-l", "x*"]) and not read_only("branch", ["-dr", "x"])
    assert read_only("tag", []) and not read_only("tag", ["v9"])
    assert parse(["-C", "a", "-c", "k=v", "--git-dir=g", "status"]).cmd == "status"
    assert parse(["--no-pager", "--exec-path"]).cmd is None


# -- generated: no crash, and only a pass or a registered code ---------------------------
WORDS = [
    "status",
    "commit",
    "checkout",
    "switch",
    "branch",
    "tag",
    "stash",
    "push",
    "fetch",
    "config",
    "reset",
    "rebase",
    "update-ref",
    "symbolic-ref",
    "reflog",
    "worktree",
    "gc",
    "notes",
    "replace",
    "lane",
    "co",
    "sh",
    "main",
    "lane/alpha",
    "-c",
    "-C",
    "--git-dir",
    "--work-tree",
    "--exec-path=/x",
    "--config-env",
    "-d",
    "-D",
    "-f",
    "-m",
    "-b",
    "--",
    "core.hooksPath=/dev/null",
    "HEAD",
    "..",
    "/tmp",
    "--onto",
    "--continue",
    "-l",
    "pop",
    "list",
    "--depth=1",
    "x:main",
    "origin",
    "--stdin",
    "--all",
    "--updateref",
    "-P",
    "--no-pager",
    "--bare",
    "=",
    "",
    "-",
    "--global",
    "hook.x",
    "!",
]
ENV_KEYS = [
    "HOME",
    "XDG_CONFIG_HOME",
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_COMMON_DIR",
    "GIT_OBJECT_DIRECTORY",
    "GIT_CONFIG_COUNT",
    "GIT_CONFIG_KEY_0",
    "GIT_CONFIG_PARAMETERS",
    "GIT_CONFIG_GLOBAL",
    "GIT_EXEC_PATH",
]
VALUES = [
    "",
    "/tmp",
    LANE,
    GD,
    COMMON,
    "1",
    "x",
    "core.hooksPath",
    "'a'='b'",
    "'unclosed",
    "/usr/lib/git-core",
    HOME,
]


@settings(max_examples=400, deadline=None)
@given(
    argv=st.lists(st.one_of(st.sampled_from(WORDS), st.text(max_size=8)), max_size=7),
    env=st.dictionaries(st.sampled_from(ENV_KEYS), st.sampled_from(VALUES), max_size=4),
    stale=st.booleans(),
    head=st.sampled_from(["refs/heads/lane/alpha", "refs/heads/main", None]),
    rebasing=st.booleans(),
    worker_land=st.booleans(),
)
def test_generated_command_lines_get_a_pass_or_a_registered_code(
    argv: list[str],
    env: dict[str, str],
    stale: bool,
    head: str | None,
    rebasing: bool,
    worker_land: bool,
) -> None:
    f = facts(
        must_sync=stale,
        head=head,
        rebase_in_progress=rebasing,
        worker_land=worker_land,
        aliases={"co": "checkout", "sh": "!echo hi"},
    )
    r = decide_git(argv, {**ENV, **env}, f)
    if r is not None:
        assert r.code in CODES
        assert isinstance(r.message, str) and r.message
        assert all(isinstance(c, str) for c in r.next)


# git 2.39's configuration keys that name a program or a shell command, or pick the one git
# runs (`git help --config`, read key by key): each is refused as -c and as a config write
# (alias.*: a -c alias is judged as what it runs, a shell one refused as shell_alias).
PROGRAM_KEYS_2_39 = [
    "core.fsmonitor", "core.sshCommand", "core.pager", "core.editor", "core.askPass",
    "core.gitProxy", "core.alternateRefsCommand", "sequence.editor", "diff.external",
    "diff.x.command", "diff.x.textconv", "diff.tool", "diff.guitool", "difftool.x.cmd",
    "difftool.x.path", "merge.tool", "merge.guitool", "mergetool.x.cmd", "mergetool.x.path",
    "merge.x.driver", "filter.x.clean", "filter.x.smudge", "filter.x.process",
    "gpg.program", "gpg.ssh.program", "gpg.x509.program", "gpg.openpgp.program",
    "gpg.ssh.defaultKeyCommand", "credential.helper", "credential.https://h.helper",
    "sendemail.toCmd", "sendemail.ccCmd", "sendemail.sendmailCmd", "sendemail.smtpServer",
    "uploadpack.packObjectsHook", "web.browser", "help.browser", "help.format",
    "browser.x.cmd", "browser.x.path", "man.viewer", "man.x.cmd", "man.x.path",
    "instaweb.browser", "instaweb.httpd", "tar.x.command", "guitool.x.cmd", "imap.tunnel",
    "interactive.diffFilter", "ssh.variant", "pager.log", "trailer.x.command",
    "trailer.x.cmd", "remote.x.uploadpack", "remote.x.receivepack", "remote.x.vcs",
    "submodule.x.update", "init.templateDir", "url.x.insteadOf",
]  # fmt: skip


@pytest.mark.parametrize("key", PROGRAM_KEYS_2_39)
def test_every_program_key_of_git_2_39_is_judged(key: str) -> None:
    for line in (f"-c {key}=/tmp/p status", f"config {key} /tmp/p"):
        r = decide_git(shlex.split(line), ENV, facts())
        assert r is not None and r.code == "unsafe_config", (line, r.line() if r else None)


def _real_lane(tmp_path: Path) -> tuple[Path, Path, GitFacts]:
    """A hub with lane alpha (a plain linked worktree), and facts naming it truly."""
    import subprocess

    hub = tmp_path / "hub"
    hub.mkdir()
    run = functools.partial(subprocess.run, check=True, capture_output=True, text=True)
    run(["git", "init", "-q", "-b", "main"], cwd=hub)
    run(["git", "-c", "user.name=u", "-c", "user.email=u@e", "commit", "-q", "--allow-empty",
         "-m", "i"], cwd=hub)  # fmt: skip
    lane = tmp_path / "lanes" / "alpha"
    run(["git", "worktree", "add", "-q", "-b", "lane/alpha", str(lane)], cwd=hub)
    admin = run(["git", "rev-parse", "--absolute-git-dir"], cwd=lane).stdout.strip()
    f = dataclasses.replace(
        facts(),
        lane_path=str(lane),
        cwd=str(lane),
        lane_git_dir=admin,
        common=str(hub / ".git"),
        exists=os.path.exists,
    )
    return hub, lane, f


def _as_script(f: GitFacts, name: str) -> GitFacts:
    """`f` with git's real exec path, where `git NAME` is the shell script git ships
    (git-NAME there), not a builtin."""
    import subprocess

    exec_path = subprocess.run(
        ["git", "--exec-path"], check=True, capture_output=True, text=True
    ).stdout.strip()
    assert os.path.exists(os.path.join(exec_path, f"git-{name}"))
    return dataclasses.replace(f, exec_path=exec_path, is_builtin=lambda n: n != name)


def test_no_next_for_a_script_or_sparse_checkout_runs_the_lanes_repository(
    tmp_path: Path,
) -> None:
    """The shims' owner nexts (sparse-checkout's unsafe_config, external_command for
    git's scripts) were plain `git -C LANE`: a lane still running repoints its `.git` at
    a repository of its own whose config names core.fsmonitor, and the owner following
    the next ran it (red team 13W). Neither prints an owner's command now (red team 14A):
    the next is `git lane status KEY`, and following it runs nothing of the lane's."""
    import subprocess

    hub, lane, f = _real_lane(tmp_path)
    fake = tmp_path / "fake"
    subprocess.run(["git", "init", "-q", str(fake)], check=True)
    pwned = tmp_path / "pwned"
    subprocess.run(
        ["git", "-C", str(fake), "config", "core.fsmonitor", f"touch {pwned}; false #"],
        check=True,
    )
    subprocess.run(["git", "-C", str(fake), "config", "core.worktree", str(lane)], check=True)
    script = _as_script(f, "submodule")
    for argv, g in ((["sparse-checkout", "set", "src"], f), (["submodule", "status"], script)):
        r = decide_git(argv, ENV, g)
        assert r is not None and r.code in ("unsafe_config", "external_command"), (argv, r)
        assert r.next == ["git lane status alpha"], (argv, r.next)
        (lane / ".git").write_text(f"gitdir: {fake / '.git'}\n")  # after the refusal
        subprocess.run(["sh", "-c", r.next[0]], cwd=hub, capture_output=True, text=True)
        assert not pwned.exists(), f"the next {r.next[0]!r} ran the lane's core.fsmonitor"


def test_merge_one_file_gets_no_owners_command(tmp_path: Path) -> None:
    """git-merge-one-file runs `rm -f -- "$4"` for the path it is given, anywhere: its
    owner's next kept every word, and `merge-one-file a a '' ../../hub/precious.txt`
    followed as printed deleted the owner's file (red team 13W). No owner's command is
    printed for it."""
    import subprocess

    hub, lane, f = _real_lane(tmp_path)
    precious = hub / "precious.txt"
    precious.write_text("uncommitted work of the owner\n")
    victim = os.path.relpath(precious, lane)
    r = decide_git(["merge-one-file", "a", "a", "", victim, "", "", ""], ENV, f)
    assert r is not None and r.code == "external_command", r
    assert r.next == ["git lane status alpha"], r.next
    assert all(victim not in n for n in [*r.next, *r.alternatives])
    subprocess.run(["sh", "-c", r.next[0]], cwd=hub, capture_output=True, text=True)
    assert precious.exists()


def test_the_owners_sparse_checkout_next_never_runs_the_lanes_config_worktree_filter(
    tmp_path: Path,
) -> None:
    """`git sparse-checkout set` in a lane is refused unsafe_config while
    extensions.worktreeConfig is off. Its next was the owner's own sparse-checkout, which
    turns the extension on in-process and then reads the lane's `<admin>/config.worktree`
    (the lane's to write): the files it checked out again went through the lane's
    `filter.NAME.smudge`, as the owner (red team 13X). Then the owner only turned the
    extension on; now not even that (red team 14A: the engine runs no git in a lane while
    it is on): the next is the lane's status."""
    import subprocess

    hub, lane, f = _real_lane(tmp_path)
    pwned = tmp_path / "pwned"

    def run(*args: str) -> None:
        subprocess.run(["git", *args], cwd=lane, check=True, capture_output=True)

    # what the lane does (its worktree, its index and its admin dir are its to write)
    (lane / ".gitattributes").write_text("victim.txt filter=evil\n")
    (lane / "victim.txt").write_text("v\n")
    run("add", ".gitattributes", "victim.txt")
    run("-c", "user.name=u", "-c", "user.email=u@e", "commit", "-q", "-m", "attrs")
    run("update-index", "--skip-worktree", "victim.txt")
    (lane / "victim.txt").unlink()
    Path(f.lane_git_dir, "config.worktree").write_text(
        f'[filter "evil"]\n\tsmudge = "touch {pwned}; cat"\n'
    )
    r = decide_git(["sparse-checkout", "set", "--no-cone", "/*"], ENV, f)
    assert r is not None and r.code == "unsafe_config", r
    assert r.next == ["git lane status alpha"], r.next
    nxt = r.next[0].split("  #")[0]
    done = subprocess.run(["sh", "-c", nxt], cwd=hub, capture_output=True, text=True)
    assert not pwned.exists(), (
        f"the owner's next {nxt!r} ran the lane's filter.evil.smudge (its config.worktree) "
        f"as the owner: {done.stderr}"
    )


def test_the_owners_mergetool_next_never_sources_a_file_the_lane_names(tmp_path: Path) -> None:
    """git mergetool is one of git's scripts: refused external_command in a lane, its
    next the owner's command without the words naming a program (_without_programs:
    `-t`, `--tool`, `--tool=`). git-mergetool takes every `--tool*` word as the tool
    (`-t|--tool*)`): `--tools=NAME` is kept, and mergetool--lib's setup_tool sources
    `$MERGE_TOOLS_DIR/NAME` when it is a file: `../../..` up to the lane's own script.
    The owner following the next as printed runs the lane's shell, unconfined."""
    import subprocess

    hub, lane, f = _real_lane(tmp_path)
    pwned = tmp_path / "pwned"

    def run(*args: str, check: bool = True) -> None:
        who = ["-c", "user.name=u", "-c", "user.email=u@e"]
        subprocess.run(["git", *who, *args], cwd=lane, check=check, capture_output=True)

    # the lane: a conflict in its index, and a script in its worktree
    (lane / "f").write_text("a\n")
    run("add", "f")
    run("commit", "-q", "-m", "a")
    run("checkout", "-q", "-b", "side")
    (lane / "f").write_text("b\n")
    run("commit", "-q", "-am", "b")
    run("checkout", "-q", "lane/alpha")
    (lane / "f").write_text("c\n")
    run("commit", "-q", "-am", "c")
    run("merge", "-q", "side", check=False)
    (lane / "evil.sh").write_text(f"touch '{pwned}'\n")
    tool = "../" * 40 + str(lane / "evil.sh").lstrip("/")
    script = _as_script(f, "mergetool")
    r = decide_git(["mergetool", "--no-prompt", f"--tools={tool}"], ENV, script)
    assert r is not None and r.code == "external_command", r
    nxt = r.next[0].split("  #")[0]
    subprocess.run(
        ["sh", "-c", nxt], cwd=hub, capture_output=True, text=True, stdin=subprocess.DEVNULL
    )
    assert not pwned.exists(), f"the owner's next {nxt!r} sourced the lane's evil.sh"


def test_the_owners_instaweb_next_never_runs_an_httpd_the_lane_names_abbreviated(
    tmp_path: Path,
) -> None:
    """The same fault by another spelling: git-instaweb reads its options through `git
    rev-parse --parseopt`, which takes any unique prefix of a long option: `--htt=PATH`
    is `--httpd=PATH`, which _without_programs keeps (it drops `-d`, `--httpd`,
    `--httpd=`). A lane script whose name holds `lighttpd` runs as the owner's httpd."""
    import subprocess

    hub, lane, f = _real_lane(tmp_path)
    pwned = tmp_path / "pwned"
    httpd = lane / "lighttpd"
    httpd.write_text(f"#!/bin/sh\ntouch '{pwned}'\n")
    httpd.chmod(0o755)
    script = _as_script(f, "instaweb")
    r = decide_git(["instaweb", "--local", f"--htt={httpd}"], ENV, script)
    assert r is not None and r.code == "external_command", r
    nxt = r.next[0].split("  #")[0]
    try:
        subprocess.run(
            ["sh", "-c", f"{nxt}; {nxt.split(' git -C ')[0]} git instaweb --stop"],
            cwd=hub, capture_output=True, stdin=subprocess.DEVNULL, timeout=15,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        pass
    assert not pwned.exists(), f"the owner's next {nxt!r} ran the lane's {httpd}"


def test_the_owners_instaweb_start_next_never_runs_an_httpd_from_the_lanes_admin_dir(
    tmp_path: Path,
) -> None:
    """`git instaweb --start` in a lane was refused external_command with the owner's
    `GIT_DIR=<admin> ... git instaweb --start` as its next (`--start` allowlisted).
    git-instaweb's resolve_full_httpd looks for its httpd (default `lighttpd`), when it is
    not on PATH, in `/usr/local/sbin /usr/sbin $root $GIT_DIR/gitweb`: the lane's admin
    dir, which the lane writes. The owner following the next ran `<admin>/gitweb/lighttpd`,
    the lane's program, unconfined (red team 14A). No owner's command is printed now."""
    import subprocess

    hub, _lane, f = _real_lane(tmp_path)
    pwned = tmp_path / "pwned"
    gitweb = Path(f.lane_git_dir) / "gitweb"
    gitweb.mkdir()
    (gitweb / "lighttpd").write_text(f"#!/bin/sh\ntouch '{pwned}'\n")
    (gitweb / "lighttpd").chmod(0o755)
    r = decide_git(["instaweb", "--start"], ENV, _as_script(f, "instaweb"))
    assert r is not None and r.code == "external_command", r
    nxt = r.next[0].split("  #")[0]
    try:
        subprocess.run(
            ["sh", "-c", nxt], cwd=hub, capture_output=True, stdin=subprocess.DEVNULL, timeout=20
        )
    except subprocess.TimeoutExpired:
        pass
    assert not pwned.exists(), f"the owner's next {nxt!r} ran the lane's <admin>/gitweb/lighttpd"
    assert r.next == ["git lane status alpha"], r.next


def test_the_owners_instaweb_stop_next_never_kills_what_the_lane_names(tmp_path: Path) -> None:
    """`git instaweb --stop` (allowlisted) in the owner's next ran `kill $(cat
    "$GIT_DIR/pid")`, unquoted: the lane writes `<admin>/pid` and picked the owner's
    kill's arguments (any signal, any pid of the owner's, `-1`: all of them; red team
    14A). Here it would kill a process of the owner's."""
    import subprocess

    hub, _lane, f = _real_lane(tmp_path)
    victim = subprocess.Popen(["sleep", "60"])
    try:
        Path(f.lane_git_dir, "pid").write_text(f"-s KILL {victim.pid}\n")
        r = decide_git(["instaweb", "--stop"], ENV, _as_script(f, "instaweb"))
        assert r is not None and r.code == "external_command", r
        nxt = r.next[0].split("  #")[0]
        subprocess.run(
            ["sh", "-c", nxt], cwd=hub, capture_output=True, stdin=subprocess.DEVNULL, timeout=20
        )
        try:
            victim.wait(timeout=2)
        except subprocess.TimeoutExpired:
            pass
        assert victim.returncode is None, (
            f"the owner's next {nxt!r} killed pid {victim.pid}, named in the lane's <admin>/pid"
        )
        assert r.next == ["git lane status alpha"], r.next
    finally:
        victim.kill()
        victim.wait()


def test_the_owners_filter_branch_next_keeps_no_rev_list_option_after_the_separator(
    tmp_path: Path,
) -> None:
    """The owner's next for git's scripts kept every word after `--` ("words after `--`
    are paths"), but git-filter-branch's `--` only ends its own options: what follows
    goes to `git rev-list` as rev-list options. `git filter-branch -f -- --output=FILE
    HEAD` got the owner's next keeping `--output=FILE`; the owner following it truncated
    FILE, wherever the lane named it (red team 14A)."""
    import subprocess

    hub, _lane, f = _real_lane(tmp_path)
    victim = tmp_path / "owners-file"
    victim.write_text("the owner's data\n")
    script = _as_script(f, "filter-branch")
    r = decide_git(["filter-branch", "-f", "--", f"--output={victim}", "HEAD"], ENV, script)
    assert r is not None and r.code == "external_command", r
    nxt = r.next[0].split("  #")[0]
    subprocess.run(
        ["sh", "-c", nxt], cwd=hub, capture_output=True, stdin=subprocess.DEVNULL, timeout=60,
        env={**os.environ, "FILTER_BRANCH_SQUELCH_WARNING": "1"},
    )  # fmt: skip
    assert victim.read_text() == "the owner's data\n", (
        f"the owner's next {nxt!r} truncated {victim} (rev-list --output)"
    )
    assert r.next == ["git lane status alpha"], r.next


def test_the_owners_filter_branch_next_never_rewrites_another_lanes_branch(
    hub: Repo, tmp_path: Path
) -> None:
    """filter-branch's allowlisted words (`--prune-empty`, `-f`) and the words after them
    that name no option (kept as paths: for filter-branch the rev-list arguments, the refs
    it rewrites) made the owner's next rewrite whatever ref lane alpha named: lane beta's
    branch, its empty commit dropped and every commit given a new id, as the owner,
    outside lane alpha (red team 14A)."""
    import subprocess

    from conftest import git

    lp = hub.create("alpha")
    bp = hub.create("beta")
    hub.commit(bp, "b.txt", "beta work\n")
    git(bp, "-c", "user.name=u", "-c", "user.email=e", "commit", "-q", "--allow-empty", "-m", "x")
    beta = git(bp, "rev-parse", "lane/beta").stdout.strip()
    admin = git(lp, "rev-parse", "--absolute-git-dir").stdout.strip()
    f = dataclasses.replace(
        facts(), lane_path=str(lp), cwd=str(lp), lane_git_dir=admin,
        common=str(hub.common_dir), exists=os.path.exists,
    )  # fmt: skip
    r = decide_git(
        ["filter-branch", "--prune-empty", "-f", "--", "lane/beta"],
        ENV,
        _as_script(f, "filter-branch"),
    )
    assert r is not None and r.code == "external_command", r
    nxt = r.next[0].split("  #")[0]
    subprocess.run(
        ["sh", "-c", nxt], cwd=tmp_path, capture_output=True, stdin=subprocess.DEVNULL,
        env={**os.environ, "FILTER_BRANCH_SQUELCH_WARNING": "1"}, timeout=60,
    )  # fmt: skip
    now = git(bp, "rev-parse", "lane/beta").stdout.strip()
    assert now == beta, f"the owner's next {nxt!r} rewrote lane/beta: {beta} -> {now}"
    assert r.next == ["git lane status alpha"], r.next


def test_the_owners_mergetool_next_never_writes_through_a_link_in_the_lane(
    tmp_path: Path,
) -> None:
    """git mergetool's owner's next (`--no-prompt` kept: allowlisted) ran git-mergetool in
    the lane's worktree as the owner. It works on the lane's conflicted paths by path in
    that worktree: `mv -- "$MERGED" "$BACKUP"`, `cp`, and `mv .merge_file_X ./DIR/NAME_BASE_
    PID.EXT` (and LOCAL, REMOTE) for a conflict at DIR/NAME.EXT. The lane turned DIR into a
    link: the owner's mergetool renamed the victim's file and wrote files of the lane's
    content, with the extension the lane chose, into the victim's directory (red team
    14A). No owner's command now; the alternative lists the conflicts to edit and add."""
    import subprocess

    hub, lane, f = _real_lane(tmp_path)
    victim = tmp_path / "victim dir"
    victim.mkdir()
    (victim / "x.sh").write_text("# the owner's\n")

    def run(*args: str, check: bool = True) -> None:
        who = ["-c", "user.name=u", "-c", "user.email=u@e"]
        subprocess.run(["git", *who, *args], cwd=lane, check=check, capture_output=True)

    (lane / "sub").mkdir()
    (lane / "sub" / "x.sh").write_text("a\n")
    run("add", "sub/x.sh")
    run("commit", "-q", "-m", "a")
    run("checkout", "-q", "-b", "side")
    (lane / "sub" / "x.sh").write_text("touch /tmp/lane-was-here\n")
    run("commit", "-q", "-am", "b")
    run("checkout", "-q", "lane/alpha")
    (lane / "sub" / "x.sh").write_text("c\n")
    run("commit", "-q", "-am", "c")
    run("merge", "-q", "side", check=False)
    for p in (lane / "sub").iterdir():  # the lane: its directory becomes a link out
        p.unlink()
    (lane / "sub").rmdir()
    (lane / "sub").symlink_to(victim)
    r = decide_git(["mergetool", "--no-prompt"], ENV, _as_script(f, "mergetool"))
    assert r is not None and r.code == "external_command", r
    nxt = r.next[0].split("  #")[0]
    subprocess.run(
        ["sh", "-c", nxt], cwd=hub, capture_output=True, stdin=subprocess.DEVNULL, timeout=60
    )
    assert sorted(os.listdir(victim)) == ["x.sh"], (
        f"the owner's next {nxt!r} wrote into {victim}, outside the lane: "
        f"{sorted(os.listdir(victim))}"
    )
    assert r.next == ["git lane status alpha"], r.next
    assert r.alternatives == ["git diff --name-only --diff-filter=U"], r.alternatives
