# SPDX-License-Identifier: Apache-2.0
"""The zstd frames of bulk-channel chunks (:mod:`gvfs_openstack.nfs.bulk`).

Kept out of the protocol core, which encodes the chunks as opaque bytes:
the client, the server proxy and the cache compress and check them here,
in worker threads (zstd releases the GIL).
"""

import asyncio

import zstandard

from gvfs_openstack.nfs.bulk import Codec


def compress(data, level):
    """``data`` as one zstd frame, with its size and content checksum."""
    return zstandard.ZstdCompressor(level=level,
                                    write_checksum=True).compress(data)


def decompress(data, raw_count):
    """One zstd frame back into at most ``raw_count`` bytes.

    A frame that says its size is decompressed into that much memory at
    once, whatever the limit: such a frame must not say more.  Raises
    ``zstandard.ZstdError``.
    """
    declared = zstandard.frame_content_size(data)
    if declared > raw_count:
        raise zstandard.ZstdError("the frame holds %d bytes" % declared)
    return zstandard.ZstdDecompressor().decompress(
        data, max_output_size=raw_count)


async def reply_bytes(body):
    """The raw bytes of a bulk READ or READV reply's ``body``.

    Decompressed in a worker thread when the server chose zstd; raises
    ``zstandard.ZstdError`` for a frame that is not what it says.
    """
    if body.codec != Codec.ZSTD:
        return body.data
    return await asyncio.get_running_loop().run_in_executor(
        None, decompress, body.data, body.raw_count)
