# SPDX-License-Identifier: Apache-2.0
"""A private RabbitMQ broker on loopback for the conductor's RPC.

Its own node name, ports, data and log directories under the lab's
workdir, and its own ``epmd`` (started in the foreground by the lab, so
it is stopped by PID like everything else, not left as a daemon).
"""

import os

from gvfs_lab import process

_CONFIG = """listeners.tcp.default = 127.0.0.1:{port}
distribution.listener.interface = 127.0.0.1
loopback_users.guest = true
"""


class RabbitMQ:
    def __init__(self, workdir):
        os.makedirs(workdir, exist_ok=True)
        self.port = process.free_port()
        self.url = "rabbit://guest:guest@127.0.0.1:%d/" % self.port
        epmd_port = process.free_port()
        with open(os.path.join(workdir, "rabbitmq.conf"), "w") as f:
            f.write(_CONFIG.format(port=self.port))
        env = dict(
            os.environ, HOME=workdir, ERL_EPMD_PORT=str(epmd_port),
            ERL_EPMD_ADDRESS="127.0.0.1",
            RABBITMQ_NODENAME="gvfs-lab-%d@localhost" % self.port,
            RABBITMQ_NODE_IP_ADDRESS="127.0.0.1",
            RABBITMQ_NODE_PORT=str(self.port),
            RABBITMQ_DIST_PORT=str(process.free_port()),
            RABBITMQ_CONFIG_FILE=os.path.join(workdir, "rabbitmq"),
            RABBITMQ_MNESIA_BASE=os.path.join(workdir, "mnesia"),
            RABBITMQ_LOG_BASE=os.path.join(workdir, "log"),
            RABBITMQ_ENABLED_PLUGINS_FILE=os.path.join(workdir, "plugins"),
            RABBITMQ_PID_FILE=os.path.join(workdir, "rabbitmq.pid"))
        self.epmd = process.ManagedProcess(
            "epmd", ["epmd", "-port", str(epmd_port), "-address",
                     "127.0.0.1"], os.path.join(workdir, "epmd.log"), env)
        try:
            process.wait_for_port(epmd_port, process=self.epmd)
            self.process = process.ManagedProcess(
                "rabbitmq-server", ["/usr/lib/rabbitmq/bin/rabbitmq-server"],
                os.path.join(workdir, "rabbitmq.out"), env)
            process.wait_for_port(self.port, timeout=120,
                                  process=self.process)
        except BaseException:
            self.stop()
            raise

    def stop(self):
        if getattr(self, "process", None) is not None:
            self.process.stop(timeout=60)
        self.epmd.stop()
