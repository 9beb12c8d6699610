"""A local web site for rootfence's network tests: plain HTTP and TLS on one
address, with a certificate for the names it is given (signed by a CA it
makes and writes out for the clients to trust), serving a directory and
logging every request it receives.

Usage: site.py ADDRESS DIR CERTDIR LOG NAME...

Prints one JSON line {"http": port, "https": port, "ca": path} once both
listen, then serves until its stdin closes. Every request is appended to
LOG as a JSON line {"method", "path", "host", "tls"} before it is answered.
GET /hello/<anything> answers "hello from <Host header>", POST answers
"posted <N> bytes" once it has read the body; every other GET path is a
file of DIR (a git repository's files for the dumb HTTP protocol, a
package index, ...).
"""

import datetime
import http.server
import ipaddress
import json
import os
import ssl
import sys
import threading

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


def certificates(certdir, names, address):
    """A CA and a leaf certificate for `names` and `address`; returns the
    paths of the CA's certificate, the leaf's chain and its key."""
    now = datetime.datetime.now(datetime.timezone.utc)
    start = now - datetime.timedelta(days=1)
    end = now + datetime.timedelta(days=2)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "rootfence test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=False,
                data_encipherment=False, key_agreement=False, key_cert_sign=True,
                crl_sign=True, encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    alt = [x509.DNSName(n) for n in names] + [x509.IPAddress(ipaddress.ip_address(address))]
    leaf = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.SubjectAlternativeName(alt), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    ca_path = os.path.join(certdir, "ca.pem")
    chain_path = os.path.join(certdir, "site.pem")
    key_path = os.path.join(certdir, "site.key")
    with open(ca_path, "wb") as f:
        f.write(ca.public_bytes(pem))
    with open(chain_path, "wb") as f:
        f.write(leaf.public_bytes(pem) + ca.public_bytes(pem))
    with open(key_path, "wb") as f:
        f.write(
            key.private_bytes(
                pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
    return ca_path, chain_path, key_path


def handler(root, log, lock, tls):
    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *a, **kw):
            super().__init__(*a, directory=root, **kw)

        def log_message(self, *a):
            pass

        def record(self):
            line = json.dumps(
                {"method": self.command, "path": self.path, "host": self.headers.get("Host"), "tls": tls}
            )
            with lock:
                with open(log, "a") as f:
                    f.write(line + "\n")

        def do_GET(self):
            self.record()
            if self.path.startswith("/hello/"):
                body = ("hello from %s\n" % self.headers.get("Host")).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            super().do_GET()

        def do_HEAD(self):
            self.record()
            super().do_HEAD()

        def do_POST(self):
            self.record()
            n = int(self.headers.get("Content-Length") or 0)
            data = self.rfile.read(n)
            body = b"posted %d bytes" % len(data)
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    return Handler


def main():
    address, root, certdir, log = sys.argv[1:5]
    names = sys.argv[5:]
    ca, chain, key = certificates(certdir, names, address)
    lock = threading.Lock()
    plain = http.server.ThreadingHTTPServer((address, 0), handler(root, log, lock, False))
    secure = http.server.ThreadingHTTPServer((address, 0), handler(root, log, lock, True))
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(chain, key)
    secure.socket = ctx.wrap_socket(secure.socket, server_side=True)
    for s in (plain, secure):
        threading.Thread(target=s.serve_forever, daemon=True).start()
    print(
        json.dumps({"http": plain.server_address[1], "https": secure.server_address[1], "ca": ca}),
        flush=True,
    )
    sys.stdin.read()
    plain.shutdown()
    secure.shutdown()


if __name__ == "__main__":
    main()
