# SPDX-License-Identifier: Apache-2.0
"""Send one account's TCP connections to an address through a lab link.

GridFTP's receiving server names the address its peer must connect to for
data, and listens on that very address, so no proxy can stand between
them by configuration alone.  An ``iptables`` DNAT rule on locally made
connections, matched by the sending account, sends them across an
emulated link (:mod:`gvfs_lab.wan`) instead, whose toxiproxy connects on
to the real address as another account (so the rule does not catch it
again).  Benchmarks only; the rule carries a
comment naming this process and is removed on stop.
"""

import os
import subprocess


class Redirect:
    def __init__(self, uid, host, port, to_port, to_host="127.0.0.1"):
        self.rule = ["OUTPUT", "-p", "tcp", "-d", host, "--dport", str(port),
                     "-m", "owner", "--uid-owner", str(uid),
                     "-m", "comment", "--comment",
                     "gvfs-lab-%d" % os.getpid(),
                     "-j", "DNAT", "--to-destination",
                     "%s:%d" % (to_host, to_port)]
        subprocess.run(["iptables", "-w", "-t", "nat", "-A"] + self.rule,
                       check=True, capture_output=True)

    def stop(self):
        subprocess.run(["iptables", "-w", "-t", "nat", "-D"] + self.rule,
                       check=False, capture_output=True)
