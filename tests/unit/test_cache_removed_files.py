# SPDX-License-Identifier: Apache-2.0
"""Files removed through the client proxy: forgotten, not served.

REMOVE, RMDIR and RENAME name a file by directory and name; the cache
keeps what it knows per handle.  These feed real replies, as they pass
the proxy, to the :class:`ReplyObserver` and look at what the cache
still holds (no network: the functional tests read through Ganesha).
"""

import time

from gvfs_openstack.nfs import const
from gvfs_openstack.nfs.const import Nfs3Proc as P
from gvfs_openstack.nfs.const import NfsStat
from gvfs_openstack.nfs import nfs3
from gvfs_openstack.nfs import rpc
from gvfs_openstack.proxy.cache import exports
from gvfs_openstack.proxy.cache import fetch
from gvfs_openstack.proxy.cache import freshness
from gvfs_openstack.proxy.cache import names
from gvfs_openstack.proxy.cache import reads
from gvfs_openstack.proxy.cache import sidecars
from gvfs_openstack.proxy.cache.store import BlockStore
from gvfs_openstack.proxy.cache.store import Geometry
from gvfs_openstack.proxy.cache import updates
from gvfs_openstack.proxy import counters

T = nfs3.NfsTime
ROOT = b"root-handle"


def fattr(size=4096, tick=1, nlink=1, kind=const.FileType.NF3REG):
    return nfs3.Fattr(kind, 0o644, nlink, 1, 1, size, size,
                      nfs3.SpecData(), 1, 2, T(tick), T(tick), T(tick))


class Proxy:
    """The cache of a client proxy in ``/srv/golden`` (``immutable``)."""

    def __init__(self, tmp_path):
        self.now = [1000.0]
        cache_counters = counters.CacheCounters()
        self.policies = exports.ExportPolicies(
            3.0, {"/srv/golden": 600.0},
            answer_overrides={"/srv/golden": 600.0})
        self.policies.learn_root(ROOT, "/srv/golden")
        self.files = freshness.FileStates(cache_counters,
                                          lambda: self.now[0])
        self.sidecars = sidecars.Sidecars(
            upstream=None, counters=counters.SidecarCounters())
        fetcher = fetch.Fetcher(
            BlockStore(str(tmp_path), Geometry(4096, 2, 16, 16)),
            self.files, None, cache_counters, self.policies,
            clock=lambda: self.now[0])
        self.reads = reads.CachedReads(
            fetcher, self.files, cache_counters, self.policies,
            clock=lambda: self.now[0])
        self.observer = updates.ReplyObserver(
            fetcher, self.files, self.policies, self.sidecars)

    def passes(self, proc, args, status, body):
        """A reply to ``proc`` with ``args`` passes the proxy."""
        call = rpc.Call(7, const.NFS_PROGRAM, 3, proc,
                        args=nfs3.encode_args(proc, args))
        self.observer.reply(call, rpc.accepted(7, results=nfs3.encode_res(
            proc, nfs3.Result(status, body))))

    def lookup(self, name, fh, attrs=None, dir_fh=ROOT):
        self.passes(P.LOOKUP, nfs3.LookupArgs(nfs3.DirOpArgs(dir_fh, name)),
                    0, nfs3.LookupOk(fh, attrs or fattr(), None))

    def getattr_reply(self, fh, attrs):
        self.passes(P.GETATTR, nfs3.GetattrArgs(fh), 0,
                    nfs3.GetattrOk(attrs))

    def remove(self, name, status=0, proc=P.REMOVE, dir_fh=ROOT):
        self.passes(proc, nfs3.RemoveArgs(nfs3.DirOpArgs(dir_fh, name)),
                    status, nfs3.WccBody(nfs3.WccData()))

    def rename(self, old, new):
        self.passes(P.RENAME, nfs3.RenameArgs(nfs3.DirOpArgs(ROOT, old),
                                              nfs3.DirOpArgs(ROOT, new)),
                    0, nfs3.RenameBody(nfs3.WccData(), nfs3.WccData()))

    def answers_getattr(self, fh):
        """Whether the proxy answers a GETATTR of ``fh`` itself."""
        return self.reads.attributes(rpc.Call(
            9, const.NFS_PROGRAM, 3, P.GETATTR,
            args=nfs3.encode_args(P.GETATTR, nfs3.GetattrArgs(fh)))) \
            is not None

    def knows(self, fh):
        """What the cache still holds of ``fh``, by table."""
        return {table for table, known in (
            ("attributes", self.files.get(fh) is not None),
            ("export", self.policies.export_of(fh) is not None),
            ("sidecar", fh in self.sidecars._names or
             fh in self.sidecars._loaded)) if known}


def test_a_removed_file_is_forgotten_and_its_handle_asks_the_server(
        tmp_path):
    proxy = Proxy(tmp_path)
    proxy.lookup("a", b"fh-a")
    proxy.lookup("keep", b"fh-keep")
    assert proxy.answers_getattr(b"fh-a")
    assert proxy.knows(b"fh-a") == {"attributes", "export", "sidecar"}
    proxy.remove("a")
    # No attributes of its own: a READ or GETATTR goes to the server,
    # which says NFS3ERR_STALE.
    assert not proxy.answers_getattr(b"fh-a")
    assert proxy.knows(b"fh-a") == set()
    assert proxy.answers_getattr(b"fh-keep")
    assert proxy.observer.names.get(ROOT, "a") is None


def test_a_reply_sent_before_the_removal_does_not_bring_it_back(tmp_path):
    proxy = Proxy(tmp_path)
    proxy.lookup("a", b"fh-a")
    before = proxy.files.reports_of(b"fh-a")
    proxy.remove("a")
    # A GETATTR (or LOOKUP) answered before the REMOVE, heard after it.
    proxy.getattr_reply(b"fh-a", fattr())
    proxy.lookup("a", b"fh-a")
    assert proxy.files.get(b"fh-a") is None
    # A READ's fetch, or a revalidation, sent before it.
    assert proxy.files.observe(b"fh-a", fattr(), before) is None
    assert proxy.files.get(b"fh-a") is None
    assert not proxy.answers_getattr(b"fh-a")
    # Asked after it: the server knows (another link kept the file).
    after = proxy.files.reports_of(b"fh-a")
    assert proxy.files.observe(b"fh-a", fattr(tick=2), after) is not None
    proxy.getattr_reply(b"fh-a", fattr(tick=3))
    assert proxy.files.get(b"fh-a").fattr == fattr(tick=3)


def test_a_file_renamed_over_is_forgotten_the_renamed_one_kept(tmp_path):
    proxy = Proxy(tmp_path)
    proxy.lookup("a", b"fh-a")
    proxy.lookup("b", b"fh-b")
    proxy.rename("a", "b")
    assert proxy.knows(b"fh-b") == set()
    assert proxy.answers_getattr(b"fh-a")
    assert proxy.observer.names.get(ROOT, "b") == b"fh-a"
    assert proxy.observer.names.get(ROOT, "a") is None
    # The name it has now is the one a REMOVE names.
    proxy.remove("b")
    assert proxy.knows(b"fh-a") == set()


def test_every_reply_that_hands_out_a_handle_names_it(tmp_path):
    proxy = Proxy(tmp_path)
    made = nfs3.Sattr(mode=0o644)
    for proc, args in (
            (P.CREATE, nfs3.CreateArgs(nfs3.DirOpArgs(ROOT, "c"),
                                       nfs3.CreateHow(
                                           const.CreateMode.UNCHECKED,
                                           made))),
            (P.MKDIR, nfs3.MkdirArgs(nfs3.DirOpArgs(ROOT, "d"), made)),
            (P.SYMLINK, nfs3.SymlinkArgs(nfs3.DirOpArgs(ROOT, "s"), made,
                                         "c")),
            (P.MKNOD, nfs3.MknodArgs(nfs3.DirOpArgs(ROOT, "n"),
                                     nfs3.MknodData(const.FileType.NF3FIFO,
                                                    made)))):
        name = args.where.name
        proxy.passes(proc, args, 0, nfs3.NewObjOk(
            b"fh-" + name.encode(), fattr(), nfs3.WccData()))
        assert proxy.observer.names.get(ROOT, name) == b"fh-" + name.encode()
    proxy.passes(P.READDIRPLUS, nfs3.ReaddirplusArgs(ROOT, 0, bytes(8), 512,
                                                     4096),
                 0, nfs3.ReaddirplusOk(None, bytes(8), (
                     nfs3.DirEntryPlus(1, ".", 1, None, ROOT),
                     nfs3.DirEntryPlus(2, "r", 2, fattr(), b"fh-r")), True))
    assert proxy.observer.names.get(ROOT, "r") == b"fh-r"
    assert proxy.observer.names.get(ROOT, ".") is None
    for name in ("c", "s", "n", "r"):
        fh = b"fh-" + name.encode()
        proxy.getattr_reply(fh, fattr())
        proxy.remove(name)
        assert proxy.files.get(fh) is None, name
    proxy.getattr_reply(b"fh-d", fattr(kind=const.FileType.NF3DIR, nlink=2))
    proxy.remove("d", proc=P.RMDIR)
    assert proxy.knows(b"fh-d") == set()


def test_a_file_with_another_link_keeps_its_export(tmp_path):
    proxy = Proxy(tmp_path)
    proxy.lookup("a", b"fh-a")
    proxy.passes(P.LINK, nfs3.LinkArgs(b"fh-a", nfs3.DirOpArgs(ROOT, "b")),
                 0, nfs3.LinkBody(fattr(tick=2, nlink=2), nfs3.WccData()))
    assert proxy.files.get(b"fh-a").fattr.nlink == 2
    proxy.remove("a")
    # Asked again all the same (the proxy cannot tell the link is still
    # there), but under its export's policy.
    assert proxy.knows(b"fh-a") == {"export"}
    proxy.remove("b")  # Its last link.
    assert proxy.knows(b"fh-a") == set()


def test_only_a_removal_that_happened_forgets(tmp_path):
    proxy = Proxy(tmp_path)
    proxy.lookup("a", b"fh-a")
    proxy.remove("a", NfsStat.NFS3ERR_ACCES)
    assert proxy.knows(b"fh-a") == {"attributes", "export", "sidecar"}
    # A repeated REMOVE whose first reply was lost finds nothing there.
    proxy.remove("a", NfsStat.NFS3ERR_NOENT)
    assert proxy.knows(b"fh-a") == set()
    # A removal in another directory, of a name never seen: nothing.
    proxy.lookup("a", b"fh-a2")
    proxy.remove("a", dir_fh=b"other-dir")
    proxy.remove("unseen")
    assert proxy.knows(b"fh-a2") == {"attributes", "export", "sidecar"}


def test_churn_leaves_nothing_behind(tmp_path):
    """Create, write, read, remove: the soak's pattern, 10,000 times."""
    proxy = Proxy(tmp_path)
    made = nfs3.CreateHow(const.CreateMode.GUARDED, nfs3.Sattr(mode=0o644))
    for i in range(10000):
        name, fh = "f%05d" % i, b"fh-%05d" % i
        proxy.passes(P.CREATE, nfs3.CreateArgs(nfs3.DirOpArgs(ROOT, name),
                                               made),
                     0, nfs3.NewObjOk(fh, fattr(0), nfs3.WccData()))
        proxy.getattr_reply(fh, fattr(8192, tick=2))
        proxy.lookup(name, fh, fattr(8192, tick=2))
        proxy.remove(name)
    assert len(proxy.files._files) == 0
    assert len(proxy.policies._export_of) == 1  # The export's root.
    assert len(proxy.sidecars._names) == len(proxy.sidecars._loaded) == 0
    assert len(proxy.observer.names._handles) == 0
    assert len(proxy.files._removed) == freshness.MAX_REMOVED


def test_the_name_index_is_bounded():
    index = names.Names(limit=3)
    for i in range(5):
        index.learn(ROOT, "n%d" % i, b"fh%d" % i)
    assert index.get(ROOT, "n0") is None and index.get(ROOT, "n1") is None
    assert index.get(ROOT, "n4") == b"fh4"
    index.learn(ROOT, "n2", b"fh2")  # Learned again: the most recent.
    index.learn(ROOT, "n5", b"fh5")
    assert index.get(ROOT, "n2") == b"fh2"
    assert index.get(ROOT, "n3") is None
    assert index.pop(ROOT, "n2") == b"fh2"
    assert index.pop(ROOT, "n2") is None


def test_a_file_state_is_small():
    """What the proxy keeps per file it knows: slotted, no dicts."""
    state = freshness.FileStates(counters.CacheCounters(),
                                 time.monotonic).observe(b"fh", fattr())
    assert not hasattr(state, "__dict__")
    assert not hasattr(state.current[0], "__dict__")
