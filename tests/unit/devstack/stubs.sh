#!/bin/bash
#
# Stand-ins for the devstack helpers devstack/lib/gvfs calls.  Each records
# its call as one line in $STUB_LOG; run_process and stop_process keep the
# set of running services as files in $STUB_STATE/running, and the
# gvfs-mount service "mounts" by creating $STUB_STATE/mounted (which the
# stand-in mountpoint and fusermount3 on $PATH read, and remove with the
# directory the mount showed).  The Keystone helpers keep users,
# services and endpoints as files under $STUB_STATE/keystone, created
# once as devstack's get_or_create_* do.

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

# As devstack's lib/keystone: the [SECTION] a service's keystonemiddleware
# (and keystoneauth) reads, as service user USER.
function configure_keystone_authtoken_middleware {
    _stub_record configure_keystone_authtoken_middleware "$@"
    local conf=$1 user=$2 section=${3:-keystone_authtoken}
    iniset "$conf" "$section" auth_type password
    iniset "$conf" "$section" interface public
    iniset "$conf" "$section" auth_url "$KEYSTONE_SERVICE_URI"
    iniset "$conf" "$section" username "$user"
    iniset "$conf" "$section" password "$SERVICE_PASSWORD"
    iniset "$conf" "$section" user_domain_name "$SERVICE_DOMAIN_NAME"
    iniset "$conf" "$section" project_name "$SERVICE_PROJECT_NAME"
    iniset "$conf" "$section" project_domain_name "$SERVICE_DOMAIN_NAME"
    iniset "$conf" "$section" www_authenticate_uri "$KEYSTONE_SERVICE_URI"
    iniset "$conf" "$section" cafile "$SSL_BUNDLE_FILE"
    iniset "$conf" "$section" memcached_servers "$MEMCACHE_SERVERS"
    if [[ -n ${4:-} ]]; then
        iniset "$conf" "$section" service_type "$4"
    fi
}

# create_service_user NAME [ROLE] - NAME in the service project with the
# role service (and ROLE): $STUB_STATE/keystone/users/NAME lists the roles.
function create_service_user {
    _stub_record create_service_user "$@"
    local user=$STUB_STATE/keystone/users/$1
    mkdir -p "$(dirname "$user")"
    touch "$user"
    { printf '%s\n' service ${2:+"$2"}; cat "$user"; } | sort -u > "$user.new"
    mv "$user.new" "$user"
}

# get_or_create_user NAME PASSWORD DOMAIN - the user's id: id-of-NAME.
function get_or_create_user {
    _stub_record get_or_create_user "$@"
    echo "id-of-$1"
}

# get_or_create_service NAME TYPE DESCRIPTION - services/TYPE holds the
# name and the description; the id echoed is the type.
function get_or_create_service {
    _stub_record get_or_create_service "$@"
    local service=$STUB_STATE/keystone/services/$2
    mkdir -p "$(dirname "$service")"
    if [[ ! -f $service ]]; then
        printf '%s\n%s\n' "$1" "$3" > "$service"
    fi
    echo "$2"
}

# get_or_create_endpoint TYPE REGION PUBLIC [ADMIN] [INTERNAL] -
# endpoints/TYPE/REGION/INTERFACE holds the URL, for a service that
# exists.
function get_or_create_endpoint {
    _stub_record get_or_create_endpoint "$@"
    if [[ ! -f $STUB_STATE/keystone/services/$1 ]]; then
        echo "No service with a type or name of '$1' exists." >&2
        return 1
    fi
    local type=$1 dir=$STUB_STATE/keystone/endpoints/$1/$2 interface
    shift 2
    mkdir -p "$dir"
    for interface in public admin internal; do
        if [[ -n ${1:-} && ! -f $dir/$interface ]]; then
            printf '%s\n' "$1" > "$dir/$interface"
        fi
        shift || true
    done
    echo "$type-public"
}

# start_tls_proxy NAME FRONT_HOST FRONT_PORT BACK_HOST BACK_PORT -
# tls-proxy/NAME holds where Apache listens and forwards to.
function start_tls_proxy {
    _stub_record start_tls_proxy "$@"
    mkdir -p "$STUB_STATE/tls-proxy"
    printf '%s\n' "$*" > "$STUB_STATE/tls-proxy/$1"
}

# wait_for_service TIMEOUT URL - fails for a URL listed in
# $STUB_DOWN_URLS (comma-separated), as if it never answered.
function wait_for_service {
    _stub_record wait_for_service "$@"
    [[ ,${STUB_DOWN_URLS:-}, != *,$2,* ]]
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
