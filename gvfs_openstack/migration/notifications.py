# SPDX-License-Identifier: Apache-2.0
"""``gvfs.migration.start``, ``.end`` and ``.error``: job changes announced
on the notification bus, as other services announce theirs.

The job store says what was announced last of each job (``notified``),
so a change is announced once whichever conductor sees it first -- at
the job's creation, when its runner exits, or in the periodic round that
also catches the runners of a conductor that died -- and never twice:
the announcement is claimed in the store before it is sent.  A crash
between the claim and the send loses that one notification; sending
first would instead risk sending it twice from two conductors.

With ``[oslo_messaging_notifications] driver`` left at its default
(none), nothing is sent and the changes are only marked.
"""

from oslo_context import context as oslo_context
from oslo_log import log as logging
import oslo_messaging as messaging

from gvfs_openstack.migration import jobs
from gvfs_openstack.migration import states

LOG = logging.getLogger(__name__)

START = "gvfs.migration.start"
END = "gvfs.migration.end"
ERROR = "gvfs.migration.error"


def event_of(job):
    """(event type, mark) of a job's unannounced change."""
    if job["state"] in states.FINISHED:
        return (ERROR if job["state"] == states.FAILED else END,
                jobs.NOTIFIED_END)
    return START, jobs.NOTIFIED_START


class JobNotifier:
    """Announces the job store's unannounced changes."""

    def __init__(self, conf, store, view, transport=None):
        self.store = store
        self.view = view     # The job as callers see it (a dict).
        transport = transport or messaging.get_notification_transport(conf)
        self.notifier = messaging.Notifier(
            transport, publisher_id="gvfs-conductor.%s" % conf.conductor.host)

    def announce(self):
        for job in self.store.to_notify():
            event, mark = event_of(job)
            if not self.store.mark_notified(job["id"], job["notified"], mark):
                continue    # Another conductor announced it.
            if not self.notifier.is_enabled():
                continue
            # Whose job it is (a dict would be dropped by the notifier).
            context = oslo_context.RequestContext(
                project_id=job["project_id"], user_id=job["user_id"])
            payload = self.view(self.store, job)
            send = self.notifier.error if event == ERROR else \
                self.notifier.info
            try:
                send(context, event, payload)
            except Exception:  # The bus's fault must not stop the conductor.
                LOG.exception("could not send %s of job %s", event,
                              job["id"])
