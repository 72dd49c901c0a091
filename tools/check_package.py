# SPDX-License-Identifier: Apache-2.0
"""Check the package as deployments install it (``tox -e package``).

Builds the sdist and the wheel and checks what the wheel ships.  Then:

* **every part**: installs the wheel -- not editable, no checkout on
  ``sys.path`` -- with all its extras into a virtualenv outside the
  checkout, loads every entry point the distribution declares and lists
  the options of each ``oslo.config.opts`` namespace;
* **each role alone**: for every extra of ``setup.cfg`` that a node type
  installs (:data:`ROLES`), a new virtualenv with only the wheel and that
  extra, where the role's own commands run for real (a job store synced
  and checked, the conductor and gvfs-api started and stopped, an image
  stored and read back through glance_store, sidecars written and
  verified) and the libraries of other roles are not installed.  Every
  console script is run by the role that owns it.

What only the checkout holds (the lab, ``gvfs_lab``, and ``tests/``)
must not be needed, and must not be shipped.
"""

import argparse
import concurrent.futures
import contextlib
import glob
import http.client
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import textwrap
import time

DIST = "gvfs-openstack"
#: uv from this interpreter's venv (tox -e package installs it).
UV = os.path.join(os.path.dirname(sys.executable), "uv")
PACKAGE = "gvfs_openstack"

#: Run in a fresh interpreter whose working directory is not the checkout.
_LOAD_ALL = r"""
import importlib.metadata
import json
import sys

dist = importlib.metadata.distribution(%(dist)r)
package = __import__(%(package)r)
if not package.__file__.startswith(%(site)r):
    sys.exit("imported %%s, not the installed wheel" %% package.__file__)
loaded = []
for ep in dist.entry_points:
    obj = ep.load()
    if ep.group == "oslo.config.opts":
        groups = obj()
        if not groups or not all(opts for _, opts in groups):
            sys.exit("%%s lists no options" %% ep.name)
    loaded.append("%%s %%s" %% (ep.group, ep.name))
print(json.dumps(loaded))
"""

#: The job store's, the bus's and the other services' libraries: a role
#: that does not run them must not pull them in.
#: Distribution names: the wheel's ``nova.virt.gvfs`` module makes a
#: ``nova`` namespace in every venv, so modules would not tell.
JOB_STORE = ("SQLAlchemy", "oslo.db", "alembic")
CONDUCTOR_ONLY = JOB_STORE + ("paramiko", "globus-sdk")
SERVICES = ("nova", "glance_store", "keystonemiddleware", "oslo.messaging")


class Role:
    """An extra (or extras) that one kind of node installs alone."""

    def __init__(self, name, extras, absent, check, scripts=()):
        self.name = name
        self.extras = extras
        #: Distributions that must not be installed in its venv.
        self.absent = absent
        #: ``check(venv, workdir)`` runs the role's commands for real...
        self.check = check
        #: ...among them these console scripts.
        self.scripts = scripts


def _run(argv, **kwargs):
    print("+ " + " ".join(argv), flush=True)
    kwargs.setdefault("check", True)
    return subprocess.run(argv, **kwargs)


def _clean_env():
    """The environment without the checkout on the module path."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def build(checkout, outdir):
    _run([sys.executable, "-m", "build", "--sdist", "--wheel",
          "--outdir", outdir, checkout])
    wheels = glob.glob(os.path.join(outdir, "*.whl"))
    sdists = glob.glob(os.path.join(outdir, "*.tar.gz"))
    if len(wheels) != 1 or len(sdists) != 1:
        raise SystemExit("expected one wheel and one sdist in %s, found %s"
                         % (outdir, os.listdir(outdir)))
    return wheels[0]


def check_contents(wheel):
    """Every package has its ``__init__.py``; no test code is shipped."""
    import zipfile

    names = zipfile.ZipFile(wheel).namelist()
    shipped = [n for n in names if n.startswith(PACKAGE + "/")]
    stray = [n for n in names
             if n.startswith(("tests/", "tools/", "gvfs_lab/"))]
    if stray:
        raise SystemExit("the wheel ships test code: %s" % stray[:5])
    dirs = {os.path.dirname(n) for n in shipped if n.endswith(".py")}
    missing = sorted(d for d in dirs
                     if d + "/__init__.py" not in names)
    if missing:
        raise SystemExit("packages without __init__.py: %s" % missing)
    return len(shipped)


def all_extras(checkout):
    """The extras ``setup.cfg`` declares, in its order."""
    import configparser

    parser = configparser.ConfigParser()
    parser.read(os.path.join(checkout, "setup.cfg"))
    return list(parser["extras"])


def check_everything(venv):
    """Every entry point loads, in one interpreter.

    Returns the entry points loaded and the console scripts among them
    (each role runs its own: :data:`ROLES` must cover them all).
    """
    out = venv.run(["python", "-I", "-c", _LOAD_ALL % {
        "dist": DIST, "package": PACKAGE, "site": venv.path}],
        capture_output=True, text=True)
    loaded = json.loads(out.stdout)
    scripts = [name.split()[1] for name in loaded
               if name.startswith("console_scripts ")]
    return loaded, scripts


class Venv:
    """A virtualenv of one role, outside the checkout."""

    def __init__(self, path, constraints):
        self.path = path
        self.bin = os.path.join(path, "bin")
        self.constraints = constraints

    def create(self, wheel, extras):
        # uv, not pip: the same resolution of the same metadata, with one
        # cache shared by all the venvs (nova's alone took 105 s by pip).
        _run([UV, "venv", "--quiet", "--python", sys.executable,
              self.path])
        _run([UV, "pip", "install", "--quiet", "--python",
              os.path.join(self.bin, "python"), "-c", self.constraints,
              "%s[%s]" % (wheel, ",".join(extras))], env=_clean_env())

    def run(self, argv, **kwargs):
        kwargs.setdefault("env", _clean_env())
        kwargs.setdefault("cwd", self.path)
        return _run([os.path.join(self.bin, argv[0])] + argv[1:], **kwargs)

    def python(self, code, args=(), **kwargs):
        return self.run(["python", "-I", "-c", textwrap.dedent(code)]
                        + list(args), **kwargs)

    def installed(self, distributions):
        """Which of ``distributions`` are installed in this venv."""
        found = self.python("""
            import importlib.metadata, sys
            for name in sys.argv[1:]:
                try:
                    importlib.metadata.distribution(name)
                except importlib.metadata.PackageNotFoundError:
                    continue
                print(name)
            """, capture_output=True, text=True, args=distributions)
        return found.stdout.split()


def _wait_for(predicate, what, timeout=60.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit("timed out waiting for %s" % what)
        time.sleep(0.2)


def _service(venv, argv, logfile):
    """Start a service of the venv; its output goes to ``logfile``."""
    print("+ " + " ".join(argv) + " &", flush=True)
    log = open(logfile, "w")
    return subprocess.Popen([os.path.join(venv.bin, argv[0])] + argv[1:],
                            stdout=log, stderr=subprocess.STDOUT,
                            cwd=venv.path, env=_clean_env())


def _stop(proc, logfile):
    proc.send_signal(signal.SIGTERM)
    try:
        status = proc.wait(60)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise SystemExit("%s ignored SIGTERM" % proc.args[0])
    if status != 0:
        with open(logfile) as f:
            raise SystemExit("%s stopped with %d:\n%s"
                             % (proc.args[0], status, f.read()[-4000:]))


def _log_says(logfile, text):
    with open(logfile) as f:
        return text in f.read()


def check_osc(venv, work):
    """``openstack gvfs ...`` is found, with cliff's formatters."""
    out = venv.run(["openstack", "gvfs", "migration", "list", "--help"],
                   capture_output=True, text=True)
    if "json" not in out.stdout:
        raise SystemExit("openstack gvfs migration list offers no -f "
                         "json:\n" + out.stdout)
    # The other commands: one CLI start lists them all.
    out = venv.run(["openstack", "command", "list", "--group",
                    "openstack.gvfs.v1", "-f", "json"],
                   capture_output=True, text=True)
    listed = " ".join(" ".join(group["Commands"])
                      for group in json.loads(out.stdout))
    for command in ("gvfs migrate", "gvfs replication create",
                    "gvfs site show", "gvfs golden reference list"):
        if command not in listed:
            raise SystemExit("openstack lists no %r: %s" % (command, listed))


def _upgrade_check(venv, conf, work, *flags):
    """``gvfs-status upgrade check`` of ``conf``, whatever its exit code."""
    return subprocess.run(
        [os.path.join(venv.bin, "gvfs-status"), "--config-file", conf,
         "upgrade", "check", *flags], env=_clean_env(), cwd=work,
        capture_output=True, text=True)


def check_proxy(venv, work):
    """Sidecars made and verified; the proxy's composition root loads.

    ``gvfs-status upgrade check`` of a server proxy's file runs with the
    proxy extra alone and warns of ``allow_root``; of a conductor's file
    it says the conductor extra is needed.
    """
    image = os.path.join(work, "golden.img")
    with open(image, "wb") as f:
        f.write(os.urandom(1 << 20))
        f.truncate(8 << 20)
    venv.run(["gvfs-meta", "generate", image])
    venv.run(["gvfs-meta", "verify", image])
    venv.run(["gvfs-proxy", "serve", "--help"], stdout=subprocess.DEVNULL)
    venv.python("import gvfs_openstack.proxy.service")
    conf = os.path.join(work, "gvfs-proxy.conf")
    with open(conf, "w") as f:
        f.write("[proxy]\nrole = server\n[listen]\nallowed_peers = "
                "127.0.0.1\n[server]\nallow_root = true\n")
    status = _upgrade_check(venv, conf, work, "--json")
    results = {c["check"]: c["result"]
               for c in json.loads(status.stdout)["checks"]}
    if status.returncode != 1 or results.get("Root on the export") != 1:
        raise SystemExit("gvfs-status of a proxy's file: %d %s %s" % (
            status.returncode, status.stdout, status.stderr[-2000:]))
    # A conductor's file on a proxy node: said plainly, no traceback.
    with open(conf, "w") as f:
        f.write("[conductor]\nsites = east\n")
    status = _upgrade_check(venv, conf, work)
    if status.returncode != 2 or "conductor extra" not in status.stderr \
            or "Traceback" in status.stderr:
        raise SystemExit(
            "gvfs-status of a conductor's file without the conductor "
            "extra: %d %s" % (status.returncode, status.stderr[-2000:]))


def check_fuse(venv, work):
    venv.run(["gvfs-proxy", "mount", "--help"], stdout=subprocess.DEVNULL)
    venv.python("import gvfs_openstack.fuse.fusefs\n"
                "import gvfs_openstack.fuse.metrics")


def check_nfs(venv, work):
    """A kernel mount's point, as os-brick lays it out, without it."""
    venv.python("""
        import hashlib, os, sys
        from gvfs_openstack.mount import mounter
        base = sys.argv[1]
        share = mounter.Share("127.0.0.1", 2049, "/srv/images")
        point = mounter.NfsMounter(base).mount_point(share)
        digest = hashlib.md5(share.name.encode()).hexdigest()
        assert point == os.path.join(base, digest), point
        """, args=[work])


def check_glance(venv, work):
    """glance_store loads the driver by name; an image goes in and out."""
    datadir = os.path.join(work, "images")
    os.mkdir(datadir)
    venv.run(["python", "-I", "-c", textwrap.dedent("""
        import hashlib, io, os, sys
        from glance_store import location
        from oslo_config import cfg
        from stevedore import driver

        store_class = driver.DriverManager(
            "glance_store.drivers", "gvfs").driver
        conf = cfg.ConfigOpts()
        conf([], project="glance")
        store = store_class(conf, backend="dtn")
        conf.set_override("gvfs_store_datadir", sys.argv[1], group="dtn")
        store.configure(re_raise_bsc=True)
        data = os.urandom(3 << 20)
        uri, size, _, multihash, _ = store.add(
            "a1b2c3d4-0000-4000-8000-000000000001", io.BytesIO(data),
            len(data), "sha256")
        assert multihash == hashlib.sha256(data).hexdigest(), multihash
        module = sys.modules[store_class.__module__]
        loc = location.Location("gvfs", module.StoreLocation, conf,
                                uri=uri, backend="dtn")
        chunks, length = store.get(loc)
        assert length == len(data) and b"".join(chunks) == data
        """), datadir])


def check_nova(venv, work):
    """The driver nova-compute loads, and the backend it brings."""
    venv.python("""
        from nova.virt.libvirt import driver as libvirt_driver
        from nova.virt import gvfs
        from gvfs_openstack.nova import imagebackend
        assert issubclass(gvfs.GvfsLibvirtDriver,
                          libvirt_driver.LibvirtDriver)
        assert imagebackend.GvfsImage
        """)
    venv.run(["gvfs-nova-compute", "--help"], stdout=subprocess.DEVNULL)


def _conf_on_a_fake_bus(work, service, sections):
    """Write ``service``'s configuration file; return its path.

    ``sections`` follow a [DEFAULT] whose message bus is oslo.messaging's
    in-process fake.
    """
    conf = os.path.join(work, service + ".conf")
    with open(conf, "w") as f:
        f.write("[DEFAULT]\ntransport_url = fake:/\n"
                + textwrap.dedent(sections))
    return conf


@contextlib.contextmanager
def _running(venv, service, conf, work, ready):
    """Run ``service`` on ``conf`` for the block, once ``ready(log)``.

    It must then stop cleanly on SIGTERM.
    """
    log = os.path.join(work, service + ".log")
    proc = _service(venv, [service, "--config-file", conf], log)
    try:
        _wait_for(lambda: ready(log) or proc.poll() is not None,
                  service + " to serve")
        if proc.poll() is not None:
            with open(log) as f:
                raise SystemExit("%s died:\n%s" % (service, f.read()))
        yield
    finally:
        _stop(proc, log)


def check_conductor(venv, work):
    """A job store synced and checked; the conductor starts and stops."""
    conf = _conf_on_a_fake_bus(work, "gvfs-conductor", """\
        [database]
        connection = sqlite:///%s
        [conductor]
        # No Keystone here to validate callers' tokens with.
        verify_callers = false
        """ % os.path.join(work, "jobs.db"))
    venv.run(["gvfs-manage", "--config-file", conf, "db", "sync"])
    status = _upgrade_check(venv, conf, work)
    if status.returncode not in (0, 1):   # 1: warnings only.
        raise SystemExit("gvfs-status upgrade check failed: %d %s %s" % (
            status.returncode, status.stdout, status.stderr[-2000:]))
    with _running(venv, "gvfs-conductor", conf, work,
                  lambda log: _log_says(log, "serves topic")):
        pass


def check_globus(venv, work):
    venv.python("import gvfs_openstack.migration.globus")


def _answer(port, path):
    try:
        connection = http.client.HTTPConnection("127.0.0.1", port,
                                                timeout=5)
        connection.request("GET", path)
        return connection.getresponse().status
    except OSError:
        return None


def _free_port():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def check_api(venv, work):
    """gvfs-api starts, answers, asks for a token, counts the refusal."""
    port, metrics_port = _free_port(), _free_port()
    conf = _conf_on_a_fake_bus(work, "gvfs-api", """\
        [api]
        host_ip = 127.0.0.1
        port = %d
        trusts = false
        [keystone_authtoken]
        www_authenticate_uri = http://127.0.0.1:1/identity
        [metrics]
        port = %d
        """ % (port, metrics_port))
    with _running(venv, "gvfs-api", conf, work,
                  lambda log: _answer(port, "/healthcheck") == 200):
        status = _answer(port, "/v1/migrations")
        if status != 401:
            raise SystemExit("gvfs-api answered %s without a token" % status)
        connection = http.client.HTTPConnection("127.0.0.1", metrics_port,
                                                timeout=5)
        connection.request("GET", "/metrics")
        scraped = connection.getresponse().read().decode()
        counted = ('gvfs_api_requests_total{code="401",method="GET",'
                   'route="/v1/migrations"} 1.0')
        if counted not in scraped:
            raise SystemExit("gvfs-api's metrics lack %s:\n%s"
                             % (counted, scraped))


#: Each node type's extra alone, what it must run, and what it must not
#: install (doc/source/install/deployment.rst lists the extras per node type).
ROLES = (
    Role("osc", ["osc"], CONDUCTOR_ONLY + SERVICES, check_osc),
    Role("proxy", ["proxy"], CONDUCTOR_ONLY + SERVICES + ("osc-lib",),
         check_proxy, scripts=("gvfs-proxy", "gvfs-meta")),
    Role("fuse", ["fuse"], CONDUCTOR_ONLY + SERVICES, check_fuse),
    Role("nfs", ["nfs"], CONDUCTOR_ONLY + SERVICES + ("os-brick",),
         check_nfs),
    Role("glance", ["glance"], CONDUCTOR_ONLY + ("nova", "osc-lib"),
         check_glance),
    Role("nova", ["nova"], ("glance_store", "globus-sdk"),
         check_nova, scripts=("gvfs-nova-compute",)),
    Role("conductor", ["conductor"],
         ("nova", "glance_store", "keystonemiddleware", "osc-lib",
          "globus-sdk"), check_conductor,
         scripts=("gvfs-conductor", "gvfs-manage", "gvfs-status")),
    Role("globus", ["conductor", "globus"], ("nova", "glance_store"),
         check_globus),
    Role("api", ["api"], CONDUCTOR_ONLY + ("nova", "glance_store"),
         check_api, scripts=("gvfs-api",)),
)


#: The programs of our own (gvfs-nova-compute is nova-compute's).
PROGRAMS = ("gvfs-proxy", "gvfs-meta", "gvfs-conductor", "gvfs-manage",
            "gvfs-status", "gvfs-api")
_EXTRA_SENTENCE = re.compile(
    r"^gvfs-[a-z]+: module [\w.]+ is missing: install the '([a-z]+)' "
    r"extra \(pip install 'gvfs-openstack\[\1\]'\)$")


def check_every_program(venv):
    """Each program answers --version, or names the extra it lacks.

    Every console script is installed on every node: run without its
    role's extra, a program says so in one line (exit 1), never with a
    traceback.
    """
    for program in PROGRAMS:
        done = venv.run([program, "--version"], capture_output=True,
                        text=True, check=False)
        said = done.stderr.strip()
        if done.returncode == 0 and done.stdout.strip():
            continue
        # Libraries imported first may warn (eventlet's deprecation):
        # the program's own last line is the sentence, and no traceback.
        last = said.splitlines()[-1] if said else ""
        if done.returncode != 1 or not _EXTRA_SENTENCE.match(last) or \
                "Traceback" in said:
            raise SystemExit("%s --version: %d %s %s" % (
                program, done.returncode, done.stdout, said[-2000:]))


def check_role(role, wheel, top, constraints):
    """``None``, or what went wrong, with the role's name."""
    venv = Venv(os.path.join(top, role.name), constraints)
    work = os.path.join(top, role.name + "-work")
    os.mkdir(work)
    started = time.monotonic()
    try:
        venv.create(wheel, role.extras)
        present = venv.installed(role.absent)
        if present:
            raise SystemExit("installs %s" % ", ".join(present))
        role.check(venv, work)
        check_every_program(venv)
    except (SystemExit, subprocess.CalledProcessError) as e:
        return "%s: %s" % (role.name, e)
    finally:
        print("role %s took %.0f s" % (role.name, time.monotonic() - started),
              flush=True)
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkout", nargs="?", default=os.getcwd())
    parser.add_argument("--role", action="append", default=[],
                        help="check only these roles (default: all)")
    args = parser.parse_args()
    constraints = os.environ.get("TOX_CONSTRAINTS_FILE") or os.path.join(
        args.checkout, "upper-constraints.txt")
    roles = [r for r in ROLES if not args.role or r.name in args.role]
    with tempfile.TemporaryDirectory() as top:
        wheel = build(args.checkout, os.path.join(top, "dist"))
        files = check_contents(wheel)
        everything = Venv(os.path.join(top, "everything"), constraints)
        everything.create(wheel, all_extras(args.checkout))
        loaded, scripts = check_everything(everything)
        unrun = set(scripts) - {s for r in ROLES for s in r.scripts}
        if unrun:
            raise SystemExit("no role runs %s" % ", ".join(sorted(unrun)))
        print("package: %s ships %d files; loaded %s"
              % (os.path.basename(wheel), files, " ".join(loaded)))
        # Two at a time: installs wait on the index as much as on a core.
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            failures = [f for f in pool.map(
                lambda r: check_role(r, wheel, top, constraints), roles)
                if f]
    for role in roles:
        print("role %-10s extras [%s]: %s" % (
            role.name, ",".join(role.extras),
            "FAILED" if any(f.startswith(role.name + ":")
                            for f in failures) else "ok"))
    for failure in failures:
        print("FAILED " + failure, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
