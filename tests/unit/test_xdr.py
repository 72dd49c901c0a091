# SPDX-License-Identifier: Apache-2.0
import pytest

from gvfs_openstack.nfs.errors import XdrError
from gvfs_openstack.nfs.xdr import Packer
from gvfs_openstack.nfs.xdr import Unpacker


def test_primitives_round_trip():
    p = Packer()
    p.pack_uint(0xFFFFFFFF)
    p.pack_int(-2)
    p.pack_uhyper(1 << 63)
    p.pack_hyper(-5)
    p.pack_bool(True)
    p.pack_opaque(b"abcde")
    p.pack_string("naïve")
    p.pack_fopaque(3, b"xyz")
    data = p.get_buffer()
    assert len(data) % 4 == 0
    u = Unpacker(data)
    assert u.unpack_uint() == 0xFFFFFFFF
    assert u.unpack_int() == -2
    assert u.unpack_uhyper() == 1 << 63
    assert u.unpack_hyper() == -5
    assert u.unpack_bool() is True
    assert u.unpack_opaque() == b"abcde"
    assert u.unpack_string() == "naïve"
    assert u.unpack_fopaque(3) == b"xyz"
    u.done()


def test_opaque_is_padded_with_zeros():
    p = Packer()
    p.pack_opaque(b"a")
    assert p.get_buffer() == b"\0\0\0\x01a\0\0\0"


@pytest.mark.parametrize("data", [b"", b"\0\0\0", b"\0\0\0\x05abc"])
def test_truncated_input_raises_xdr_error(data):
    with pytest.raises(XdrError):
        Unpacker(data).unpack_opaque()


def test_nonzero_padding_is_refused():
    with pytest.raises(XdrError, match="padding"):
        Unpacker(b"\0\0\0\x01a\0\x01\0").unpack_opaque()


def test_opaque_limit_is_enforced_before_reading():
    with pytest.raises(XdrError, match="limit"):
        Unpacker(b"\0\0\x10\0").unpack_opaque(maximum=64)


def test_hostile_array_count_is_refused():
    with pytest.raises(XdrError):
        Unpacker(b"\xff\xff\xff\xff").unpack_array(lambda: 0)


def test_bool_must_be_zero_or_one():
    with pytest.raises(XdrError):
        Unpacker(b"\0\0\0\x02").unpack_bool()


def test_trailing_bytes_are_detected():
    u = Unpacker(b"\0\0\0\x01\0\0\0\x02")
    u.unpack_uint()
    with pytest.raises(XdrError, match="trailing"):
        u.done()


def test_packer_refuses_oversized_opaque():
    with pytest.raises(ValueError):
        Packer().pack_opaque(b"x" * 65, maximum=64)
