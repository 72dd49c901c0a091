# SPDX-License-Identifier: Apache-2.0
"""The local control socket: one JSON request line, one JSON reply line.

Only the owner of the proxy process can connect (the socket is created
mode 0600 in a directory the operator chooses).
"""

import asyncio
import json
import os
import socket

from oslo_log import log as logging

from gvfs_openstack import exceptions

LOG = logging.getLogger(__name__)

MAX_REQUEST = 64 * 1024


class ControlServer:
    def __init__(self, path, commands):
        self.path = path
        self.commands = commands
        self._server = None

    async def start(self):
        if os.path.exists(self.path):
            os.unlink(self.path)
        old = os.umask(0o177)
        try:
            self._server = await asyncio.start_unix_server(self._serve,
                                                           self.path)
        finally:
            os.umask(old)
        os.chmod(self.path, 0o600)

    async def _serve(self, reader, writer):
        try:
            line = await reader.readuntil(b"\n")
            request = json.loads(line[:MAX_REQUEST])
            handler = self.commands.get(request.get("command"))
            if handler is None:
                reply = {"error": "unknown command %r; known: %s" % (
                    request.get("command"), sorted(self.commands))}
            else:
                reply = {"result": await handler(request)}
        except exceptions.GvfsError as e:
            reply = {"error": str(e)}
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError,
                ValueError, AttributeError, TypeError) as e:
            reply = {"error": "bad request: %s" % e}
        writer.write(json.dumps(reply).encode() + b"\n")
        try:
            await writer.drain()
        finally:
            writer.close()

    async def close(self):
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass  # Removed by the operator; nothing left to clean.


class ControlError(Exception):
    """The proxy could not be reached or refused the request."""


def request(socket_path, command, timeout=10.0, **args):
    """Send one command to the proxy at ``socket_path``; its result."""
    payload = dict(args, command=command)
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout)
            sock.connect(socket_path)
            sock.sendall(json.dumps(payload).encode() + b"\n")
            data = b""
            while not data.endswith(b"\n"):
                chunk = sock.recv(65536)
                if not chunk:
                    break
                data += chunk
    except OSError as e:
        raise ControlError("cannot reach the proxy control socket %s: %s"
                           % (socket_path, e)) from e
    try:
        reply = json.loads(data)
    except ValueError as e:
        raise ControlError("garbled reply from %s" % socket_path) from e
    if "error" in reply:
        raise ControlError(reply["error"])
    return reply["result"]
