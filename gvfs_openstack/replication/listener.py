# SPDX-License-Identifier: Apache-2.0
"""The source Glance's own notifications, heard so that a policy's round
starts as soon as an image changes rather than at the next interval.

Glance announces ``image.activate``, ``image.update`` and
``image.delete`` on its notification bus (``[oslo_messaging_notifications]
driver = messagingv2`` in glance-api.conf).  The conductor listens in a
pool of its own, so Ceilometer or any other listener still gets every
notification.  A notification only wakes the reconciliation: what to do
is still read from the Images API, so a notification lost, repeated or
out of order changes nothing but the delay.
"""

from oslo_log import log as logging
import oslo_messaging as messaging

LOG = logging.getLogger(__name__)

#: The Glance events that may change what a policy selects.
EVENTS = ("image.activate", "image.update", "image.delete")

#: The listeners' pool: a queue of the conductors' own.
POOL = "gvfs-replication"


class _Endpoint:
    filter_rule = messaging.NotificationFilter(
        event_type=r"^image\.(activate|update|delete)$")

    def __init__(self, wake):
        self.wake = wake

    def info(self, ctxt, publisher_id, event_type, payload, metadata):
        LOG.info("%s of image %s from %s: reconciling", event_type,
                 (payload or {}).get("id"), publisher_id)
        self.wake()
        return messaging.NotificationResult.HANDLED


def listen(conf, wake):
    """Start listening; the listener (``stop()``, ``wait()``), or None.

    None when ``[replication] glance_notifications`` is off.
    """
    group = conf.replication
    if not group.glance_notifications:
        return None
    transport = messaging.get_notification_transport(
        conf, url=group.glance_transport_url)
    # On Glance's exchanges (glance_exchanges), not on the conductor's
    # own control_exchange: each service sends on its own.
    listener = messaging.get_notification_listener(
        transport, [messaging.Target(exchange=exchange, topic=topic)
                    for exchange in group.glance_exchanges
                    for topic in group.glance_topics],
        [_Endpoint(wake)], executor="threading", pool=POOL)
    listener.start()
    LOG.info("listening to Glance's %s on topics %s of exchanges %s",
             ", ".join(EVENTS), ", ".join(group.glance_topics),
             ", ".join(group.glance_exchanges))
    return listener
