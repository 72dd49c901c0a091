# SPDX-License-Identifier: Apache-2.0
"""Options of the migration conductor: ``[conductor]`` and one group per site.

A site is one cloud with its DTN: ``[conductor] sites = east, west`` and a
group ``[site:east]`` (and ``[site:west]``) with the options below.  The
groups are registered when the list is read (:func:`register_sites`), like
Glance's ``enabled_backends``.  The job store is oslo.db's ``[database]``.
"""

import copy
import socket

from keystoneauth1 import loading as ks_loading
from oslo_config import cfg
from oslo_db import options as db_options

from gvfs_openstack import conf as conf_pkg
from gvfs_openstack.conf import metrics as metrics_conf

GROUP = "conductor"
SITE_GROUP = "site:%s"

CONDUCTOR_OPTS = [
    cfg.StrOpt("host", default=socket.gethostname(),
               sample_default="<the host's name>",
               help="Name of this conductor on the message bus (its RPC "
                    "server name) and in the claims it takes on jobs."),
    cfg.ListOpt("sites", default=[],
                help="""Names of the sites this conductor moves images between.

Each name has a group ``[site:NAME]`` with its Glance, DTN export, GridFTP
server and SSH access.  Related options: local_site.
"""),
    cfg.StrOpt("local_site",
               help="The site whose images this conductor sends (the "
                    "source of its migrations); one of ``sites``."),
    cfg.StrOpt("job_store", secret=True,
               deprecated_for_removal=True,
               deprecated_since="2026.2",
               deprecated_reason="The job store is oslo.db's, named by "
                                 "[database] connection as every OpenStack "
                                 "service names its database.",
               help="SQLAlchemy URL of the job store; when set, it is used "
                    "instead of ``[database] connection``."),
    cfg.IntOpt("images_in_flight", default=3, min=1, max=64,
               help="""Images of one job between local copy and remote copy.

While image k crosses the DTN link, image k+1 is in local copy and image
k-1 in remote copy; this caps how many are staged on the DTNs at once.
``openstack gvfs migrate --parallel`` overrides it per job.
"""),
    cfg.IntOpt("transfers", default=2, min=1, max=16,
               help="""DTN-to-DTN transfers of one job run at once (threads
of the transfer stage's process).

Each transfer ends with both DTNs reading the whole file for its checksum
and starts with a handshake and TCP's slow start, when the link carries
nothing of that image: with two at once, one image's bytes fill the link
while the other's checksums are computed.  The images share the link, so
more than two rarely helps.  1: one after another, as in the DTN paper.
"""),
    cfg.IntOpt("remote_copies", default=4, min=1, max=64,
               help="""Remote copies of one job run at once (threads of the
runner's parent process).

Registering an image at the destination costs Glance round trips and its
own import of the file, whatever the image's size: with many small images
that, not the DTN link, is the slowest stage, and several at once keep
the destination's Glance busy.  1: one after another, as in the DTN
paper.
"""),
    cfg.IntOpt("retries", default=4, min=0,
               help="How many times a stage that failed on a transient "
                    "fault (a reset link, an unreachable server) is tried "
                    "again before the image fails."),
    cfg.FloatOpt("retry_backoff", default=2.0, min=0.0,
                 help="Seconds before the first retry of a stage; each "
                      "further retry waits twice as long (at most 60 s)."),
    cfg.IntOpt("lease_seconds", default=30, min=3,
               help="""How long a job stays claimed by a runner that stopped
renewing its claim.

A job's runner renews its claim every third of this; a conductor that
restarts (or another conductor sharing the job store) takes over a job
whose claim is older.  Related options: [database] connection.
"""),
    cfg.StrOpt("globus_url_copy", default="globus-url-copy",
               help="The GridFTP client program run for DTN-to-DTN "
                    "transfers."),
    cfg.BoolOpt("delta_transfer", default=True,
                help="""Send a new image version as a delta where it can.

When the destination site has a ``gvfs`` store holding a related image --
the one named with ``--base``, or else the newest image of the same name
family (the name without its trailing version or date), ``os_distro``
and ``disk_format`` -- only the 4 KiB blocks that image lacks cross the
DTN link; the destination DTN rebuilds the file from it and checks the
image's ``os_hash_value`` before Glance sees it.  Any failure of the
delta (no base, a damaged delta, another hash) sends the whole file
instead.  Needs ``gvfs_meta_command`` on both DTNs.

Related options: delta_max_ratio, [site:NAME] gvfs_store,
[site:NAME] gvfs_meta_command.
"""),
    cfg.BoolOpt("require_trust", default=True,
                help="""Start a migration asked over RPC only with a trust.

The trust must be the caller's own (its trustor is the user of the
request's context, in the context's project) and delegated to this
conductor's user: otherwise anyone who can send on the message bus could
name any project and have the conductor read its images with its own
(admin) credentials. Set it false only with gvfs-api's ``[api] trusts =
false``, where policy alone decides.
"""),
    cfg.BoolOpt("verify_callers", default=True,
                help="""Validate each RPC call's token with Keystone.

The request context that gvfs-api sends carries its user's token; the
conductor validates it (as the token's own subject: no role is needed)
and holds the call to the token's project: another project's job,
replication policy or image is answered as missing, and only the admin
role lists every project's. Anyone who can send on the message bus can
name any project in a context, but cannot forge a token. A validated
token is believed for a minute at most. Set it false only where nothing
but gvfs-api can reach the bus: the context's project and roles are then
believed.
"""),
    cfg.IntOpt("max_running_jobs", default=16, min=1, max=1024,
               help="""Jobs this conductor runs at once; the rest wait, queued.

Each running job is a runner process with its own NFS, SSH and GridFTP
sessions: unbounded, a burst of requests would exhaust the host and the
DTNs. Jobs start in the order they were made, as runners end.
Related options: max_running_jobs_per_project.
"""),
    cfg.IntOpt("max_running_jobs_per_project", default=4, min=1, max=1024,
               help="""Jobs of one project this conductor runs at once.

So that one project's burst of migrations leaves room for the others';
its further jobs wait, queued, behind the ones running.
Related options: max_running_jobs.
"""),
    cfg.FloatOpt("delta_max_ratio", default=0.5, min=0.0, max=1.0,
                 help="A delta larger than this share of the image's "
                      "size is not sent: the whole file goes instead "
                      "(a base too unlike it is no help, and rebuilding "
                      "costs the destination a pass over the file)."),
]

SITE_OPTS = [
    cfg.URIOpt("glance_endpoint",
               help="""The site's Images API, e.g. ``http://ctl:9292``.

Unset (the usual case): found in the Keystone catalog of the site's
credentials -- the keystoneauth options of this group (``auth_type =
password``, ``auth_url``, ``username``, ``password``, ``project_name``,
``user_domain_name``, ``project_domain_name``), by ``glance_region`` and
``glance_interface``.  The token goes with every call either way; only
``auth_type = none`` talks to a Glance without Keystone.

Related options: glance_region, glance_interface, auth_type.
"""),
    cfg.StrOpt("glance_interface", default="public",
               choices=["public", "internal", "admin"],
               help="Catalog interface of the Images API."),
    cfg.StrOpt("glance_region",
               help="""Catalog region of the site's Images API.

Two sites whose clouds share one Keystone are two regions of its catalog:
each site's group names its own.  Unset: whichever Images API the catalog
lists first, right only for a catalog with one.

Related options: glance_endpoint.
"""),
    cfg.StrOpt("gvfs_store",
               help="""The ``gvfs`` Glance store on this site's DTN export.

As a source: an image in this store is sent from the export as it is (no
local copy).  As a destination: migrated images are moved into the store's
directory and registered by location (no upload through the API).  Unset:
images are uploaded through the Images API.  Related options:
dtn_images_dir.
"""),
    cfg.StrOpt("dtn_images_dir", default="images",
               help="The ``gvfs`` store's directory, relative to the "
                    "export (the store's ``gvfs_store_datadir``)."),
    cfg.StrOpt("dtn_staging_dir", default=".gvfs-migration",
               help="Directory, relative to the export, where images in "
                    "transit are kept; each job has its own directory in "
                    "it, removed when the job ends."),
    cfg.HostAddressOpt("dtn_nfs_host", default="127.0.0.1",
                       help="The DTN's NFS server (local copy)."),
    cfg.PortOpt("dtn_nfs_port", default=2049,
                help="Port of the DTN's NFS server."),
    cfg.PortOpt("dtn_mount_port",
                help="Port of the DTN's MOUNT service; default: "
                     "``dtn_nfs_port``."),
    cfg.StrOpt("dtn_nfs_tls_cert",
               help="""Client certificate (PEM) for the DTN's NFS calls.

With ``dtn_nfs_tls_key`` and ``dtn_nfs_tls_ca`` set, the local copy, the
clean-up and the golden-reference walk reach ``dtn_nfs_host`` over
mutual TLS: ``dtn_nfs_port`` (and ``dtn_mount_port``) must then be the
DTN's ``gvfs-proxy`` server proxy listening with TLS, whose
``[listen] allowed_peers`` lists the conductor's address and whose
identity mapping gives the conductor's calls the images' account.  The
certificate must be issued for TLS clients (extended key usage
clientAuth), the proxy's for TLS servers.  Without TLS, calls to a
``dtn_nfs_host`` off loopback are refused unless
``dtn_nfs_trusted_network`` is set.
Related options: dtn_nfs_tls_key, dtn_nfs_tls_ca, dtn_nfs_tls_server_name.
"""),
    cfg.StrOpt("dtn_nfs_tls_key",
               help="Private key (PEM) of ``dtn_nfs_tls_cert``."),
    cfg.StrOpt("dtn_nfs_tls_ca",
               help="CA bundle (PEM) the DTN proxy's certificate must "
                    "chain to."),
    cfg.StrOpt("dtn_nfs_tls_server_name",
               help="Name to verify in the DTN proxy's certificate; "
                    "default: ``dtn_nfs_host``."),
    cfg.BoolOpt("dtn_nfs_trusted_network", default=False,
                help="""Allow plain NFS (AUTH_SYS over TCP) to a DTN elsewhere.

Off: a site whose ``dtn_nfs_host`` is not a loopback address must set
``dtn_nfs_tls_cert``; the conductor refuses to load it otherwise. Plain
NFS authenticates nobody (any host that reaches the port may claim the
images' account) and carries the images in clear. On: only where every
host that can reach the DTN's NFS port, and every link between, is
trusted.
Related options: dtn_nfs_tls_cert.
"""),
    cfg.StrOpt("dtn_export",
               help="Path of the DTN's export (the NFS export and the "
                    "same directory as the GridFTP server and sshd see "
                    "it)."),
    cfg.IntOpt("nfs_uid", min=0, max=2 ** 32 - 1,
               help="""AUTH_SYS uid of the conductor's NFS calls to the DTN.

Unset: the owner of ``dtn_images_dir``, the file account that owns the
images, read from the export once mounted. Never root unless that is
what owns the images: the DTN's NFS server squashes root, or, where it
does not, uid 0 would make every file the conductor writes root's.
Related options: nfs_gid.
"""),
    cfg.IntOpt("nfs_gid", min=0, max=2 ** 32 - 1,
               help="AUTH_SYS gid of the conductor's NFS calls; unset: "
                    "the group of ``dtn_images_dir``."),
    cfg.IntOpt("nfs_wsize", default=1024 * 1024, min=4096,
               help="""Bytes per NFS WRITE of the local copy.

The DTN paper's tuning: large writes, UNSTABLE (the server's async
mode) with one COMMIT per ``nfs_commit_mib``; capped by the server's
``wtmax``.
"""),
    cfg.IntOpt("nfs_window", default=16, min=1, max=256,
               help="UNSTABLE WRITEs of the local copy in flight at once."),
    cfg.IntOpt("nfs_commit_mib", default=256, min=1,
               help="MiB written between COMMITs (the most the conductor "
                    "holds to re-send after a DTN restart)."),
    cfg.StrOpt("local_copy_compression", default="none", choices=[
        ("none", "plain NFS WRITEs"),
        ("zstd", "zstd chunks of the GVFS bulk channel")],
        help="""How the local copy sends image bytes to the DTN.

``zstd`` needs ``dtn_nfs_port`` to be a ``gvfs-proxy`` server proxy on
the DTN (it serves the bulk channel next to NFS): the conductor sends
``local_copy_chunk_mib`` chunks compressed with zstd, and the DTN's
proxy writes them to its NFS server.  Worth it where the controller's
link to the DTN is slower than zstd (some hundred MB/s per core) and the
images compress.  Against a plain NFS server the local copy falls back
to plain WRITEs and says so in its log.
"""),
    cfg.IntOpt("local_copy_chunk_mib", default=2, min=1, max=16,
               help="MiB of image per compressed chunk of the local copy "
                    "(with ``local_copy_compression = zstd``); "
                    "``nfs_window`` of them are in flight.  At most half "
                    "the DTN proxy's ``[proxy] max_record_size`` (4 MiB "
                    "by default): it refuses larger chunks."),
    cfg.StrOpt("gridftp_url",
               help="""The DTN's GridFTP server, ``gsiftp://host:port`` (or
``ftp://host:port`` for an anonymous server on a private network).  A
URL with a user or password is refused: it would show in the process
table and the log.

Transfers are third-party: the two DTNs' servers move the data between
them, the conductor only drives them.
"""),
    cfg.IntOpt("gridftp_parallel", default=4, min=1, max=64,
               help="Parallel TCP streams of a transfer from this site "
                    "(``globus-url-copy -p``)."),
    cfg.IntOpt("gridftp_stall_timeout", default=60, min=5,
               help="Seconds without data before a transfer is "
                    "restarted from its restart markers."),
    cfg.IntOpt("gridftp_restarts", default=5, min=0,
               help="How many times a broken transfer is restarted from "
                    "its restart markers (``globus-url-copy -rst``) "
                    "before the stage fails and the conductor retries "
                    "it.  Related options: [conductor] retries."),
    cfg.StrOpt("gridftp_data_protection", default="private",
               choices=[("private", "encrypted and integrity-checked "
                         "(globus-url-copy -dcpriv)"),
                        ("safe", "integrity-checked (-dcsafe)"),
                        ("clear", "neither: only on a network between "
                         "the DTNs that nobody else can read")],
               help="""Protection of the images GridFTP moves to and from here.

Images cross the WAN on GridFTP's data channel, which is clear text
unless the servers protect it; that needs GSI (``gsiftp://``). An
anonymous ``ftp://`` server cannot, so a site with one must say
``clear``. A transfer uses the stronger of its two sites' settings, and
is refused if one of them is ``clear`` and the other is not.
"""),
    cfg.BoolOpt("gridftp_verify_checksum", default=True,
                help="Have the two GridFTP servers compare MD5 checksums "
                     "of each image once it crossed "
                     "(``-verify-checksum``)."),
    cfg.IntOpt("gridftp_segment_mib", default=1024, min=0,
               help="""Size of the parts a large image crosses in, MiB.

An image larger than this crosses in parts, one ``globus-url-copy -off
-len`` per part, one after the other; the job store records each part
that arrived, so a transfer cut by a conductor restart (or a failed
attempt) goes on from the last whole part instead of byte 0 (parallel
streams write out of order: within a part nothing is known to be
complete). The whole file's checksums are then compared once
(``-sync -sync-level 3 -verify-checksum``: a file that differs is sent
again whole). Each part costs a few round trips to set up. 0: one
transfer per image, started over after a restart.
"""),
    cfg.HostAddressOpt("ssh_host",
                       help="sshd of the DTN, for the remote copy at this "
                            "site; default: ``dtn_nfs_host``."),
    cfg.PortOpt("ssh_port", default=22, help="Port of the DTN's sshd."),
    cfg.StrOpt("ssh_user", default="gvfs", help="User on the DTN."),
    cfg.StrOpt("ssh_key_file", help="Private key of ``ssh_user``."),
    cfg.StrOpt("ssh_known_hosts",
               help="known_hosts file holding the DTN's host key; an "
                    "unknown host key is refused, never trusted on first "
                    "use."),
    cfg.StrOpt("gvfs_meta_command", default="gvfs-meta",
               help="""``gvfs-meta`` as ``ssh_user`` runs it on this DTN.

An image registered in place in the ``gvfs`` store gets its metadata
sidecar (zero map, digest) from ``gvfs-meta generate`` run there, as an
upload through the store would have; without one the GVFS proxies read it
block by block.  Empty: no sidecar.
"""),
    cfg.ListOpt("sidecar_whole_file_formats", default=["iso"],
                help="Disk formats whose sidecar asks the proxies to fetch "
                     "the whole file at the first read (as the store's "
                     "``gvfs_store_whole_file_formats``)."),
    cfg.StrOpt("dtn_transfer", default="gridftp", choices=[
        ("gridftp", "the conductor drives the two DTNs' GridFTP servers "
                    "with globus-url-copy (``gridftp_*`` options)"),
        ("globus", "the Globus Transfer service moves the files between "
                   "the two sites' collections (``globus_*`` options and "
                   "the ``[globus]`` group; pip install globus-sdk)")],
        help="How images leave this site for another site's DTN; the "
             "sending site's choice applies."),
    cfg.StrOpt("globus_endpoint_id",
               help="UUID of the Globus collection serving this DTN's "
                    "export; required to send or receive with "
                    "``dtn_transfer = globus``."),
    cfg.StrOpt("globus_export_path",
               help="Path of ``dtn_export`` as the Globus collection shows "
                    "it (a collection often has its own root); default: "
                    "``dtn_export``."),
    cfg.DictOpt("project_mapping", default={},
                help="""Owners of the images copied to this site:
``source-project-id:this-site-project-id`` pairs.

A copy belongs to the project its source image belongs to, mapped by
this option; a project not listed keeps its id, as it does when both
sites share one Keystone (two regions).

Possible values: a comma-separated list of ``id:id`` pairs.
"""),
]

REPLICATION_GROUP = cfg.OptGroup(
    "replication", title="Replication policies",
    help="How the conductor keeps the images of replication policies "
         "copied (``openstack gvfs replication``).")

REPLICATION_OPTS = [
    cfg.FloatOpt("interval", default=60.0, min=0.5,
                 help="""Seconds between two comparisons of each policy
with the source Glance (reconciliation).

Each round starts a migration job for every selected image without a copy
at the policy's destination, follows property changes and (with
``delete_follows``) deletes.  With ``glance_notifications`` a round also
starts as soon as Glance announces a change; this interval then only
bounds how late a lost notification is made up for.
"""),
    cfg.BoolOpt("glance_notifications", default=True,
                help="""Listen to the source Glance's ``image.activate``,
``image.update`` and ``image.delete`` notifications and reconcile at
once.

Glance must send them (``[oslo_messaging_notifications] driver =
messagingv2`` in glance-api.conf) to the bus of ``glance_transport_url``.
The conductor listens in a pool of its own: other listeners still get
every notification.  Related options: interval.
"""),
    cfg.StrOpt("glance_transport_url", secret=True,
               help="The source Glance's notification bus; default: the "
                    "conductor's own (``[oslo_messaging_notifications] "
                    "transport_url``, else ``[DEFAULT] transport_url``)."),
    cfg.ListOpt("glance_topics", default=["notifications"],
                help="Topics the source Glance sends its notifications "
                     "to (its ``[oslo_messaging_notifications] topics``)."),
    cfg.ListOpt("glance_exchanges", default=["glance", "openstack"],
                help="""Exchanges the source Glance may send its notifications
on (its ``[DEFAULT] control_exchange``).

Glance means ``glance``, but a glance-api whose configuration was read
before it set that default sends on oslo.messaging's ``openstack`` (as the
WSGI glance-api does): both are heard, as Ceilometer does.  Each event
comes once, on the one exchange Glance uses.

Related options: glance_topics, glance_transport_url.
"""),
]

GLOBUS_GROUP = cfg.OptGroup(
    "globus", title="Globus Transfer service",
    help="The conductor's Globus identity, for sites with "
         "``dtn_transfer = globus``.")

GLOBUS_OPTS = [
    cfg.StrOpt("client_id",
               help="Client ID of the conductor's confidential Globus "
                    "application (a service account); it must be granted "
                    "access on every site's collection."),
    cfg.StrOpt("client_secret", secret=True,
               help="Secret of ``client_id``."),
    cfg.FloatOpt("poll_interval", default=10.0, min=1.0,
                 help="Seconds between two questions to the service about "
                      "a running task (progress and end)."),
]


#: The job store of a conductor configured with neither ``[database]
#: connection`` nor the deprecated ``[conductor] job_store``.
DEFAULT_STORE = "sqlite:////var/lib/gvfs/conductor.db"

DATABASE_HELP = """The conductor's job store (oslo.db).

Jobs and the stage each image reached are kept here, so a conductor that
is restarted goes on from the last completed stage.  ``connection``: sqlite
for one conductor (the default, %s); conductors on several hosts share one
PostgreSQL (``postgresql+psycopg2://gvfs:PASS@db/gvfs``) or MySQL/MariaDB
(``mysql+pymysql://gvfs:PASS@db/gvfs?charset=utf8mb4``) database.  After an
upgrade run ``gvfs-manage db sync``.""" % DEFAULT_STORE


def _database_opts():
    """oslo.db's options as the configuration sample shows them.

    Copies, with the job store as ``connection``'s default; a program
    registers oslo.db's own (:func:`register_opts`), which another library
    in the process may have registered too.
    """
    opts = copy.deepcopy(db_options.database_opts)
    for opt in opts:
        if opt.dest == "connection":
            opt.default = DEFAULT_STORE
    return opts


def register_opts(conf):
    conf.register_opts(CONDUCTOR_OPTS, group=GROUP)
    db_options.set_defaults(conf, connection=DEFAULT_STORE)
    conf.register_opts(GLOBUS_OPTS, group=GLOBUS_GROUP)
    conf.register_opts(REPLICATION_OPTS, group=REPLICATION_GROUP)
    metrics_conf.register_opts(conf)


def register_sites(conf):
    """Register ``[site:NAME]`` for each name in ``[conductor] sites``."""
    for name in conf[GROUP].sites:
        group = SITE_GROUP % name
        conf.register_opts(SITE_OPTS, group=group)
        ks_loading.register_session_conf_options(conf, group)
        ks_loading.register_auth_conf_options(conf, group)


def load(conf, argv, prog, version=None):
    """Parse ``argv`` into ``conf`` with the conductor's and sites' options.

    ``version``: what ``--version`` prints (the program's).
    """
    register_opts(conf)
    conf(argv, project=conf_pkg.PROJECT, prog=prog, version=version)
    register_sites(conf)
    return conf


def list_opts():
    site = cfg.OptGroup(SITE_GROUP % "name", help="""One group per site named
in ``[conductor] sites`` (``[site:east]`` for ``east``): the site's Glance
(keystoneauth credentials, catalog region, or an endpoint), its DTN's NFS
export, GridFTP server or Globus collection, and SSH access.""")
    return [(GROUP, CONDUCTOR_OPTS),
            (cfg.OptGroup("database", help=DATABASE_HELP), _database_opts()),
            (GLOBUS_GROUP, GLOBUS_OPTS),
            (REPLICATION_GROUP, REPLICATION_OPTS),
            (site, SITE_OPTS
             + ks_loading.get_session_conf_options()
             + ks_loading.get_auth_common_conf_options())]
