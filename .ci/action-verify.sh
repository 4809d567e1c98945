#!/usr/bin/env bash
# The run step of the GitHub Action in action.yml (docs/remotes.md): fetch the
# remote's branches and run logs, install gitwal, and run
# `git wal verify --format junit` into a report file.
#
# Inputs arrive as environment variables (action.yml sets them):
#   INPUT_VERSION          "" (default): gitwal from the action's own checkout;
#                          X.Y.Z: gitwal==X.Y.Z from the package index;
#                          "installed": the git-wal already on PATH
#   INPUT_ARGS             arguments for `git wal verify` (default: --all)
#   INPUT_ALLOWED_SIGNERS  an allowed-signers file, passed as --allowed-signers
#   INPUT_REMOTE           the remote holding the logs (default: origin)
#   INPUT_REPORT           the JUnit file, relative to the workspace (default: gitwal-verify.xml)
#   INPUT_PIP_ARGS         extra `pip install` arguments (an index URL, say)
# and GITHUB_WORKSPACE, GITHUB_ACTION_PATH, RUNNER_TEMP, GITHUB_OUTPUT and
# GITHUB_STEP_SUMMARY as the runner sets them (each has a local default).
#
# Exit status: that of `git wal verify` (0: every run verified, 1: a check
# failed, 2: bad arguments); 1 when fetching or installing failed.
set -euo pipefail

workspace=${GITHUB_WORKSPACE:-$PWD}
action_path=${GITHUB_ACTION_PATH:-$(cd "$(dirname "$0")/.." && pwd)}
tmp=${RUNNER_TEMP:-${TMPDIR:-/tmp}}
remote=${INPUT_REMOTE:-origin}
report=${INPUT_REPORT:-gitwal-verify.xml}
case "$report" in /*) ;; *) report="$workspace/$report" ;; esac
signers=${INPUT_ALLOWED_SIGNERS:-}
if [ -n "$signers" ]; then
    case "$signers" in /*) ;; *) signers="$workspace/$signers" ;; esac
fi

cd "$workspace"

# The branch check diffs each run's base with its branch: history must be whole.
if [ "$(git rev-parse --is-shallow-repository)" = true ]; then
    git fetch --quiet --unshallow "$remote"
fi
# What the remote has now. The logs land in the staging namespace `git wal
# fetch` uses, so the workspace's own refs/wal/* are never overwritten; forcing
# into that namespace is right: it mirrors the remote, rewritten logs included.
git fetch --quiet --no-tags --prune "$remote" \
    "+refs/heads/*:refs/remotes/$remote/*" \
    "+refs/wal/*:refs/wal-remote/$remote/wal/*" \
    "+refs/wal-archive/*:refs/wal-remote/$remote/wal-archive/*" \
    "+refs/wal-checkpoints/*:refs/wal-remote/$remote/wal-checkpoints/*"

case "${INPUT_VERSION:-}" in
    installed)
        gitwal=$(command -v git-wal) || { echo "error: git-wal is not on PATH" >&2; exit 1; }
        ;;
    *)
        venv="$tmp/gitwal-venv"
        [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
        spec=$action_path
        [ -z "${INPUT_VERSION:-}" ] || spec="gitwal==$INPUT_VERSION"
        # shellcheck disable=SC2086  # pip arguments are split on purpose
        "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
            ${INPUT_PIP_ARGS:-} "$spec"
        gitwal="$venv/bin/git-wal"
        ;;
esac

# Verify in a scratch bare repository that borrows the workspace's objects and
# holds the remote's branches and logs under their own names: each run's plan
# branch then resolves as it does on the remote, and nothing in the workspace
# (its checkout, its own logs) changes what is verified.
scratch="$tmp/gitwal-verify.git"
rm -rf "$scratch"
git init --quiet --bare --object-format="$(git rev-parse --show-object-format)" "$scratch"
echo "$(git rev-parse --path-format=absolute --git-common-dir)/objects" \
    >"$scratch/objects/info/alternates"
git for-each-ref --format='%(objectname) %(refname)' \
    "refs/remotes/$remote/" "refs/wal-remote/$remote/" |
    while read -r oid ref; do
        case "$ref" in
            "refs/remotes/$remote/HEAD") continue ;;
            "refs/remotes/$remote/"*) echo "create refs/heads/${ref#"refs/remotes/$remote/"} $oid" ;;
            *) echo "create refs/${ref#"refs/wal-remote/$remote/"} $oid" ;;
        esac
    done | git --git-dir="$scratch" update-ref --stdin

# shellcheck disable=SC2206  # the arguments are split on purpose
args=(${INPUT_ARGS:---all})
[ -z "$signers" ] || args+=(--allowed-signers "$signers")
mkdir -p "$(dirname "$report")"
status=0
(cd "$scratch" && "$gitwal" verify "${args[@]}" --format junit) >"$report" || status=$?

runs=$(sed -n 's/.*<testsuite [^>]*tests="\([0-9]*\)".*/\1/p' "$report" | head -n 1)
failed=$(sed -n 's/.*<testsuite [^>]*failures="\([0-9]*\)".*/\1/p' "$report" | head -n 1)
summary="gitwal verify: ${runs:-?} run(s), ${failed:-?} failed (exit $status); report: $report"
echo "$summary"
[ -z "${GITHUB_STEP_SUMMARY:-}" ] || echo "$summary" >>"$GITHUB_STEP_SUMMARY"
if [ -n "${GITHUB_OUTPUT:-}" ]; then
    echo "report=$report" >>"$GITHUB_OUTPUT"
    echo "ok=$([ "$status" = 0 ] && echo true || echo false)" >>"$GITHUB_OUTPUT"
fi
exit "$status"
