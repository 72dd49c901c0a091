#!/bin/bash
#
# Stand-ins for the devstack helpers devstack/lib/gvfs calls.  Each records
# its call as one line in $STUB_LOG; run_process and stop_process keep the
# set of running services as files in $STUB_STATE/running, and the
# gvfs-mount service "mounts" by creating $STUB_STATE/mounted (which the
# stand-in mountpoint and fusermount3 on $PATH read, and remove with the
# directory the mount showed).

STUB_LOG=${STUB_LOG:?}
STUB_STATE=${STUB_STATE:?}
STUB_PYTHON=${STUB_PYTHON:-python3}
STUB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

function _stub_record {
    echo "$*" >> "$STUB_LOG"
}

function define_plugin {
    _stub_record define_plugin "$@"
}

function enable_service {
    local service
    for service in "$@"; do
        if [[ ,$DISABLED_SERVICES, != *,$service,* ]]; then
            ENABLED_SERVICES="$ENABLED_SERVICES,$service"
        fi
    done
}

function is_service_enabled {
    local service
    for service in "$@"; do
        if [[ ,$ENABLED_SERVICES, == *,$service,* ]]; then
            return 0
        fi
    done
    return 1
}

function iniset {
    local sudo=""
    if [[ $1 == -sudo ]]; then
        sudo=-sudo
        shift
    fi
    _stub_record iniset $sudo "$@"
    "$STUB_PYTHON" -I -S "$STUB_DIR/ini.py" set "$@"
}

function inicomment {
    _stub_record inicomment "$@"
    "$STUB_PYTHON" -I -S "$STUB_DIR/ini.py" comment "$@"
}

function iniset_rpc_backend {
    _stub_record iniset_rpc_backend "$@"
    iniset "$2" "$3" transport_url "rabbit://stackrabbit:secret@$SERVICE_HOST:5672/"
}

function run_process {
    _stub_record run_process "$@"
    if is_service_enabled "$1"; then
        mkdir -p "$STUB_STATE/running"
        printf '%s\n' "$2" > "$STUB_STATE/running/$1"
        if [[ $1 == gvfs-mount ]]; then
            mkdir -p "$GVFS_MOUNT_POINT/$GVFS_IMAGES_SUBDIR"
            # What the "mounted" export shows, removed by the unmount.
            printf '%s\n' "$GVFS_MOUNT_POINT/$GVFS_IMAGES_SUBDIR" \
                > "$STUB_STATE/mounted"
        fi
    fi
}

function stop_process {
    _stub_record stop_process "$@"
    rm -f "$STUB_STATE/running/$1"
}

function setup_develop {
    _stub_record setup_develop "$@"
}

function install_package {
    _stub_record install_package "$@"
}

function is_ubuntu {
    return 0
}

function get_python_exec_prefix {
    echo /opt/stack/data/venv/bin
}

function echo_summary {
    _stub_record echo_summary "$@"
}

function die {
    local line=$1
    shift
    echo "die at line $line: $*" >&2
    exit 1
}

function sudo {
    _stub_record sudo "$@"
    # The plugin's own commands (under $GVFS_BIN_DIR) are not installed
    # here: their call is recorded, not run.
    if [[ $1 == /* && ! -x $1 ]]; then
        return 0
    fi
    "$@"
}
