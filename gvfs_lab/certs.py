# SPDX-License-Identifier: Apache-2.0
"""A throw-away CA and certificates for the TLS tunnel in the lab."""

import datetime
import ipaddress
import os

from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives import serialization
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID
from cryptography.x509.oid import NameOID


def _name(common_name):
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _write(path, key, cert):
    with open(path + ".key", "wb") as f:
        f.write(key.private_bytes(serialization.Encoding.PEM,
                                  serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption()))
    os.chmod(path + ".key", 0o600)
    with open(path + ".pem", "wb") as f:
        f.write(cert.public_bytes(serialization.Encoding.PEM))


#: What each certificate of the lab is for (extended key usage): a DTN's
#: server proxy proves it is a TLS server, a client proxy a TLS client,
#: and neither passes for the other.
PURPOSES = {
    "server": ExtendedKeyUsageOID.SERVER_AUTH,
    "client": ExtendedKeyUsageOID.CLIENT_AUTH,
}


def make_pki(workdir, names=("server", "client"), purposes=None):
    """Write ca.pem and NAME.pem/NAME.key valid for 127.0.0.1.

    Each certificate names its purpose (``purposes``, default
    :data:`PURPOSES`) in its extended key usage; a name mapped to None
    gets no extended key usage at all.  Returns a dict of the paths
    written.
    """
    purposes = dict(PURPOSES, **(purposes or {}))
    os.makedirs(workdir, exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = (x509.CertificateBuilder()
               .subject_name(_name("gvfs lab CA"))
               .issuer_name(_name("gvfs lab CA"))
               .public_key(ca_key.public_key())
               .serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5))
               .not_valid_after(now + datetime.timedelta(days=2))
               .add_extension(x509.BasicConstraints(ca=True, path_length=0),
                              critical=True)
               .sign(ca_key, hashes.SHA256()))
    paths = {"ca": os.path.join(workdir, "ca.pem")}
    _write(os.path.join(workdir, "ca"), ca_key, ca_cert)
    for name in names:
        key = ec.generate_private_key(ec.SECP256R1())
        builder = (x509.CertificateBuilder()
                   .subject_name(_name("gvfs lab %s" % name))
                   .issuer_name(ca_cert.subject)
                   .public_key(key.public_key())
                   .serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(minutes=5))
                   .not_valid_after(now + datetime.timedelta(days=2))
                   .add_extension(x509.SubjectAlternativeName(
                       [x509.DNSName("localhost"),
                        x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                       critical=False))
        if purposes.get(name) is not None:
            builder = builder.add_extension(
                x509.ExtendedKeyUsage([purposes[name]]), critical=False)
        cert = builder.sign(ca_key, hashes.SHA256())
        base = os.path.join(workdir, name)
        _write(base, key, cert)
        paths[name] = (base + ".pem", base + ".key")
    return paths
