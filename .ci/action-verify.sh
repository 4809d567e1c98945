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
#   INPUT_ALLOW_EMPTY      "true": no run log on the remote is a pass (default: a failure)
# and GITHUB_WORKSPACE, GITHUB_ACTION_PATH, RUNNER_TEMP, GITHUB_OUTPUT and
# GITHUB_STEP_SUMMARY as the runner sets them (each has a local default).
#
# Exit status: that of `git wal verify` (0: every run verified, 1: a check
# failed, 2: bad arguments); 1 when fetching or installing failed, when
# Python is older than gitwal needs, or when the remote holds no run log
# (unless INPUT_ALLOW_EMPTY is true). Problems are also printed as GitHub
# `::error` annotations.
set -euo pipefail

# A workflow command's message: GitHub reads %, CR and LF as escapes.
annotate() { # level message
    local msg=${2//%/%25}
    msg=${msg//$'\r'/%0D}
    msg=${msg//$'\n'/%0A}
    echo "::$1 title=gitwal verify::$msg"
}

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

# Nothing to verify is not a pass: the agent never pushed its log, or this is
# a pull request from a fork (the logs are on the fork, docs/remotes.md).
if [ -z "$(git for-each-ref --count=1 "refs/wal-remote/$remote/wal/")" ]; then
    if [ "${INPUT_ALLOW_EMPTY:-false}" = true ]; then
        annotate notice "no gitwal run log on $remote: nothing to verify (allow-empty)"
        [ -z "${GITHUB_OUTPUT:-}" ] || { echo "report=" >>"$GITHUB_OUTPUT"; echo "ok=true" >>"$GITHUB_OUTPUT"; }
        exit 0
    fi
    annotate error "no gitwal run log on $remote (refs/wal/*): push the logs with \`git wal push\` where the agent works, or set allow-empty: true for workflows where no log is expected (pull requests from forks)"
    [ -z "${GITHUB_OUTPUT:-}" ] || { echo "report=" >>"$GITHUB_OUTPUT"; echo "ok=false" >>"$GITHUB_OUTPUT"; }
    exit 1
fi

case "${INPUT_VERSION:-}" in
    installed)
        gitwal=$(command -v git-wal) || { annotate error "git-wal is not on PATH (version: installed)"; exit 1; }
        ;;
    *)
        if ! python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
            annotate error "gitwal needs Python 3.11 or newer; found $(python3 -V 2>&1 || echo 'no python3'): add actions/setup-python with python-version: \"3.12\" before this step"
            exit 1
        fi
        venv="$tmp/gitwal-venv"
        spec=$action_path
        [ -z "${INPUT_VERSION:-}" ] || spec="gitwal==$INPUT_VERSION"
        # What is installed, by content: a venv restored from the cache is
        # reused only when it holds exactly this gitwal.
        if [ -z "${INPUT_VERSION:-}" ]; then
            stamp=$( (cd "$action_path" && find pyproject.toml gitwal hooks -type f \
                ! -path '*/__pycache__/*' -print0 2>/dev/null | sort -z | xargs -0 cat) |
                sha256sum)
        else
            stamp="$spec ${INPUT_PIP_ARGS:-}"
        fi
        stamp="$stamp $(python3 -V 2>&1)"
        if [ -x "$venv/bin/git-wal" ] && [ "$(cat "$venv/.gitwal-stamp" 2>/dev/null)" = "$stamp" ]; then
            echo "gitwal: reusing the install in $venv"
        else
            # A venv restored for another Python cannot run: made anew.
            "$venv/bin/python" -c pass 2>/dev/null || { rm -rf "$venv"; python3 -m venv "$venv"; }
            # shellcheck disable=SC2086  # pip arguments are split on purpose
            "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
                ${INPUT_PIP_ARGS:-} "$spec" || { annotate error "installing $spec failed"; exit 1; }
            echo "$stamp" >"$venv/.gitwal-stamp"
        fi
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
# One annotation per failed run (the JUnit report names run, check and LSN).
if [ "$status" != 0 ] && [ -s "$report" ]; then
    python3 - "$report" <<'PY' | while IFS= read -r line; do annotate error "$line"; done || true
import sys
import xml.etree.ElementTree as ET
for case in ET.parse(sys.argv[1]).getroot().iter("testcase"):
    for failure in case.findall("failure"):
        text = (failure.text or failure.get("message") or "").strip().replace("\n", " | ")
        print(f"run {case.get('name')}: {text[:2000]}")
PY
fi
exit "$status"
