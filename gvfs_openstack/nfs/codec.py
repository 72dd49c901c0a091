# SPDX-License-Identifier: Apache-2.0
"""Declarative XDR codecs: describe a type once, get both directions.

RFC 1813 defines some sixty structures; writing a packer and an unpacker by
hand for each invites the two to drift apart.  Here each structure is a
frozen dataclass whose fields are paired with a codec, and unions and
optional data are combinators over codecs.
"""

from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Mapping
from collections.abc import Sequence
import dataclasses
from enum import IntEnum
from typing import Any
from typing import ClassVar
from typing import Generic
from typing import TYPE_CHECKING
from typing import TypeVar

from gvfs_openstack.nfs.errors import XdrError
from gvfs_openstack.nfs.xdr import BytesLike
from gvfs_openstack.nfs.xdr import Packer
from gvfs_openstack.nfs.xdr import Unpacker

if TYPE_CHECKING:
    from typing_extensions import dataclass_transform
else:
    def dataclass_transform(**kwargs: Any) -> Callable[[Any], Any]:
        """For type checkers only; Python 3.10's typing lacks it."""
        return lambda function: function

_T = TypeVar("_T")
_E = TypeVar("_E", bound=IntEnum)
_S = TypeVar("_S", bound="XdrStruct")


class Codec(Generic[_T]):
    """Packs a Python value into a Packer and unpacks it from an Unpacker."""

    def pack(self, packer: Packer, value: _T) -> None:
        raise NotImplementedError

    def unpack(self, unpacker: Unpacker) -> _T:
        raise NotImplementedError


class XdrStruct:
    """A type with an XDR layout: its codec is the class's ``CODEC``.

    The base of the :func:`xdr_struct` classes, and of the few whose codec
    is written by hand.  Empty slots keep their instances without a
    ``__dict__``.
    """

    __slots__ = ()

    CODEC: ClassVar[Codec[Any]]


class _Primitive(Codec[_T]):
    """A method of :class:`Packer` and one of :class:`Unpacker`.

    The methods are looked up once, here: a lookup per field was a
    fifth of decoding a READ reply.
    """

    def __init__(self, pack: str, unpack: str, *args: Any) -> None:
        self._pack: Callable[..., None] = getattr(Packer, pack)
        self._unpack: Callable[..., _T] = getattr(Unpacker, unpack)
        self._args = args

    def pack(self, packer: Packer, value: _T) -> None:
        self._pack(packer, value, *self._args)

    def unpack(self, unpacker: Unpacker) -> _T:
        return self._unpack(unpacker, *self._args)


class _Name(Codec[str]):
    """A component name (``filename3``): a string that names one entry.

    RFC 1813 lets a name hold any byte, but a server's file system
    cannot: a NUL ends the name there (NFS-Ganesha cuts ``images\0`` to
    ``images``), and a ``/`` makes it a path.  A name that differs
    between the proxy's checks and the server's file system walks
    around every check by name, so such a name is refused when decoded,
    as Linux's nfsd refuses it (``svcxdr_decode_filename``): the call is
    GARBAGE_ARGS.  Packing is not checked: a test must be able to send
    what an attacker sends.
    """

    def pack(self, packer: Packer, value: str) -> None:
        packer.pack_string(value)

    def unpack(self, unpacker: Unpacker) -> str:
        value = unpacker.unpack_string()
        if "\0" in value or "/" in value:
            raise XdrError("a file name with a %s in it: %r" % (
                "NUL" if "\0" in value else "slash", value))
        return value


class _FixedOpaque(Codec[bytes]):
    def __init__(self, size: int) -> None:
        self.size = size

    def pack(self, packer: Packer, value: BytesLike) -> None:
        packer.pack_fopaque(self.size, value)

    def unpack(self, unpacker: Unpacker) -> bytes:
        return unpacker.unpack_fopaque(self.size)


class _Enum(Codec[_E]):
    """An XDR enum decoded into an ``IntEnum`` member; unknown values fail."""

    def __init__(self, enum_type: type[_E]) -> None:
        self.enum_type = enum_type
        self._allowed = frozenset(int(m) for m in enum_type)

    def pack(self, packer: Packer, value: int) -> None:
        packer.pack_int(int(value))

    def unpack(self, unpacker: Unpacker) -> _E:
        return self.enum_type(unpacker.unpack_enum(self._allowed))


class _Void(Codec[None]):
    def pack(self, packer: Packer, value: object) -> None:
        if value is not None:
            raise ValueError("void carries no value")

    def unpack(self, unpacker: Unpacker) -> None:
        return None


class Optional(Codec[_T | None]):
    """``T *name`` optional-data (RFC 4506 section 4.19)."""

    def __init__(self, item: Codec[_T]) -> None:
        self.item = item

    def pack(self, packer: Packer, value: _T | None) -> None:
        packer.pack_bool(value is not None)
        if value is not None:
            self.item.pack(packer, value)

    def unpack(self, unpacker: Unpacker) -> _T | None:
        return unpacker.unpack_optional(lambda: self.item.unpack(unpacker))


class Array(Codec[tuple[_T, ...]]):
    """Variable-length array ``T name<max>`` (section 4.13)."""

    def __init__(self, item: Codec[_T], maximum: int | None = None) -> None:
        self.item = item
        self.maximum = maximum

    def pack(self, packer: Packer, value: Sequence[_T]) -> None:
        if self.maximum is not None and len(value) > self.maximum:
            raise ValueError("array of %d items exceeds %d"
                             % (len(value), self.maximum))
        packer.pack_uint(len(value))
        for element in value:
            self.item.pack(packer, element)

    def unpack(self, unpacker: Unpacker) -> tuple[_T, ...]:
        return tuple(unpacker.unpack_array(
            lambda: self.item.unpack(unpacker), self.maximum))


class LinkedList(Codec[tuple[_T, ...]]):
    """The ``entry *next`` chains RFC 1813 uses for directory listings."""

    def __init__(self, item: Codec[_T]) -> None:
        self.item = item

    def pack(self, packer: Packer, value: Iterable[_T]) -> None:
        for element in value:
            packer.pack_bool(True)
            self.item.pack(packer, element)
        packer.pack_bool(False)

    def unpack(self, unpacker: Unpacker) -> tuple[_T, ...]:
        return tuple(unpacker.unpack_list(lambda: self.item.unpack(unpacker)))


class Struct(Codec[Any]):
    """A dataclass packed field by field in declaration order."""

    def __init__(self, cls: type[Any], codecs: Sequence[Codec[Any]]) -> None:
        self.cls = cls
        self.fields = tuple(zip((f.name for f in dataclasses.fields(cls)),
                                codecs))
        if len(self.fields) != len(codecs):
            raise TypeError("%s: %d fields, %d codecs"
                            % (cls.__name__, len(self.fields), len(codecs)))

    def pack(self, packer: Packer, value: Any) -> None:
        for name, codec in self.fields:
            codec.pack(packer, getattr(value, name))

    def unpack(self, unpacker: Unpacker) -> Any:
        return self.cls(*[codec.unpack(unpacker) for _, codec in self.fields])


class Union(Codec[tuple[Any, Any]]):
    """A discriminated union whose arms are chosen by the discriminant.

    The Python value is ``(discriminant, arm_value)``; a discriminant with
    no arm and no default is an error in both directions.
    """

    def __init__(self, discriminant: Codec[Any],
                 arms: Mapping[Any, Codec[Any]],
                 default: Codec[Any] | None = None) -> None:
        self.discriminant = discriminant
        self.arms = arms
        self.default = default

    def _arm(self, disc: Any) -> Codec[Any]:
        arm = self.arms.get(disc, self.default)
        if arm is None:
            raise XdrError("union discriminant %r has no arm" % (disc,))
        return arm

    def pack(self, packer: Packer, value: tuple[Any, Any]) -> None:
        disc, body = value
        self.discriminant.pack(packer, disc)
        self._arm(disc).pack(packer, body)

    def unpack(self, unpacker: Unpacker) -> tuple[Any, Any]:
        disc = self.discriminant.unpack(unpacker)
        return disc, self._arm(disc).unpack(unpacker)


class Mapped(Codec[Any]):
    """Wraps a codec with conversions to and from a friendlier value."""

    def __init__(self, inner: Codec[Any], to_wire: Callable[[Any], Any],
                 from_wire: Callable[[Any], Any]) -> None:
        self.inner = inner
        self.to_wire = to_wire
        self.from_wire = from_wire

    def pack(self, packer: Packer, value: Any) -> None:
        self.inner.pack(packer, self.to_wire(value))

    def unpack(self, unpacker: Unpacker) -> Any:
        return self.from_wire(self.inner.unpack(unpacker))


@dataclass_transform(frozen_default=True)
def xdr_struct(*codecs: Codec[Any]) -> Callable[[type[_S]], type[_S]]:
    """Class decorator: a frozen, slotted dataclass with a ``CODEC``.

    The class derives from :class:`XdrStruct`, which declares ``CODEC``.
    """

    def wrap(cls: type[_S]) -> type[_S]:
        cls = dataclasses.dataclass(frozen=True, slots=True)(cls)
        cls.CODEC = Struct(cls, codecs)
        return cls
    return wrap


UINT32: Codec[int] = _Primitive("pack_uint", "unpack_uint")
INT32: Codec[int] = _Primitive("pack_int", "unpack_int")
UINT64: Codec[int] = _Primitive("pack_uhyper", "unpack_uhyper")
BOOL: Codec[bool] = _Primitive("pack_bool", "unpack_bool")
VOID = _Void()


def opaque(maximum: int | None = None) -> Codec[bytes]:
    return _Primitive("pack_opaque", "unpack_opaque", maximum)


def string(maximum: int | None = None) -> Codec[str]:
    return _Primitive("pack_string", "unpack_string", maximum)


def name() -> Codec[str]:
    return _Name()


def fixed_opaque(size: int) -> Codec[bytes]:
    return _FixedOpaque(size)


def enum(enum_type: type[_E]) -> Codec[_E]:
    return _Enum(enum_type)
