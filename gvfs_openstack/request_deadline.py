# SPDX-License-Identifier: Apache-2.0
"""Reading a request from a socket until a deadline, not only per read.

A socket timeout bounds each read: a client sending a byte now and then
keeps every read short and its request open for as long as it likes,
holding a thread of a threaded server (gvfs-api's, the threaded metrics
endpoint's).  :class:`DeadlineReader` bounds the whole request.
"""

import io
import time


class RequestTimeout(TimeoutError):
    """The client did not send its whole request within its deadline."""


class DeadlineReader(io.RawIOBase):
    """A connection's bytes, readable until the request's deadline.

    Every read waits at most ``per_read`` seconds (``client_timeout``)
    and never past ``deadline`` (monotonic), after which reading raises
    :class:`RequestTimeout`: a client sending a byte now and then keeps
    each read short but cannot make the request last.  The socket's own
    timeout is put back after each read, so that the reply's writes get
    the whole ``per_read``.
    """

    def __init__(self, sock, deadline, per_read):
        super().__init__()
        self._sock = sock
        self._deadline = deadline
        self._per_read = per_read

    def readable(self):
        return True

    def readinto(self, buffer):
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise RequestTimeout("request not received within its deadline")
        self._sock.settimeout(min(self._per_read, left))
        try:
            return self._sock.recv_into(buffer)
        except TimeoutError as e:
            if time.monotonic() >= self._deadline:
                raise RequestTimeout(
                    "request not received within its deadline") from e
            raise
        finally:
            self._sock.settimeout(self._per_read)
