# SPDX-License-Identifier: Apache-2.0
"""The ``gvfs`` glance_store driver: images on a DTN export via GVFS.

The store writes into a directory that is the GVFS mount of a DTN export
(a kernel NFS mount of the local client proxy, or ``gvfs-proxy mount``);
to this driver it is a directory with POSIX semantics.  What it adds to a
plain file store is what the proxies need and what an export shared by
many hosts must never see:

* an upload streams into a hidden temporary name, is fsync'd, and only
  then appears under its image id (``link``, so a concurrent upload of the
  same id is a ``Duplicate``, never an overwrite); any failure removes the
  temporary file;
* all-zero chunks become holes (thin provisioning), and in the same pass
  the metadata sidecar is built (zero map, digest, ``whole_file`` for the
  disk formats that are read in full) for the client proxies;
* MD5, the requested multihash and the block signature the migration
  conductor's delta transfer reads are computed in that same pass, each
  on a thread of its own (:class:`ParallelHashes`);
* locations are ``gvfs://<store id>/<image id>``; an image id that could
  name anything but a plain file in the store's directory (``..``, ``/``,
  dot files, symlinks leading out) is refused, and a read opens only
  the file checked, never a link swapped in after the check
  (:mod:`checked_open`).
"""

import collections
from concurrent import futures
import errno
import hashlib
import os
import stat
import uuid

from glance_store import capabilities
from glance_store import driver
from glance_store import exceptions
from glance_store import location as store_location
from oslo_log import log as logging

from gvfs_openstack.conf import glance as glance_conf
from gvfs_openstack.delta import blocks
from gvfs_openstack import exceptions as gvfs_exceptions
from gvfs_openstack.files import durable
from gvfs_openstack.glance import checked_open
from gvfs_openstack.images import golden
from gvfs_openstack.images import locations
from gvfs_openstack.mount import configured
from gvfs_openstack.sidecar import profile
from gvfs_openstack.sidecar import scan

LOG = logging.getLogger(__name__)

SCHEME = locations.SCHEME
_UPLOAD_PREFIX = ".gvfs-upload."


def _safe_image_id(image_id):
    if not locations.is_image_id(image_id):
        raise exceptions.BadStoreUri(
            message="image id %r is not a plain file name" % (image_id,))
    return image_id


class StoreLocation(store_location.StoreLocation):
    """``gvfs://<store id>/<image id>``."""

    def process_specs(self):
        self.store_id = self.specs.get("store_id", "default")
        self.image_id = _safe_image_id(self.specs.get("image_id"))

    def get_uri(self):
        return locations.url(self.store_id, self.image_id)

    def parse_uri(self, uri):
        try:
            self.store_id, self.image_id = locations.parse(uri)
        except ValueError as e:
            raise exceptions.BadStoreUri(message=str(e)) from None


class _ChunkedFile:
    """An image being read: iterable in chunks, closed when done."""

    def __init__(self, fd, offset, length, chunk_size):
        self.fd = fd
        self.offset = offset
        self.remaining = length
        self.chunk_size = chunk_size

    def __iter__(self):
        try:
            while self.remaining > 0:
                data = os.pread(self.fd, min(self.chunk_size,
                                             self.remaining), self.offset)
                if not data:
                    break
                self.offset += len(data)
                self.remaining -= len(data)
                yield data
        finally:
            self.close()

    def close(self):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


class Store(driver.Store):
    _CAPABILITIES = (capabilities.BitMasks.READ_RANDOM |
                     capabilities.BitMasks.WRITE_ACCESS |
                     capabilities.BitMasks.DRIVER_REUSABLE)
    OPTIONS = glance_conf.OPTS

    def get_schemes(self):
        return (SCHEME,)

    @property
    def _conf(self):
        return getattr(self.conf, self.backend_group or "glance_store")

    @property
    def store_id(self):
        return self.backend_group or "default"

    def configure_add(self):
        conf = self._conf
        self._mount = None
        self._leftovers = set()
        datadir = conf.gvfs_store_datadir
        try:
            self._mount = configured.mount_from(conf, "gvfs_store_")
            if self._mount is not None:
                configured.check_images_dir("gvfs_store_datadir", datadir)
        except gvfs_exceptions.InvalidConfig as e:
            raise exceptions.BadStoreConfiguration(store_name=SCHEME,
                                                   reason=str(e)) from e
        if self._mount is not None:
            datadir = self._mount_datadir(datadir)
        reason = None
        if not datadir:
            reason = "gvfs_store_datadir is not set"
        elif not os.path.isabs(datadir):
            reason = "gvfs_store_datadir %r is not absolute" % datadir
        elif not os.path.isdir(datadir):
            reason = "gvfs_store_datadir %r is not a directory (is the " \
                     "GVFS export mounted?)" % datadir
        elif not os.access(datadir, os.W_OK | os.X_OK):
            reason = "gvfs_store_datadir %r is not writable" % datadir
        elif self._conf.gvfs_store_chunk_size % 4096:
            reason = "gvfs_store_chunk_size is not a multiple of 4096"
        if reason:
            raise exceptions.BadStoreConfiguration(store_name=SCHEME,
                                                   reason=reason)
        self.datadir = os.path.realpath(datadir)
        try:
            golden.recover(self.datadir)
        except OSError as e:
            raise exceptions.BadStoreConfiguration(
                store_name=SCHEME, reason="cannot check %s for interrupted "
                "deletes: %s" % (self.datadir, e)) from e
        self.chunk_size = self._conf.gvfs_store_chunk_size
        self.READ_CHUNKSIZE = self.WRITE_CHUNKSIZE = self.chunk_size
        # glance_store's ``url_prefix``: how Glance tells which store a
        # location (e.g. a snapshot Nova registers) belongs to.
        self._url_prefix = locations.url(self.store_id, "")

    def _mount_datadir(self, subdir):
        """Mount now; the directory in the mount the images go to."""
        made, share = self._mount
        try:
            root = made.ensure(share)
        except gvfs_exceptions.GvfsError as e:
            raise exceptions.BadStoreConfiguration(
                store_name=SCHEME, reason=str(e)) from e
        return os.path.join(root, subdir or "")

    def _check_mount(self):
        """Fail now on a hung or dead mount, and remount it.

        The next call gets a fresh mount, instead of a glance-api worker
        stuck for good.
        """
        if self._mount is None:
            return
        made, share = self._mount
        try:
            made.ensure(share)
        except gvfs_exceptions.GvfsError as e:
            raise exceptions.BackendException(
                "GVFS store %s: %s" % (self.store_id, e)) from e

    # --- leftovers ----------------------------------------------------------

    def _remove(self, path):
        """Remove what a failed call made.

        If the export does not answer now (the reason the call failed,
        often), the path is remembered and removed at the next call, so
        no partial file outlives the outage.
        """
        try:
            os.lstat(path)
            os.unlink(path)
        except FileNotFoundError:
            pass  # Never made (a read-only store), or removed meanwhile.
        except OSError as e:
            LOG.warning("cannot remove %s now (%s); will retry", path, e)
            self._leftovers.add(path)

    def _sweep_leftovers(self):
        for path in list(self._leftovers):
            self._leftovers.discard(path)
            self._remove(path)

    # --- paths --------------------------------------------------------------

    def _path(self, image_id):
        """The image's path, refusing anything that leaves the store."""
        self._check_mount()
        self._sweep_leftovers()
        path = os.path.join(self.datadir, _safe_image_id(image_id))
        real = os.path.realpath(path)
        if os.path.dirname(real) != self.datadir:
            raise exceptions.BadStoreUri(
                message="image %s leads out of the store" % image_id)
        return path

    def _existing(self, location):
        path = self._path(location.store_location.image_id)
        try:
            st = os.stat(path, follow_symlinks=False)
        except FileNotFoundError:
            raise exceptions.NotFound(image=path) from None
        if not stat.S_ISREG(st.st_mode):
            raise exceptions.NotFound(image=path)
        return path, st

    # --- reading ------------------------------------------------------------

    @capabilities.check
    def get(self, location, offset=0, chunk_size=None, context=None):
        path, st = self._existing(location)
        if offset < 0 or offset > st.st_size:
            raise exceptions.Invalid("offset %d is outside the image"
                                     % offset)
        length = st.st_size - offset if chunk_size is None else \
            min(chunk_size, st.st_size - offset)
        fd = checked_open.open_image(path, st)
        return (_ChunkedFile(fd, offset, length, self.chunk_size), length)

    def get_size(self, location, context=None):
        return self._existing(location)[1].st_size

    # --- writing ------------------------------------------------------------

    @driver.back_compat_add
    @capabilities.check
    def add(self, image_id, image_file, image_size, hashing_algo,
            context=None, verifier=None):
        final = self._path(image_id)
        if os.path.lexists(final):
            raise exceptions.Duplicate(image=final)
        tmp = os.path.join(self.datadir, "%s%s.%s" % (
            _UPLOAD_PREFIX, image_id, uuid.uuid4().hex[:8]))
        try:
            written, md5, multihash, builder, signature, disk_format = \
                self._write(tmp, image_file, hashing_algo, verifier)
            if image_size and written != image_size:
                raise exceptions.Invalid(
                    "image %s: %d bytes received, %d announced"
                    % (image_id, written, image_size))
            try:
                os.link(tmp, final)
            except FileExistsError:
                raise exceptions.Duplicate(image=final) from None
            except OSError as e:
                raise _storage_error(e, final) from e
        finally:
            self._remove(tmp)
        try:
            with _store_errors(final):
                self._finish(final, builder, signature, disk_format)
        except BaseException:
            self._remove(final)
            self._remove_beside(final)
            raise
        metadata = {"store": self.backend_group} if self.backend_group \
            else {}
        return (locations.url(self.store_id, image_id), written,
                md5, multihash, metadata)

    def _write(self, path, image_file, hashing_algo, verifier):
        """Stream the upload into ``path``.

        Errors of the client's stream stay its own; errors of the store
        become glance_store's.
        """
        md5 = hashlib.md5(usedforsecurity=False)
        multihash = hashlib.new(str(hashing_algo))
        signature = blocks.SignatureBuilder() if \
            self._conf.gvfs_store_block_signatures else None
        hashes = ParallelHashes(*[digest for digest in (md5, multihash,
                                                        signature)
                                  if digest is not None])
        builder = scan.SidecarBuilder()
        head = b""
        thin = self._conf.gvfs_store_thin_provisioning
        with _store_errors(path):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL,
                         self._conf.gvfs_store_file_perm)
        try:
            written = 0
            while True:
                chunk = image_file.read(self.chunk_size)
                if not chunk:
                    break
                # Hashed on other threads meanwhile: it must not change.
                chunk = chunk if isinstance(chunk, bytes) else bytes(chunk)
                if len(head) < SNIFF_BYTES:
                    head += chunk[:SNIFF_BYTES - len(head)]
                hashes.update(chunk)
                if verifier is not None:
                    verifier.update(chunk)
                try:
                    with _store_errors(path):
                        _write_chunk(fd, chunk, written, thin, builder)
                except (exceptions.StorageFull,
                        exceptions.StorageWriteDenied):
                    _drain(image_file, self.chunk_size)
                    raise
                written += len(chunk)
            with _store_errors(path):
                # Trailing holes still count in the size.
                os.ftruncate(fd, written)
                os.fsync(fd)
            hashes.wait()
        except BaseException:
            # The error raised is the one to report; on a dead mount the
            # close fails too and must not replace it.
            try:
                os.close(fd)
            except OSError:
                pass
            raise
        finally:
            hashes.close()
        with _store_errors(path):
            os.close(fd)
        return (written, md5.hexdigest(), multihash.hexdigest(), builder,
                signature, disk_format_of(head))

    def _finish(self, path, builder, signature, disk_format):
        """Make the new name durable; write the sidecar and signature."""
        mtime_ns = os.stat(path).st_mtime_ns
        if self._conf.gvfs_store_sidecars:
            action = "whole_file" if disk_format in \
                self._conf.gvfs_store_whole_file_formats else "on_demand"
            scan.write_sidecar(path, builder.finish(
                mtime_ns, action,
                "zstd" if action == "whole_file" else "none"))
        if signature is not None:
            blocks.write(path, signature.finish(mtime_ns))
        durable.fsync_path(self.datadir)

    @capabilities.check
    def delete(self, location, context=None):
        """Delete an image no instance disk is made of.

        Images referenced by Nova's ``gvfs`` backend are kept
        (InUseByStore: glance-api answers 409 Conflict).
        """
        path, _ = self._existing(location)
        image_id = os.path.basename(path)
        try:
            aside = golden.retire(self.datadir, image_id,
                                  self._conf.gvfs_store_delete_grace)
        except FileNotFoundError:
            golden.forget(self.datadir, image_id)
            raise exceptions.NotFound(image=path) from None
        except golden.GoldenImageInUse as e:
            LOG.info("not deleting image %s: held by %s", image_id,
                     e.kwargs["holders"])
            raise exceptions.InUseByStore(str(e)) from e
        except PermissionError as e:
            raise exceptions.Forbidden(str(e)) from e
        self._remove(aside)
        self._remove_beside(path)

    def _remove_beside(self, path):
        """Remove the sidecar, block signature and profile beside ``path``."""
        self._remove(scan.sidecar_path(path))
        self._remove(blocks.signature_path(path))
        self._remove(profile.profile_path(path))


class ParallelHashes:
    """Several digests of one stream, each updated on a thread of its own.

    A digest is anything with ``update(bytes)``: hashlib's, or a
    :class:`~gvfs_openstack.delta.blocks.SignatureBuilder`.

    hashlib releases the GIL while it hashes a large buffer, so MD5 and
    SHA-512 of an upload's chunk run on two cores while the request
    thread reads the next chunk and writes this one: on glance-api the two
    digests were over half of an upload's time, one after the other.
    Chunks are handed over in order (one thread a digest) and at most
    ``depth`` behind, so memory stays bounded.
    """

    def __init__(self, *hashes, depth=2):
        self._hashes = hashes
        self._threads = [futures.ThreadPoolExecutor(
            1, thread_name_prefix="gvfs-store-hash") for _ in hashes]
        self._pending = collections.deque()
        self.depth = depth

    def update(self, chunk):
        """Hash ``chunk`` (bytes: it must not change until hashed)."""
        while len(self._pending) >= self.depth:
            self._wait_oldest()
        self._pending.append([thread.submit(digest.update, chunk)
                              for thread, digest in zip(self._threads,
                                                        self._hashes)])

    def _wait_oldest(self):
        for update in self._pending.popleft():
            update.result()

    def wait(self):
        """Return once every chunk given is in every digest."""
        while self._pending:
            self._wait_oldest()

    def close(self):
        for thread in self._threads:
            thread.shutdown(wait=True, cancel_futures=True)


#: Bytes of an image's start that tell its format.
SNIFF_BYTES = 32774


def disk_format_of(head):
    """The format of an image from its first SNIFF_BYTES bytes."""
    if head.startswith(b"QFI\xfb"):
        return "qcow2"
    if head.startswith(b"KDMV"):
        return "vmdk"
    if head.startswith(b"vhdxfile"):
        return "vhdx"
    if head[32769:32774] == b"CD001":
        return "iso"
    return "raw"


#: Thin provisioning leaves a hole for every all-zero piece this large.
THIN_GRAIN = 64 * 1024
_ZERO_GRAIN = bytes(THIN_GRAIN)


def _write_chunk(fd, chunk, offset, thin, builder):
    """Write ``chunk`` at ``offset``, leaving holes for zero pieces."""
    view = memoryview(chunk)
    if not thin:
        builder.update(chunk)
        durable.pwrite_all(fd, view, offset)
        return
    # Compared as bytes: memoryview comparisons go element by element.
    data = chunk if isinstance(chunk, bytes) else bytes(chunk)
    run_from = None
    for at in range(0, len(view), THIN_GRAIN):
        piece = data[at:at + THIN_GRAIN]
        if piece == _ZERO_GRAIN[:len(piece)]:
            if run_from is not None:
                builder.update(view[run_from:at])
                durable.pwrite_all(fd, view[run_from:at], offset + run_from)
                run_from = None
            builder.add_zeros(len(piece))
        elif run_from is None:
            run_from = at
    if run_from is not None:
        builder.update(view[run_from:])
        durable.pwrite_all(fd, view[run_from:], offset + run_from)


class _store_errors:
    """OSErrors of the store's own file calls as glance_store errors."""

    def __init__(self, path):
        self.path = path

    def __enter__(self):
        return self

    def __exit__(self, kind, error, tb):
        if isinstance(error, OSError):
            raise _storage_error(error, self.path) from error
        return False


#: How much of an upload is read and dropped after the store refused it.
DRAIN_LIMIT = 256 * 1024 * 1024


def _drain(image_file, chunk_size, limit=DRAIN_LIMIT):
    """Read and drop the rest of a refused upload, up to ``limit`` bytes.

    glance-api answers a full or read-only store at once (413, 403), and
    gunicorn closes the connection after the answer: a client still
    sending its body then gets a reset instead of the answer, often
    without having read it ("Remote end closed connection").  Reading the
    rest first lets the client see why; past ``limit`` the client is left
    to its reset rather than keeping the server busy with a huge upload.
    """
    drained = 0
    try:
        while drained < limit:
            chunk = image_file.read(min(chunk_size, limit - drained))
            if not chunk:
                return
            drained += len(chunk)
    except Exception:  # The store's error is the one to report.
        return


def _storage_error(error, image_id):
    if error.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        return exceptions.StorageFull()
    if error.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return exceptions.StorageWriteDenied()
    return exceptions.BackendException(
        "cannot store image %s: %s" % (image_id, error))
