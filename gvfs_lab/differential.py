# SPDX-License-Identifier: Apache-2.0
"""Differential testing of the proxy chains against NFS-Ganesha itself.

The proxies claim to be transparent: whatever an NFSv3 client does
through a chain, it must see what it would have seen talking to Ganesha
directly.  Hand-written tests check the cases someone thought of; this
state machine lets Hypothesis pick the sequences (writes past the end,
truncates under dirty data, renames over links, stale handles ...) and
applies each operation twice, once to ``<export>/direct-N`` through
Ganesha's own port and once to ``<export>/chain-N`` through a chain's
first hop.  Every reply is reduced to what must agree (the status, the
data, the attributes that do not depend on time or identity) and the two
must be equal; the whole trees are compared over NFS at random points
and, at the end of each example, after a write-back flush, on disk.

Both the short functional run and the long soak run use
:func:`run_differential`.
"""

import asyncio
import collections
import dataclasses
import hashlib
import itertools
import os
import random
import shutil
import stat
import sys
import time

import hypothesis
from hypothesis import stateful
from hypothesis import strategies as st

from gvfs_lab.topology import FILE_GID
from gvfs_lab.topology import FILE_UID
from gvfs_openstack.client.nfs import NfsClient
from gvfs_openstack.nfs import const
from gvfs_openstack.nfs.const import Nfs3Proc as P
from gvfs_openstack.nfs import nfs3
from gvfs_openstack.proxy import control

KIB = 1024
MIB = 1024 * KIB

#: A caching chain: blocks cached, WRITEs written through.
CACHING = {"capacity_mb": 64}
#: The write-back chain; the idle timer is off so that data reaches
#: Ganesha only where the machine's ``flush`` rule (or teardown) says.
WRITEBACK = {"capacity_mb": 64, "write_policy": "writeback",
             "writeback_idle_seconds": 0}

KINDS = ("pass-through", "caching", "write-back", "lan")

#: Few names, so that operations collide (EXIST, NOTEMPTY, renames and
#: links over existing entries) as often as they succeed.
NAMES = ("a", "b", "c", "d")
#: Deeper than this, MKDIR is not offered (the tree stays small to walk).
MAX_DEPTH = 3
SYMLINK_TARGETS = ("a", "../b", "c/d", "/nonexistent", "x" * 200)
FILE_MODES = (0o644, 0o600, 0o755, 0o640, 0o444, 0o400, 0o200, 0o000)
DIR_MODES = (0o755, 0o700, 0o500)
#: Sizes that straddle the proxies' 64 KiB cache blocks.
BLOCK = 64 * KIB

_counter = itertools.count()


@dataclasses.dataclass
class Chain:
    """One way of reaching Ganesha through proxies.

    ``port`` is the first hop's (NFS and MOUNT); ``caches`` the control
    sockets of the proxies on the way that keep a cache, nearest first;
    ``writeback`` the control socket of the write-back proxy, if any.
    """

    kind: str
    port: int
    caches: tuple = ()
    writeback: str = None

    def flush(self):
        """Write dirty data upstream so that Ganesha (and disk) has it."""
        if self.writeback:
            result = control.request(self.writeback, "flush", timeout=300)
            assert result.get("dirty_bytes", 0) == 0, result

    def drop(self):
        """Empty the caches (after writing back), so reads go upstream."""
        for sock in self.caches:
            control.request(sock, "drop", timeout=300)


def start_chain(lab, kind):
    """Start the proxies of chain ``kind`` on ``lab``.

    ``lab`` must have been started with ``cache=CACHING``: its client
    proxy is the caching chain's first hop and the LAN chain's LAN proxy.
    """
    if kind == "pass-through":
        return Chain(kind, lab.add_client("diff-pass-through").port)
    if kind == "caching":
        proxy = lab.client_proxy
        return Chain(kind, proxy.port, (proxy.control_socket,))
    if kind == "write-back":
        proxy = lab.add_client("diff-write-back", cache=WRITEBACK)
        return Chain(kind, proxy.port, (proxy.control_socket,),
                     proxy.control_socket)
    if kind == "lan":
        leaf = lab.add_leaf("diff-leaf", cache=CACHING)
        return Chain(kind, leaf.port, (leaf.control_socket,
                                       lab.client_proxy.control_socket))
    raise ValueError("unknown chain kind %r" % kind)


# --- one side: a client, its base directory and raw calls ---------------

class Side:
    """One NFS client working under its own directory of the export."""

    def __init__(self, label, port, mount_port, export, dirname):
        self.label = label
        self.export = export
        self.dirname = dirname
        self.path = os.path.join(export, dirname)
        # The file account, as the server proxy squashes every client to
        # it: permission checks then come out the same on both sides.
        self.nfs = NfsClient("127.0.0.1", port, mount_port, uid=FILE_UID,
                             gid=FILE_GID, timeout=120)
        self.base = None
        self.rtmax = self.wtmax = None
        #: path -> file handle, as last looked up: kept across renames and
        #: removes for the stale-handle rule.
        self.handles = {}

    async def start(self):
        root = await self.nfs.mount(self.export)
        res = await self.call(P.MKDIR, nfs3.MkdirArgs(
            nfs3.DirOpArgs(root, self.dirname), nfs3.Sattr(mode=0o755)))
        assert res.ok, (self.label, "MKDIR", status_name(res.status))
        self.base = res.body.obj or (await self.nfs.lookup(
            root, self.dirname)).object
        info = await self.nfs.fsinfo(root)
        self.rtmax, self.wtmax = info.rtmax, info.wtmax

    def close(self):
        self.nfs.close()

    async def call(self, proc, args):
        """The decoded result, whatever its status."""
        return nfs3.decode_res(proc, await self.nfs.nfs.call(
            const.NFS_PROGRAM, const.NFS_V3, proc,
            nfs3.encode_args(proc, args)))

    async def resolve(self, path):
        """``(status, handle)`` of ``path`` by LOOKUPs from the base."""
        fh = self.base
        for part in _parts(path):
            res = await self.call(P.LOOKUP, nfs3.LookupArgs(
                nfs3.DirOpArgs(fh, part)))
            if not res.ok:
                return res.status, None
            fh = res.body.object
        if path:
            self.handles[path] = fh
        return 0, fh


def _parts(path):
    return [p for p in path.split("/") if p]


def _split(path):
    head, _, name = path.rpartition("/")
    return head, name


def status_name(status):
    return const.status_name(status)


def attrs(fattr):
    """What of a file's attributes must not depend on the path taken.

    Not times, fileids, fsid or ``used``; not the size of directories,
    which depends on the file system's history of the directory.
    """
    if fattr is None:
        return None
    kind = const.FileType(fattr.type)
    return (kind.name, fattr.mode & 0o7777, fattr.nlink, fattr.uid,
            fattr.gid, None if kind == const.FileType.NF3DIR
            else fattr.size)


def _wcc_after(wcc):
    return attrs(wcc.after if wcc is not None else None)


# --- the operations: each returns what both sides must agree on ----------

async def op_lookup(side, path):
    status, fh = await side.resolve(path)
    if status:
        return {"status": status_name(status)}
    res = await side.call(P.GETATTR, nfs3.GetattrArgs(fh))
    return {"status": status_name(res.status),
            "attrs": attrs(res.body.obj_attributes) if res.ok else None}


async def _in_dir(side, path):
    """``(outcome, dir handle, name)``; outcome set if the dir failed."""
    head, name = _split(path)
    status, fh = await side.resolve(head)
    if status:
        return {"lookup": status_name(status)}, None, name
    return None, fh, name


async def op_create(side, path, how, mode, verf):
    failed, dir_fh, name = await _in_dir(side, path)
    if failed:
        return failed
    if how == "exclusive":
        create_how = nfs3.CreateHow(const.CreateMode.EXCLUSIVE, verf=verf)
    elif how == "guarded":
        create_how = nfs3.CreateHow(const.CreateMode.GUARDED,
                                    nfs3.Sattr(mode=mode))
    elif how == "truncate":
        create_how = nfs3.CreateHow(const.CreateMode.UNCHECKED,
                                    nfs3.Sattr(mode=mode, size=0))
    else:
        create_how = nfs3.CreateHow(const.CreateMode.UNCHECKED,
                                    nfs3.Sattr(mode=mode))
    res = await side.call(P.CREATE, nfs3.CreateArgs(
        nfs3.DirOpArgs(dir_fh, name), create_how))
    return _new_obj(res)


def _new_obj(res):
    out = {"status": status_name(res.status)}
    if res.ok:
        out["attrs"] = attrs(res.body.obj_attributes)
        out["dir_attrs"] = _wcc_after(res.body.dir_wcc)
    return out


async def op_mkdir(side, path, mode):
    failed, dir_fh, name = await _in_dir(side, path)
    if failed:
        return failed
    return _new_obj(await side.call(P.MKDIR, nfs3.MkdirArgs(
        nfs3.DirOpArgs(dir_fh, name), nfs3.Sattr(mode=mode))))


async def op_symlink(side, path, target):
    failed, dir_fh, name = await _in_dir(side, path)
    if failed:
        return failed
    return _new_obj(await side.call(P.SYMLINK, nfs3.SymlinkArgs(
        nfs3.DirOpArgs(dir_fh, name), nfs3.Sattr(mode=0o777), target)))


async def _with_handle(side, path, fh, body):
    if fh is None:
        status, fh = await side.resolve(path)
        if status:
            return {"lookup": status_name(status)}
    return await body(fh)


async def op_write(side, path, offset, data, stable, fh=None):
    async def body(fh):
        res = await side.call(P.WRITE, nfs3.WriteArgs(
            fh, offset, len(data), stable, data))
        out = {"status": status_name(res.status)}
        if res.ok:
            out["count"] = res.body.count
            out["attrs"] = _wcc_after(res.body.file_wcc)
            # RFC 1813 3.3.7: committed is at least what was asked for.
            assert res.body.committed >= stable, (
                side.label, "WRITE committed %s < stable %s" % (
                    res.body.committed, stable))
        return out
    return await _with_handle(side, path, fh, body)


async def op_read(side, path, offset, count, fh=None):
    async def body(fh):
        res = await side.call(P.READ, nfs3.ReadArgs(fh, offset, count))
        out = {"status": status_name(res.status)}
        if res.ok:
            data = bytes(res.body.data)
            assert len(data) == res.body.count, (side.label, "READ count")
            out.update(requested=count, count=res.body.count,
                       eof=res.body.eof,
                       data=hashlib.sha256(data).hexdigest(),
                       attrs=attrs(res.body.file_attributes))
        return out
    return await _with_handle(side, path, fh, body)


async def op_getattr(side, path, fh=None):
    async def body(fh):
        res = await side.call(P.GETATTR, nfs3.GetattrArgs(fh))
        return {"status": status_name(res.status),
                "attrs": attrs(res.body.obj_attributes) if res.ok else None}
    return await _with_handle(side, path, fh, body)


async def op_setattr(side, path, size, mode):
    status, fh = await side.resolve(path)
    if status:
        return {"lookup": status_name(status)}
    res = await side.call(P.SETATTR, nfs3.SetattrArgs(
        fh, nfs3.Sattr(mode=mode, size=size)))
    out = {"status": status_name(res.status)}
    if res.ok:
        out["attrs"] = _wcc_after(res.body.obj_wcc)
    return out


async def op_commit(side, path, offset, count):
    status, fh = await side.resolve(path)
    if status:
        return {"lookup": status_name(status)}
    res = await side.call(P.COMMIT, nfs3.CommitArgs(fh, offset, count))
    # Verifiers differ by design (the write-back proxy makes its own).
    out = {"status": status_name(res.status)}
    if res.ok:
        out["attrs"] = _wcc_after(res.body.file_wcc)
    return out


async def op_access(side, path):
    status, fh = await side.resolve(path)
    if status:
        return {"lookup": status_name(status)}
    res = await side.call(P.ACCESS, nfs3.AccessArgs(fh, 0x3f))
    out = {"status": status_name(res.status)}
    if res.ok:
        out.update(access=res.body.access,
                   attrs=attrs(res.body.obj_attributes))
    return out


async def op_readlink(side, path):
    status, fh = await side.resolve(path)
    if status:
        return {"lookup": status_name(status)}
    res = await side.call(P.READLINK, nfs3.ReadlinkArgs(fh))
    out = {"status": status_name(res.status)}
    if res.ok:
        out["target"] = res.body.data
    return out


async def _readdirplus(side, fh):
    """``(status, {name: attrs})`` of a directory, ``.``/``..`` left out."""
    cookie, verf, entries = 0, b"\0" * 8, {}
    for _ in range(1000):
        res = await side.call(P.READDIRPLUS, nfs3.ReaddirplusArgs(
            fh, cookie, verf, 16 * KIB, 64 * KIB))
        if not res.ok:
            return res.status, None
        for entry in res.body.entries:
            if entry.name not in (".", ".."):
                assert entry.name not in entries, (side.label, "READDIRPLUS"
                                                   " repeats", entry.name)
                entries[entry.name] = (attrs(entry.name_attributes),
                                       entry.name_handle)
        if res.body.eof or not res.body.entries:
            return 0, entries
        cookie, verf = res.body.entries[-1].cookie, res.body.cookieverf
    raise AssertionError("%s: READDIRPLUS never reached eof" % side.label)


async def op_readdirplus(side, path):
    status, fh = await side.resolve(path)
    if status:
        return {"lookup": status_name(status)}
    status, entries = await _readdirplus(side, fh)
    out = {"status": status_name(status)}
    if not status:
        out["names"] = sorted(entries)
        out["entries"] = {name: a for name, (a, _) in entries.items()}
    return out


async def op_readdir(side, path):
    status, fh = await side.resolve(path)
    if status:
        return {"lookup": status_name(status)}
    cookie, verf, names = 0, b"\0" * 8, []
    while True:
        res = await side.call(P.READDIR, nfs3.ReaddirArgs(
            fh, cookie, verf, 8 * KIB))
        if not res.ok:
            return {"status": status_name(res.status)}
        names.extend(e.name for e in res.body.entries
                     if e.name not in (".", ".."))
        if res.body.eof or not res.body.entries:
            return {"status": "NFS3_OK", "names": sorted(names)}
        cookie, verf = res.body.entries[-1].cookie, res.body.cookieverf


async def op_remove(side, path, proc):
    failed, dir_fh, name = await _in_dir(side, path)
    if failed:
        return failed
    res = await side.call(proc, nfs3.RemoveArgs(
        nfs3.DirOpArgs(dir_fh, name)))
    out = {"status": status_name(res.status)}
    if res.ok:
        out["dir_attrs"] = _wcc_after(res.body.obj_wcc)
    return out


async def op_rename(side, src, dst):
    failed, from_fh, from_name = await _in_dir(side, src)
    if failed:
        return failed
    failed, to_fh, to_name = await _in_dir(side, dst)
    if failed:
        return {"to": failed}
    res = await side.call(P.RENAME, nfs3.RenameArgs(
        nfs3.DirOpArgs(from_fh, from_name), nfs3.DirOpArgs(to_fh, to_name)))
    out = {"status": status_name(res.status)}
    if res.ok:
        out["dir_attrs"] = (_wcc_after(res.body.fromdir_wcc),
                            _wcc_after(res.body.todir_wcc))
    return out


async def op_link(side, src, dst):
    status, fh = await side.resolve(src)
    if status:
        return {"lookup": status_name(status)}
    failed, dir_fh, name = await _in_dir(side, dst)
    if failed:
        return {"to": failed}
    res = await side.call(P.LINK, nfs3.LinkArgs(
        fh, nfs3.DirOpArgs(dir_fh, name)))
    out = {"status": status_name(res.status)}
    if res.ok:
        out["attrs"] = attrs(res.body.file_attributes)
        out["dir_attrs"] = _wcc_after(res.body.linkdir_wcc)
    return out


# --- whole trees ----------------------------------------------------------

async def _read_all(side, fh):
    digest, offset = hashlib.sha256(), 0
    count = min(side.rtmax, MIB)
    while True:
        res = await side.call(P.READ, nfs3.ReadArgs(fh, offset, count))
        if not res.ok:
            return status_name(res.status)
        digest.update(res.body.data)
        offset += res.body.count
        if res.body.eof:
            return "%d:%s" % (offset, digest.hexdigest())
        if not res.body.count:
            return "short read without eof at %d" % offset


async def nfs_tree(side):
    """``{path: (attrs, content)}`` of the side's tree, read over NFS."""
    tree = {}

    async def walk(fh, prefix):
        status, entries = await _readdirplus(side, fh)
        if status:
            # A directory the file account may not read (mode 0200 ...).
            tree[prefix + "*"] = (None, status_name(status))
            return
        for name in sorted(entries):
            listed, child = entries[name]
            path = prefix + name
            if not child:
                found = await side.call(P.LOOKUP, nfs3.LookupArgs(
                    nfs3.DirOpArgs(fh, name)))
                if not found.ok:
                    # Listed, not searchable (a directory mode 0444 ...).
                    tree[path] = (listed, status_name(found.status))
                    continue
                child = found.body.object
            got = await side.call(P.GETATTR, nfs3.GetattrArgs(child))
            assert got.ok, (side.label, path, status_name(got.status))
            now = attrs(got.body.obj_attributes)
            # What READDIRPLUS said, where it differs from GETATTR.
            now = now if listed in (None, now) else (now, listed)
            kind = got.body.obj_attributes.type
            if kind == const.FileType.NF3DIR:
                tree[path] = (now, None)
                await walk(child, path + "/")
            elif kind == const.FileType.NF3LNK:
                tree[path] = (now, (await side.nfs.readlink(child)))
            else:
                tree[path] = (now, await _read_all(side, child))

    await walk(side.base, "")
    return tree


def disk_tree(root):
    """``{path: (attrs, content)}`` as the export's file system has it."""
    tree = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(dirnames + filenames):
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, root)
            st_ = os.lstat(full)
            mode = stat.S_IMODE(st_.st_mode)
            if stat.S_ISDIR(st_.st_mode):
                entry = (("NF3DIR", mode, st_.st_nlink, st_.st_uid,
                          st_.st_gid, None), None)
            elif stat.S_ISLNK(st_.st_mode):
                entry = (("NF3LNK", mode, st_.st_nlink, st_.st_uid,
                          st_.st_gid, st_.st_size), os.readlink(full))
            else:
                with open(full, "rb") as f:
                    content = f.read()
                entry = (("NF3REG", mode, st_.st_nlink, st_.st_uid,
                          st_.st_gid, st_.st_size), "%d:%s" % (
                              len(content),
                              hashlib.sha256(content).hexdigest()))
            tree[rel] = entry
    return tree


def tree_differences(direct, chain, tolerate=lambda d, c: None):
    """Lines saying what differs.

    ``tolerate(d, c)`` names a known bug that explains the difference of
    two entries' attributes.
    """
    lines = []
    for path in sorted(set(direct) | set(chain)):
        d, c = direct.get(path), chain.get(path)
        if d != c and not (d and c and d[1] == c[1] and tolerate(d[0],
                                                                 c[0])):
            lines.append("  %s: direct %s, chain %s" % (path, d, c))
    return lines


def outcome_differences(direct, chain):
    """``(field, text)`` of what differs.

    Attributes one side left out are not compared:

    Post-operation attributes are optional in NFSv3 replies.
    """
    lines = []
    for key in sorted(set(direct) | set(chain)):
        d, c = direct.get(key), chain.get(key)
        if key.endswith("attrs") and (d is None or c is None):
            continue
        if key == "eof" and direct.get("requested") == 0:
            # Ganesha answers a READ of 0 bytes eof=False even at the
            # end of the file; a proxy answering it from its cache says
            # eof=True.  RFC 1813 3.3.6 ties eof to the data returned:
            # there is none.  Not a bug either way.
            continue
        if key == "entries":
            for name in sorted(set(d or {}) | set(c or {})):
                a, b = (d or {}).get(name), (c or {}).get(name)
                if a is not None and b is not None and a != b:
                    lines.append((key, "  entry %s: direct %s, chain %s"
                                  % (name, a, b)))
            continue
        if key == "dir_attrs" and isinstance(d, tuple) and \
                isinstance(c, tuple) and len(d) == 2 and not isinstance(
                    d[0], str):
            for x, y in zip(d, c):
                if x is not None and y is not None and x != y:
                    lines.append((key, "  dir_attrs: direct %s, chain %s"
                                  % (x, y)))
            continue
        if d != c:
            lines.append((key, "  %s: direct %s, chain %s" % (key, d, c)))
    return lines


# --- differences that are known and explained ------------------------------

#: name -> (chain kinds, test(operation, field, direct, chain), why).
#: Only the difference described is let pass (and counted, and printed);
#: the rest of the reply is still compared (all of it unless the
#: difference is in the status), and after the write-back flush at the
#: end of every example the trees must be equal.  The proxy bugs this
#: machine found are fixed; their reproductions are tests in
#: tests/functional/test_differential.py.
KNOWN_BUGS = {
    # Not a bug of the proxies but a difference caching makes: Ganesha
    # keeps an EXCLUSIVE CREATE's verifier in the file's atime.  A READ
    # sent straight to it moves the atime, so a repeated EXCLUSIVE CREATE
    # with the same verifier no longer matches (EXIST); a READ a caching
    # proxy answers from its cache leaves it, and the repeat is taken
    # for the retry it looks like (OK).
    "cached-read-keeps-exclusive-verifier": (
        ("caching", "lan", "write-back"),
        lambda op, field, d, c: op == "CREATE" and field == "status" and
        d == "NFS3ERR_EXIST" and c == "NFS3_OK",
        "a READ answered from a caching proxy's cache leaves the server's "
        "atime, where Ganesha keeps an EXCLUSIVE CREATE's verifier: a "
        "repeated EXCLUSIVE CREATE with that verifier gets NFS3_OK "
        "through the chain and NFS3ERR_EXIST directly"),
}


def known_bug(kind, op, field, direct, chain):
    """The name of the known bug explaining this difference, or None."""
    for name, (kinds, test, _) in KNOWN_BUGS.items():
        if kind in kinds and test(op, field, direct.get(field),
                                  chain.get(field)):
            return name
    return None


# --- the state machine ------------------------------------------------------

def _files_and_dirs(root):
    """Sorted relative paths on disk: (all entries, directories, files)."""
    entries, dirs, files = [], [""], []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(dirnames + filenames):
            rel = os.path.relpath(os.path.join(dirpath, name), root)
            entries.append(rel)
            if name in dirnames:
                dirs.append(rel)
            elif os.path.isfile(os.path.join(dirpath, name)) and \
                    not os.path.islink(os.path.join(dirpath, name)):
                files.append(rel)
    return sorted(entries), sorted(dirs), sorted(files)


def _offsets():
    return st.one_of(
        st.integers(0, 300 * KIB),
        st.builds(lambda k, d: max(0, k * BLOCK + d), st.integers(0, 64),
                  st.integers(-3, 3)),
        st.integers(0, 6 * MIB))


class DifferentialMachine(stateful.RuleBasedStateMachine):
    """Same operations, Ganesha direct vs. a chain; set up by a subclass.

    Subclasses (made by :func:`machine_for`) set ``chain``, ``export`` and
    ``ganesha`` (its NFS and MOUNT ports).
    """

    chain = None
    export = None
    ganesha = None
    #: Examples started by this class (the soak run reports them).
    examples = 0
    #: (operation, status) -> how often: shows what a run exercised.
    outcomes = None
    #: Known bug -> how often it showed (and was let pass).
    known = None

    def __init__(self):
        super().__init__()
        type(self).examples += 1
        self.loop = asyncio.new_event_loop()
        self.log = []
        self.failed = False
        n = "%d-%d-%d" % (os.getpid(), int(time.time() * 1000) % 10**9,
                          next(_counter))
        kind = self.chain.kind.replace(" ", "-")
        self.direct = Side("direct", self.ganesha[0], self.ganesha[1],
                           self.export, "direct-%s-%s" % (kind, n))
        self.proxied = Side(self.chain.kind, self.chain.port,
                            self.chain.port, self.export,
                            "chain-%s-%s" % (kind, n))
        try:
            self._run(self.direct.start())
            self._run(self.proxied.start())
        except BaseException:
            self._close()
            raise
        self.rtmax = min(self.direct.rtmax, self.proxied.rtmax)
        self.wtmax = min(self.direct.wtmax, self.proxied.wtmax)

    # -- plumbing --

    def _run(self, coroutine):
        # Left set if the call raises: teardown then does not compare
        # (and so hide the error under another).
        self.failed = True
        result = self.loop.run_until_complete(coroutine)
        self.failed = False
        return result

    def _both(self, label, op, *args, **kwargs):
        """Apply ``op`` to both sides at once; their outcomes must agree."""
        d, c = self._run(_gather(op(self.direct, *args, **kwargs),
                                 op(self.proxied, *args, **kwargs)))
        self.log.append("%s -> %s" % (label, _short(d)))
        self.outcomes[label.split()[0], d.get("status") or "lookup " + str(
            d.get("lookup") or d.get("to"))] += 1
        lines = []
        op = label.split()[0]
        status_bug = known_bug(self.chain.kind, op, "status", d, c)
        if status_bug:
            # The rest of the reply follows from the status.
            self.known[status_bug] += 1
        for field, text in () if status_bug else outcome_differences(d, c):
            bug = known_bug(self.chain.kind, op, field, d, c)
            if bug:
                self.known[bug] += 1
            else:
                lines.append(text)
        if lines:
            self._fail("%s differs through the %s chain:\n%s\n"
                       "direct: %s\nchain:  %s" % (
                           label, self.chain.kind, "\n".join(lines), d, c))
        return d

    def _fail(self, message):
        self.failed = True
        raise AssertionError("%s\nlast operations (direct outcomes):\n%s"
                             % (message, "\n".join(
                                 "  " + line for line in self.log[-40:])))

    def _state(self):
        return _files_and_dirs(self.direct.path)

    def _any_path(self, data):
        entries, dirs, _ = self._state()
        new = [(d + "/" if d else "") + n for d in dirs for n in NAMES
               if len(_parts(d)) < MAX_DEPTH]
        return data.draw(st.sampled_from(entries) | st.sampled_from(new)
                         if entries else st.sampled_from(new))

    def _file_path(self, data):
        """Mostly a regular file that exists, so that I/O gets done."""
        _, _, files = self._state()
        if files and data.draw(st.integers(0, 3), label="existing"):
            return data.draw(st.sampled_from(files), label="file")
        return self._any_path(data)

    def _dir_path(self, data):
        _, dirs, _ = self._state()
        return data.draw(st.sampled_from(dirs), label="dir")

    def _new_path(self, data):
        _, dirs, _ = self._state()
        parent = data.draw(st.sampled_from(dirs), label="parent")
        name = data.draw(st.sampled_from(NAMES), label="name")
        return (parent + "/" if parent else "") + name

    def _payload(self, data):
        big = min(self.wtmax, 2 * MIB)
        size = data.draw(st.one_of(
            st.integers(0, 4 * KIB), st.integers(0, 256 * KIB),
            st.sampled_from([BLOCK - 1, BLOCK, BLOCK + 1, 2 * BLOCK]),
            st.integers(min(MIB + 1, big), big)), label="size")
        fill = data.draw(st.sampled_from(["random", "zeros"]), label="fill")
        if fill == "zeros":
            return bytes(size)
        seed = data.draw(st.integers(0, 2**16), label="seed")
        return random.Random(seed).randbytes(size)

    # -- rules: names and directories --

    @stateful.initialize(data=st.data(), files=st.integers(0, 3))
    def populate(self, data, files):
        """A few files with data, so that I/O rules find something."""
        for name in NAMES[:files]:
            self._both("CREATE %s" % name, op_create, name, "unchecked",
                       0o644, None)
            payload = self._payload(data)
            self._both("WRITE %s offset=0 count=%d" % (name, len(payload)),
                       op_write, name, 0, payload, const.StableHow.UNSTABLE)

    @stateful.rule(data=st.data(),
                   how=st.sampled_from(["unchecked", "guarded", "exclusive",
                                        "truncate"]),
                   mode=st.sampled_from(FILE_MODES[:4]) | st.sampled_from(
                       FILE_MODES),
                   verf=st.sampled_from([b"verifier", b"\0" * 8]))
    def create(self, data, how, mode, verf):
        path = self._new_path(data)
        self._both("CREATE %s %s mode=%o" % (path, how, mode), op_create,
                   path, how, mode, verf)

    @stateful.rule(data=st.data(), mode=st.sampled_from(DIR_MODES))
    def mkdir(self, data, mode):
        path = self._new_path(data)
        self._both("MKDIR %s mode=%o" % (path, mode), op_mkdir, path, mode)

    @stateful.rule(data=st.data(), link_to=st.sampled_from(SYMLINK_TARGETS))
    def symlink(self, data, link_to):
        path = self._new_path(data)
        self._both("SYMLINK %s -> %s" % (path, link_to[:20]), op_symlink,
                   path, link_to)

    @stateful.rule(data=st.data())
    def remove(self, data):
        path = self._any_path(data)
        self._both("REMOVE %s" % path, op_remove, path, P.REMOVE)

    @stateful.rule(data=st.data())
    def rmdir(self, data):
        path = self._any_path(data)
        self._both("RMDIR %s" % path, op_remove, path, P.RMDIR)

    @stateful.rule(data=st.data())
    def rename(self, data):
        src = self._any_path(data)
        if data.draw(st.booleans(), label="over an existing entry"):
            dst = self._any_path(data)
        else:
            dst = self._new_path(data)
        self._both("RENAME %s -> %s" % (src, dst), op_rename, src, dst)

    @stateful.rule(data=st.data())
    def link(self, data):
        src = self._any_path(data)
        dst = self._new_path(data)
        self._both("LINK %s -> %s" % (src, dst), op_link, src, dst)

    # -- rules: data --

    @stateful.rule(data=st.data(), offset=_offsets(),
                   stable=st.sampled_from(list(const.StableHow)))
    def write(self, data, offset, stable):
        path = self._file_path(data)
        payload = self._payload(data)
        self._both("WRITE %s offset=%d count=%d %s" % (
            path, offset, len(payload), stable.name), op_write, path,
            offset, payload, stable)

    @stateful.rule(data=st.data(), offset=_offsets(),
                   count=st.one_of(st.integers(0, 256 * KIB),
                                   st.integers(0, 2 * MIB)))
    def read(self, data, offset, count):
        path = self._file_path(data)
        count = min(count, self.rtmax)
        self._both("READ %s offset=%d count=%d" % (path, offset, count),
                   op_read, path, offset, count)

    @stateful.rule(data=st.data(),
                   size=st.none() | _offsets(),
                   mode=st.none() | st.sampled_from(FILE_MODES))
    def setattr(self, data, size, mode):
        path = self._file_path(data)
        self._both("SETATTR %s size=%s mode=%s" % (
            path, size, None if mode is None else "%o" % mode), op_setattr,
            path, size, mode)

    @stateful.rule(data=st.data(), offset=st.sampled_from([0, 0, BLOCK]),
                   count=st.sampled_from([0, 0, 4 * KIB]))
    def commit(self, data, offset, count):
        path = self._file_path(data)
        self._both("COMMIT %s offset=%d count=%d" % (path, offset, count),
                   op_commit, path, offset, count)

    # -- rules: looking --

    @stateful.rule(data=st.data())
    def lookup(self, data):
        path = self._any_path(data)
        self._both("LOOKUP+GETATTR %s" % path, op_lookup, path)

    @stateful.rule(data=st.data())
    def access(self, data):
        path = self._any_path(data)
        self._both("ACCESS %s" % path, op_access, path)

    @stateful.rule(data=st.data())
    def readlink(self, data):
        path = self._any_path(data)
        self._both("READLINK %s" % path, op_readlink, path)

    @stateful.rule(data=st.data(), plus=st.booleans())
    def readdir(self, data, plus):
        path = self._dir_path(data) if data.draw(st.booleans()) else \
            self._any_path(data)
        if plus:
            self._both("READDIRPLUS %s" % path, op_readdirplus, path)
        else:
            self._both("READDIR %s" % path, op_readdir, path)

    @stateful.precondition(lambda self: self.direct.handles)
    @stateful.rule(data=st.data(), what=st.sampled_from(
        ["getattr", "read", "write"]), offset=st.integers(0, 200 * KIB))
    def old_handle(self, data, what, offset):
        """I/O through a handle looked up earlier.

        Maybe renamed since, maybe removed (then Ganesha says STALE).
        """
        path = data.draw(st.sampled_from(sorted(
            set(self.direct.handles) & set(self.proxied.handles))))
        fhs = {self.direct.label: self.direct.handles[path],
               self.proxied.label: self.proxied.handles[path]}

        def on(op):
            async def call(side, *args):
                return await op(side, path, *args, fh=fhs[side.label])
            return call
        label = "%s via old handle of %s" % (what.upper(), path)
        if what == "getattr":
            self._both(label, on(op_getattr))
        elif what == "read":
            self._both(label + " offset=%d" % offset, on(op_read), offset,
                       64 * KIB)
        else:
            payload = self._payload(data)
            self._both(label + " offset=%d count=%d" % (offset,
                                                        len(payload)),
                       on(op_write), offset, payload,
                       const.StableHow.UNSTABLE)

    # -- rules: the chain's own moves --

    @stateful.precondition(lambda self: self.chain.writeback)
    @stateful.rule()
    def flush(self):
        self.log.append("(flush the write-back proxy)")
        self.failed = True
        self.chain.flush()
        self.failed = False

    @stateful.precondition(lambda self: self.chain.caches)
    @stateful.rule()
    def drop_caches(self):
        self.log.append("(drop the chain's caches)")
        self.failed = True
        self.chain.drop()
        self.failed = False

    @stateful.rule()
    def compare_trees(self):
        self.log.append("(compare the trees over NFS)")
        self._compare_nfs_trees()

    def _compare_nfs_trees(self):
        direct, chain = self._run(_gather(nfs_tree(self.direct),
                                          nfs_tree(self.proxied)))

        def tolerate(d, c):
            # Only GETATTR's attributes may differ; READDIRPLUS's agree.
            if isinstance(c, tuple) and isinstance(c[0], tuple):
                c = c[0] if c[1] == d else None
            bug = known_bug(self.chain.kind, "GETATTR", "attrs",
                            {"attrs": d}, {"attrs": c})
            if bug:
                self.known[bug] += 1
            return bug
        lines = tree_differences(direct, chain, tolerate)
        if lines:
            self._fail("the trees differ over NFS through the %s chain:\n%s"
                       % (self.chain.kind, "\n".join(lines)))

    def _compare_disk_trees(self):
        lines = tree_differences(disk_tree(self.direct.path),
                                 disk_tree(self.proxied.path))
        if lines:
            self._fail("the trees differ on disk after the %s chain's "
                       "flush:\n%s" % (self.chain.kind, "\n".join(lines)))

    def teardown(self):
        try:
            if not self.failed:
                self._compare_nfs_trees()
                self.failed = True
                self.chain.flush()
                self.failed = False
                self._compare_disk_trees()
                # And what Ganesha now serves of the chain's directory.
                self._compare_nfs_trees()
        finally:
            self._close()
        # The trees are equal (a failure keeps them to look at): they go,
        # so that long runs do not fill the disk.
        if not self.failed:
            for side in (self.direct, self.proxied):
                shutil.rmtree(side.path, ignore_errors=True)

    def _close(self):
        self.direct.close()
        self.proxied.close()
        self.loop.close()


async def _gather(*coroutines):
    """gather inside the machine's loop (outside, it takes another)."""
    return await asyncio.gather(*coroutines)


def _short(outcome):
    text = str(outcome)
    return text if len(text) < 200 else text[:200] + "..."


def machine_for(chain, lab):
    """A state machine class comparing ``chain`` with ``lab``'s Ganesha."""
    return type("Differential_" + chain.kind.replace("-", "_"),
                (DifferentialMachine,),
                {"chain": chain, "export": lab.export,
                 "ganesha": (lab.ganesha.nfs_port, lab.ganesha.mount_port),
                 "examples": 0, "outcomes": collections.Counter(),
                 "known": collections.Counter()})


def run_differential(chain, lab, examples, steps, seconds=None, batch=None):
    """Run the machine for ``chain``, bounded in examples and time.

    At most ``examples``, and no new batch once ``seconds`` have passed.

    Hypothesis has no wall-clock bound, so a long run is cut into batches
    of ``batch`` examples, each with its own seed derived from the run's
    seed (``GVFS_DIFF_SEED`` to replay one).  Returns ``(examples run,
    seconds taken)``.
    """
    base_seed = int(os.environ.get("GVFS_DIFF_SEED") or
                    random.SystemRandom().randrange(2**32))
    batch = batch or examples
    start = time.monotonic()
    machine = machine_for(chain, lab)
    done = 0
    for number in itertools.count():
        if done >= examples or (seconds is not None and number and
                                time.monotonic() - start >= seconds):
            break
        size = min(batch, examples - done)
        seed = base_seed + number
        print("differential %s: batch %d, %d examples of <= %d steps, "
              "seed %d (replay the first batch with GVFS_DIFF_SEED=%d)"
              % (chain.kind, number, size, steps, seed, seed),
              file=sys.stderr, flush=True)
        before = machine.examples
        stateful.run_state_machine_as_test(
            hypothesis.seed(seed)(machine), settings=hypothesis.settings(
                max_examples=size, stateful_step_count=steps,
                deadline=None, database=None, print_blob=True,
                phases=[hypothesis.Phase.explicit, hypothesis.Phase.generate,
                        hypothesis.Phase.shrink],
                suppress_health_check=list(hypothesis.HealthCheck)))
        done += machine.examples - before
    took = time.monotonic() - start
    for bug, n in sorted(machine.known.items()):
        print("differential %s: known bug %s seen %d times (let pass): %s"
              % (chain.kind, bug, n, KNOWN_BUGS[bug][2]), file=sys.stderr,
              flush=True)
    print("differential %s: %d examples, %d operations in %.0f s; %s" % (
        chain.kind, done, sum(machine.outcomes.values()), took, ", ".join(
            "%s %s: %d" % (op, status, n) for (op, status), n in sorted(
                machine.outcomes.items()))), file=sys.stderr, flush=True)
    return done, took


def replay(lab, chain, steps):
    """Apply fixed ``steps`` to both sides; ``[(step, direct, chain)]``.

    A step is ``(op, path, *args)`` with ``op`` one of the ``op_*``
    functions; ``op`` may be ``("old", op)``, to go through the handle
    ``path`` had when it was last looked up.  The reproductions of the
    bugs this machine found are written with it.
    """
    async def run():
        n = next(_counter)
        sides = [Side("direct", lab.ganesha.nfs_port, lab.ganesha.mount_port,
                      lab.export, "replay-direct-%d" % n),
                 Side(chain.kind, chain.port, chain.port, lab.export,
                      "replay-chain-%d" % n)]
        results = []
        try:
            for side in sides:
                await side.start()
            for op, *args in steps:
                outs = []
                for side in sides:
                    if isinstance(op, tuple):
                        outs.append(await op[1](side, *args,
                                                fh=side.handles[args[0]]))
                    else:
                        outs.append(await op(side, *args))
                results.append(((op, *args), *outs))
        finally:
            for side in sides:
                side.close()
        return results
    return asyncio.run(run())
