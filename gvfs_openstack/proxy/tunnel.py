# SPDX-License-Identifier: Apache-2.0
"""How a proxy reaches its next hop: plain TCP, mutual TLS, or SSH.

Each connector opens one byte stream to the next hop and hands it to an
asyncio protocol.  The SSH connector follows the GVFS paper: the stream is a
``direct-tcpip`` channel through the DTN's own sshd, authenticated by key,
so the server proxy itself only listens on the DTN's loopback.
"""

import asyncio
import socket
import ssl
import threading

from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID
from oslo_log import log as logging
import paramiko

LOG = logging.getLogger(__name__)

_PUMP_CHUNK = 256 * 1024
_STREAM_ERRORS = (OSError, EOFError, paramiko.SSHException)
#: AEAD ciphers paramiko runs fastest; tried before the rest.
_FAST_CIPHERS = ("aes128-gcm@openssh.com", "aes256-gcm@openssh.com")


def _prefer(available, first):
    return tuple(c for c in first if c in available) + tuple(
        c for c in available if c not in first)


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


class WrongCertificatePurpose(ConnectionError):
    """The peer's certificate is not issued for its side of the tunnel."""


def certificate_allows(ssl_object, purpose):
    """Whether the peer's certificate is issued for ``purpose``.

    ``purpose`` is ``ExtendedKeyUsageOID.SERVER_AUTH`` or ``CLIENT_AUTH``,
    which the certificate's extended key usage must name.  OpenSSL
    already refuses a certificate whose extended key usage lacks the
    purpose, but accepts one without that extension for any purpose: a
    DTN's server certificate would then pass as a client's.  A tunnel
    endpoint must name its purpose.
    """
    der = ssl_object.getpeercert(binary_form=True) if ssl_object else None
    if not der:
        return False
    try:
        usage = x509.load_der_x509_certificate(der).extensions \
            .get_extension_for_class(x509.ExtendedKeyUsage).value
    except x509.ExtensionNotFound:
        return False
    return purpose in usage


def client_tls_context(cert, key, ca):
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=ca)
    ctx.load_cert_chain(cert, key)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    return ctx


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
        self.context = client_tls_context(cert, key, ca)
        self.server_name = server_name or host

    async def connect(self, protocol_factory):
        transport, protocol = await asyncio.get_running_loop() \
            .create_connection(protocol_factory, self.host, self.port,
                               ssl=self.context,
                               server_hostname=self.server_name)
        if not certificate_allows(transport.get_extra_info("ssl_object"),
                                  ExtendedKeyUsageOID.SERVER_AUTH):
            transport.abort()
            raise WrongCertificatePurpose(
                "the certificate of %s is not issued for TLS servers "
                "(extended key usage serverAuth)" % self.describe())
        return transport, protocol


class SshConnector(TcpConnector):
    """Streams forwarded through sshd (like ``ssh -L``), key auth only.

    One SSH session is shared by every stream and re-established when it
    dies.  Each stream is a socketpair whose far end two threads pump to
    and from the channel, so the event loop sees an ordinary socket.
    """

    kind = "ssh"

    def __init__(self, host, port, ssh_host, ssh_port, user, key_file,
                 known_hosts, connect_timeout=10.0):
        super().__init__(host, port)
        self.ssh_host = ssh_host
        self.ssh_port = ssh_port
        self.user = user
        self.key_file = key_file
        self.known_hosts = known_hosts
        self.connect_timeout = connect_timeout
        self._ssh = None
        self._lock = threading.Lock()

    def describe(self):
        return "ssh://%s@%s:%d -> %s:%d" % (self.user, self.ssh_host,
                                            self.ssh_port, self.host,
                                            self.port)

    def _transport(self):
        with self._lock:
            transport = self._ssh
            if transport is not None and transport.is_active():
                return transport
            if transport is not None:
                transport.close()
            self._ssh = self._connect()
            return self._ssh

    def _connect(self):
        """A new authenticated SSH transport.

        Built by hand rather than with ``SSHClient`` for three reasons:
        TCP_NODELAY (without it Nagle and delayed ACKs add tens of
        milliseconds to every small NFS reply), AES-GCM first (twice the
        throughput of AES-CTR with HMAC in paramiko), and a host key that
        must be in ``known_hosts`` -- never trusted on first use.
        """
        known = paramiko.HostKeys(self.known_hosts)
        sock = socket.create_connection((self.ssh_host, self.ssh_port),
                                        timeout=self.connect_timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        transport = paramiko.Transport(sock)
        try:
            options = transport.get_security_options()
            options.ciphers = _prefer(options.ciphers, _FAST_CIPHERS)
            transport.start_client(timeout=self.connect_timeout)
            host_key = transport.get_remote_server_key()
            name = self.ssh_host if self.ssh_port == 22 else \
                "[%s]:%d" % (self.ssh_host, self.ssh_port)
            if not known.check(name, host_key):
                raise paramiko.SSHException(
                    "host key of %s is not in %s" % (name, self.known_hosts))
            transport.auth_publickey(
                self.user, paramiko.PKey.from_path(self.key_file))
        except BaseException:
            transport.close()
            raise
        transport.set_keepalive(15)
        return transport

    def _open_stream(self):
        transport = self._transport()
        channel = transport.open_channel(
            "direct-tcpip", (self.host, self.port), ("127.0.0.1", 0),
            window_size=64 * 1024 * 1024, max_packet_size=256 * 1024,
            timeout=self.connect_timeout)
        ours, theirs = socket.socketpair()
        for source, sink, name in ((theirs, channel, "to"),
                                   (channel, theirs, "from")):
            threading.Thread(target=_pump, args=(source, sink, theirs,
                                                 channel),
                             name="ssh-pump-%s" % name, daemon=True).start()
        return ours

    async def connect(self, protocol_factory):
        loop = asyncio.get_running_loop()
        sock = await loop.run_in_executor(None, self._open_stream)
        return await loop.create_connection(protocol_factory, sock=sock)

    def close(self):
        with self._lock:
            if self._ssh is not None:
                self._ssh.close()
                self._ssh = None


def _pump(source, sink, sock, channel):
    """Copy one direction until EOF or error, then close both ends."""
    try:
        while True:
            data = source.recv(_PUMP_CHUNK)
            if not data:
                break
            sink.sendall(data)
    except _STREAM_ERRORS as e:
        LOG.debug("ssh stream ended: %s", e)
    finally:
        channel.close()
        _close_quietly(sock)


def _close_quietly(sock):
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass  # Already shut down by the other pump.
    sock.close()
