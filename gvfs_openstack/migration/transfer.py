# SPDX-License-Identifier: Apache-2.0
"""Stage 2, DTN to DTN, by the method the sending site is set up for.

``dtn_transfer = gridftp`` (default): the conductor drives the two DTNs'
GridFTP servers itself (:mod:`gvfs_openstack.migration.gridftp`).
``globus``: the Globus Transfer service moves the file between the two
sites' collections (:mod:`gvfs_openstack.migration.globus`; globus-sdk is
imported only then).  A new version of an image the destination has
goes as a delta where it can (:mod:`gvfs_openstack.migration.delta`).
"""


def run(ctx, row):
    """Stage 2 for one image; returns the job-store values it completed."""
    from gvfs_openstack.migration import delta
    values = delta.run(ctx, row)
    if values is not None:
        return values
    return send_whole(ctx, row)


def send_whole(ctx, row):
    """The whole file of ``row`` into the destination's staging directory.

    Returns the job-store values it completed.
    """
    if ctx.source.dtn_transfer == "globus":
        from gvfs_openstack.migration import globus
        values = globus.run(ctx, row)
    else:
        from gvfs_openstack.migration import gridftp
        values = gridftp.run(ctx, row)
    return dict(values, delta_base=None, sent_bytes=row["size"])


def send(ctx, row, source_path, destination_path, self_checking=False):
    """Move one file (a packed job's archive, a delta) between the DTNs.

    By the sending site's method, as a transfer of ``row``; returns the
    job-store values to record once the stage completed.  A
    ``self_checking`` file carries a digest of itself that its receiver
    checks (a delta): GridFTP does not checksum it again, which would
    cost both servers a pass over it and a round trip over the link.
    """
    if ctx.source.dtn_transfer == "globus":
        from gvfs_openstack.migration import globus
        return globus.send(ctx, row, source_path, destination_path)
    from gvfs_openstack.migration import gridftp
    gridftp.send(ctx, row, source_path, destination_path,
                 self_checking=self_checking)
    return {}


def resume_point(ctx, row):
    """Where a restarted stage 2 of ``row`` goes on, in bytes."""
    if ctx.source.dtn_transfer == "globus":
        # The Globus task went on by itself; this is how far it got.
        return row["stage_bytes"]
    from gvfs_openstack.migration import gridftp
    return gridftp.resume_point(row)
