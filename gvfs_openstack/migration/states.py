# SPDX-License-Identifier: Apache-2.0
"""The names of a migration's stages and states, and its pack methods.

The conductor stores them, gvfs-api validates and filters by them, and
the ``openstack gvfs`` commands wait on and offer them.  They live here,
in a module that imports nothing, so that a laptop with only the OSC
plugin (the ``osc`` extra) need not install the job store's SQLAlchemy
and oslo.db to know them.
"""

#: The stages of an image, in order.
LOCAL_COPY = "local_copy"
TRANSFER = "transfer"
REMOTE_COPY = "remote_copy"
DONE = "done"
STAGES = (LOCAL_COPY, TRANSFER, REMOTE_COPY)

#: States of a job and of an image.
QUEUED = "queued"
RUNNING = "running"
FAILED = "failed"
CANCELLED = "cancelled"
FINISHED = (DONE, FAILED, CANCELLED)

#: Every state a job is shown in, in the order a job passes them.
JOB_STATES = (QUEUED, RUNNING, DONE, FAILED, CANCELLED)

#: How a job's images may cross the DTN link together (``--pack``).
PACK_METHODS = ("tar",)
