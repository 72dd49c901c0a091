# SPDX-License-Identifier: Apache-2.0
"""The job store's schema versions: an alembic environment in the package.

:mod:`.schema` opens a store and knows its revision, :mod:`.sync` upgrades
one (``gvfs-manage db sync``), ``versions/`` holds the revisions.  Alembic
is configured in code (:func:`.schema.alembic_config`): no ``alembic.ini``.
A developer adds a revision with::

    python -c "from alembic import command; \\
      from gvfs_openstack.migration.db import schema; \\
      command.revision(schema.alembic_config(), 'what it does', rev_id='0003')"
"""
