# SPDX-License-Identifier: Apache-2.0
"""Job stores as an earlier release left them, on any database.

What ``gvfs-manage db sync`` is tested to upgrade: sqlite in the unit
tests, PostgreSQL and MariaDB in the functional ones.
"""

from alembic import command
import sqlalchemy as sa

from gvfs_openstack.migration.db import engine as store_engine
from gvfs_openstack.migration.db import schema
from gvfs_openstack.migration import jobs
from gvfs_openstack.migration import states

#: The images of the job :func:`store_at_0001` leaves.
IMAGES = [{"id": "i%d" % n, "name": "n%d" % n, "size": 10 * n,
           "os_hash_algo": "sha512", "os_hash_value": "h%d" % n}
          for n in range(3)]


def store_at_0001(url):
    """A store as revision 0001 made it, with a job ``j1`` of two images.

    The job is packed with tar, and each image has a Globus task.
    """
    engine = store_engine.create_engine(url)
    try:
        with engine.begin() as db:
            command.upgrade(schema.alembic_config(db), "0001")
            tables = sa.MetaData()
            tables.reflect(db)
            now = jobs.utcnow()
            db.execute(tables.tables["jobs"].insert().values(
                id="j1", source="east", destination="west", state="queued",
                images_in_flight=2, pack="tar", cancel_requested=False,
                created_at=now, updated_at=now))
            for position, image in enumerate(IMAGES[:2]):
                db.execute(tables.tables["job_images"].insert().values(
                    job_id="j1", position=position, image_id=image["id"],
                    name=image["name"], size=image["size"],
                    stage=states.LOCAL_COPY, state=states.QUEUED,
                    stage_bytes=0,
                    transfer_task="task-%d" % position, attempts=0,
                    updated_at=now))
    finally:
        engine.dispose()
