# SPDX-License-Identifier: Apache-2.0
"""The client proxy's cache: blocks on local disk, and write-back.

A map of the room, along the two paths a call takes through it.

READ: :mod:`updates` learns from every reply that passes (attributes,
names, WRITEs written through) -> :mod:`freshness` says what is known
of each file and which cached blocks still hold -> :mod:`reads` answers
READ, bulk READ and READV from the cache, and :mod:`fetch` fetches what
it lacks -> :mod:`store` keeps the blocks.  Beside them: :mod:`exports`
(each export's policies), :mod:`sidecars` (zero maps and the
``whole_file`` action; :mod:`bulk_fetch` brings such files whole),
:mod:`readv` (the bulk channel's READV), and the parts that fetch
ahead of a reader through :mod:`fetch`, a :mod:`window` of fetches in
flight each: :mod:`profiles` (boot profiles), :mod:`stream` (the rest
of a golden image) and :mod:`warm` (on an operator's request).

WRITE: :mod:`writeback` answers WRITE and COMMIT -> :mod:`journal`
keeps the bytes on local disk -> :mod:`dirty` says which are not yet
upstream -> :mod:`flusher` chooses when and which file -> :mod:`flush`
writes one file's dirty bytes upstream.  :mod:`postop` and
:mod:`names` read what replies say of files and directory entries.
"""
