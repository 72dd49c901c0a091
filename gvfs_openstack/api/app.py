# SPDX-License-Identifier: Apache-2.0
"""The gvfs-api WSGI application and the middleware around it.

From the outside in: ``http_proxy_to_wsgi`` (the scheme and host a TLS
proxy in front saw), the request id, ``/healthcheck`` (answered before
authentication, for load balancers), ``keystonemiddleware.auth_token``
(every other request carries a token Keystone issued), then the
router.  Versions (``/`` and ``/v1``) need no token either, as in the
other services, so clients can discover them.
"""

import json
import re

from keystonemiddleware import auth_token
from oslo_context import context as oslo_context
from oslo_log import log as logging
import oslo_messaging as messaging
from oslo_middleware import healthcheck
from oslo_middleware import http_proxy_to_wsgi
from oslo_middleware import request_id
import webob
import webob.dec

from gvfs_openstack.api import faults
from gvfs_openstack.api import golden
from gvfs_openstack.api import metrics as api_metrics
from gvfs_openstack.api import migrations
from gvfs_openstack.api import policy
from gvfs_openstack.api import replications as replications_mod
from gvfs_openstack import exceptions
from gvfs_openstack.migration import rpcapi

LOG = logging.getLogger(__name__)

#: The largest request body read (a migration of MAX_IMAGES names fits).
MAX_BODY = 256 * 1024

#: Conductor errors and the status each is answered with.
_STATUS_OF = (
    (exceptions.JobNotFound, 404),
    (exceptions.ReplicationNotFound, 404),
    (exceptions.JobFinished, 409),
    (exceptions.ConductorTooOld, 409),
    (exceptions.UnknownSite, 400),
    (exceptions.ImageNotFound, 400),
    (exceptions.ImageNotMigratable, 400),
    (exceptions.TrustRefused, 403),
    (exceptions.CallerRefused, 403),
    (exceptions.InvalidConfig, 400),
    (exceptions.StageFailed, 503),
)

_ID = r"(?P<%s>[^/]+)"


class Router:
    """Method and path to a handler; 404 and 405 for the rest."""

    def __init__(self):
        #: (method, compiled pattern, handler, body, name in metrics)
        self._routes = []

    def add(self, method, pattern, handler, body=False):
        self._routes.append((method, re.compile(
            "^" + pattern % {"id": _ID % "ident"} + "/?$"), handler, body,
            pattern % {"id": "{id}"}))

    def route_of(self, path):
        """The name of the route of ``path``, for metrics.

        The pattern it matches (``/v1/migrations/{id}``) or ``other``,
        never the path itself: a label set as small as the API.
        """
        if path.rstrip("/") in ("", "/v1", "/healthcheck"):
            return path.rstrip("/") or "/"
        for _, pattern, _, _, name in self._routes:
            if pattern.match(path):
                return name
        return "other"

    def dispatch(self, request):
        allowed = []
        for method, pattern, handler, body, _ in self._routes:
            match = pattern.match(request.path_info)
            if not match:
                continue
            if method != request.method:
                allowed.append(method)
                continue
            args = list(match.groupdict().values())
            if body:
                args.append(_json_body(request))
            return handler(request, *args)
        if allowed:
            raise faults.Fault(405, "%s is not allowed on %s (allowed: %s)"
                               % (request.method, request.path_info,
                                  ", ".join(allowed)))
        raise faults.Fault(404, "No resource %s" % request.path_info)


def _json_body(request):
    # The declared length first: a client that claims a large body and
    # sends it slowly (or not at all) must not hold a thread, or make
    # this process buffer it, before it is refused.
    too_large = faults.Fault(413, "The body is larger than %d bytes"
                             % MAX_BODY)
    if request.content_length and request.content_length > MAX_BODY:
        raise too_large
    if request.content_length is None and \
            request.environ.get("HTTP_TRANSFER_ENCODING"):
        # Chunked: read one byte more than allowed, never all of it.
        data = request.body_file_raw.read(MAX_BODY + 1)
        if len(data) > MAX_BODY:
            raise too_large
        request.body = data
    if not request.body:
        return None
    if request.content_type != "application/json":
        raise faults.Fault(415, "The body must be application/json, not %s"
                           % (request.content_type or "untyped"))
    try:
        return json.loads(request.body)
    except ValueError as e:
        raise faults.Fault(400, "The body is not JSON: %s" % e) from e


def _versions(request):
    v1 = {"id": "v1.0", "status": "CURRENT",
          "links": [{"rel": "self", "href": request.host_url + "/v1"}]}
    if request.path_info.rstrip("/") == "/v1":
        return 200, {"version": v1}
    return 300, {"versions": [v1]}


class Application:
    """The API's resources, each request answered in JSON."""

    def __init__(self, conf, conductor):
        self.conductor = conductor
        rules = policy.enforcer(conf)
        jobs = migrations.MigrationsController(conductor, rules, conf)
        sites = migrations.SitesController(conductor, rules)
        images = golden.GoldenImagesController(conductor, rules)
        replications = replications_mod.ReplicationsController(
            conductor, rules)
        self.router = Router()
        self.router.add("POST", "/v1/migrations", jobs.create, body=True)
        self.router.add("GET", "/v1/migrations", jobs.index)
        self.router.add("GET", "/v1/migrations/%(id)s", jobs.show)
        self.router.add("POST", "/v1/migrations/%(id)s/cancel", jobs.cancel,
                        body=True)
        self.router.add("POST", "/v1/replications", replications.create,
                        body=True)
        self.router.add("GET", "/v1/replications", replications.index)
        self.router.add("GET", "/v1/replications/%(id)s", replications.show)
        self.router.add("DELETE", "/v1/replications/%(id)s",
                        replications.delete)
        self.router.add("POST", "/v1/replications/%(id)s/pause",
                        replications.pause, body=True)
        self.router.add("POST", "/v1/replications/%(id)s/resume",
                        replications.resume, body=True)
        self.router.add("GET", "/v1/golden-images/%(id)s/references",
                        images.references)
        self.router.add("GET", "/v1/sites", sites.index)
        self.router.add("GET", "/v1/sites/%(id)s", sites.show)

    @webob.dec.wsgify
    def __call__(self, request):
        request.context = oslo_context.RequestContext.from_environ(
            request.environ)
        try:
            status, document = self.router.dispatch(request)
        except faults.Fault as fault:
            return _fault(fault.status, fault.message)
        except messaging.MessagingTimeout:
            LOG.error("gvfs-conductor did not answer %s %s", request.method,
                      request.path_info)
            return _fault(503, "gvfs-conductor did not answer; try again")
        except messaging.UnsupportedVersion as e:
            LOG.error("gvfs-conductor rejected %s %s for its RPC version "
                      "(%s): cap [upgrade_levels] conductor while "
                      "conductors are upgraded", request.method,
                      request.path_info, e)
            return _fault(409, "gvfs-conductor does not serve this request "
                          "yet: it is being upgraded")
        except exceptions.GvfsError as e:
            for kind, status in _STATUS_OF:
                if isinstance(e, kind):
                    # The message without the conductor's traceback,
                    # which oslo.messaging appends to a remote error's.
                    return _fault(status, e.args[0] if e.args else str(e))
            raise
        return _json(status, document)


def _json(status, document):
    if document is None:
        return webob.Response(status=faults.status_line(status))
    return webob.Response(status=faults.status_line(status),
                          content_type="application/json", charset=None,
                          body=json.dumps(document).encode())


def _fault(status, message):
    return webob.Response(status=faults.status_line(status),
                          content_type="application/json", charset=None,
                          body=faults.body(status, message))


class _Unauthenticated:
    """Versions and the health check without a token; the rest with."""

    def __init__(self, authenticated, health):
        self.authenticated = authenticated
        self.health = health

    def __call__(self, environ, start_response):
        path = environ.get("PATH_INFO", "").rstrip("/")
        if path == "/healthcheck":
            return self.health(environ, start_response)
        if path in ("", "/v1") and environ["REQUEST_METHOD"] == "GET":
            status, document = _versions(webob.Request(environ))
            return _json(status, document)(environ, start_response)
        return self.authenticated(environ, start_response)


def build(conf, conductor=None):
    """The whole WSGI application of ``conf`` (options registered)."""
    return _build(conf, conductor)[0]


def build_measured(conf, conductor=None):
    """:func:`build`'s application, its requests counted and timed.

    Returns ``(application, api_metrics.RequestMetrics)``.
    """
    application, router = _build(conf, conductor)
    measured = api_metrics.RequestMetrics(router.route_of)
    return measured.wrap(application), measured


def _build(conf, conductor):
    """The application and its router."""
    if conductor is None:
        conductor = rpcapi.ConductorAPI(
            rpcapi.get_transport(conf), timeout=conf.api.rpc_timeout,
            version_cap=conf.upgrade_levels.conductor)
    app = Application(conf, conductor)
    authenticated = auth_token.AuthProtocol(
        app, {"oslo_config_config": conf})
    health = healthcheck.Healthcheck(None, conf)
    wrapped = _Unauthenticated(authenticated, health)
    wrapped = request_id.RequestId(wrapped)
    return http_proxy_to_wsgi.HTTPProxyToWSGI(wrapped, conf), app.router
