#!/usr/bin/env bash
# Installs what the lab, tests, benchmarks and demo need on Debian/Ubuntu:
# the system packages listed in bindep.txt that are missing, toxiproxy
# (pinned, built with `go install`), tox and tox-uv.  Idempotent; uses
# sudo when not root.
set -euo pipefail

TOP=$(cd "$(dirname "$0")/.." && pwd)
TOXIPROXY_VERSION=${TOXIPROXY_VERSION:-v2.5.0}
TOXIPROXY_BIN=${TOXIPROXY_BIN:-/usr/local/bin/toxiproxy-server}

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO=sudo
fi

missing=()
while read -r pkg _; do
    case "$pkg" in ''|'#'*) continue ;; esac
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null \
            | grep -q "install ok installed"; then
        missing+=("$pkg")
    fi
done < "$TOP/bindep.txt"

if ! command -v go >/dev/null 2>&1 && [ ! -x "$TOXIPROXY_BIN" ]; then
    missing+=(golang-go)
fi

# The functional tests build pjdfstest (Rust >= 1.85) with cargo: rustup's
# when there is one, else the distribution's (new enough from Debian 13).
if ! command -v cargo >/dev/null 2>&1 && [ ! -x "$HOME/.cargo/bin/cargo" ]; then
    missing+=(cargo)
fi

if [ "${#missing[@]}" -gt 0 ]; then
    echo "install-deps: installing ${missing[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq \
        --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ ! -x "$TOXIPROXY_BIN" ]; then
    echo "install-deps: building toxiproxy $TOXIPROXY_VERSION"
    gobin=$(mktemp -d)
    GOBIN="$gobin" GOFLAGS=-mod=mod go install \
        "github.com/Shopify/toxiproxy/v2/cmd/server@$TOXIPROXY_VERSION"
    $SUDO install -m 0755 "$gobin/server" "$TOXIPROXY_BIN"
    rm -rf "$gobin"
fi

# tox, and tox-uv, which tox.ini requires (tox would otherwise provision
# it in .tox/.tox at every clean start).
if ! command -v tox >/dev/null 2>&1 \
        || ! python3 -c "import tox_uv" >/dev/null 2>&1; then
    echo "install-deps: installing tox and tox-uv"
    python3 -m pip install --quiet 'tox>=4' 'tox-uv>=1.11' 2>/dev/null \
        || python3 -m pip install --quiet --break-system-packages \
            'tox>=4' 'tox-uv>=1.11'
fi
echo "install-deps: system dependencies are in place"
