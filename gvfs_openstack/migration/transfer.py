# SPDX-License-Identifier: Apache-2.0
"""Files from DTN to DTN, by the method the sending site is set up for.

Each method (:class:`GridFtp`, :class:`Globus`) says what a site needs
to take part and moves files between two sites; :data:`METHODS` maps
``[site:*] dtn_transfer`` to them, the one place the name is read.
``gridftp`` (default): the conductor drives the two DTNs' GridFTP
servers itself (:mod:`gvfs_openstack.migration.gridftp`).  ``globus``:
the Globus Transfer service moves the file between the two sites'
collections (:mod:`gvfs_openstack.migration.globus`; globus-sdk is
imported only then).  Stage 2 itself, which sends a delta where it
can, is :mod:`gvfs_openstack.migration.dtn_to_dtn`.
"""


class GridFtp:
    """Third-party GridFTP between the two DTNs' servers."""

    label = "GridFTP"
    #: The option of every site taking part (a :class:`sites.Site` field
    #: of the same name), and what it names.
    site_option = "gridftp_url"
    site_part = "GridFTP server"

    @staticmethod
    def check_pair(source, destination):
        """InvalidConfig if the two sites cannot move images together."""
        from gvfs_openstack.migration import gridftp
        gridftp.data_protection(source, destination)

    @staticmethod
    def send_whole(ctx, row):
        from gvfs_openstack.migration import gridftp
        return gridftp.run(ctx, row)

    @staticmethod
    def send(ctx, row, source_path, destination_path, self_checking):
        from gvfs_openstack.migration import gridftp
        gridftp.send(ctx, row, source_path, destination_path,
                     self_checking=self_checking)
        return {}

    @staticmethod
    def resume_point(row):
        """Past the segments already recorded whole."""
        from gvfs_openstack.migration import gridftp
        return gridftp.resume_point(row)


class Globus:
    """A Globus Transfer task between the two sites' collections."""

    label = "Globus"
    site_option = "globus_endpoint_id"
    site_part = "collection"

    @staticmethod
    def check_pair(source, destination):
        """Nothing to refuse: every task's data channel is encrypted."""

    @staticmethod
    def send_whole(ctx, row):
        from gvfs_openstack.migration import globus
        return globus.run(ctx, row)

    @staticmethod
    def send(ctx, row, source_path, destination_path, self_checking):
        # A task's own checksums cover every file, deltas too.
        from gvfs_openstack.migration import globus
        return globus.send(ctx, row, source_path, destination_path)

    @staticmethod
    def resume_point(row):
        """The task went on by itself; this is how far it got."""
        return row["stage_bytes"]


#: ``[site:*] dtn_transfer`` -> its method.
METHODS = {"gridftp": GridFtp, "globus": Globus}


def method_of(site):
    """The method ``site`` sends with."""
    return METHODS[site.dtn_transfer]


def send_whole(ctx, row):
    """The whole file of ``row`` into the destination's staging directory.

    Returns the job-store values it completed.
    """
    values = method_of(ctx.source).send_whole(ctx, row)
    return dict(values, delta_base=None, sent_bytes=row["size"])


def send(ctx, row, source_path, destination_path, self_checking=False):
    """Move one file (a packed job's archive, a delta) between the DTNs.

    By the sending site's method, as a transfer of ``row``; returns the
    job-store values to record once the stage completed.  A
    ``self_checking`` file carries a digest of itself that its receiver
    checks (a delta): GridFTP does not checksum it again, which would
    cost both servers a pass over it and a round trip over the link.
    """
    return method_of(ctx.source).send(ctx, row, source_path,
                                      destination_path, self_checking)


def resume_point(ctx, row):
    """Where a restarted stage 2 of ``row`` goes on, in bytes."""
    return method_of(ctx.source).resume_point(row)
