# shellcheck shell=sh source-path=SCRIPTDIR disable=SC2034,SC3013,SC2154 # -ef: dash, bash, busybox ash and ksh have it; gl_*: hooks/common.sh
# shims/common.sh: the sh every git-lane PATH shim (git, edit, write) shares on its hot
# path, sourced as "${0%/*}/common.sh" (kept short: every git call parses it); what only
# a refusal or the Python slow path needs is in shims/slow.sh, loaded by gs_slow. The binding it reads is what `git lane exec` hands a lane-bound
# process (guard/binding.py names each variable). Fails closed: a bound process whose
# binding is missing or broken is refused [shim_facts_unknown], never passed through.
gs_self=$0
gs_dir=${0%/*}
[ "$gs_dir" = "$0" ] && gs_dir=.

# gs_is_shim FILE: is FILE one of ours (this very file, or a file in this shim's
# directory or in GITLANE_SHIMS_DIR), so that running it would only come back here?
gs_is_shim() {
	[ "$1" -ef "$gs_self" ] && return 0
	gs_d=${1%/*}
	[ "$gs_d" = "$1" ] && gs_d=.
	[ "$gs_d" -ef "$gs_dir" ] && return 0
	[ -n "${GITLANE_SHIMS_DIR:-}" ] && [ "$gs_d" -ef "$GITLANE_SHIMS_DIR" ]
}

# gs_cand FILE: consider FILE as the real TOOL. GITLANE_SHIM_VIA names the program a
# shim last handed the call to: when a wrapper behind us called TOOL through PATH again,
# we come back here with VIA set, and the first candidate after it wins (the last one
# seen when nothing follows it), so a wrapper never loops back into itself.
gs_cand() {
	[ -f "$1" ] && [ -x "$1" ] || return 0
	gs_is_shim "$1" && return 0
	gs_last=$1
	if [ -n "$gs_via" ] && [ "$1" -ef "$gs_via" ]; then
		gs_real=
		return 0
	fi
	[ -n "$gs_real" ] || gs_real=$1
}

# gs_find TOOL [RECORDED]: gs_real = the program to run for TOOL: RECORDED (what exec
# resolved) when it is executable and not a shim, else the first TOOL on PATH outside
# every shim directory. Returns 1 when there is none.
gs_find() {
	gs_real='' gs_last=''
	gs_via=${GITLANE_SHIM_VIA:-}
	[ -z "${2:-}" ] || gs_cand "$2"
	if [ -z "$gs_real" ] || [ -n "$gs_via" ]; then
		gs_ifs=$IFS
		IFS=:
		set -f
		for gs_p in $PATH; do
			[ -n "$gs_real" ] && [ -z "$gs_via" ] && break
			gs_cand "${gs_p:-.}/$1"
		done
		set +f
		IFS=$gs_ifs
	fi
	[ -n "$gs_real" ] || gs_real=$gs_last
	[ -n "$gs_real" ]
}

# gs_run ARGS...: hand the call to gs_real.
gs_run() {
	GITLANE_SHIM_VIA=$gs_real
	export GITLANE_SHIM_VIA
	exec "$gs_real" "$@"
}

# gs_bound TOOL: is the binding of this lane-bound process whole (lane worktree, common
# dir, the recorded real TOOL)? Sets gs_real; returns 1
# with gs_why saying what is missing (the caller passes the call only when the owner
# switched git-lane off, gs_enabled_false, and refuses otherwise: gs_broken).
gs_bound() {
	gs_why='' gs_gd=''
	if [ -z "${GITLANE_LANE_PATH:-}" ] || [ ! -d "$GITLANE_LANE_PATH" ]; then
		gs_why="the lane's worktree (GITLANE_LANE_PATH=${GITLANE_LANE_PATH-} is not a directory)"
	elif [ -z "${GITLANE_COMMON:-}" ] || [ ! -d "$GITLANE_COMMON/refs" ]; then
		gs_why="the repository (GITLANE_COMMON=${GITLANE_COMMON-} is not a git common dir)"
	elif [ -z "${GITLANE_REAL_GIT:-}" ] || [ ! -f "$GITLANE_REAL_GIT" ] ||
		[ ! -x "$GITLANE_REAL_GIT" ] || gs_is_shim "$GITLANE_REAL_GIT"; then
		gs_why="which $1 to run (GITLANE_REAL_GIT=${GITLANE_REAL_GIT-} is not an executable $1 outside the shims)"
	elif [ -z "${GITLANE_SHIM_VIA:-}" ]; then
		gs_real=$GITLANE_REAL_GIT # checked just above: no PATH walk on the common path
	else
		gs_find "$1" "$GITLANE_REAL_GIT"
	fi
	[ -z "$gs_why" ]
}

# gs_lane_gd: gs_gd = the lane's own git dir, from the gitdir line of its .git file
# (returns 1, gs_why set, when there is none).
gs_lane_gd() {
	[ -n "$gs_gd" ] && return 0
	gs_c='' gs_x=''
	# git reads the whole file: exactly one line (a second one is part of the name to git)
	{ { IFS= read -r gs_c && ! IFS= read -r gs_x && [ -z "$gs_x" ]; } <"$GITLANE_LANE_PATH/.git"; } 2>/dev/null || gs_c=
	case $gs_c in
	"gitdir: "?*) gs_gd=${gs_c#gitdir: } ;;
	*)
		gs_why="the lane's git dir ($GITLANE_LANE_PATH/.git is not one line \`gitdir: DIR\`)"
		return 1
		;;
	esac
}


# gs_slow: load shims/slow.sh (gs_refuse, gs_broken, gs_enabled_false, gs_python).
gs_slow() {
	# shellcheck source=slow.sh
	. "$gs_dir/slow.sh"
}
