#!/bin/bash
#
# devstack plugin of gvfs-openstack: dispatches on the phase; the work is
# in lib/gvfs, the variables in settings.

# shellcheck source=devstack/lib/gvfs
source "$GVFS_DIR/devstack/lib/gvfs"

if [[ "$1" == "stack" && "$2" == "pre-install" ]]; then
    gvfs_check_services
elif [[ "$1" == "stack" && "$2" == "install" ]]; then
    echo_summary "Installing gvfs-openstack"
    gvfs_install
elif [[ "$1" == "stack" && "$2" == "post-config" ]]; then
    echo_summary "Configuring and starting the GVFS DTN, proxies and mount"
    gvfs_configure
    gvfs_start_storage
    if is_service_enabled g-api; then
        gvfs_configure_glance
    fi
    if is_service_enabled n-cpu && [[ $GVFS_NOVA_BACKEND == True ]]; then
        gvfs_configure_nova
    fi
elif [[ "$1" == "stack" && "$2" == "extra" ]]; then
    echo_summary "Starting gvfs-conductor, gvfs-api and the gvfs compute driver"
    if is_service_enabled gvfs-conductor; then
        gvfs_start_conductor
    fi
    if is_service_enabled gvfs-api; then
        gvfs_start_api
    fi
    if is_service_enabled n-cpu && [[ $GVFS_NOVA_BACKEND == True ]]; then
        gvfs_start_compute
    fi
elif [[ "$1" == "stack" && "$2" == "test-config" ]]; then
    gvfs_configure_tests
fi

if [[ "$1" == "unstack" ]]; then
    gvfs_stop
fi

if [[ "$1" == "clean" ]]; then
    gvfs_cleanup
fi
