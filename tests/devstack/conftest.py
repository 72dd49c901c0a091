# SPDX-License-Identifier: Apache-2.0
"""The devstack deployment under test, as the plugin described it.

``stack test-config`` writes ``devstack-tests.conf`` (see
``gvfs_configure_tests`` in ``devstack/lib/gvfs``); these tests read it,
and reach the cloud as devstack's ``devstack-admin`` cloud of
``clouds.yaml``.  They run only where devstack ran (``tox -e devstack``
in the Zuul jobs of ``.zuul.yaml``) and refuse to run anywhere else.
"""

import configparser
import os

import pytest

CONF_FILE = os.environ.get("GVFS_DEVSTACK_TESTS_CONF",
                           "/etc/gvfs-openstack/devstack-tests.conf")


@pytest.fixture(scope="session")
def deployment():
    if not os.path.exists(CONF_FILE):
        raise pytest.UsageError(
            "%s is missing: these tests run against a devstack deployed "
            "with devstack/ (stack test-config writes it)" % CONF_FILE)
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(CONF_FILE)
    return parser["gvfs"]


@pytest.fixture(scope="session")
def cloud_env():
    env = dict(os.environ)
    env.setdefault("OS_CLOUD", "devstack-admin")
    return env
