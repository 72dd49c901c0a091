# SPDX-License-Identifier: Apache-2.0
"""What replies passing through the proxy tell the cache.

Writes and attribute changes that go through this proxy must reach the
cache (write-through): written blocks are discarded, and the new file
attributes are recorded as this proxy's own change so that the file's
other cached blocks stay valid.  GETATTR replies refresh what the proxy
knows of a file; LOOKUP replies say where to look for a file's metadata
sidecar, and their attributes are as fresh as a GETATTR's: a client that
looks a file up and then opens and reads it (every first access) is not
made to wait for one more round trip to the server for attributes the
proxy has just seen.  Not those of a file with dirty bytes here: the
server's attributes are behind what write-back holds.

Replies that name a file by directory and name (LOOKUP, CREATE, MKDIR,
SYMLINK, MKNOD, LINK, READDIRPLUS) teach :class:`names.Names` which
handle that is, so that a REMOVE, RMDIR or RENAME over an existing name
can tell which file it may have unlinked for good.  The proxy forgets
that file (its attributes, sidecar and export): the next use of its
handle asks the server, which says NFS3ERR_STALE if it is gone, and
what is left of the cache is only what live files need.  A REMOVE's
reply cannot say whether another link keeps the file; the server can.
"""


from oslo_log import log as logging

from gvfs_openstack.nfs import const
from gvfs_openstack.nfs.const import MountProc
from gvfs_openstack.nfs.const import Nfs3Proc
from gvfs_openstack.nfs.errors import ProtocolError
from gvfs_openstack.nfs import mount3
from gvfs_openstack.nfs import nfs3
from gvfs_openstack.nfs import rpc
from gvfs_openstack.nfs.xdr import Unpacker
from gvfs_openstack.proxy.cache import names as names_mod

LOG = logging.getLogger(__name__)

#: Calls that make a new object and may give its handle.
_MAKING = frozenset({Nfs3Proc.CREATE, Nfs3Proc.MKDIR, Nfs3Proc.SYMLINK,
                     Nfs3Proc.MKNOD})
_WATCHED = _MAKING | {
    Nfs3Proc.WRITE, Nfs3Proc.SETATTR, Nfs3Proc.GETATTR, Nfs3Proc.LOOKUP,
    Nfs3Proc.LINK, Nfs3Proc.READDIRPLUS, Nfs3Proc.REMOVE, Nfs3Proc.RMDIR,
    Nfs3Proc.RENAME}


def _write_range(args):
    """fh, offset and count of WRITE args, without copying the data."""
    u = Unpacker(args)
    return (u.unpack_opaque(const.NFS3_FHSIZE), u.unpack_uhyper(),
            u.unpack_uint())


class ReplyObserver:
    """Tells the cache what each reply passing through the proxy means.

    ``fetcher`` (:class:`fetch.Fetcher`) drops written blocks, ``files``
    (:class:`FileStates`) takes attributes, ``policies``
    (:class:`ExportPolicies`) and ``sidecars`` (:class:`Sidecars`, if
    any) learn which export and which name a handle has, and all three
    forget files removed through the proxy.  ``names``
    (:class:`names.Names`, a new one by default) says which handle a
    removed name was.
    """

    def __init__(self, fetcher, files, policies, sidecars=None, names=None):
        self.fetcher = fetcher
        self.files = files
        self.policies = policies
        self.sidecars = sidecars
        self.names = names_mod.Names() if names is None else names

    def mount(self, call, reply_message):
        """An MNT reply names the root handle of an export."""
        if call.proc != MountProc.MNT:
            return
        try:
            results = rpc.results_of(reply_message)
            if results is None:
                return
            res = mount3.decode_res(MountProc.MNT, results)
            if res.ok:
                path = mount3.decode_args(MountProc.MNT, call.args).dirpath
                self.policies.learn_root(res.body.fhandle, path)
        except ProtocolError as e:
            LOG.warning("cannot learn from an MNT reply: %s", e)

    def wrote(self, fh, offset, count, res):
        """A WRITE of ``count`` bytes at ``offset`` went upstream.

        ``res`` is its ``nfs3.Result``, None if there is none to read.
        """
        # Whatever the outcome, those bytes may have changed.
        self.fetcher.discard_range(fh, offset, count)
        if res is not None:
            self._own_write(fh, res)

    def _own_write(self, fh, res):
        self.files.observe_own_change(
            fh, res.body.file_wcc if res.ok else res.body.obj_wcc)

    def reply(self, call, reply_message, dirty=()):
        """What ``reply_message`` to NFS ``call`` tells the cache.

        ``dirty``: handles of files with bytes written back here only.
        """
        if call.proc not in _WATCHED:
            return
        try:
            if call.proc == Nfs3Proc.WRITE:
                fh, offset, count = _write_range(call.args)
                # Whatever the outcome, those bytes may have changed.
                self.fetcher.discard_range(fh, offset, count)
            results = rpc.results_of(reply_message)
            if results is None:
                return
            res = nfs3.decode_res(call.proc, results)
            if call.proc == Nfs3Proc.WRITE:
                self._own_write(fh, res)
            else:
                self._learn(call, res, dirty)
        except ProtocolError as e:
            LOG.warning("cannot learn from a %s reply: %s",
                        Nfs3Proc(call.proc).name, e)

    def _learn(self, call, res, dirty):
        if call.proc == Nfs3Proc.SETATTR:
            args = nfs3.decode_args(Nfs3Proc.SETATTR, call.args)
            wcc = res.body.obj_wcc
            self._resized(args.object, args.new_attributes.size,
                          wcc.after if wcc else None)
            self.files.observe_own_change(args.object, wcc, reset=True)
        elif call.proc == Nfs3Proc.GETATTR and res.ok:
            fh = nfs3.decode_args(Nfs3Proc.GETATTR, call.args).object
            self.files.observe(fh, res.body.obj_attributes)
        elif call.proc == Nfs3Proc.LOOKUP and res.ok:
            args = nfs3.decode_args(Nfs3Proc.LOOKUP, call.args)
            self.policies.learn_child(args.what.dir, res.body.object)
            if res.body.object not in dirty:
                self.files.observe(res.body.object, res.body.obj_attributes)
            if self.sidecars is not None:
                self.sidecars.learn(args.what.dir, args.what.name,
                                    res.body.object)
            self.names.learn(args.what.dir, args.what.name, res.body.object)
        elif call.proc in _MAKING and res.ok and res.body.obj:
            # The new object lives in its directory's export.
            args = nfs3.decode_args(call.proc, call.args)
            where = args.where
            self.policies.learn_child(where.dir, res.body.obj)
            self.names.learn(where.dir, where.name, res.body.obj)
            if call.proc == Nfs3Proc.CREATE and res.body.obj not in dirty:
                # It may have truncated a file known here.
                given = args.how.attributes
                self._resized(res.body.obj, given and given.size,
                              res.body.obj_attributes)
                self.files.observe_created(res.body.obj,
                                           res.body.obj_attributes)
        elif call.proc == Nfs3Proc.LINK and res.ok:
            args = nfs3.decode_args(Nfs3Proc.LINK, call.args)
            self.names.learn(args.link.dir, args.link.name, args.file)
            if bytes(args.file) not in dirty:
                # Its link count: whether a REMOVE may leave it linked.
                self.files.observe(args.file, res.body.file_attributes)
        elif call.proc == Nfs3Proc.READDIRPLUS and res.ok:
            dir_fh = nfs3.decode_args(Nfs3Proc.READDIRPLUS, call.args).dir
            for entry in res.body.entries:
                self.names.learn(dir_fh, entry.name, entry.name_handle)
        elif call.proc in (Nfs3Proc.REMOVE, Nfs3Proc.RMDIR):
            # NOENT too: the name is gone (a first attempt whose reply was
            # lost may have removed it).
            if res.ok or res.status == const.NfsStat.NFS3ERR_NOENT:
                what = nfs3.decode_args(call.proc, call.args).object
                self._unlinked(self.names.pop(what.dir, what.name))
        elif call.proc == Nfs3Proc.RENAME and res.ok:
            args = nfs3.decode_args(Nfs3Proc.RENAME, call.args)
            moved = self.names.pop(args.from_.dir, args.from_.name)
            replaced = self.names.pop(args.to.dir, args.to.name)
            if replaced != moved:
                # Renamed over: the target's old file lost that link.
                self._unlinked(replaced)
            if moved is not None:
                self.names.learn(args.to.dir, args.to.name, moved)

    def _resized(self, fh, size, fattr):
        """A CREATE or SETATTR through this proxy set ``fh``'s ``size``.

        The cached bytes past ``size`` are gone whatever attributes the
        reply (``fattr``, if any) gives: Ganesha has answered a
        truncating CREATE with the size and times from before it (the
        differential test, in CI), under which the old blocks would
        still look current.  They are discarded up to the largest size
        this proxy knows of the file.
        """
        if size is None:
            return
        state = self.files.get(fh)
        known = [fattr.size] if fattr is not None else []
        if state is not None:
            known.append(state.fattr.size)
            known.extend(attrs.size for attrs in state.current)
        end = max(known, default=size)
        if end > size:
            self.fetcher.discard_range(fh, size, end - size)

    def _unlinked(self, fh):
        """A removal through this proxy took a link of ``fh`` (if known).

        Maybe its last: whatever is known of the file goes, and the next
        use of its handle asks the server.  Its export is kept while the
        proxy knows of other links (the handle then stays in use).
        """
        if fh is None:
            return
        state = self.files.get(fh)
        linked = state is not None and \
            state.fattr.type != const.FileType.NF3DIR and \
            state.fattr.nlink > 1
        self.files.removed(fh)
        if self.sidecars is not None:
            self.sidecars.forget(fh)
        if not linked:
            self.policies.forget(fh)
