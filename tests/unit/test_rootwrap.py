# SPDX-License-Identifier: Apache-2.0
"""A packaged service's rootwrap starts the privsep daemon as it is.

A packaged nova-compute or glance-api starts privsep daemons through its
rootwrap (``helper_command = sudo nova-rootwrap /etc/nova/rootwrap.conf
privsep-helper --config-file /etc/nova/nova.conf``).  oslo.rootwrap
admits ``privsep-helper`` whatever its arguments, without a filter file,
so the project ships none: what keeps the daemon to its job is that it
checks every mount against its own configuration
(:mod:`gvfs_openstack.mount.privileged`).  If a rootwrap release ever
stops doing so, this test says that a filter must be shipped.
"""

import os
import sys

from oslo_config import cfg
from oslo_rootwrap import wrapper
import pytest

from gvfs_openstack.mount import privileged

SOCK = "/tmp/tmpa1b2c3/privsep.sock"


def _privsep_command(service, config_files):
    """What oslo.privsep runs for our context, after the rootwrap part."""
    helper = "sudo %s-rootwrap /etc/%s/rootwrap.conf privsep-helper %s" % (
        service, service, " ".join("--config-file %s" % f
                                   for f in config_files))
    group = privileged.context.cfg_section
    cfg.CONF.set_override("helper_command", helper, group)
    try:
        argv = privileged.context.helper_command(SOCK)
    finally:
        cfg.CONF.clear_override("helper_command", group)
    assert argv[:3] == ["sudo", "%s-rootwrap" % service,
                        "/etc/%s/rootwrap.conf" % service]
    return argv[3:]


@pytest.mark.parametrize("service,config_files", [
    ("nova", ["/etc/nova/nova.conf", "/etc/nova/nova-compute.conf"]),
    ("glance", ["/etc/glance/glance-api.conf"]),
])
def test_rootwrap_admits_the_daemon_without_a_filter_of_ours(
        tmp_path, service, config_files):
    command = _privsep_command(service, config_files)
    assert command[-4:] == ["--privsep_context",
                            "gvfs_openstack.mount.privileged.context",
                            "--privsep_sock_path", SOCK]
    no_filters_of_ours = wrapper.load_filters([str(tmp_path)])
    matched = wrapper.match_filter(
        no_filters_of_ours, command,
        exec_dirs=[os.path.dirname(sys.executable)])
    assert matched.name == "privsep-helper"
