# SPDX-License-Identifier: Apache-2.0
"""gvfs-api's requests in Prometheus: counted and timed by route.

A WSGI middleware outside Keystone's, so refused tokens count too.  The
route label is the matched pattern (``/v1/migrations/{id}``), never the
path itself, so the label set stays as small as the API.
"""

import time

from prometheus_client import core
from prometheus_client import metrics as prometheus_metrics

PREFIX = "gvfs_api_"

#: The methods counted by name; any other is counted as ``other``, so
#: no client can add series by inventing methods.
METHODS = frozenset(("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE",
                     "OPTIONS"))

#: Upper bounds, in seconds, of the request latency buckets: an answer
#: from memory to one that waited on the conductor's RPC timeout.
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
           30.0, 60.0)


class RequestMetrics:
    """Counts and times requests into a registry of its own."""

    def __init__(self, route_of):
        """``route_of(path)`` names a request's route."""
        self.route_of = route_of
        self.registry = core.CollectorRegistry(auto_describe=True)
        self.requests = prometheus_metrics.Counter(
            PREFIX + "requests", "Requests answered, by method, route and "
            "status code.", ["method", "route", "code"],
            registry=self.registry)
        self.seconds = prometheus_metrics.Histogram(
            PREFIX + "request_duration_seconds", "From a request's arrival "
            "to its answer, by method and route.", ["method", "route"],
            buckets=BUCKETS, registry=self.registry)

    def wrap(self, application):
        """``application``, its requests counted and timed."""
        def measured(environ, start_response):
            started = time.monotonic()
            answered = []

            def remember(status, headers, exc_info=None):
                answered.append(status.split(" ", 1)[0])
                return start_response(status, headers, exc_info)

            try:
                return application(environ, remember)
            finally:
                method = environ.get("REQUEST_METHOD", "")
                method = method if method in METHODS else "other"
                route = self.route_of(environ.get("PATH_INFO", ""))
                self.requests.labels(method, route,
                                     answered[0] if answered else "500").inc()
                self.seconds.labels(method, route).observe(
                    time.monotonic() - started)

        return measured
