# SPDX-License-Identifier: Apache-2.0
"""What ``gvfs-status upgrade check`` reports of a conductor.

Read from the conductor's configuration and its job store: the schema
revision this release needs (``gvfs-manage db sync``), deprecated options
still set, migrations started without the requester's trust, and DTNs
reached over NFS as root or in clear (the security guide's unsafe
settings).
"""

from oslo_db import exception as db_exception
from oslo_upgradecheck import upgradecheck
import sqlalchemy as sa

from gvfs_openstack.conf import migration as migration_conf
from gvfs_openstack import exceptions
from gvfs_openstack.migration.db import engine as store_engine
from gvfs_openstack.migration.db import schema
from gvfs_openstack.migration import jobs
from gvfs_openstack.migration import sites
from gvfs_openstack.proxy import access

Code = upgradecheck.Code
Result = upgradecheck.Result


def job_store(conf):
    engine = None
    try:
        engine = store_engine.create_engine(jobs.store_url(conf),
                                            **jobs.engine_options(conf))
        with engine.connect() as connection:
            revision = schema.current(connection)
            empty = schema.is_empty(connection)
    except (exceptions.GvfsError, db_exception.DBError,
            sa.exc.DBAPIError) as e:
        return Result(Code.FAILURE, "Cannot read the job store: %s"
                      % jobs.store_error_reason(e))
    finally:
        if engine is not None:
            engine.dispose()
    head = schema.head()
    if revision == head:
        return Result(Code.SUCCESS, "The job store is at revision %s."
                      % head)
    if revision is not None and not schema.known(revision):
        return Result(Code.FAILURE, (
            "The job store is at revision %s, which this release does "
            "not know: a newer release upgraded it." % revision))
    return Result(Code.FAILURE, (
        "The job store is at revision %s; this release needs %s. Run "
        "gvfs-manage db sync with the conductors stopped." % (
            "none (empty)" if empty else revision or "none", head)))


def deprecated_options(conf):
    if conf.conductor.job_store:
        return Result(Code.WARNING, (
            "[conductor] job_store is deprecated and will be removed: "
            "name the job store in [database] connection instead."))
    return Result(Code.SUCCESS)


def trusts(conf):
    if not conf.conductor.require_trust:
        return Result(Code.WARNING, (
            "[conductor] require_trust is off: whoever can use the "
            "message bus can start migrations of any project's images "
            "with the conductor's credentials."))
    return Result(Code.SUCCESS)


def dtn_identity(conf):
    as_root = [name for name in conf.conductor.sites
               if conf[migration_conf.SITE_GROUP % name].nfs_uid == 0]
    if as_root:
        return Result(Code.WARNING, (
            "[site:%s] nfs_uid = 0: the conductor reaches that DTN's "
            "NFS server as root. Unset it (the owner of "
            "dtn_images_dir) or name the file account."
            % ",".join(as_root)))
    return Result(Code.SUCCESS)


def dtn_links(conf):
    """Sites this release refuses to load: plain NFS to a DTN off loopback.

    The site's own check (:func:`sites.nfs_tls`) says why and what to
    set.
    """
    refused, trusted = [], []
    for name in conf.conductor.sites:
        group = migration_conf.SITE_GROUP % name
        try:
            tls = sites.nfs_tls(group, conf[group])
        except exceptions.InvalidConfig as e:
            refused.append(str(e))
            continue
        if tls is None and \
                not access.is_loopback(conf[group].dtn_nfs_host):
            trusted.append(name)
    if refused:
        return Result(Code.FAILURE, "; ".join(refused))
    if trusted:
        return Result(Code.WARNING, (
            "[site:%s] dtn_nfs_trusted_network: the conductor's NFS calls "
            "to that DTN are plain AUTH_SYS in clear" % ",".join(trusted)))
    return Result(Code.SUCCESS)


#: (name, check of the parsed configuration) in the order reported.
CHECKS = (
    ("Job store schema", job_store),
    ("Deprecated options", deprecated_options),
    ("Trusts", trusts),
    ("DTN identity", dtn_identity),
    ("DTN links", dtn_links),
)
