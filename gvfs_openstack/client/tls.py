# SPDX-License-Identifier: Apache-2.0
"""Mutual TLS from the client's side: the context and the peer's purpose.

Shared by a client proxy's tunnel to the server proxy and by the
conductor's NFS calls to a DTN's server proxy: both present a client
certificate and accept only a certificate issued for TLS servers.

``cryptography`` (the proxy's and the conductor's extras) is imported
only when a certificate is checked: the NFS client imports this module,
and a node that only mounts (the ``fuse`` extra) never speaks TLS.
"""

import dataclasses
import ssl


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
    from cryptography import x509

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


@dataclasses.dataclass(frozen=True)
class ClientTls:
    """How to reach a server proxy over mutual TLS, as plain values.

    Paths rather than an ``ssl.SSLContext``, so that a conductor's forked
    stage workers can carry it; :meth:`context` loads the files.
    """

    cert: str
    key: str
    ca: str
    #: The name the server's certificate must carry; None: the host.
    server_name: str = None

    def context(self):
        return client_tls_context(self.cert, self.key, self.ca)


def check_server(transport, describe):
    """Abort ``transport`` unless its peer's certificate is a server's."""
    from cryptography.x509.oid import ExtendedKeyUsageOID

    if not certificate_allows(transport.get_extra_info("ssl_object"),
                              ExtendedKeyUsageOID.SERVER_AUTH):
        transport.abort()
        raise WrongCertificatePurpose(
            "the certificate of %s is not issued for TLS servers "
            "(extended key usage serverAuth)" % describe)
