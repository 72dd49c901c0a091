# SPDX-License-Identifier: Apache-2.0
"""The console scripts: each program, or one sentence naming its extra.

A node installs the extras of the roles it runs (``pip install
'gvfs-openstack[proxy]'``); every node still gets every console script.
Run without its role's extra, a program would die with a
``ModuleNotFoundError`` traceback; here it says which extra provides
the missing module, and how to install it, in one line.
"""

import importlib
from importlib import metadata
import re
import sys

DISTRIBUTION = "gvfs-openstack"
#: A requirement of an extra in the distribution's metadata, e.g.
#: ``pyfuse3>=3.3; extra == "fuse"``.
_REQUIREMENT = re.compile(
    r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*).*;.*extra\s*==\s*['\"]([^'\"]+)['\"]")


def _import_name(distribution):
    """The top-level module a distribution installs, by its usual rule.

    ``prometheus-client`` installs ``prometheus_client``, ``oslo.db``
    ``oslo_db``, ``SQLAlchemy`` ``sqlalchemy``: what every requirement of
    the extras follows.
    """
    return re.sub(r"[-.]", "_", distribution).lower()


def extras_providing(module):
    """The extras (sorted) whose requirements install ``module``."""
    top = module.split(".")[0].lower()
    found = set()
    for requirement in metadata.requires(DISTRIBUTION) or ():
        match = _REQUIREMENT.match(requirement)
        if match and _import_name(match.group(1)) == top:
            found.add(match.group(2))
    return sorted(found)


def _run(module, program, extra):
    """Run ``gvfs_openstack.cmd.<module>``'s main, or name the extra."""
    try:
        return importlib.import_module(
            "gvfs_openstack.cmd." + module).main()
    except ModuleNotFoundError as e:
        missing = e.name or ""
        extras = extras_providing(missing)
        if not extras or missing.split(".")[0] == "gvfs_openstack":
            raise
        wanted = extra if extra in extras else extras[0]
        print("%s: module %s is missing: install the %r extra "
              "(pip install 'gvfs-openstack[%s]')"
              % (program, missing.split(".")[0], wanted, wanted),
              file=sys.stderr)
        return 1


def proxy():
    return _run("proxy", "gvfs-proxy", "proxy")


def meta():
    return _run("meta", "gvfs-meta", "proxy")


def conductor():
    return _run("conductor", "gvfs-conductor", "conductor")


def manage():
    return _run("manage", "gvfs-manage", "conductor")


def status():
    return _run("status", "gvfs-status", "conductor")


def api():
    return _run("api", "gvfs-api", "api")
