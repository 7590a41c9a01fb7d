#!/usr/bin/env bash
# Starts `goalrun action` for the composite action (action.yml), on the
# runner itself.
#
# A release of goalrun/goalrun is a commit that carries dist/VERSION and
# dist/SHA256SUMS (.github/workflows/release.yml makes it): the static
# binary for this runner's platform is downloaded from that release, its
# SHA-256 checked against dist/SHA256SUMS (a binary that does not match is
# never run), and kept in the runner's tool cache for later jobs. Any other
# ref (a branch, a commit between releases, a fork) has no dist/: goalrun is
# then built from the action's own checkout with the runner's Go, which
# takes longer and needs Go on PATH (actions/setup-go).
#
# The action's files are found through GITHUB_ACTION_PATH, which the runner
# sets to the action's folder as the step sees it: in a container job that
# is the path inside the job's container (the ${{ github.action_path }}
# expression gives the host's path there, actions/runner#2185).
#
# Every failure here is an ::error:: naming the fix, exit 3, and the step
# output status=error (goalrun did not start: every verdict output stays
# empty, as when no run started).
#
# GOALRUN_RELEASE_URL replaces the download location (a mirror); the
# checksum still decides.
set -euo pipefail

here=${GITHUB_ACTION_PATH:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}

fail() {
  printf '::error::goalrun: %s\n' "$*"
  if [ -n "${GITHUB_OUTPUT:-}" ]; then
    printf 'status=error\n' >>"$GITHUB_OUTPUT" 2>/dev/null || true
  fi
  exit 3
}

sha256() {
  if command -v sha256sum >/dev/null 2>&1; then sha256sum "$1" | cut -d' ' -f1
  else shasum -a 256 "$1" | cut -d' ' -f1; fi
}

# The runner's platform: RUNNER_OS and RUNNER_ARCH, which the runner sets
# to its own, else uname. The platforms are
# .ci/build-release's targets: Linux only, since the sandbox is a Linux
# Docker Engine's containers and goalrun uses Linux kernel features.
os=${RUNNER_OS:-$(uname -s)}
[ "$(printf '%s' "$os" | tr '[:upper:]' '[:lower:]')" = linux ] ||
  fail "goalrun runs on Linux runners only (this one is $os): its sandbox is a Linux Docker Engine's containers and goalrun uses Linux kernel features; use runs-on: ubuntu-latest or a Linux self-hosted runner with Docker"
os=linux
machine=${RUNNER_ARCH:-$(uname -m)}
case "$machine" in
  X64 | x86_64 | amd64) arch=amd64 ;;
  ARM64 | aarch64 | arm64) arch=arm64 ;;
  *) fail "no goalrun build for the machine type $machine (releases cover linux on amd64 and arm64)" ;;
esac
name=goalrun-$os-$arch

if [ -f "$here/dist/VERSION" ] && [ -f "$here/dist/SHA256SUMS" ]; then
  version=$(tr -d ' \n\r' <"$here/dist/VERSION")
  if ! [[ "$version" =~ ^v[0-9]+\.[0-9]+\.[0-9]+([-+][0-9A-Za-z.-]+)?$ ]]; then
    fail "dist/VERSION holds \"$version\", not a release tag"
  fi
  want=$(awk -v n="$name" '$2 == n || $2 == "*" n { print $1 }' "$here/dist/SHA256SUMS")
  [ -n "$want" ] || fail "release $version has no build for $os/$arch (dist/SHA256SUMS lists none)"
  command -v sha256sum >/dev/null 2>&1 || command -v shasum >/dev/null 2>&1 ||
    fail "neither sha256sum nor shasum is on the runner's PATH, so the goalrun binary's SHA-256 cannot be checked and it is not run; install coreutils (apt-get install coreutils) in the job or its container"
  cache=${RUNNER_TOOL_CACHE:-${RUNNER_TEMP:-/tmp}}/goalrun/$version/$os-$arch
  bin=$cache/goalrun
  if [ ! -x "$bin" ] || [ "$(sha256 "$bin")" != "$want" ]; then
    base=${GOALRUN_RELEASE_URL:-https://github.com/goalrun/goalrun/releases/download}
    url=$base/$version/$name
    if command -v curl >/dev/null 2>&1; then
      get() { curl -fsSL --retry 3 --retry-delay 2 -o "$1" "$url"; }
    elif command -v wget >/dev/null 2>&1; then
      get() { wget -q -O "$1" "$url"; }
    else
      fail "neither curl nor wget is on the runner's PATH, so goalrun $version cannot be downloaded from $url; install one (apt-get install curl) in the job or its container, before this step"
    fi
    mkdir -p "$cache" || fail "could not make the tool cache folder $cache"
    tmp=$(mktemp "$cache/.download.XXXXXX") || fail "could not make a file in the tool cache folder $cache"
    trap 'rm -f "$tmp"' EXIT
    get "$tmp" || fail "could not download $url (see the message above)"
    got=$(sha256 "$tmp")
    [ "$got" = "$want" ] || fail "the download $url has SHA-256 $got, not $want as dist/SHA256SUMS of release $version says; it was not run"
    chmod 0755 "$tmp"
    mv -f "$tmp" "$bin"
    trap - EXIT
  fi
else
  command -v go >/dev/null 2>&1 ||
    fail "this ref of goalrun/goalrun is not a release (it has no dist/VERSION), so goalrun must be built from source, and there is no Go on the runner's PATH: pin a release tag (uses: goalrun/goalrun@v1), or add actions/setup-go before this step"
  printf '::notice::goalrun: %s is not a release ref; building goalrun from source with %s (pin a release tag for a start in seconds)\n' \
    "${GITHUB_ACTION_REF:-this ref}" "$(go version)"
  bin=${RUNNER_TEMP:-/tmp}/goalrun-source-build/goalrun
  (cd "$here" && CGO_ENABLED=0 go build -trimpath -o "$bin" ./cmd/goalrun) || fail "building goalrun from $here failed (see the log above)"
fi

exec "$bin" action
