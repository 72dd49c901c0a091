# SPDX-License-Identifier: Apache-2.0
"""Two clouds on loopback for disaster-recovery migration.

Each site has a DTN -- an NFS-Ganesha export, a ``gvfs-proxy`` server
proxy in front of it (for the compressed local copy), a GridFTP server
and an sshd -- and a real glance-api whose default store is the ``gvfs``
store on that export (mounted as it is: the lab's Glance sees the
export's directory) plus a plain ``file`` store.  The two Glance
servers keep their databases in one PostgreSQL server, as production
Glance does in a real database: with sqlite, concurrent location imports
lock each other up.

The two clouds share one Keystone, as two regions of its catalog: each
glance-api is the Images API of its own region and checks tokens with
it, and the conductor finds each site's Glance by region with the
keystoneauth credentials of its ``[site:NAME]`` group, as deployed.  One
Keystone rather than two: the conductor's code is the same either way (a
session per site group), a second Keystone would cost every DR lab some
seconds, and with both Glance servers in one catalog a conductor that
ignored a site's region would reach the wrong cloud and fail the tests.
:meth:`DrLab.conductor_config` writes the conductor's configuration for
the two sites.
"""

import configparser
import contextlib
import os
import sys

from gvfs_lab import certs
from gvfs_lab import dnat
from gvfs_lab import ganesha
from gvfs_lab import glance_api
from gvfs_lab import gridftp
from gvfs_lab import keystone as keystone_lab
from gvfs_lab import postgres
from gvfs_lab import process
from gvfs_lab import sshd
from gvfs_lab import topology
from gvfs_lab import wan

IMAGES_DIR = "images"
STAGING_DIR = ".gvfs-migration"
GVFS_STORE = "dtn"
#: Data ports of the receiving GridFTP server behind an emulated link: a
#: port stays busy for a minute after its transfer (TIME_WAIT), so enough
#: for the transfers of a minute (many small images make many; with 16,
#: the 17th transfer within a minute found no free port and was aborted).
DATA_PORTS = 64
FILE_STORE = "local"
#: Whose token the lab's own calls to the two Glance servers carry: the
#: cloud's admin sees every project's images, the conductor's included.
OPERATOR = "admin"
#: The conductor's service user at both sites.
CONDUCTOR = "gvfs-conductor"


class DrSite:
    def __init__(self, workdir, name, stack, database, keystone,
                 data_interface=None, data_ports=None):
        self.name = name
        self.keystone = keystone
        self.workdir = workdir
        self.export = os.path.join(workdir, "export")
        os.makedirs(self.export, exist_ok=True)
        # The GridFTP user reaches the export.
        process.let_others_traverse(self.export)
        self.ganesha = stack.enter_context(_stopping(ganesha.Ganesha(
            os.path.join(workdir, "ganesha"), self.export)))
        self.gridftp = stack.enter_context(_stopping(gridftp.GridFtpServer(
            os.path.join(workdir, "gridftp"),
            data_interface=data_interface or "127.0.0.1",
            data_ports=data_ports)))
        self.sshd = stack.enter_context(_stopping(sshd.Sshd(
            os.path.join(workdir, "sshd"))))
        # Files written through it belong to the GridFTP user, who sends
        # them on.  The conductor reaches it over mutual TLS, as deployed
        # (its own client certificate, the proxy's server certificate).
        self.pki = certs.make_pki(os.path.join(workdir, "pki"),
                                  names=("server", "conductor"),
                                  purposes={"conductor": certs.PURPOSES[
                                      "client"]})
        self.proxy = stack.enter_context(_stopping(topology.Proxy(
            workdir, "dtn-proxy", {
                "proxy": {"role": "server"},
                "listen": {"host": "127.0.0.1", "port": process.free_port(),
                           "allowed_peers": "127.0.0.1/32",
                           "tls_cert": self.pki["server"][0],
                           "tls_key": self.pki["server"][1],
                           "tls_ca": self.pki["ca"]},
                "server": {"nfs_port": self.ganesha.nfs_port,
                           "mount_port": self.ganesha.mount_port,
                           "exports": self.export,
                           "squash_uid": self.gridftp.uid,
                           "squash_gid": self.gridftp.gid}})))
        self.images = os.path.join(self.export, IMAGES_DIR)
        os.makedirs(self.images, exist_ok=True)
        # The GridFTP server writes arriving images as its own user.
        staging = os.path.join(self.export, STAGING_DIR)
        os.makedirs(staging, exist_ok=True)
        os.chown(staging, self.gridftp.uid, self.gridftp.gid)
        local = os.path.join(workdir, "file-store")
        os.makedirs(local, exist_ok=True)
        self.glance = stack.enter_context(_stopping(glance_api.GlanceApi(
            os.path.join(workdir, "glance"), {
                GVFS_STORE: ("gvfs", {
                    "gvfs_store_mount_type": "none",
                    "gvfs_store_datadir": self.images,
                    # The GridFTP user reads images in place.
                    "gvfs_store_file_perm": 0o644,
                    "gvfs_store_delete_grace": 0}),
                FILE_STORE: ("file", {"filesystem_store_datadir": local}),
            }, keystone, database=database, user=OPERATOR)))

    def proxy_over_tls(self):
        """Site options reaching the DTN's NFS through its proxy, by TLS."""
        return {"dtn_nfs_port": self.proxy.port,
                "dtn_mount_port": self.proxy.port,
                "dtn_nfs_tls_cert": self.pki["conductor"][0],
                "dtn_nfs_tls_key": self.pki["conductor"][1],
                "dtn_nfs_tls_ca": self.pki["ca"]}

    def compressed_local_copy(self):
        """Site options for a local copy in zstd through the proxy."""
        return dict(self.proxy_over_tls(), local_copy_compression="zstd")

    def site_options(self, in_place=True):
        """This site's ``[site:NAME]`` group for the conductor."""
        options = dict(self.keystone.auth_options(CONDUCTOR), **{
            "glance_region": self.glance.region,
            "dtn_export": self.export,
            "dtn_images_dir": IMAGES_DIR,
            "dtn_staging_dir": STAGING_DIR,
            "dtn_nfs_host": "127.0.0.1",
            "dtn_nfs_port": self.ganesha.nfs_port,
            "dtn_mount_port": self.ganesha.mount_port,
            "gridftp_url": self.gridftp.url,
            # The lab's servers are anonymous (no GSI), on loopback.
            "gridftp_data_protection": "clear",
            "ssh_host": "127.0.0.1",
            "ssh_port": self.sshd.port,
            "ssh_user": self.sshd.user,
            "ssh_key_file": self.sshd.key,
            "ssh_known_hosts": self.sshd.known_hosts,
            # sshd's sessions do not have this environment's scripts on
            # their PATH.
            "gvfs_meta_command": os.path.join(
                os.path.dirname(sys.executable), "gvfs-meta"),
        })
        if in_place:
            options["gvfs_store"] = GVFS_STORE
        return options


@contextlib.contextmanager
def _stopping(part):
    try:
        yield part
    finally:
        part.stop()


class DrLab:
    """Site ``east`` (the source) and site ``west`` (the destination).

    With ``dtn_link = (rtt_ms, rate_mbit)`` the DTN-to-DTN data crosses
    an emulated WAN link (:mod:`gvfs_lab.wan`) whose rate every
    connection shares, as on a real WAN: west's GridFTP server receives on
    ports of the link's gateway address, and east's connections to them
    (made by the GridFTP user) are redirected across the link.
    ``ssh_link`` is then ``(host, port)`` of a route across the same link
    to west's sshd, for the plain scp a user would otherwise run.
    """

    def __init__(self, workdir, dtn_link=None, keystone=None):
        self.workdir = workdir
        self.dtn_link = dtn_link
        #: A started Keystone to share (a test session's); without one,
        #: the lab starts its own.
        self.keystone = keystone
        #: The DTN link (:class:`wan.SharedLink`) with ``dtn_link``.
        self.wan = None
        self.ssh_link = None
        self._stack = contextlib.ExitStack()

    def __enter__(self):
        os.makedirs(self.workdir, exist_ok=True)
        try:
            self._stack.enter_context(_stopping(ganesha.Rpcbind(
                self.workdir)))
            if self.keystone is None:
                self.keystone = self._stack.enter_context(
                    keystone_lab.Keystone(os.path.join(self.workdir,
                                                       "keystone")))
            self.postgres = self._stack.enter_context(_stopping(
                postgres.PostgreSQL(os.path.join(self.workdir, "postgres"))))
            self.east = DrSite(os.path.join(self.workdir, "east"), "east",
                               self._stack,
                               self.postgres.database("glance_east"),
                               self.keystone)
            data_ports = None
            if self.dtn_link:
                rtt_ms, rate_mbit = self.dtn_link
                self.wan = self._stack.enter_context(_stopping(
                    wan.SharedLink(self.workdir, rate_mbit, rtt_ms)))
                first = process.free_port_range(DATA_PORTS)
                data_ports = range(first, first + DATA_PORTS)
            self.west = DrSite(os.path.join(self.workdir, "west"), "west",
                               self._stack,
                               self.postgres.database("glance_west"),
                               self.keystone,
                               data_interface=self.wan.gateway if data_ports
                               else None, data_ports=data_ports)
            if data_ports:
                self._link(data_ports)
        except BaseException:
            self._stack.close()
            raise
        return self

    def _link(self, data_ports):
        self._dtn_links = []
        for data_port in data_ports:
            name = "dtn%d" % data_port
            self._dtn_links.append(name)
            port = self.wan.add_link(name, data_port, self.wan.gateway)
            self._stack.enter_context(_stopping(dnat.Redirect(
                self.east.gridftp.uid, self.wan.gateway, data_port,
                port, to_host=self.wan.host)))
        self.ssh_link = (self.wan.host,
                         self.wan.add_link("ssh", self.west.sshd.port))

    def reset_dtn_link(self):
        """Break every connection on the DTN link (it comes back at once)."""
        for name in self._dtn_links:
            self.wan.set_enabled(name, False)
        for name in self._dtn_links:
            self.wan.set_enabled(name, True)

    def __exit__(self, *exc):
        self._stack.close()

    def stop(self):
        self._stack.close()

    def conductor_config(self, path, job_store, west_in_place=True,
                         east=None, west=None, transport_url=None,
                         **conductor):
        """Write the conductor's configuration file; returns ``path``.

        ``east`` and ``west`` override options of the sites' groups.
        """
        conf = configparser.ConfigParser(interpolation=None)
        conf["DEFAULT"] = {"debug": "false"}
        if transport_url:
            conf["DEFAULT"]["transport_url"] = transport_url
        conf["conductor"] = dict({
            "sites": "east,west", "local_site": "east",
            "retry_backoff": "0.2"},
            **{k: str(v) for k, v in conductor.items()})
        conf["database"] = {"connection": job_store}
        conf["site:east"] = {k: str(v) for k, v in dict(
            self.east.site_options(), **(east or {})).items()}
        conf["site:west"] = {k: str(v) for k, v in dict(
            self.west.site_options(in_place=west_in_place),
            **(west or {})).items()}
        with open(path, "w") as f:
            conf.write(f)
        return path
