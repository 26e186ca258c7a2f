#!/usr/bin/env bash
# Build Argo Rollouts' own controller from its published Go module (pinned in scripts/k8s-versions.env), so
# the integration tests run the real controller against the real control plane: it makes the ReplicaSets,
# moves the steps and writes the Rollout's status, as in a cluster. Nothing is downloaded but modules from
# the Go module proxy.
#
# Output: ${GPUTUI_CACHE:-$HOME/.cache/gputui}/argo-rollouts/<version>/rollouts-controller; the last line
# printed is that directory. Idempotent; one build at a time per cache; a build is moved into place only
# when complete. (The module has replace directives, so `go install module@version` refuses it: it is built
# as the main module, from a writable copy of its source.)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
log() { printf '[build-argo-rollouts] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

version="${ARGO_ROLLOUTS_VERSION:-$(sed -nE 's/^ARGO_ROLLOUTS_VERSION=(.*)$/\1/p' "$here/k8s-versions.env")}"
[[ "$version" =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "ARGO_ROLLOUTS_VERSION must look like v1.8.3, got '$version'"
cache_root="${GPUTUI_CACHE:-$HOME/.cache/gputui}"
out_dir="$cache_root/argo-rollouts/$version"
bin="$out_dir/rollouts-controller"

if [[ -x "$bin" ]]; then
  log "up to date: Argo Rollouts $version already built; nothing to do"
  echo "$out_dir"
  exit 0
fi
command -v go >/dev/null || die "go not found on PATH"
mkdir -p "$cache_root/argo-rollouts"
exec 9>"$cache_root/argo-rollouts/.build.lock"
flock 9
if [[ -x "$bin" ]]; then
  log "up to date (built by a concurrent run): nothing to do"
  echo "$out_dir"
  exit 0
fi

export GOPATH="$cache_root/gomod" GOFLAGS="-mod=mod" GO111MODULE=on
mkdir -p "$GOPATH"
module="github.com/argoproj/argo-rollouts@$version"
log "downloading $module"
src="$(cd "$GOPATH" && go mod download -json "$module" | python3 -c 'import json, sys; d = json.load(sys.stdin); print(d.get("Dir") or "")')"
[[ -n "$src" && -d "$src" ]] || die "go mod download $module gave no source directory"

work="$(mktemp -d "$cache_root/argo-rollouts/.build-XXXXXX")"
trap 'rm -rf "$work"; chmod -R u+w "$GOPATH/pkg" 2>/dev/null || true' EXIT
cp -r "$src/." "$work/src"
chmod -R u+w "$work/src"
log "building rollouts-controller (a few minutes the first time)"
(cd "$work/src" && go build -p "${GPUTUI_BUILD_JOBS:-2}" -o "$work/rollouts-controller" ./cmd/rollouts-controller) \
  || die "go build of $module failed"
mkdir -p "$out_dir"
mv "$work/rollouts-controller" "$bin.partial"
mv "$bin.partial" "$bin"
log "built $bin"
echo "$out_dir"
