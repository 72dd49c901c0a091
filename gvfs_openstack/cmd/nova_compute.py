# SPDX-License-Identifier: Apache-2.0
"""``gvfs-nova-compute``: deprecated, run the stock ``nova-compute``.

The wheel now installs the module ``nova.virt.gvfs`` (see
``nova/virt/gvfs.py`` in the source tree), so Nova's own loader finds
``compute_driver = gvfs.GvfsLibvirtDriver`` in the stock nova-compute.
This program is kept for one release for deployments whose units name
it: it checks that the shim is installed and runs nova-compute
unchanged.  It no longer aliases anything in ``sys.modules``.
"""

import importlib
import warnings


def register():
    """Check that Nova's loader can find the driver; the shim module.

    ImportError (as Nova's loader would meet it) when the package is
    installed without its ``nova.virt.gvfs`` module.
    """
    return importlib.import_module("nova.virt.gvfs")


def main():
    # nova-compute's module sets up its threading model before any other
    # part of Nova is imported: import it first.
    from nova.cmd import compute
    warnings.warn("gvfs-nova-compute is deprecated: run nova-compute with "
                  "compute_driver = gvfs.GvfsLibvirtDriver",
                  FutureWarning, stacklevel=1)
    register()
    return compute.main()
