# SPDX-License-Identifier: Apache-2.0
"""The FUSE mount's NFS session with the client proxy.

A kernel NFS mount either hangs forever ("hard") or returns EIO on any
hiccup ("soft").  The mount does neither: every operation has a deadline
(``[mount] io_timeout``); a dropped connection is re-established (MNT
again) and idempotent calls are sent again, so a proxy that restarts is
invisible to readers; a proxy that does not come back within the deadline
gives ETIMEDOUT with the reason logged.  Writes are kept until COMMITted,
so they survive both a reconnect and a server restart (a changed write
verifier).
"""

import asyncio
import errno

from oslo_log import log as logging

from gvfs_openstack.client import nfs as nfs_client
from gvfs_openstack.client import write_batch
from gvfs_openstack.deadline import within
from gvfs_openstack.fuse import counters
from gvfs_openstack.fuse import nfsattr
from gvfs_openstack.nfs.errors import NfsError
from gvfs_openstack.nfs.errors import RpcError

LOG = logging.getLogger(__name__)

#: Connection errors that a reconnect may cure.
_LINK_ERRORS = (ConnectionError, RpcError, EOFError)


class OperationFailed(Exception):
    """A file operation failed; ``errno`` is what the caller gets."""

    def __init__(self, err, message):
        super().__init__(message)
        self.errno = err


class ProxySession:
    def __init__(self, host, port, export, io_timeout=60.0,
                 rsize=1024 * 1024, wsize=1024 * 1024, window=8):
        self.host = host
        self.port = port
        self.export = export
        self.io_timeout = io_timeout
        self.client = nfs_client.NfsClient(
            host, port, port, rsize=rsize, wsize=wsize, window=window,
            timeout=io_timeout)
        self.root = None
        #: :class:`counters.UpstreamCounters`: the calls and their times.
        self.counters = counters.UpstreamCounters()
        #: Calls made so far: how busy the mount has been.
        self.calls = 0
        self._reconnect_lock = asyncio.Lock()

    @property
    def where(self):
        return "%s:%d%s" % (self.host, self.port, self.export)

    async def start(self):
        """MNT the export; errors here are the caller's to report."""
        self.root = await self.client.mount(self.export)
        return self.root

    def close(self):
        self.client.close()

    def deadline(self):
        return asyncio.get_running_loop().time() + self.io_timeout

    async def call(self, method, *args, idempotent=True, **kwargs):
        """``self.client.<method>(*args, **kwargs)`` within ``io_timeout``.

        Raises :class:`OperationFailed` with the errno to return.  A call
        that may have changed something (CREATE, REMOVE, RENAME ...) is
        not sent twice: if its connection died under it, nobody knows
        whether it was done, and EIO says so.
        """
        loop = asyncio.get_running_loop()
        deadline = self.deadline()
        self.calls += 1
        while True:
            if not self.client.nfs.connected:
                await self.reconnect(deadline)
            sent = loop.time()
            try:
                result = await within(
                    max(deadline - loop.time(), 0.01),
                    getattr(self.client, method)(*args, **kwargs))
            except NfsError as e:
                self.counters.answered(method, loop.time() - sent)
                raise self.failure(nfsattr.errno_of(e.status),
                                   str(e)) from e
            except TimeoutError:
                raise self.timed_out(method) from None
            except _LINK_ERRORS as e:
                if not idempotent:
                    raise self.failure(errno.EIO, (
                        "connection to the proxy %s lost during %s; it "
                        "may or may not have been done" % (
                            self.where, method))) from e
                LOG.warning("connection to the proxy %s lost during %s "
                            "(%s); reconnecting", self.where, method, e)
            else:
                self.counters.answered(method, loop.time() - sent)
                return result

    def failure(self, err, message):
        """The :class:`OperationFailed` to raise, counted."""
        self.counters.failed(err)
        return OperationFailed(err, message)

    def timed_out(self, what):
        message = "no answer from the proxy %s for %s within %.0fs" % (
            self.where, what, self.io_timeout)
        LOG.error("%s", message)
        return self.failure(errno.ETIMEDOUT, message)

    async def reconnect(self, deadline):
        """Connect and MNT again, retrying with backoff until ``deadline``.

        Concurrent callers share one attempt.
        """
        loop = asyncio.get_running_loop()
        async with self._reconnect_lock:
            delay = 0.05
            while not self.client.nfs.connected:
                self.client.close()
                try:
                    root = await asyncio.wait_for(
                        self.client.mount(self.export),
                        max(deadline - loop.time(), 0.01))
                except NfsError as e:
                    raise self.failure(nfsattr.errno_of(e.status), (
                        "the proxy %s refused the mount: %s" % (
                            self.where, e))) from e
                except (OSError, *_LINK_ERRORS):
                    if loop.time() + delay >= deadline:
                        raise self.timed_out("reconnect") from None
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, 2.0)
                    continue
                if root != self.root:
                    LOG.error("the export %s has a new root handle after "
                              "reconnecting: files open before are stale",
                              self.where)
                self.counters.reconnects += 1
                LOG.info("reconnected to the proxy %s", self.where)


class FileWriter:
    """Writes through one open file.

    WRITEs go UNSTABLE with a window in flight and stay in memory until a
    COMMIT covers them: at ``buffer_bytes``, fsync and close.  A dropped
    connection or a changed verifier makes them go again.
    """

    def __init__(self, session, fh, buffer_bytes):
        self.session = session
        self.fh = fh
        self.buffer_bytes = buffer_bytes
        self.batch = write_batch.WriteBatch(session.client, fh)
        self.lock = asyncio.Lock()
        self.broken = False

    @property
    def pending(self):
        return self.batch.size

    async def write(self, offset, data):
        async with self.lock:
            deadline = self.session.deadline()
            if self.broken:
                await self._recover(deadline)
            # The window may be full of WRITEs the proxy does not answer:
            # wait for room no longer than the deadline.
            await self._send(self.batch.add(offset, data), "WRITE",
                             deadline)
            if self.batch.size >= self.buffer_bytes:
                await self._commit(deadline)

    async def commit(self):
        async with self.lock:
            await self._commit(self.session.deadline())

    @property
    def in_flight(self):
        """Whether WRITEs may be in flight (or wait to go again)."""
        return self.broken or any(not task.done()
                                  for task in self.batch.inflight)

    async def settle(self, start, end):
        """Return once no WRITE over [start, end) is in flight.

        The kernel sends a READ of bytes just written as soon as their
        WRITE returned, which is before the proxy answered it (O_DIRECT
        readers such as ``qemu-img -t none`` do): the READ must not
        overtake it.
        """
        if not self.in_flight:
            return
        async with self.lock:
            deadline = self.session.deadline()
            while True:
                if self.broken:
                    await self._recover(deadline)
                if await self._send(self.batch.settle(start, end), "WRITE",
                                    deadline):
                    return

    async def _recover(self, deadline):
        await self.session.reconnect(deadline)
        self.batch.resend()
        self.broken = False

    async def _commit(self, deadline):
        while True:
            if self.broken:
                await self._recover(deadline)
            if await self._send(self.batch.commit(), "COMMIT", deadline):
                return

    async def _send(self, operation, what, deadline):
        """Run a WRITE or COMMIT step; False if the link broke under it.

        What a link failure interrupted stays in the batch and goes again
        once reconnected; a timeout is the caller's error now (the proxy
        does not answer), the data still kept for the next COMMIT.
        """
        loop = asyncio.get_running_loop()
        try:
            await within(max(deadline - loop.time(), 0.01), operation)
            return True
        except NfsError as e:
            if what == "COMMIT":
                # The server will not take these bytes (ENOSPC, EDQUOT,
                # ESTALE ...): report it once, as close(2) and fsync(2) do.
                self.batch = write_batch.WriteBatch(self.session.client,
                                                    self.fh)
            raise self.session.failure(nfsattr.errno_of(e.status),
                                       str(e)) from e
        except TimeoutError:
            self.broken = True
            raise self.session.timed_out(what) from None
        except _LINK_ERRORS as e:
            LOG.warning("%s to %s interrupted (%s); will resend", what,
                        self.session.where, e)
            self.broken = True
            return False
