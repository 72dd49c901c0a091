# SPDX-License-Identifier: Apache-2.0
"""Nova for the lab: its real services from PyPI ``nova``, one cell.

nova-api (``nova.wsgi.osapi_compute:application`` under gunicorn),
nova-conductor, nova-scheduler and the stock ``nova-compute`` on the
lab's RabbitMQ, with their api, cell0 and cell1 databases in the lab's
PostgreSQL (several processes write them at once, which sqlite
serialises badly), Placement (:mod:`gvfs_lab.placement`) and neutron's
API (:mod:`gvfs_lab.neutron`: Nova needs it even for ``--nic none``).
nova-compute runs the gvfs driver, ``compute_driver =
gvfs.GvfsLibvirtDriver``, found by Nova's own loader in the module the
package installs, on the lab's libvirtd (:mod:`gvfs_lab.libvirt`) with
QEMU's TCG.  Its GVFS mounts are made under the libvirt lab's
``mounts_dir``, the only place whose later mounts QEMU sees.

All of Nova's endpoints (and Keystone's own, which the CLI looks for
there too) go into the catalog in the glance-api's region, so a user's
``openstack`` CLI with ``OS_REGION_NAME`` of that region finds images,
servers, placement and the network API together.
"""

import concurrent.futures
import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys

import sqlalchemy

from gvfs_lab import hostns
from gvfs_lab import neutron as neutron_lab
from gvfs_lab import openstack_service as service
from gvfs_lab import placement as placement_lab
from gvfs_lab import process
from gvfs_lab import sshd as sshd_lab
from gvfs_openstack.mount import mounter

#: What nova-compute's ``[DEFAULT] host`` is in the lab.
HOST = "lab-compute"
#: Nova services started as programs, in the order they start.
SERVICES = ("nova-conductor", "nova-scheduler", "nova-compute")
#: nova-api's paste pipeline, as the nova wheel installs it.
PASTE = os.path.join(sys.prefix, "etc", "nova", "api-paste.ini")
#: How long a stopping nova-compute may take to finish its tasks: Nova's
#: own ``graceful_shutdown_timeout`` (180 s) bounds it the same way.
COMPUTE_SHUTDOWN_SECONDS = 180.0
#: The first compute host's address (``[DEFAULT] my_ip``).
MY_IP = "127.0.0.1"
#: How nova-compute's ``ssh`` and ``scp`` find the lab's hosts: the
#: compute user's ``~/.ssh/config`` of a deployment.  OpenSSH reads that
#: file in the account's home from the password database, not $HOME, so
#: the lab puts these wrappers first on nova-compute's PATH instead.
_SSH_WRAPPER = """#!/bin/sh
exec {program} {options}-F {config} "$@"
"""
_SSH_HOST = """
Host {address}
    Port {port}
    User {user}
    IdentityFile {key}
    IdentitiesOnly yes
    UserKnownHostsFile {known_hosts}
    StrictHostKeyChecking yes
"""


@dataclasses.dataclass(frozen=True)
class ComputeHost:
    """Where one nova-compute keeps its state, and on which libvirtd.

    ``workdir`` holds its ``state``, ``instances`` and ``locks``;
    ``mount_base`` is its ``[gvfs] mount_point_base``; ``my_ip`` its
    address.  A further host's nova-compute, libvirtd and sshd see its
    ``instances`` at ``instances_as``, the first host's path, as Nova
    wants every host's (:mod:`gvfs_lab.hostns`): ``instances_path`` is
    where the directory is seen from here.
    """

    host: str
    workdir: str
    libvirt: object
    mount_base: str
    my_ip: str = MY_IP
    instances_as: str = None

    @property
    def instances_path(self):
        return os.path.join(self.workdir, "instances")

    @property
    def config_file(self):
        return os.path.join(self.workdir, "nova.conf")

    @property
    def nova_instances_path(self):
        """Its ``[DEFAULT] instances_path``, as its services see it."""
        return self.instances_as or self.instances_path

    @property
    def service(self):
        """Its name among the lab's services and logs."""
        return "nova-compute" if self.host == HOST else \
            "nova-compute-" + self.host


def _log_size(path):
    try:
        return os.path.getsize(path)
    except FileNotFoundError:
        return 0


def _log_since(path, offset):
    """What a service wrote to its log past ``offset`` (bytes)."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            return f.read()
    except FileNotFoundError:
        return b""


def _write_ssh_client(directory):
    """``ssh`` and ``scp`` in ``directory``/bin reading its ``ssh_config``.

    Hosts are added to ``ssh_config`` as they start (``Host`` blocks);
    ssh reads it at every call.
    """
    config = os.path.join(directory, "ssh_config")
    os.makedirs(os.path.join(directory, "bin"), exist_ok=True)
    with open(config, "w") as f:
        f.write("# The lab's compute hosts, as nova-compute reaches them.\n")
    ssh = shutil.which("ssh") or "/usr/bin/ssh"
    for name, program, options in (
            ("ssh", ssh, ""),
            # scp runs ssh itself: the real one, with the same file.
            ("scp", shutil.which("scp") or "/usr/bin/scp",
             "-S %s " % ssh)):
        path = os.path.join(directory, "bin", name)
        with open(path, "w") as f:
            f.write(_SSH_WRAPPER.format(program=program, options=options,
                                        config=config))
        os.chmod(path, 0o755)


def _make_host_directories(workdir):
    """A compute host's ``state``, ``instances`` and ``locks`` paths."""
    for directory in ("state", "instances", "locks"):
        os.makedirs(os.path.join(workdir, directory), exist_ok=True)


def _result_or_none(future):
    """A finished future's result, or None if it raised."""
    return None if future.exception() is not None else future.result()


class Nova:
    """A one-cell Nova with one compute host on the lab's libvirtd.

    ``keystone``: a started :class:`gvfs_lab.keystone.Keystone`;
    ``glance``: a :class:`gvfs_lab.glance_api.GlanceApi` on it, whose
    region this Nova joins; ``rabbitmq`` and ``postgres``: the lab's
    broker and database server; ``libvirt``: a
    :class:`gvfs_lab.libvirt.Libvirt`; ``gvfs``: the compute host's
    ``[gvfs]`` options (without ``mount_point_base``, which is made under
    the libvirt lab's ``mounts_dir``); ``extra``: more options of
    ``nova.conf``, ``{section: {option: value}}``.
    """

    def __init__(self, workdir, keystone, glance, rabbitmq, postgres,
                 libvirt, gvfs, extra=None):
        self.workdir = os.path.abspath(workdir)
        os.makedirs(self.workdir, exist_ok=True)
        self.keystone = keystone
        self.glance = glance
        self.region = glance.region
        self.libvirt = libvirt
        self.instances_path = os.path.join(self.workdir, "instances")
        self.mount_base = os.path.join(libvirt.mounts_dir, "nova")
        #: Every mount point base nova-compute has had (see
        #: :meth:`restart_compute`); stop unmounts them all.
        self._mount_bases = [self.mount_base]
        self._extra = extra or {}
        self.placement = self.neutron = self.api = None
        self.services = {}
        #: What each further compute host runs besides nova-compute (its
        #: namespace, its sshd), by host, stopped with it.
        self._host_parts = {}
        self.ssh_dir = os.path.join(self.workdir, "ssh")
        _write_ssh_client(self.ssh_dir)
        self.endpoints = []
        try:
            self._start(rabbitmq, postgres, gvfs)
        except BaseException:
            self.stop()
            raise

    # --- start-up -----------------------------------------------------------

    def _start(self, rabbitmq, postgres, gvfs):
        databases = {name: postgres.database(name) for name in (
            "nova_api", "nova_cell0", "nova_cell1", "placement")}
        _make_host_directories(self.workdir)
        auth = service.service_user(self.keystone, "nova-services")
        self._config_args = (databases, rabbitmq.url, auth)
        self.config_file = self._write_config(databases, rabbitmq.url,
                                              auth, gvfs)
        # Placement, neutron's API and Nova's databases need nothing of
        # each other: each is a minute of schema and imports on a slow
        # machine, so they are made side by side.  Placement is up
        # before nova-compute starts, which reports to it at once.
        with concurrent.futures.ThreadPoolExecutor(3) as pool:
            placement = pool.submit(
                placement_lab.Placement,
                os.path.join(self.workdir, "placement"), self.keystone,
                databases["placement"], self.region)
            neutron = pool.submit(
                neutron_lab.Neutron, os.path.join(self.workdir, "neutron"),
                self.keystone, rabbitmq.url, self.region)
            cells = pool.submit(self._make_cells, databases, rabbitmq.url)
        # Kept before any error is raised, for stop() to stop.
        self.placement = _result_or_none(placement)
        self.neutron = _result_or_none(neutron)
        for made in (placement, neutron, cells):
            made.result()
        # nova-api loads its paste pipeline from the first file it is
        # given: Nova's shipped one, copied beside nova.conf.
        shutil.copyfile(PASTE, os.path.join(self.workdir, "api-paste.ini"))
        self.api = service.WsgiApp(
            self.workdir, "nova-api", "nova.wsgi.osapi_compute:application",
            {"OS_NOVA_CONFIG_DIR": self.workdir,
             "OS_NOVA_CONFIG_FILES": "api-paste.ini;nova.conf"}, workers=2)
        # The conductor and the scheduler need nothing of each other;
        # nova-compute waits for the conductor's answer at start (a
        # ping lost before the conductor's queue exists costs it a
        # minute), so it starts once the conductor is up.
        conductor, scheduler = (self._launch_service(name)
                                for name in SERVICES[:2])
        conductor()
        compute = self._launch_service(SERVICES[2])
        scheduler()
        compute()
        # The CLI looks for Keystone itself in the region too (flavor
        # and project commands).
        self.endpoints = self.keystone.add_endpoint(
            "compute", "nova", self.api.url + "/v2.1", self.region)
        self.endpoints += self.keystone.add_endpoint(
            "identity", "keystone", self.keystone.auth_url, self.region)
        self.api.wait()
        self._wait_for_compute_host()

    def _write_config(self, databases, transport_url, auth, gvfs,
                      node=None):
        """``nova.conf`` of the cell's services and the first compute host.

        ``node``: a further compute host (:class:`ComputeHost`), whose
        file differs in its host, paths, libvirtd and ``[gvfs]`` mounts.
        """
        node = node or ComputeHost(HOST, self.workdir, self.libvirt,
                                   self.mount_base)
        client = dict(auth, region_name=self.region,
                      valid_interfaces="public")
        privsep = {"helper_command": "%s --config-file %s" % (
            service.program("privsep-helper"), node.config_file)}
        sections = {
            "DEFAULT": {
                "transport_url": transport_url,
                "host": node.host, "my_ip": node.my_ip,
                "state_path": os.path.join(node.workdir, "state"),
                "instances_path": node.nova_instances_path,
                "compute_driver": "gvfs.GvfsLibvirtDriver",
                "reserved_host_memory_mb": "0",
                # One machine: a resize stays on its host.
                "allow_resize_to_same_host": "true",
                "ram_allocation_ratio": "4.0",
                # The test guest (busybox init, no acpid) ignores the
                # power button, so a clean shutdown could only time out;
                # Nova destroys the domain at once instead of after the
                # default 60 s (stop, rebuild, rescue, resize, snapshot).
                "shutdown_timeout": "0",
                # Periodic tasks from the start, not after a random delay
                # of up to a minute: the scheduler's maps new hosts.
                "periodic_fuzzy_delay": "0",
                "debug": "true",
            },
            "api": {"auth_strategy": "keystone"},
            "api_database": {"connection": databases["nova_api"]},
            "database": {"connection": databases["nova_cell1"]},
            "keystone_authtoken": service.authtoken(self.keystone, auth),
            "placement": client,
            "neutron": client,
            "glance": {"region_name": self.region,
                       "valid_interfaces": "public"},
            "service_user": {"send_service_user_token": "false"},
            # One worker each: two cores, and fewer Keystone logins.
            "conductor": {"workers": "1"},
            # The scheduler maps new compute hosts into cell1 itself, as
            # a small deployment's does: a nova-manage run per look costs
            # seconds of start-up.
            "scheduler": {"discover_hosts_in_cells_interval": "1",
                          "workers": "1"},
            "libvirt": {"virt_type": "qemu",
                        "connection_uri": node.libvirt.uri,
                        "cpu_mode": "none", "images_type": "qcow2"},
            "gvfs": dict({k: (",".join(v) if isinstance(v, list) else v)
                          for k, v in gvfs.items()},
                         mount_point_base=node.mount_base),
            "vnc": {"enabled": "false"},
            "oslo_concurrency": {"lock_path": os.path.join(node.workdir,
                                                           "locks")},
            "oslo_messaging_notifications": {"driver": "noop"},
            # nova-compute runs as root here; the lab has no sudo.
            "nova_sys_admin": privsep,
            "privsep_osbrick": privsep,
        }
        for section, options in self._extra.items():
            sections.setdefault(section, {}).update(options)
        return service.write_ini(node.config_file, sections)

    def restart_compute(self, gvfs, name):
        """nova-compute again, as a fresh compute host.

        With ``gvfs`` options, its mounts under a new base named ``name``
        (nothing mounted or cached by the GVFS backend before) and Nova's
        own ``_base`` cache emptied.
        """
        self._stop_compute("nova-compute")
        self.mount_base = os.path.join(self.libvirt.mounts_dir, name)
        self._mount_bases.append(self.mount_base)
        shutil.rmtree(os.path.join(self.instances_path, "_base"),
                      ignore_errors=True)
        self.config_file = self._write_config(*self._config_args, gvfs)
        self._start_service("nova-compute")

    def add_compute(self, host, libvirt, gvfs, my_ip="127.0.0.2"):
        """Another compute host of the cell: its own ``nova-compute``.

        As on a machine of its own: its ``[DEFAULT] host`` and ``my_ip``
        (another loopback address), state, instances and lock paths, its
        libvirtd (``libvirt``, whose host name is the hypervisor's and the
        Placement resource provider's) and its ``[gvfs]`` options, mounted
        under that libvirt's ``mounts_dir``.  Its instances directory is
        seen at the first host's path by its nova-compute, libvirtd and
        an sshd of its own on ``my_ip``, which the other hosts'
        nova-compute reach with a key, as Nova's cold migration and
        resize do (``[libvirt] remote_filesystem_transport = ssh``).
        Returns the :class:`ComputeHost`; stopped with
        :meth:`remove_compute` or :meth:`stop`.
        """
        node = ComputeHost(host, os.path.join(self.workdir, host), libvirt,
                           os.path.join(libvirt.mounts_dir, "nova"),
                           my_ip=my_ip, instances_as=self.instances_path)
        _make_host_directories(node.workdir)
        self._mount_bases.append(node.mount_base)
        parts = self._host_parts[host] = []
        try:
            namespace = hostns.HostNamespace(
                os.path.join(node.workdir, "namespace"),
                {node.instances_as: node.instances_path})
            parts.append(namespace)
            libvirt.bind(node.instances_as, node.instances_path)
            server = sshd_lab.Sshd(os.path.join(node.workdir, "sshd"),
                                   address=my_ip, wrap=namespace.command)
            parts.append(server)
            self._trust_ssh(server)
            self._write_config(*self._config_args, gvfs, node=node)
            self._start_service("nova-compute", node.config_file,
                                node.service, wrap=namespace.command)
            self._wait_for_compute_host(node.host, node.service)
        except BaseException:
            self._stop_host_parts(host)
            raise
        return node

    def _trust_ssh(self, server):
        """Let every nova-compute log in to ``server`` (an sshd)."""
        with open(os.path.join(self.ssh_dir, "ssh_config"), "a") as f:
            f.write(_SSH_HOST.format(
                address=server.address, port=server.port, user=server.user,
                key=server.key, known_hosts=server.known_hosts))

    def remove_compute(self, node):
        """Stop ``node``'s nova-compute and unmount what it mounted."""
        self._stop_compute(node.service)
        self._stop_host_parts(node.host)
        if os.path.isdir(node.mount_base):
            mounter.FuseMounter(node.mount_base).unmount_all()

    def _stop_host_parts(self, host):
        for part in reversed(self._host_parts.pop(host, [])):
            part.stop()

    def _stop_compute(self, label):
        """Stop nova-compute ``label`` once Nova's shutdown has done its part.

        In Nova's threading mode, nova-compute's graceful shutdown waits
        for its in-progress tasks, then shuts its default thread pool
        down waiting for every thread in it -- and libvirt's event
        dispatch threads run there until the process ends.  So it never
        exits by itself and would be killed only at the lab's timeout,
        a minute per compute host.  Once it logs that it shuts that pool
        down, its own work is done: then it is killed.  A nova-compute
        that exits by itself (eventlet mode) is simply waited for.
        """
        proc = self.services.pop(label, None)
        if proc is None:
            return
        log = os.path.join(self.workdir, label + ".log")
        written = _log_size(log)
        proc.signal(signal.SIGTERM)
        shut_down = b"The thread pool MainProcess.default is shutting down"
        try:
            process.wait_until(
                lambda: proc.poll() is not None or shut_down in _log_since(
                    log, written), "%s's graceful shutdown" % label,
                COMPUTE_SHUTDOWN_SECONDS, interval=0.2)
        except process.LabError:
            pass    # Killed below all the same; its log says why.
        proc.signal(signal.SIGKILL)
        proc.stop()

    def _start_service(self, name, config_file=None, label=None,
                       timeout=120.0, wrap=None):
        """Start ``name`` and wait until its node takes requests."""
        self._launch_service(name, config_file, label, timeout, wrap)()

    def _launch_service(self, name, config_file=None, label=None,
                        timeout=120.0, wrap=None):
        """Start ``name``; a function that waits until it takes requests.

        ``label`` names its log and its entry in :attr:`services`
        (default: ``name``); ``wrap``, a function of its command line,
        runs it elsewhere (a compute host's namespace).  nova-compute
        finds the lab's ``ssh`` and ``scp`` first on its PATH.  Services
        may start side by side: the lab's Keystone keeps its data in
        PostgreSQL, which takes their logins at once.
        """
        label = label or name
        log = os.path.join(self.workdir, label + ".log")
        # A restarted service appends to its log: only what it writes
        # from now on says it is up.
        written = _log_size(log)
        argv = [service.program(name), "--config-file",
                config_file or self.config_file, "--log-file", log]
        env = None
        if name == "nova-compute":
            env = dict(os.environ, PATH=os.pathsep.join([
                os.path.join(self.ssh_dir, "bin"),
                os.environ.get("PATH", os.defpath)]))
        proc = self.services[label] = process.ManagedProcess(
            label, wrap(argv) if wrap else argv,
            os.path.join(self.workdir, label + ".out"), env=env)
        # nova.service.Service.start logs this once init_host and the
        # RPC servers are done: from then on the node takes requests
        # (its "Starting ... node" line comes before all of that).
        started = ("Join ServiceGroup membership for this service %s"
                   % name.split("-", 1)[1]).encode()

        def wait():
            process.wait_until(lambda: started in _log_since(log, written),
                               "%r in %s" % (started, log), timeout, proc,
                               0.5)
        return wait

    def _make_cells(self, databases, transport_url):
        """The API database, cell0 and cell1, as a deployment makes them."""
        self._manage("api_db", "sync")
        self._manage("cell_v2", "map_cell0", "--database_connection",
                     databases["nova_cell0"])
        self._manage("cell_v2", "create_cell", "--name", "cell1",
                     "--database_connection", databases["nova_cell1"],
                     "--transport-url", transport_url)
        self._manage("db", "sync")

    def _manage(self, *args, timeout=600):
        """``nova-manage ARGS``; its output, LabError if it fails."""
        result = subprocess.run(
            [service.program("nova-manage"), "--config-file",
             self.config_file] + list(args), capture_output=True, text=True,
            timeout=timeout, env=process.child_env())
        if result.returncode:
            raise process.LabError("nova-manage %s failed (%d): %s" % (
                " ".join(args[:2]), result.returncode,
                (result.stderr or result.stdout)[-2000:]))
        return result.stdout

    def _wait_for_compute_host(self, host=HOST, label="nova-compute",
                               timeout=240.0):
        """nova-compute ``label`` reported ``host``, mapped into cell1."""
        api_database = sqlalchemy.create_engine(
            self._config_args[0]["nova_api"],
            poolclass=sqlalchemy.pool.NullPool)

        def mapped():
            for name, proc in self.services.items():
                if proc.poll() is not None:
                    raise process.LabError("%s exited (%s): see %s" % (
                        name, proc.returncode, proc.log_path))
            with api_database.connect() as connection:
                return connection.execute(sqlalchemy.text(
                    "SELECT 1 FROM host_mappings WHERE host = :host"),
                    {"host": host}).first() is not None

        try:
            process.wait_until(mapped, "%s in cell1" % host, timeout,
                               interval=0.5)
        except process.LabError as e:
            # nova-compute may hang on after a fatal error: say which.
            errors = [line for line in self.log(label).splitlines()
                      if " ERROR " in line or " CRITICAL " in line]
            raise process.LabError("%s; nova-compute's last errors:\n%s"
                                   % (e, "\n".join(errors[-15:]))) from e

    # --- for tests ----------------------------------------------------------

    def openstack(self, *args, user="alpha-member", timeout=600):
        """The real ``openstack`` CLI as ``user``, in this Nova's region."""
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("OS_")}
        env.update(self.keystone.credentials(user, self.region),
                   OS_IMAGE_API_VERSION="2")
        return subprocess.run([service.program("openstack")] + list(args),
                              capture_output=True, text=True,
                              timeout=timeout, env=env)

    def cli(self, *args, user="alpha-member", timeout=600):
        """``openstack ARGS -f json`` as ``user``; the parsed output."""
        result = self.openstack(*args, "-f", "json", user=user,
                                timeout=timeout)
        if result.returncode:
            raise process.LabError("openstack %s: %s" % (
                " ".join(args[:2]), result.stderr[-3000:]))
        return json.loads(result.stdout)

    def server(self, server_id, user="alpha-member"):
        """The server as the compute API shows ``user`` (a dict).

        For waits that ask again and again: the API itself, as the CLI
        asks it, without the CLI's seconds of start-up at every look.
        """
        return self._compute(user, "GET", "/servers/%s" % server_id)[
            "server"]

    def console_log(self, server_id, user="alpha-member"):
        """The server's console log (``openstack console log show``)."""
        return self._compute(user, "POST", "/servers/%s/action" % server_id,
                             {"os-getConsoleOutput": {}})["output"] or ""

    def _compute(self, user, method, path, body=None):
        reply = self.keystone.session(user).request(
            self.api.url + "/v2.1" + path, method, json=body,
            # Hosts (OS-EXT-SRV-ATTR:host) as the tests' CLI calls see
            # them; nothing here depends on later fields.
            headers={"OpenStack-API-Version": "compute 2.74"},
            raise_exc=True)
        return reply.json()

    def upload_guest(self, golden, name):
        """The test guest's kernel, initramfs and disk, as a member.

        ``{"kernel": id, "ramdisk": id, "disk": id}``; the disk names
        the other two, as Nova boots it.
        """
        kernel = self.cli("image", "create", "--disk-format", "aki",
                          "--container-format", "aki", "--file",
                          golden.kernel, name + "-kernel")
        ramdisk = self.cli("image", "create", "--disk-format", "ari",
                           "--container-format", "ari", "--file",
                           golden.initrd, name + "-initrd")
        disk = self.cli("image", "create", "--disk-format", "qcow2",
                        "--container-format", "bare", "--file",
                        golden.qcow2, "--property",
                        "kernel_id=%s" % kernel["id"], "--property",
                        "ramdisk_id=%s" % ramdisk["id"], name)
        return {"kernel": kernel["id"], "ramdisk": ramdisk["id"],
                "disk": disk["id"]}

    def log(self, name):
        """The log of service ``name`` (e.g. ``nova-compute``)."""
        with open(os.path.join(self.workdir, name + ".log"),
                  errors="replace") as f:
            return f.read()

    def stop(self):
        """Stop every service this Nova started, then its mounts.

        The compute hosts first (their shutdown may still call the
        conductor), then the cell's other services and the APIs together:
        each takes seconds to shut down, half a minute in turn.
        """
        for name in [n for n in self.services
                     if n.startswith("nova-compute")]:
            self._stop_compute(name)
        for host in list(self._host_parts):
            self._stop_host_parts(host)
        apps = [self.api] + [getattr(part, "app", None) for part in (
            self.neutron, self.placement)]
        process.stop_together(list(self.services.values()) + [
            app.process for app in apps if app is not None])
        self.services = {}
        for part in ("api", "neutron", "placement"):
            if getattr(self, part) is not None:
                getattr(self, part).stop()
                setattr(self, part, None)
        if self.endpoints:
            self.keystone.remove_endpoints(self.endpoints)
            self.endpoints = []
        for base in self._mount_bases:
            if os.path.isdir(base):
                mounter.FuseMounter(base).unmount_all()
