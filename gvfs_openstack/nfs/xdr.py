# SPDX-License-Identifier: Apache-2.0
"""XDR encoding and decoding (RFC 4506).

Only the primitives ONC-RPC, MOUNTv3 and NFSv3 need.  The decoder works on a
``memoryview`` so that large opaque payloads (READ and WRITE data) are sliced,
not copied, and every way the input can be wrong -- truncated, oversized,
non-canonical padding -- raises :class:`XdrError` and nothing else.
"""

from collections.abc import Callable
from collections.abc import Collection
import struct
from typing import TypeAlias
from typing import TypeVar

from gvfs_openstack.nfs.errors import XdrError

#: What the codecs take as bytes: READ and WRITE data arrive as views
#: of a received record, and records are ``bytearray``.
BytesLike: TypeAlias = bytes | bytearray | memoryview

_T = TypeVar("_T")

_U32 = struct.Struct(">I")
_I32 = struct.Struct(">i")
_U64 = struct.Struct(">Q")
_I64 = struct.Struct(">q")

#: RFC 4506 section 4.10: opaque and string data is padded to 4 bytes.
_PAD = (b"", b"\0\0\0", b"\0\0", b"\0")


def _pad_len(n: int) -> int:
    return (4 - n % 4) % 4


class Packer:
    """Appends XDR items to a growing buffer (RFC 4506 section 4)."""

    __slots__ = ("_buf",)

    def __init__(self) -> None:
        self._buf = bytearray()

    def get_buffer(self) -> bytes:
        return bytes(self._buf)

    def pack_uint(self, value: int) -> None:
        self._buf += _U32.pack(value)

    def pack_int(self, value: int) -> None:
        self._buf += _I32.pack(value)

    def pack_uhyper(self, value: int) -> None:
        self._buf += _U64.pack(value)

    def pack_hyper(self, value: int) -> None:
        self._buf += _I64.pack(value)

    def pack_bool(self, value: object) -> None:
        self._buf += _U32.pack(1 if value else 0)

    def pack_fopaque(self, size: int, data: BytesLike) -> None:
        """Fixed-length opaque (section 4.9)."""
        if len(data) != size:
            raise ValueError("fixed opaque needs %d bytes, got %d"
                             % (size, len(data)))
        self._buf += data
        self._buf += _PAD[size % 4]

    def pack_opaque(self, data: BytesLike,
                    maximum: int | None = None) -> None:
        """Variable-length opaque (section 4.10)."""
        if maximum is not None and len(data) > maximum:
            raise ValueError("opaque of %d bytes exceeds its limit of %d"
                             % (len(data), maximum))
        self._buf += _U32.pack(len(data))
        self._buf += data
        self._buf += _PAD[len(data) % 4]

    def pack_string(self, text: str | BytesLike,
                    maximum: int | None = None) -> None:
        """String (section 4.11); ``str`` is encoded as UTF-8."""
        if isinstance(text, str):
            text = text.encode("utf-8", "surrogateescape")
        self.pack_opaque(text, maximum)


class Unpacker:
    """Reads XDR items from a buffer, raising :class:`XdrError` on any fault.

    ``max_items`` bounds arrays and linked lists so that a hostile count
    cannot make the decoder allocate or loop without limit.
    """

    __slots__ = ("_view", "_pos", "max_items")

    def __init__(self, data: BytesLike, offset: int = 0,
                 max_items: int = 1 << 16) -> None:
        self._view = memoryview(data).cast("B") if not isinstance(
            data, memoryview) else data
        self._pos = offset
        self.max_items = max_items

    @property
    def position(self) -> int:
        return self._pos

    def remaining(self) -> int:
        return len(self._view) - self._pos

    def _advance(self, n: int) -> int:
        """Where the next ``n`` bytes start; they are consumed.

        Numbers are read in place from there (``unpack_from``): a
        memoryview slice per field was most of a READ reply's decoding.
        """
        pos = self._pos
        if n < 0 or pos + n > len(self._view):
            raise XdrError("truncated XDR data: need %d bytes at offset %d, "
                           "have %d" % (n, pos, self.remaining()))
        self._pos = pos + n
        return pos

    def _take(self, n: int) -> memoryview:
        pos = self._advance(n)
        return self._view[pos:pos + n]

    def unpack_uint(self) -> int:
        return _U32.unpack_from(self._view, self._advance(4))[0]

    def unpack_int(self) -> int:
        return _I32.unpack_from(self._view, self._advance(4))[0]

    def unpack_uhyper(self) -> int:
        return _U64.unpack_from(self._view, self._advance(8))[0]

    def unpack_hyper(self) -> int:
        return _I64.unpack_from(self._view, self._advance(8))[0]

    def unpack_bool(self) -> bool:
        value = self.unpack_uint()
        if value > 1:
            raise XdrError("boolean must be 0 or 1, got %d" % value)
        return value == 1

    def unpack_enum(self, allowed: Collection[int]) -> int:
        value = self.unpack_int()
        if value not in allowed:
            raise XdrError("enum value %d is not one of %s"
                           % (value, sorted(allowed)))
        return value

    def _skip_padding(self, n: int) -> None:
        pad = _pad_len(n)
        if pad and bytes(self._take(pad)) != b"\0" * pad:
            raise XdrError("non-zero XDR padding")

    def unpack_fopaque_view(self, size: int) -> memoryview:
        data = self._take(size)
        self._skip_padding(size)
        return data

    def unpack_fopaque(self, size: int) -> bytes:
        return bytes(self.unpack_fopaque_view(size))

    def unpack_opaque_view(self,
                           maximum: int | None = None) -> memoryview:
        """Variable-length opaque as a zero-copy view of the input."""
        size = self.unpack_uint()
        if maximum is not None and size > maximum:
            raise XdrError("opaque of %d bytes exceeds its limit of %d"
                           % (size, maximum))
        return self.unpack_fopaque_view(size)

    def unpack_opaque(self, maximum: int | None = None) -> bytes:
        return bytes(self.unpack_opaque_view(maximum))

    def unpack_string(self, maximum: int | None = None) -> str:
        """String as ``str``; undecodable bytes survive as surrogates."""
        return self.unpack_opaque(maximum).decode("utf-8", "surrogateescape")

    def unpack_array(self, unpack_item: Callable[[], _T],
                     maximum: int | None = None) -> list[_T]:
        count = self.unpack_uint()
        limit = self.max_items if maximum is None else min(maximum,
                                                           self.max_items)
        if count > limit:
            raise XdrError("array of %d items exceeds its limit of %d"
                           % (count, limit))
        # Each item is at least 4 bytes: a count larger than the input
        # cannot be honest.
        if count * 4 > self.remaining():
            raise XdrError("array count %d larger than the data" % count)
        return [unpack_item() for _ in range(count)]

    def unpack_list(self, unpack_item: Callable[[], _T]) -> list[_T]:
        """An XDR linked list (``*next`` optional-data chain)."""
        items: list[_T] = []
        while self.unpack_bool():
            if len(items) >= self.max_items:
                raise XdrError("list longer than %d items" % self.max_items)
            items.append(unpack_item())
        return items

    def unpack_optional(self,
                        unpack_item: Callable[[], _T]) -> _T | None:
        return unpack_item() if self.unpack_bool() else None

    def done(self) -> None:
        """Assert that the whole input was consumed (no trailing bytes)."""
        if self._pos != len(self._view):
            raise XdrError("%d trailing bytes after XDR data"
                           % self.remaining())
