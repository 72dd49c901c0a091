# SPDX-License-Identifier: Apache-2.0
import pytest

from gvfs_openstack.nfs.rpc import AuthSys
from gvfs_openstack.proxy import access


def test_default_is_all_squash_to_the_file_account():
    ids = access.IdentityMap(4242, 4343)
    assert ids.map(AuthSys(1000, 1000, (27, 100), "n")) == \
        AuthSys(4242, 4343, (), "n")


def test_mapped_shadow_accounts_reach_their_own_ids():
    ids = access.IdentityMap(4242, 4343, {1001: 2001}, {100: 200, 27: 270})
    assert ids.map(AuthSys(1001, 100, (27, 5, 100))) == \
        AuthSys(2001, 200, (270, 200))


@pytest.mark.parametrize("cred", [AuthSys(0, 0), AuthSys(0, 100),
                                  AuthSys(1001, 0)])
def test_root_never_passes_by_default(cred):
    ids = access.IdentityMap(4242, 4343, {0: 0, 1001: 2001}, {0: 0})
    assert ids.map(cred) == AuthSys(4242, 4343, ())


def test_maps_cannot_smuggle_root():
    ids = access.IdentityMap(4242, 4343, {1001: 0}, {100: 0})
    assert ids.map(AuthSys(1001, 100)) == AuthSys(4242, 4343, ())


def test_root_passes_only_when_allowed():
    ids = access.IdentityMap(4242, 4343, {0: 0}, {0: 0}, allow_root=True)
    assert ids.map(AuthSys(0, 0)) == AuthSys(0, 0, ())


def test_parse_id_map_rejects_garbage():
    assert access.parse_id_map({"1": "2"}, "uid") == {1: 2}
    with pytest.raises(ValueError, match="uid map"):
        access.parse_id_map({"x": "2"}, "uid")
    with pytest.raises(ValueError):
        access.parse_id_map({"1": str(2 ** 32)}, "uid")


@pytest.mark.parametrize("path,allowed", [
    ("/srv/images", True), ("/srv/images/", True),
    ("/srv/images/project1", True), ("/srv/imagesX", False),
    ("/srv", False), ("/", False), ("/srv/images/../secret", False),
    ("srv/images", False), ("/srv/images\0", False), ("", False),
])
def test_export_allowlist(path, allowed):
    assert access.ExportAllowlist(["/srv/images"]).allows(path) is allowed


def test_export_allowlist_needs_absolute_paths():
    with pytest.raises(ValueError):
        access.ExportAllowlist(["relative"])
    with pytest.raises(ValueError):
        access.ExportAllowlist([])


def test_peer_allowlist():
    peers = access.PeerAllowlist(["127.0.0.1/32", "10.1.0.0/16"])
    assert peers.allows("127.0.0.1")
    assert peers.allows("::ffff:127.0.0.1")
    assert not peers.allows("127.0.0.2")
    assert not peers.allows("not-an-address")
    assert access.PeerAllowlist([]).allows("192.0.2.1")


def test_identity_preserving_map_passes_unmapped_ids():
    ids = access.IdentityMap(4242, 4343, {1001: 2001}, {100: 200},
                             squash_unmapped=False)
    assert ids.map(AuthSys(1000, 1000, (27, 100), "n")) == \
        AuthSys(1000, 1000, (27, 200), "n")
    assert ids.map(AuthSys(1001, 5)) == AuthSys(2001, 5, ())


def test_identity_preserving_map_still_squashes_root():
    ids = access.IdentityMap(4242, 4343, squash_unmapped=False)
    assert ids.map(AuthSys(0, 0, (0, 5))) == AuthSys(4242, 4343, ())
    assert ids.map(AuthSys(1000, 1000, (0, 5))) == \
        AuthSys(1000, 1000, (4343, 5))
    allowed = access.IdentityMap(4242, 4343, allow_root=True,
                                 squash_unmapped=False)
    assert allowed.map(AuthSys(0, 0, (0, 5))) == AuthSys(0, 0, (0, 5))
