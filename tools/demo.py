# SPDX-License-Identifier: Apache-2.0
"""The demo: a 256 MiB file through the GVFS proxy chain and back.

Brings the loopback lab up (NFS-Ganesha as the DTN's NFS server, sshd,
server proxy, a caching client proxy over an SSH tunnel), writes a random
file with libnfs's nfs-cp through the client proxy, reads it back twice
(cold, then from the cache), checks it is byte-identical, prints timings
and the bytes each hop carried, and tears everything down.
"""

import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
import time

from gvfs_lab.topology import Lab

MIB = 1024 * 1024


def _sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(8 * MIB):
            digest.update(chunk)
    return digest.hexdigest()


def _copy(src, dst):
    start = time.monotonic()
    subprocess.run(["nfs-cp", src, dst], check=True,
                   stdout=subprocess.DEVNULL)
    return time.monotonic() - start


def _hop_table(lab):
    client = lab.client_proxy.stats()
    server = lab.server_proxy.stats()
    print("\nbytes on each hop (in = towards the DTN, out = back):")
    rows = [
        ("nfs-cp -> client proxy", client["downstream_bytes_in"],
         client["downstream_bytes_out"]),
        ("client proxy -> %s tunnel" % lab.tunnel,
         client["upstream_bytes_out"], client["upstream_bytes_in"]),
        ("tunnel -> server proxy", server["downstream_bytes_in"],
         server["downstream_bytes_out"]),
        ("server proxy -> Ganesha", server["upstream_bytes_out"],
         server["upstream_bytes_in"]),
    ]
    for name, towards, back in rows:
        print("  %-28s %12d %12d" % (name, towards, back))
    calls = client["calls"]
    print("\nNFS calls seen by the client proxy: %s" % ", ".join(
        "%s=%d" % kv for kv in sorted(calls.items())))
    print("peak RSS: client proxy %.1f MB, server proxy %.1f MB" % (
        client["peak_rss_kb"] / 1024, server["peak_rss_kb"] / 1024))


def main(argv=None):
    parser = argparse.ArgumentParser(prog="tox -e demo --")
    parser.add_argument("--tunnel", choices=["ssh", "tls", "tcp"],
                        default="ssh")
    parser.add_argument("--size-mib", type=int, default=256)
    args = parser.parse_args(argv)
    size = args.size_mib * MIB
    with tempfile.TemporaryDirectory(prefix="gvfs-demo-") as work:
        print("starting the lab (NFS-Ganesha, %s tunnel, server and client "
              "proxies) in %s" % (args.tunnel, work))
        start = time.monotonic()
        cache = {"capacity_mb": 2 * args.size_mib + 64}
        with Lab(os.path.join(work, "lab"), tunnel=args.tunnel,
                 cache=cache) as lab:
            print("lab up in %.1fs: Ganesha on ports %d/%d, server proxy "
                  "on %d, client proxy on %d" % (
                      time.monotonic() - start, lab.ganesha.nfs_port,
                      lab.ganesha.mount_port, lab.server_proxy.port,
                      lab.client_proxy.port))
            src = os.path.join(work, "image.raw")
            with open(src, "wb") as f:
                for _ in range(size // (16 * MIB)):
                    f.write(os.urandom(16 * MIB))
            url = lab.client_url("demo-image.raw")
            print("\nwriting %d MiB to %s" % (args.size_mib, url))
            write = _copy(src, url)
            back = src + ".back"
            print("reading it back (the client proxy's cache is cold)")
            read = _copy(url, back)
            same = _sha256(src) == _sha256(back)
            fetched = lab.client_proxy.stats()["cache_bytes_fetched"]
            os.unlink(back)
            print("reading it again (now from the client proxy's cache)")
            warm = _copy(url, back)
            same = same and _sha256(src) == _sha256(back)
            refetched = lab.client_proxy.stats()["cache_bytes_fetched"] - \
                fetched
            on_export = os.stat(os.path.join(lab.export, "demo-image.raw"))
            print("\n  write %6.1fs  %7.1f MB/s" % (write, size / MIB / write))
            print("  read  %6.1fs  %7.1f MB/s  cold: %d MiB fetched over "
                  "the tunnel" % (read, size / MIB / read, fetched // MIB))
            print("  read  %6.1fs  %7.1f MB/s  warm: %d bytes fetched" % (
                warm, size / MIB / warm, refetched))
            print("  byte-identical after every round trip: %s" % same)
            print("  owner on the export: uid %d gid %d (the mapped file "
                  "account; nfs-cp ran as uid %d)" % (
                      on_export.st_uid, on_export.st_gid, os.getuid()))
            _hop_table(lab)
        print("\nlab stopped; every process it started has exited")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
