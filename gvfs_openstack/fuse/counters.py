# SPDX-License-Identifier: Apache-2.0
"""What a mount counts: the numbers its Prometheus endpoint shows.

Plain fields counted on the mount's event loop, read at a scrape by
:mod:`gvfs_openstack.fuse.metrics`; counting needs no prometheus-client.
Labels stay bounded: NFS procedures are the client's methods, failures
are errno names.
"""

import dataclasses
import errno

from gvfs_openstack import latency


@dataclasses.dataclass(slots=True)
class KernelCounters:
    """The kernel's requests, by operation; what failed; bytes moved.

    ``requests`` is keyed by the FUSE operation (the mount's handlers),
    ``failures`` by the errno the kernel got.
    """

    requests: dict = dataclasses.field(default_factory=dict)
    failures: dict = dataclasses.field(default_factory=dict)
    read_bytes: int = 0
    written_bytes: int = 0

    def request(self, operation):
        self.requests[operation] = self.requests.get(operation, 0) + 1

    def failed(self, err):
        _count_errno(self.failures, err)


@dataclasses.dataclass(slots=True)
class UpstreamCounters:
    """The mount's NFS calls to its client proxy.

    ``call_seconds`` holds, per NFS procedure, how long its answers
    took (errors included: they are answers); ``failures`` the calls
    that failed, by the errno the caller got.
    """

    call_seconds: dict = dataclasses.field(default_factory=dict)
    failures: dict = dataclasses.field(default_factory=dict)
    reconnects: int = 0

    def answered(self, procedure, seconds):
        histogram = self.call_seconds.get(procedure)
        if histogram is None:
            histogram = self.call_seconds[procedure] = latency.Histogram()
        histogram.observe(seconds)

    def failed(self, err):
        _count_errno(self.failures, err)


def _count_errno(failures, err):
    name = errno.errorcode.get(err, "EIO")
    failures[name] = failures.get(name, 0) + 1
