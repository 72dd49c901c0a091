# SPDX-License-Identifier: Apache-2.0
"""Declarative XDR codecs: describe a type once, get both directions.

RFC 1813 defines some sixty structures; writing a packer and an unpacker by
hand for each invites the two to drift apart.  Here each structure is a
frozen dataclass whose fields are paired with a codec, and unions and
optional data are combinators over codecs.
"""

import dataclasses

from gvfs_openstack.nfs.errors import XdrError
from gvfs_openstack.nfs.xdr import Packer
from gvfs_openstack.nfs.xdr import Unpacker


class Codec:
    """Packs a Python value into a Packer and unpacks it from an Unpacker."""

    def pack(self, packer, value):
        raise NotImplementedError

    def unpack(self, unpacker):
        raise NotImplementedError


class _Primitive(Codec):
    """A method of :class:`Packer` and one of :class:`Unpacker`.

    The methods are looked up once, here: a lookup per field was a
    fifth of decoding a READ reply.
    """

    def __init__(self, pack, unpack, *args):
        self._pack = getattr(Packer, pack)
        self._unpack = getattr(Unpacker, unpack)
        self._args = args

    def pack(self, packer, value):
        self._pack(packer, value, *self._args)

    def unpack(self, unpacker):
        return self._unpack(unpacker, *self._args)


class _FixedOpaque(Codec):
    def __init__(self, size):
        self.size = size

    def pack(self, packer, value):
        packer.pack_fopaque(self.size, value)

    def unpack(self, unpacker):
        return unpacker.unpack_fopaque(self.size)


class _Enum(Codec):
    """An XDR enum decoded into an ``IntEnum`` member; unknown values fail."""

    def __init__(self, enum_type):
        self.enum_type = enum_type
        self._allowed = frozenset(int(m) for m in enum_type)

    def pack(self, packer, value):
        packer.pack_int(int(value))

    def unpack(self, unpacker):
        return self.enum_type(unpacker.unpack_enum(self._allowed))


class _Void(Codec):
    def pack(self, packer, value):
        if value is not None:
            raise ValueError("void carries no value")

    def unpack(self, unpacker):
        return None


class Optional(Codec):
    """``T *name`` optional-data (RFC 4506 section 4.19)."""

    def __init__(self, item):
        self.item = item

    def pack(self, packer, value):
        packer.pack_bool(value is not None)
        if value is not None:
            self.item.pack(packer, value)

    def unpack(self, unpacker):
        return unpacker.unpack_optional(lambda: self.item.unpack(unpacker))


class Array(Codec):
    """Variable-length array ``T name<max>`` (section 4.13)."""

    def __init__(self, item, maximum=None):
        self.item = item
        self.maximum = maximum

    def pack(self, packer, value):
        if self.maximum is not None and len(value) > self.maximum:
            raise ValueError("array of %d items exceeds %d"
                             % (len(value), self.maximum))
        packer.pack_uint(len(value))
        for element in value:
            self.item.pack(packer, element)

    def unpack(self, unpacker):
        return tuple(unpacker.unpack_array(
            lambda: self.item.unpack(unpacker), self.maximum))


class LinkedList(Codec):
    """The ``entry *next`` chains RFC 1813 uses for directory listings."""

    def __init__(self, item):
        self.item = item

    def pack(self, packer, value):
        for element in value:
            packer.pack_bool(True)
            self.item.pack(packer, element)
        packer.pack_bool(False)

    def unpack(self, unpacker):
        return tuple(unpacker.unpack_list(lambda: self.item.unpack(unpacker)))


class Struct(Codec):
    """A dataclass packed field by field in declaration order."""

    def __init__(self, cls, codecs):
        self.cls = cls
        self.fields = tuple(zip((f.name for f in dataclasses.fields(cls)),
                                codecs))
        if len(self.fields) != len(codecs):
            raise TypeError("%s: %d fields, %d codecs"
                            % (cls.__name__, len(self.fields), len(codecs)))

    def pack(self, packer, value):
        for name, codec in self.fields:
            codec.pack(packer, getattr(value, name))

    def unpack(self, unpacker):
        return self.cls(*[codec.unpack(unpacker) for _, codec in self.fields])


class Union(Codec):
    """A discriminated union whose arms are chosen by the discriminant.

    The Python value is ``(discriminant, arm_value)``; a discriminant with
    no arm and no default is an error in both directions.
    """

    def __init__(self, discriminant, arms, default=None):
        self.discriminant = discriminant
        self.arms = arms
        self.default = default

    def _arm(self, disc):
        arm = self.arms.get(disc, self.default)
        if arm is None:
            raise XdrError("union discriminant %r has no arm" % (disc,))
        return arm

    def pack(self, packer, value):
        disc, body = value
        self.discriminant.pack(packer, disc)
        self._arm(disc).pack(packer, body)

    def unpack(self, unpacker):
        disc = self.discriminant.unpack(unpacker)
        return disc, self._arm(disc).unpack(unpacker)


class Mapped(Codec):
    """Wraps a codec with conversions to and from a friendlier value."""

    def __init__(self, inner, to_wire, from_wire):
        self.inner = inner
        self.to_wire = to_wire
        self.from_wire = from_wire

    def pack(self, packer, value):
        self.inner.pack(packer, self.to_wire(value))

    def unpack(self, unpacker):
        return self.from_wire(self.inner.unpack(unpacker))


def xdr_struct(*codecs):
    """Class decorator: a frozen, slotted dataclass with a ``CODEC``."""

    def wrap(cls):
        cls = dataclasses.dataclass(frozen=True, slots=True)(cls)
        cls.CODEC = Struct(cls, codecs)
        return cls
    return wrap


UINT32 = _Primitive("pack_uint", "unpack_uint")
INT32 = _Primitive("pack_int", "unpack_int")
UINT64 = _Primitive("pack_uhyper", "unpack_uhyper")
BOOL = _Primitive("pack_bool", "unpack_bool")
VOID = _Void()


def opaque(maximum=None):
    return _Primitive("pack_opaque", "unpack_opaque", maximum)


def string(maximum=None):
    return _Primitive("pack_string", "unpack_string", maximum)


def fixed_opaque(size):
    return _FixedOpaque(size)


def enum(enum_type):
    return _Enum(enum_type)
