# SPDX-License-Identifier: Apache-2.0
"""How a proxy reaches its next hop: plain TCP, mutual TLS, or SSH.

Each connector opens one byte stream to the next hop and hands it to an
asyncio protocol.  The SSH connector follows the GVFS paper: the stream is a
channel forwarded by the DTN's own sshd, authenticated by key, so the
server proxy itself only listens on the DTN's loopback.
"""

import asyncio
import ssl

from gvfs_openstack.client import tls as client_tls
from gvfs_openstack.proxy import ssh_forward


class TcpConnector:
    """Plain TCP: for trusted networks only; nothing is authenticated."""

    kind = "tcp"

    def __init__(self, host, port):
        self.host = host
        self.port = port

    def describe(self):
        return "%s://%s:%d" % (self.kind, self.host, self.port)

    async def connect(self, protocol_factory):
        return await asyncio.get_running_loop().create_connection(
            protocol_factory, self.host, self.port)

    def close(self):
        """Release anything shared between connections."""


def server_tls_context(cert, key, ca):
    """A server context that requires a client certificate signed by ca."""
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=ca)
    ctx.load_cert_chain(cert, key)
    ctx.verify_mode = ssl.CERT_REQUIRED
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    return ctx


class TlsConnector(TcpConnector):
    """Mutual TLS: both ends present certificates signed by one CA."""

    kind = "tls"

    def __init__(self, host, port, cert, key, ca, server_name=None):
        super().__init__(host, port)
        self.context = client_tls.client_tls_context(cert, key, ca)
        self.server_name = server_name or host

    async def connect(self, protocol_factory):
        transport, protocol = await asyncio.get_running_loop() \
            .create_connection(protocol_factory, self.host, self.port,
                               ssl=self.context,
                               server_hostname=self.server_name)
        client_tls.check_server(transport, self.describe())
        return transport, protocol


class SshConnector(TcpConnector):
    """Channels of one supervised OpenSSH connection to the DTN's sshd.

    See :mod:`ssh_forward`.  The server proxy at ``host``:``port`` is
    reached from the DTN's side of the SSH connection, so it listens on
    the DTN's loopback only.
    """

    kind = "ssh"

    def __init__(self, host, port, ssh_host, ssh_port, user, key_file,
                 known_hosts, connect_timeout=10.0,
                 ciphers=ssh_forward.DEFAULT_CIPHERS, ssh_command="ssh"):
        super().__init__(host, port)
        self.ssh_host = ssh_host
        self.ssh_port = ssh_port
        self.user = user
        self.forward = ssh_forward.SshForward(
            lambda path: ssh_forward.ssh_argv(
                ssh_command, path, (host, port), ssh_host, ssh_port, user,
                key_file, known_hosts, connect_timeout, ciphers),
            connect_timeout)

    def describe(self):
        return "ssh://%s@%s:%d -> %s:%d" % (self.user, self.ssh_host,
                                            self.ssh_port, self.host,
                                            self.port)

    async def connect(self, protocol_factory):
        path = await self.forward.ready()
        return await asyncio.get_running_loop().create_unix_connection(
            protocol_factory, path)

    def close(self):
        self.forward.close()
