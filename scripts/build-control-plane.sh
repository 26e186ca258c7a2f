#!/usr/bin/env bash
# Build a real Kubernetes control plane (etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, kubectl) from Go modules, for the
# integration tests. No binaries are downloaded: everything is compiled from
# the modules the Go module proxy serves, through small wrapper modules.
#
# Output: ${GPUTUI_CACHE:-$HOME/.cache/gputui}/k8s/<k8s-version>/bin/
# The last line printed is that directory.
#
# Idempotent: when the binaries for the pinned versions are already there, it
# says so and exits at once. A build happens in a temporary directory next to
# the cache and is renamed into place only when complete, so an interrupted
# build never leaves a half-filled cache.
#
# Environment:
#   K8S_VERSION / ETCD_VERSION  override scripts/k8s-versions.env
#   GPUTUI_CACHE                cache root (default ~/.cache/gputui)
#   GPUTUI_BUILD_JOBS           go build -p (default 2)
#   GPUTUI_FORCE_REBUILD=1      rebuild even if the cache is complete
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
log() { printf '[build-control-plane] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }
# First line of a command's output. (Not "cmd | head -1": under pipefail a
# command killed by SIGPIPE after head exits would fail the script.)
first_line() { local out; out="$("$@" 2>&1)" || true; printf '%s\n' "${out%%$'\n'*}"; }
# First match of a sed -E substitution in a file.
first_match() { sed -nE "$1" "$2" | awk 'NR == 1 { print } END {}'; }
trap 'log "ERROR: command failed (exit $?) at line $LINENO: $BASH_COMMAND"' ERR

# --- versions -----------------------------------------------------------
env_k8s="${K8S_VERSION:-}"
env_etcd="${ETCD_VERSION:-}"
# shellcheck disable=SC1091
source "$here/k8s-versions.env"
K8S_VERSION="${env_k8s:-$K8S_VERSION}"
ETCD_VERSION="${env_etcd:-$ETCD_VERSION}"
[[ "$K8S_VERSION" =~ ^v1\.([0-9]+)\.([0-9]+)$ ]] || die "K8S_VERSION must look like v1.37.2, got '$K8S_VERSION'"
k8s_minor="${BASH_REMATCH[1]}"
k8s_patch="${BASH_REMATCH[2]}"
STAGING_VERSION="v0.${k8s_minor}.${k8s_patch}"   # k8s.io/api etc. are tagged v0.<minor>.<patch>

cache_root="${GPUTUI_CACHE:-$HOME/.cache/gputui}"
version_dir="$cache_root/k8s/$K8S_VERSION"
bin_dir="$version_dir/bin"
stamp="$bin_dir/VERSIONS"
binaries=(etcd kube-apiserver kube-controller-manager kube-scheduler kubectl)
want_stamp="K8S_VERSION=$K8S_VERSION ETCD_VERSION=$ETCD_VERSION"

cache_complete() {
  [[ -f "$stamp" ]] && [[ "$(cat "$stamp")" == "$want_stamp" ]] || return 1
  local b
  for b in "${binaries[@]}"; do [[ -x "$bin_dir/$b" ]] || return 1; done
}

if [[ "${GPUTUI_FORCE_REBUILD:-0}" != 1 ]] && cache_complete; then
  log "up to date: Kubernetes $K8S_VERSION, etcd $ETCD_VERSION already built; nothing to do"
  echo "$bin_dir"
  exit 0
fi

command -v go >/dev/null || die "go not found on PATH"
mkdir -p "$cache_root/k8s"

# One build at a time per cache (two test runs starting together must not race).
exec 9>"$cache_root/k8s/.build.lock"
if ! flock -n 9; then
  log "another build holds $cache_root/k8s/.build.lock; waiting for it"
  flock 9
fi
if [[ "${GPUTUI_FORCE_REBUILD:-0}" != 1 ]] && cache_complete; then
  log "up to date (built by the concurrent run): nothing to do"
  echo "$bin_dir"
  exit 0
fi

# Holding the lock, any leftover work dir is from a build that was killed.
for stale in "$cache_root/k8s"/.build-*; do
  [[ -d "$stale" ]] || continue
  log "removing leftover work dir of an interrupted build: $stale"
  rm -rf "$stale"
done
work="$(mktemp -d "$cache_root/k8s/.build-$K8S_VERSION.XXXXXX")"
cleanup() { rm -rf "$work"; }
trap cleanup EXIT
trap 'log "interrupted; discarding $work"; exit 130' INT TERM

export CGO_ENABLED=0
export GOFLAGS="${GOFLAGS:-} -mod=mod"
jobs="${GPUTUI_BUILD_JOBS:-2}"
log "Go: $(go version)"
log "building Kubernetes $K8S_VERSION (staging modules $STAGING_VERSION) and etcd $ETCD_VERSION into $bin_dir"
log "work dir: $work (jobs: $jobs)"

# If a requirement's exact version is not served by the proxy, pin the
# module at the next version the proxy does serve. Looks at go's error
# output for "M@V: ... 403/404/410/not found/not available" lines.
bump_unserved() { # $1 = log file of the failed go command
  local errlog="$1" line mod ver newer bumped=0
  while IFS= read -r line; do
    mod="${line%@*}"; ver="${line#*@}"
    [[ -n "$mod" && -n "$ver" ]] || continue
    newer="$( { go list -m -versions "$mod" 2>/dev/null | tr ' ' '\n' | tail -n +2; echo "$ver"; } \
             | sort -V -u | awk -v v="$ver" 'seen { print; exit } $0 == v { seen = 1 }')"
    if [[ -z "$newer" ]]; then
      log "module $mod@$ver is not served and no newer version is listed"
      continue
    fi
    log "module $mod@$ver is not served by the proxy; using $mod@$newer instead (go get)"
    go get "$mod@$newer" >>"$errlog.get" 2>&1 || { cat "$errlog.get" >&2; return 1; }
    bumped=1
  done < <(grep -oE '[[:alnum:]._~/-]+@v[0-9][[:alnum:].+-]*: (reading|verifying|unrecognized|invalid|no matching)[^|]*(403|404|410|not found|not available|unknown revision)' "$errlog" \
            | sed -E 's/: .*//' | sort -u)
  [[ $bumped == 1 ]]
}

# Run a go command in the current module; on "not served" errors, bump the
# offending modules and retry (a few rounds).
go_retry() {
  local round rc out="$work/go-cmd.log"
  for round in 1 2 3 4 5 6; do
    rc=0
    "$@" 2>&1 | tee "$out" >&2 || rc=$?
    (( rc == 0 )) && return 0
    if bump_unserved "$out"; then
      log "retrying: $*"
      continue
    fi
    return 1
  done
  return 1
}

# --- Kubernetes wrapper module -------------------------------------------
k8s_mod_dir="$work/k8s"
mkdir -p "$k8s_mod_dir" "$work/bin"
cd "$k8s_mod_dir"
log "fetching k8s.io/kubernetes@$K8S_VERSION go.mod"
go mod download -json "k8s.io/kubernetes@$K8S_VERSION" >"$work/k8s-download.json" \
  || { cat "$work/k8s-download.json" >&2; die "cannot download k8s.io/kubernetes@$K8S_VERSION from the module proxy"; }
upstream_mod="$(sed -nE 's/^[[:space:]]*"GoMod": "(.*)",?$/\1/p' "$work/k8s-download.json")"
[[ -f "$upstream_mod" ]] || die "go mod download did not report the go.mod of k8s.io/kubernetes@$K8S_VERSION"
go_line="$(first_match 's/^go ([0-9.]+)$/\1/p' "$upstream_mod")"
godebug_line="$(first_match 's/^godebug ([^ ]+)$/\1/p' "$upstream_mod")"

cat >go.mod <<MOD
// Generated by gputui scripts/build-control-plane.sh: builds Kubernetes
// $K8S_VERSION binaries from the published modules.
module gputui.local/k8s-build

go ${go_line:-1.26.0}
MOD
[[ -n "$godebug_line" ]] && go mod edit -godebug="$godebug_line"
go mod edit -require="k8s.io/kubernetes@$K8S_VERSION"

# The release's own replace list: k8s.io/X => ./staging/src/k8s.io/X
# becomes k8s.io/X => k8s.io/X $STAGING_VERSION. Other replace lines that
# point at a module version are copied as they are.
n_staging=0
while IFS= read -r line; do
  line="${line#replace }"
  line="$(sed -E 's/^[[:space:]]+//; s/[[:space:]]*\/\/.*$//' <<<"$line")"
  [[ "$line" == *"=>"* ]] || continue
  lhs="$(sed -E 's/[[:space:]]*=>.*//' <<<"$line")"
  rhs="$(sed -E 's/.*=>[[:space:]]*//' <<<"$line")"
  lhs_mod="${lhs%% *}"
  if [[ "$rhs" == ./staging/* ]]; then
    go mod edit -replace="$lhs_mod=$lhs_mod@$STAGING_VERSION"
    n_staging=$((n_staging + 1))
  elif [[ "$rhs" == .* || "$rhs" == /* ]]; then
    log "skipping local replace in upstream go.mod: $line"
  else
    rhs_mod="${rhs%% *}"; rhs_ver="${rhs##* }"
    lhs_arg="$lhs_mod"; [[ "$lhs" == *" "* ]] && lhs_arg="$lhs_mod@${lhs##* }"
    go mod edit -replace="$lhs_arg=$rhs_mod@$rhs_ver"
    log "copied upstream replace: $line"
  fi
done < <(awk '/^replace \(/{inblk=1; next} inblk && /^\)/{inblk=0; next} inblk{print; next} /^replace /{print}' "$upstream_mod")
(( n_staging > 0 )) || die "found no staging replace lines in k8s.io/kubernetes@$K8S_VERSION go.mod"
log "generated $n_staging staging replace directives from the release's go.mod"

k8s_cmds=(kube-apiserver kube-controller-manager kube-scheduler kubectl)
k8s_pkgs=()
for c in "${k8s_cmds[@]}"; do k8s_pkgs+=("k8s.io/kubernetes/cmd/$c"); done

log "resolving dependencies (go get -tool ${k8s_cmds[*]})"
tool_args=()
for p in "${k8s_pkgs[@]}"; do tool_args+=("$p@$K8S_VERSION"); done
go_retry go get -tool "${tool_args[@]}" || die "could not resolve the Kubernetes modules (see errors above)"

build_date="$(first_match 's/^[[:space:]]*"Time": "([^"]+)".*/\1/p' "$work/k8s-download.json")"
[[ -n "$build_date" ]] || build_date="1970-01-01T00:00:00Z"
git_commit="$(first_match 's/^[[:space:]]*"Hash": "([0-9a-f]{40})".*/\1/p' "$work/k8s-download.json")"
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$k8s_minor"
  ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$build_date"
  [[ -n "$git_commit" ]] && ldflags+=" -X $pkg.gitCommit=$git_commit"
done

log "compiling ${k8s_cmds[*]} (CGO_ENABLED=0, -p $jobs); a cold build takes 10-25 minutes on 2 cores"
t0=$SECONDS
go_retry go build -p "$jobs" -trimpath -ldflags "$ldflags" -o "$work/bin/" "${k8s_pkgs[@]}" \
  || die "go build of the Kubernetes binaries failed (see errors above)"
log "Kubernetes binaries built in $((SECONDS - t0)) s"

# --- etcd wrapper module -------------------------------------------------
etcd_mod_dir="$work/etcd"
mkdir -p "$etcd_mod_dir"
cd "$etcd_mod_dir"
cat >go.mod <<MOD
// Generated by gputui scripts/build-control-plane.sh: builds etcd $ETCD_VERSION.
module gputui.local/etcd-build

go ${go_line:-1.26.0}
MOD
go mod edit -require="go.etcd.io/etcd/server/v3@$ETCD_VERSION"
log "resolving etcd dependencies (go get -tool go.etcd.io/etcd/server/v3@$ETCD_VERSION)"
go_retry go get -tool "go.etcd.io/etcd/server/v3@$ETCD_VERSION" || die "could not resolve go.etcd.io/etcd/server/v3@$ETCD_VERSION"
log "compiling etcd"
t0=$SECONDS
go_retry go build -p "$jobs" -trimpath -ldflags "-s -w" -o "$work/bin/etcd" go.etcd.io/etcd/server/v3 \
  || die "go build of etcd failed (see errors above)"
log "etcd built in $((SECONDS - t0)) s"

# --- check what was built reports the right version ----------------------
got="$(first_line "$work/bin/kube-apiserver" --version)"
[[ "$got" == "Kubernetes $K8S_VERSION" ]] || die "kube-apiserver --version says '$got', expected 'Kubernetes $K8S_VERSION'"
for b in kube-controller-manager kube-scheduler; do
  got="$(first_line "$work/bin/$b" --version)"
  [[ "$got" == "Kubernetes $K8S_VERSION" ]] || die "$b --version says '$got'"
done
got="$(first_line "$work/bin/kubectl" version --client)"
[[ "$got" == *"$K8S_VERSION"* ]] || die "kubectl version --client says '$got'"
got="$(first_line "$work/bin/etcd" --version)"
[[ "$got" == *"${ETCD_VERSION#v}"* ]] || die "etcd --version says '$got', expected ${ETCD_VERSION#v}"
for b in "${binaries[@]}"; do
  if [[ $b == kubectl ]]; then log "  $b: $(first_line "$work/bin/$b" version --client)"
  else log "  $b: $(first_line "$work/bin/$b" --version)"; fi
done

# Record what went into the build (including any version bumps).
cp "$k8s_mod_dir/go.mod" "$work/bin/k8s-build.go.mod"
cp "$etcd_mod_dir/go.mod" "$work/bin/etcd-build.go.mod"
echo "$want_stamp" >"$work/bin/VERSIONS"

# --- move into place atomically ------------------------------------------
mkdir -p "$version_dir"
if [[ -e "$bin_dir" ]]; then
  old="$version_dir/.old-bin.$$"
  mv "$bin_dir" "$old"
  mv "$work/bin" "$bin_dir"
  rm -rf "$old"
else
  mv "$work/bin" "$bin_dir"
fi
log "done: binaries in $bin_dir"
echo "$bin_dir"
