#!/usr/bin/env bash
# Make sure Debian's Prometheus (/usr/bin/prometheus, /usr/bin/promtool) is
# installed for the integration tests. Idempotent and silent when it already is.
#
# The tests never use the package's own service: they start their own
# Prometheus on a free loopback port with a temporary config and data dir.
# So the package's service is kept from starting at install time and is
# stopped/disabled if it is running (it would otherwise listen on :9090).
set -euo pipefail

log() { printf '[install-prometheus] %s\n' "$*" >&2; }

stop_package_service() {
  if command -v systemctl >/dev/null 2>&1 && [[ -d /run/systemd/system ]]; then
    if systemctl is-enabled --quiet prometheus.service 2>/dev/null \
       || systemctl is-active --quiet prometheus.service 2>/dev/null; then
      log "disabling the prometheus package's systemd service (tests run their own server)"
      systemctl disable --now prometheus.service >/dev/null 2>&1 || true
    fi
  elif [[ -x /etc/init.d/prometheus && -s /run/prometheus/prometheus.pid ]]; then
    if /etc/init.d/prometheus status >/dev/null 2>&1; then
      log "stopping the prometheus package's init.d service (tests run their own server)"
      /etc/init.d/prometheus stop >/dev/null 2>&1 || true
    fi
  fi
}

if [[ -x /usr/bin/prometheus && -x /usr/bin/promtool ]]; then
  stop_package_service
  exit 0
fi

SUDO=""
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null 2>&1 || { log "ERROR: need root (or sudo) to apt-get install prometheus"; exit 1; }
  SUDO="sudo"
fi

# Keep the package's service from being started by the postinst script.
policy=/usr/sbin/policy-rc.d
made_policy=0
if [[ ! -e $policy ]]; then
  printf '#!/bin/sh\n# temporary, from gputui scripts/install-prometheus.sh\nexit 101\n' | $SUDO tee $policy >/dev/null
  $SUDO chmod +x $policy
  made_policy=1
fi
cleanup() { if [[ $made_policy == 1 ]]; then $SUDO rm -f "$policy"; fi; }
trap cleanup EXIT

export DEBIAN_FRONTEND=noninteractive
if ! apt-cache policy prometheus 2>/dev/null | grep -q 'Candidate: [0-9]'; then
  log "apt-get update (no candidate for prometheus in the package lists yet)"
  $SUDO apt-get update -qq
fi
log "apt-get install prometheus (no recommends)"
$SUDO apt-get install -y -qq --no-install-recommends prometheus >/dev/null
[[ -x /usr/bin/prometheus && -x /usr/bin/promtool ]] || { log "ERROR: prometheus/promtool still missing after install"; exit 1; }
stop_package_service
log "installed: $(/usr/bin/prometheus --version 2>&1 | head -1)"
