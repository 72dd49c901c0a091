# SPDX-License-Identifier: Apache-2.0
"""Processes the lab starts, and how it waits for and stops them.

Every process is started by us, remembered by PID, and stopped by that PID
(SIGTERM, then SIGKILL after a grace period) -- never by name, so nothing
else on the machine is touched.
"""

import contextlib
import os
import pwd
import signal
import socket
import subprocess
import threading
import time

from gvfs_lab import slowness


#: The checkout the lab runs from.  The lab is not installed with the
#: package: its Python children (the compute process, glance-api's paste
#: filter) import ``gvfs_lab`` from here, whatever their working directory.
CHECKOUT = os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))

#: How long the lab's gunicorn servers keep an idle connection open.
#: gunicorn's default (2 s) equals the interval at which ``openstack ...
#: --wait`` polls: a poll sent on a kept connection just as the server
#: closes it fails with "Remote end closed connection without response"
#: (seen once, on ``server delete --wait``).  Longer than any client's
#: pause between calls, as nginx's default keep-alive (75 s) is.
HTTP_KEEPALIVE_SECONDS = 75


def child_env(env=None):
    """``env`` (default: ours) with the checkout on ``PYTHONPATH``."""
    env = dict(os.environ if env is None else env)
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    if CHECKOUT not in paths:
        env["PYTHONPATH"] = os.pathsep.join([CHECKOUT] + paths)
    return env


class LabError(Exception):
    """A part of the lab failed to start or behaved unexpectedly."""


def command(*argv):
    """Run a system command (``ip``, ``tc``, ...); its standard output.

    LabError with the command and its error output if it fails.
    """
    result = subprocess.run(argv, capture_output=True, text=True,
                            check=False)
    if result.returncode:
        raise LabError("%s: %s" % (" ".join(argv), result.stderr.strip()))
    return result.stdout


def undo(commands):
    """Run ``commands`` (argv tuples) last first, whatever each says.

    What a lab part runs on stop to take back the interfaces, namespaces
    and firewall rules it made, each command recorded as it made them:
    one that fails (already gone) does not keep the others from running.
    """
    for argv in reversed(commands):
        subprocess.run(list(argv), capture_output=True, check=False)


def together(calls):
    """Run each of ``calls`` in a thread of its own, at once; results.

    In the order of ``calls``; once every one has returned, the first
    exception any raised is raised here.
    """
    results = [None] * len(calls)
    errors = []

    def one(index, call):
        try:
            results[index] = call()
        except Exception as e:  # Raised below, in the caller's thread.
            errors.append(e)

    threads = [threading.Thread(target=one, args=(i, call), daemon=True)
               for i, call in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return results


class Part:
    """A lab part that is a ``with`` block: started, then stopped.

    ``stop()`` also runs when ``start()`` fails half-way, so that what
    it had started is stopped.
    """

    def __enter__(self):
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc):
        self.stop()


def let_others_traverse(path):
    """``o+x`` on ``path`` and every directory above it.

    Servers the lab runs as other accounts (the GridFTP user, postgres)
    must reach their directories, and test directories are often private.
    """
    path = os.path.abspath(path)
    while path != "/":
        mode = os.stat(path).st_mode
        if not mode & 0o001:
            os.chmod(path, (mode & 0o7777) | 0o001)
        path = os.path.dirname(path)


def account_directory(path, account):
    """Make ``path`` a directory of the system ``account``, reachable.

    For a server the lab runs as that account (postgres, mysql).
    """
    entry = pwd.getpwnam(account)
    os.makedirs(path, exist_ok=True)
    os.chown(path, entry.pw_uid, entry.pw_gid)
    let_others_traverse(path)


#: Ports :func:`free_port` has handed out in this process.  A port is
#: free again the moment its probe socket closes, so the kernel may give
#: the same one to the next probe: two parts started side by side (or
#: one after the other, before the first listens) would then collide.
_HANDED_OUT = set()
_HANDING_OUT = threading.Lock()


def free_port(host="127.0.0.1"):
    """A port free now and not handed out before by this process."""
    with _HANDING_OUT:
        for _ in range(1000):
            with socket.socket() as sock:
                sock.bind((host, 0))
                port = sock.getsockname()[1]
            if port not in _HANDED_OUT:
                _HANDED_OUT.add(port)
                return port
    raise LabError("no free port that was not handed out already")


def free_port_range(count, host="127.0.0.1"):
    """The first of ``count`` consecutive ports that are all free now."""
    for _ in range(100):
        first = free_port(host)
        if first + count > 65535:
            continue
        try:
            with contextlib.ExitStack() as held:
                for port in range(first, first + count):
                    sock = held.enter_context(socket.socket())
                    sock.bind((host, port))
        except OSError:
            continue
        with _HANDING_OUT:
            if _HANDED_OUT.isdisjoint(range(first + 1, first + count)):
                _HANDED_OUT.update(range(first, first + count))
                return first
    raise LabError("no %d consecutive free ports" % count)


#: What a check raises when it cannot be evaluated yet: a series not yet
#: exported (KeyError), a file not yet written (FileNotFoundError), a
#: server not yet listening (ConnectionError), half a JSON document
#: (ValueError).  Such a check counts as "not yet", not as a failure.
NOT_YET = (LookupError, OSError, ValueError)


def wait_until(ready, what, timeout=30.0, process=None, interval=0.05):
    """Poll ``ready()`` until it is true.

    ``timeout`` is in seconds of a fast machine: the deadline is
    :func:`slowness.scaled`, so a slower or CPU-capped machine waits
    longer, and a fast one returns as soon as ``ready()`` holds.  A
    ``ready()`` that raises one of :data:`NOT_YET` is asked again; the
    last such error is in the message if the deadline passes.

    LabError if ``process`` (a :class:`ManagedProcess`) exits first, or
    after the deadline; ``what`` says what was waited for.
    """
    timeout = slowness.scaled(timeout)
    deadline = time.monotonic() + timeout
    last_error = None
    while True:
        if process is not None and process.poll() is not None:
            raise LabError("%s exited with status %s before %s (log: %s)"
                           % (process.name, process.returncode, what,
                              process.log_path))
        try:
            if ready():
                return
        except NOT_YET as e:
            last_error = e
        if time.monotonic() >= deadline:
            raise LabError("not %s after %.0fs%s%s" % (
                what, timeout,
                "" if last_error is None else
                " (last check: %s: %s)" % (type(last_error).__name__,
                                           last_error),
                "" if process is None else
                " (log: %s)" % process.log_path)) from last_error
        time.sleep(interval)


def wait_for_port(port, host="127.0.0.1", timeout=30.0, process=None):
    def listening():
        try:
            with socket.create_connection((host, port), timeout=1):
                return True
        except OSError:
            return False

    wait_until(listening, "listening on %s:%d" % (host, port), timeout,
               process)


class ManagedProcess:
    """A child process with its output in a log file.

    It runs in its log's directory, its part of the lab: what a server
    drops in its working directory (RabbitMQ's crash dumps, core files)
    stays with the lab, not in the checkout the tests run from.
    """

    def __init__(self, name, argv, log_path, env=None):
        self.name = name
        self.argv = argv
        self.log_path = log_path
        self._log = open(log_path, "ab")
        self.popen = subprocess.Popen(
            argv, stdout=self._log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True,
            env=child_env(env),
            cwd=os.path.dirname(os.path.abspath(log_path)))

    @property
    def pid(self):
        return self.popen.pid

    @property
    def returncode(self):
        return self.popen.returncode

    def poll(self):
        return self.popen.poll()

    def signal(self, signum):
        if self.popen.poll() is None:
            os.kill(self.popen.pid, signum)

    def stop(self, timeout=10.0):
        """SIGTERM, wait, then SIGKILL; returns the exit status."""
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(timeout)
        self._log.close()
        return self.popen.returncode


def stop_together(processes, timeout=60.0):
    """Stop ``processes`` (:class:`ManagedProcess`) at once.

    Each is sent SIGTERM before any is waited for: services that take
    seconds to shut down gracefully then take them side by side.  One
    still running at ``timeout`` is stopped as :meth:`ManagedProcess.stop`
    does.
    """
    for proc in processes:
        proc.signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout
    for proc in processes:
        try:
            proc.popen.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
        proc.stop(timeout=10.0)


def start_listening(name, argv, log_path, ports, host="127.0.0.1"):
    """Start a process and wait until it listens on every port in ports.

    Of ``host``.  A process that exits or never listens is stopped and
    LabError raised, with its log's path in the message.
    """
    proc = ManagedProcess(name, argv, log_path)
    try:
        for port in ports:
            wait_for_port(port, host, process=proc)
    except LabError:
        proc.stop()
        raise
    return proc
