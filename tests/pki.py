"""Certificates for the tests that serve or verify TLS on loopback (the simulator's https, the real sglang-router
verifying its https workers): a CA and a server certificate it signs, as PEM files, made with the pinned
cryptography."""

from __future__ import annotations

import datetime
import ipaddress
from pathlib import Path
from typing import NamedTuple

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


class Pki(NamedTuple):
    ca: Path      # the CA certificate clients verify against
    cert: Path    # the server's certificate, for 127.0.0.1 and localhost, signed by the CA
    key: Path     # its private key, unencrypted


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def make_pki(directory: Path, label: str, names: list[x509.GeneralName] | None = None) -> Pki:
    """A CA and a server certificate it signs (by default for 127.0.0.1, ::1 and localhost), as PEM files."""
    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (x509.CertificateBuilder().subject_name(_name(f"{label} CA")).issuer_name(_name(f"{label} CA"))
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    names = names or [x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                      x509.IPAddress(ipaddress.ip_address("::1")), x509.DNSName("localhost")]
    cert = (x509.CertificateBuilder().subject_name(_name("sglang test server")).issuer_name(ca.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .sign(ca_key, hashes.SHA256()))
    pki = Pki(directory / "ca.crt", directory / "server.crt", directory / "server.key")
    pki.ca.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    pki.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    pki.key.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption()))
    pki.key.chmod(0o600)
    return pki
