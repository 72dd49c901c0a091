# SPDX-License-Identifier: Apache-2.0
"""The FUSE mount's RAM cache: what it keeps, answers and drops."""

import os

from gvfs_openstack.fuse import readcache
from gvfs_openstack.nfs import const
from gvfs_openstack.nfs import nfs3

BLOCK = 4096
INODE = 7


def fattr(size, mtime=100, ctime=None):
    return nfs3.Fattr(const.FileType.NF3REG, 0o644, 1, 1, 1, size, size,
                      nfs3.SpecData(), 1, 2, nfs3.NfsTime(mtime),
                      nfs3.NfsTime(mtime),
                      nfs3.NfsTime(mtime if ctime is None else ctime))


def cache(blocks=64):
    return readcache.ReadCache(blocks * BLOCK, block_size=BLOCK)


def fill(c, data, attrs, inode=INODE, offset=0):
    """A fetch of data[offset:] as the mount does it: begin, then store."""
    token = c.begin(inode)
    c.store(inode, token, attrs, offset, data[offset:])


def test_a_fetched_span_answers_reads_inside_it():
    data = os.urandom(10 * BLOCK)
    c = cache()
    assert c.get(INODE, 100, 200) is None
    assert c.span(100, BLOCK) == (0, 2 * BLOCK)
    fill(c, data, fattr(len(data)))
    assert c.get(INODE, 100, 200) == data[100:300]
    assert c.get(INODE, BLOCK - 10, 3 * BLOCK) == data[BLOCK - 10:
                                                       4 * BLOCK - 10]
    assert (c.hits, c.misses) == (2, 1)
    assert c.used == len(data)


def test_reads_at_and_past_the_end_are_short_as_a_read_is():
    data = os.urandom(2 * BLOCK + 100)
    c = cache()
    fill(c, data, fattr(len(data)))
    assert c.get(INODE, 2 * BLOCK, BLOCK) == data[2 * BLOCK:]
    assert c.get(INODE, len(data), BLOCK) == b""
    assert c.get(INODE, len(data) + 5 * BLOCK, BLOCK) == b""
    # The last block alone, as a READ at its offset brings it.
    alone = cache()
    token = alone.begin(INODE)
    alone.store(INODE, token, fattr(len(data)), 2 * BLOCK, data[2 * BLOCK:])
    assert alone.get(INODE, 2 * BLOCK + 50, BLOCK) == data[2 * BLOCK + 50:]
    assert alone.used == 100


def test_only_whole_blocks_and_the_last_one_are_kept():
    data = os.urandom(4 * BLOCK)
    c = cache()
    token = c.begin(INODE)
    # Bytes 100 .. 3 blocks + 50: only blocks 1 and 2 are whole.
    c.store(INODE, token, fattr(len(data)), 100, data[100:3 * BLOCK + 50])
    assert c.used == 2 * BLOCK
    assert c.get(INODE, BLOCK, 2 * BLOCK) == data[BLOCK:3 * BLOCK]
    assert c.get(INODE, 0, BLOCK) is None
    assert c.get(INODE, 3 * BLOCK, 10) is None


def test_other_attributes_drop_the_file():
    """A file changed elsewhere is read afresh once attributes show it.

    At the next open, or in any reply.
    """
    data = os.urandom(4 * BLOCK)
    c = cache()
    fill(c, data, fattr(len(data), mtime=100))
    c.observe(INODE, fattr(len(data), mtime=100))
    assert c.get(INODE, 0, BLOCK) == data[:BLOCK]
    c.observe(INODE, fattr(len(data), mtime=100, ctime=101))
    assert c.get(INODE, 0, BLOCK) is None
    assert c.used == 0


def test_a_fetch_overtaken_by_a_write_is_not_kept():
    data = os.urandom(4 * BLOCK)
    c = cache()
    c.observe(INODE, fattr(len(data)))
    token = c.begin(INODE)
    c.invalidate(INODE, BLOCK, BLOCK + 1)   # A write went meanwhile.
    c.store(INODE, token, fattr(len(data)), 0, data)
    assert c.get(INODE, 0, BLOCK) is None
    assert c.used == 0


def test_a_fetch_out_while_new_attributes_came_is_not_kept():
    """An old reply's bytes are not kept under newer attributes.

    The file may have changed in between.
    """
    old, new = os.urandom(2 * BLOCK), os.urandom(2 * BLOCK)
    c = cache()
    c.observe(INODE, fattr(len(old), mtime=100))
    late = c.begin(INODE)
    fill(c, new, fattr(len(new), mtime=200))
    c.store(INODE, late, fattr(len(old), mtime=100), 0, old)
    assert c.get(INODE, 0, BLOCK) is None
    fill(c, new, fattr(len(new), mtime=200))
    assert c.get(INODE, 0, 2 * BLOCK) == new


def test_a_write_drops_only_the_blocks_it_covers():
    data = os.urandom(4 * BLOCK)
    c = cache()
    fill(c, data, fattr(len(data)))
    c.invalidate(INODE, BLOCK + 10, 2 * BLOCK + 10)
    assert c.get(INODE, 0, BLOCK) == data[:BLOCK]
    assert c.get(INODE, 3 * BLOCK, BLOCK) == data[3 * BLOCK:]
    assert c.get(INODE, BLOCK, 1) is None
    assert c.get(INODE, 2 * BLOCK, 1) is None
    assert c.used == 2 * BLOCK


def test_the_least_recently_read_blocks_go_first():
    c = cache(blocks=3)
    files = {inode: os.urandom(BLOCK) for inode in (1, 2, 3)}
    for inode, data in files.items():
        fill(c, data, fattr(BLOCK), inode=inode)
    assert c.get(1, 0, BLOCK) == files[1]   # 2 is now the oldest.
    fill(c, os.urandom(BLOCK), fattr(BLOCK), inode=4)
    assert c.get(2, 0, BLOCK) is None
    assert c.get(1, 0, BLOCK) == files[1]
    assert c.get(3, 0, BLOCK) == files[3]
    assert c.used == 3 * BLOCK


def test_a_forgotten_inode_takes_its_blocks_along():
    c = cache()
    fill(c, os.urandom(3 * BLOCK), fattr(3 * BLOCK))
    c.forget(INODE)
    assert c.used == 0
    assert c.get(INODE, 0, 1) is None


def test_a_reply_without_attributes_is_not_kept():
    c = cache()
    token = c.begin(INODE)
    c.store(INODE, token, None, 0, os.urandom(BLOCK))
    assert c.used == 0
