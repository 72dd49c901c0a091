# SPDX-License-Identifier: Apache-2.0
"""The sites a conductor knows: each cloud's Glance and its DTN.

Read once from the configuration into plain values, so that the forked
stage workers get everything they need without touching oslo.config.
"""

import dataclasses
import os
import posixpath
import urllib.parse

from keystoneauth1 import exceptions as ks_exceptions
from keystoneauth1.identity import v3
from keystoneauth1 import loading as ks_loading
from oslo_log import log as logging

from gvfs_openstack.client import tls as client_tls
from gvfs_openstack.conf import migration as migration_conf
from gvfs_openstack import exceptions
from gvfs_openstack.images import locations
from gvfs_openstack.migration import transfer
from gvfs_openstack.proxy import access

LOG = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Site:
    name: str
    glance_endpoint: str
    glance_interface: str
    glance_region: str
    gvfs_store: str
    dtn_export: str
    dtn_images_dir: str
    dtn_staging_dir: str
    nfs_host: str
    nfs_port: int
    mount_port: int
    #: None: the owner of ``dtn_images_dir`` (:func:`localcopy.dtn_mount`).
    nfs_uid: int
    nfs_gid: int
    nfs_wsize: int
    nfs_window: int
    nfs_commit_bytes: int
    local_copy_compression: str
    local_copy_chunk_bytes: int
    gridftp_url: str
    gridftp_parallel: int
    gridftp_stall_timeout: int
    gridftp_restarts: int
    gridftp_verify_checksum: bool
    #: "private", "safe" or "clear" (``[site:NAME]
    #: gridftp_data_protection``).
    gridftp_data_protection: str
    gridftp_segment_bytes: int
    ssh_host: str
    ssh_port: int
    ssh_user: str
    ssh_key_file: str
    ssh_known_hosts: str
    gvfs_meta_command: str
    sidecar_whole_file_formats: tuple
    dtn_transfer: str
    globus_endpoint_id: str
    globus_export_path: str
    #: Source project id to this site's project id (:meth:`owner_of`).
    project_mapping: tuple = ()
    #: :class:`client_tls.ClientTls` of the DTN's NFS calls; None: plain.
    nfs_tls: client_tls.ClientTls = None

    def owner_of(self, source_owner):
        """Whom this site's copy of an image of ``source_owner`` belongs to."""
        return dict(self.project_mapping).get(source_owner, source_owner)

    def export_path(self, *parts):
        """A path on the DTN (as NFS, GridFTP and sshd see it)."""
        return posixpath.join(self.dtn_export, *parts)

    def image_path(self, image_id):
        """Where the gvfs store keeps an image, on the DTN."""
        return self.export_path(self.dtn_images_dir, image_id)

    def staging_dir(self, job_id):
        """The job's staging directory, relative to the export."""
        return posixpath.join(self.dtn_staging_dir, job_id)

    def staged_path(self, job_id, image_id):
        """Where an image of a job waits on the DTN between stages."""
        return self.export_path(self.staging_dir(job_id), image_id)

    def gridftp(self, path):
        """The GridFTP URL of ``path`` on this DTN."""
        return "%s/%s" % (self.gridftp_url.rstrip("/"), path.lstrip("/"))

    def gvfs_location(self, image_id):
        return locations.url(self.gvfs_store, image_id)


def _relative(option, value):
    """A directory under the export: no absolute path, no ``..``."""
    norm = posixpath.normpath(value or ".")
    if norm.startswith("/") or norm == ".." or norm.startswith("../"):
        raise exceptions.InvalidConfig(
            option=option, reason="%r is not a directory under the export"
            % value)
    return norm


def _check_gridftp_url(option, url):
    """A server URL with no credentials in it.

    The URL becomes an argument of ``globus-url-copy``, which every
    local account reads in the process table, and a line of the
    conductor's log: a ``user:password@`` there would be everyone's.
    GSI authenticates ``gsiftp://``; ``ftp://`` is for an anonymous
    server on a private network.
    """
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme not in ("gsiftp", "ftp") or not parsed.netloc:
        raise exceptions.InvalidConfig(
            option=option, reason="it is not a gsiftp:// or ftp:// URL")
    if "@" in parsed.netloc:
        raise exceptions.InvalidConfig(
            option=option, reason="it names a user; credentials in the URL "
            "would show in the process table and the log (GSI "
            "authenticates gsiftp://)")


def nfs_tls(group, opts):
    """The TLS of the site's NFS calls to its DTN, or None for plain NFS.

    Plain AUTH_SYS authenticates nobody and carries images in clear: it
    is refused off loopback unless the site says its network is trusted.
    """
    files = {"dtn_nfs_tls_cert": opts.dtn_nfs_tls_cert,
             "dtn_nfs_tls_key": opts.dtn_nfs_tls_key,
             "dtn_nfs_tls_ca": opts.dtn_nfs_tls_ca}
    if any(files.values()):
        for option, path in sorted(files.items()):
            if not path:
                raise exceptions.InvalidConfig(
                    option="[%s] %s" % (group, option),
                    reason="it is required with %s" % ", ".join(
                        o for o, p in sorted(files.items()) if p))
            if not os.access(path, os.R_OK):
                raise exceptions.InvalidConfig(
                    option="[%s] %s" % (group, option),
                    reason="%s cannot be read" % path)
        return client_tls.ClientTls(
            opts.dtn_nfs_tls_cert, opts.dtn_nfs_tls_key, opts.dtn_nfs_tls_ca,
            opts.dtn_nfs_tls_server_name)
    if not access.is_loopback(opts.dtn_nfs_host) and \
            not opts.dtn_nfs_trusted_network:
        raise exceptions.InvalidConfig(
            option="[%s] dtn_nfs_host" % group,
            reason="%s is not a loopback address, and plain NFS to it would "
                   "carry the images in clear with nobody authenticated: "
                   "reach the DTN's server proxy over TLS "
                   "(dtn_nfs_tls_cert, dtn_nfs_tls_key, dtn_nfs_tls_ca), "
                   "or set dtn_nfs_trusted_network = true where every host "
                   "and link between is trusted" % opts.dtn_nfs_host)
    return None


def load(conf, name):
    """The site ``name``; InvalidConfig or UnknownSite when it is wrong."""
    if name not in conf.conductor.sites:
        raise exceptions.UnknownSite(site=name,
                                     known=", ".join(conf.conductor.sites)
                                     or "none")
    group = migration_conf.SITE_GROUP % name
    opts = conf[group]

    def need(option):
        value = getattr(opts, option)
        if not value:
            raise exceptions.InvalidConfig(option="[%s] %s" % (group, option),
                                           reason="it is required")
        return value

    keystone = opts.auth_section or opts.auth_type not in (None, "", "none")
    if not opts.glance_endpoint and not keystone:
        raise exceptions.InvalidConfig(
            option="[%s] auth_type" % group,
            reason="the site's Glance is found in the Keystone catalog of "
                   "the group's keystoneauth credentials (auth_type = "
                   "password, auth_url, username, ...); set them, or "
                   "glance_endpoint with auth_type = none for a Glance "
                   "without Keystone")
    export = need("dtn_export")
    if not export.startswith("/"):
        raise exceptions.InvalidConfig(option="[%s] dtn_export" % group,
                                       reason="an absolute path is needed")
    need(transfer.METHODS[opts.dtn_transfer].site_option)
    gridftp = opts.gridftp_url
    if gridftp:
        _check_gridftp_url("[%s] gridftp_url" % group, gridftp)
        if gridftp.startswith("ftp:") and \
                opts.gridftp_data_protection != "clear":
            raise exceptions.InvalidConfig(
                option="[%s] gridftp_data_protection" % group,
                reason="an anonymous ftp:// server cannot protect its data "
                       "channel (GSI, gsiftp://, can); say clear only where "
                       "nobody else can read the network between the DTNs")
    globus_export = posixpath.normpath(opts.globus_export_path or export)
    if not globus_export.startswith("/"):
        raise exceptions.InvalidConfig(
            option="[%s] globus_export_path" % group,
            reason="an absolute path is needed")
    return Site(
        name=name,
        glance_endpoint=opts.glance_endpoint,
        glance_interface=opts.glance_interface,
        glance_region=opts.glance_region,
        gvfs_store=opts.gvfs_store,
        dtn_export=posixpath.normpath(export),
        dtn_images_dir=_relative("[%s] dtn_images_dir" % group,
                                 opts.dtn_images_dir),
        dtn_staging_dir=_relative("[%s] dtn_staging_dir" % group,
                                  opts.dtn_staging_dir),
        nfs_host=opts.dtn_nfs_host,
        nfs_port=opts.dtn_nfs_port,
        mount_port=opts.dtn_mount_port or opts.dtn_nfs_port,
        nfs_uid=opts.nfs_uid,
        nfs_gid=opts.nfs_gid,
        nfs_wsize=opts.nfs_wsize,
        nfs_window=opts.nfs_window,
        nfs_commit_bytes=opts.nfs_commit_mib * 1024 * 1024,
        local_copy_compression=opts.local_copy_compression,
        local_copy_chunk_bytes=opts.local_copy_chunk_mib * 1024 * 1024,
        gridftp_url=gridftp,
        gridftp_parallel=opts.gridftp_parallel,
        gridftp_stall_timeout=opts.gridftp_stall_timeout,
        gridftp_restarts=opts.gridftp_restarts,
        gridftp_verify_checksum=opts.gridftp_verify_checksum,
        gridftp_data_protection=opts.gridftp_data_protection,
        gridftp_segment_bytes=opts.gridftp_segment_mib * 1024 * 1024,
        ssh_host=opts.ssh_host or opts.dtn_nfs_host,
        ssh_port=opts.ssh_port,
        ssh_user=opts.ssh_user,
        ssh_key_file=opts.ssh_key_file,
        ssh_known_hosts=opts.ssh_known_hosts,
        gvfs_meta_command=opts.gvfs_meta_command,
        sidecar_whole_file_formats=tuple(opts.sidecar_whole_file_formats),
        dtn_transfer=opts.dtn_transfer,
        globus_endpoint_id=opts.globus_endpoint_id,
        globus_export_path=globus_export,
        project_mapping=tuple(sorted(opts.project_mapping.items())),
        nfs_tls=nfs_tls(group, opts),
    )


#: The keystoneauth plugins with which a trust can be used.
_TRUST_PLUGINS = ("password", "v3password")


def glance_session(conf, name, trust_id=None):
    """A keystoneauth session for the site's Glance, with its credentials.

    The ``[site:NAME]`` group's keystoneauth options, as every OpenStack
    service reads its peers': the session gets and renews the token and
    finds the Images API in the catalog.  ``auth_type = none`` (with
    ``glance_endpoint``) talks to a Glance without Keystone.

    With ``trust_id`` the session acts as the user who delegated the
    trust (gvfs-api makes one per job): the conductor's user and password,
    the token scoped by the trust to the user's project and roles.
    """
    group = migration_conf.SITE_GROUP % name
    if trust_id is None:
        auth = ks_loading.load_auth_from_conf_options(conf, group)
    else:
        auth = _trust_auth(conf, group, trust_id)
    return ks_loading.load_session_from_conf_options(conf, group, auth=auth)


def _trust_auth(conf, group, trust_id):
    # Loading the plugin registers its options (auth_url, username, ...).
    ks_loading.load_auth_from_conf_options(conf, group)
    opts = conf[group]
    if opts.auth_type not in _TRUST_PLUGINS:
        raise exceptions.InvalidConfig(
            option="[%s] auth_type" % group,
            reason="acting for a user with a Keystone trust needs a "
                   "password plugin (%s), not %s"
                   % (", ".join(_TRUST_PLUGINS), opts.auth_type))
    # A trust scopes the token itself: no project may be named with it.
    return v3.Password(
        auth_url=opts.auth_url, username=opts.username,
        user_id=opts.user_id, password=opts.password,
        user_domain_id=opts.user_domain_id,
        user_domain_name=opts.user_domain_name, trust_id=trust_id)


def check_trust(conf, name, trust_id, user_id, project_id):
    """Raise TrustRefused unless ``trust_id`` is the caller's, to us.

    Asked of Keystone with the conductor's own authority at site
    ``name``: a trust not delegated to the conductor's user is not shown
    to it (Keystone answers 404), and one shown must have the request's
    user as trustor and its project.
    """
    session = glance_session(conf, name)
    reply = ask_keystone(
        session, "/OS-TRUST/trusts/%s" % urllib.parse.quote(trust_id,
                                                            safe=""),
        "checking the trust", refused=(403, 404))
    if reply.status_code != 200:
        raise exceptions.TrustRefused(reason="it does not exist or is not "
                                      "delegated to this conductor")
    trust = reply.json()["trust"]
    if trust.get("trustee_user_id") != session.get_user_id():
        raise exceptions.TrustRefused(reason="it is delegated to another "
                                      "user")
    if trust.get("trustor_user_id") != user_id or \
            trust.get("project_id") != project_id:
        raise exceptions.TrustRefused(reason="it is not the requester's "
                                      "own, in the requester's project")


def ask_keystone(session, path, stage, refused=(), **kwargs):
    """GET ``path`` of the identity API: its reply if 200 or ``refused``.

    The caller says what a refusal means; Keystone out of reach or any
    other answer is a StageFailed (transient where a retry may help),
    whose detail only the log shows.
    """
    try:
        reply = session.get(path, raise_exc=False, endpoint_filter={
            "service_type": "identity", "interface": "public"}, **kwargs)
    except ks_exceptions.ClientException as e:
        LOG.warning("Cannot reach Keystone (%s): %s", stage, e)
        raise exceptions.StageFailed(
            stage=stage, image="-", reason="Keystone cannot be reached",
            detail=str(e), transient=True) from e
    if reply.status_code != 200 and reply.status_code not in refused:
        raise exceptions.StageFailed(
            stage=stage, image="-",
            reason="Keystone answered %d" % reply.status_code,
            transient=reply.status_code >= 500)
    return reply


def forget_trust(conf, name, trust_id):
    """Delete a job's trust, with the conductor's own authority.

    False if Keystone refused; a trust already gone counts as forgotten.
    """
    session = glance_session(conf, name)
    try:
        reply = session.delete(
            "/OS-TRUST/trusts/%s" % trust_id, raise_exc=False,
            endpoint_filter={"service_type": "identity",
                             "interface": "public"})
    except ks_exceptions.ClientException:
        return False
    return reply.status_code in (204, 404)
