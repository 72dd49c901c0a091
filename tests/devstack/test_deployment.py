# SPDX-License-Identifier: Apache-2.0
"""A devstack deployment with the gvfs plugin works end to end.

The real ``openstack`` CLI against devstack's Glance and Nova: images land
on the DTN export through the GVFS mount (sparse, with their sidecar, with
Glance's hashes equal to the file's), a server boots as a qcow2 overlay
over its golden image on the mount, the client proxy answers ``stats``,
and gvfs-conductor answers on RabbitMQ (and, on the two-site job,
migrates an image to the other site).
"""

import hashlib
import json
import os
import subprocess
import uuid

import pytest


def _openstack(cloud_env, *args, parse=True):
    result = subprocess.run(["openstack"] + list(args) + (
        ["-f", "json"] if parse else []), env=cloud_env, text=True,
        capture_output=True, timeout=900)
    if result.returncode:
        pytest.fail("openstack %s: %s" % (" ".join(args), result.stderr))
    return json.loads(result.stdout) if parse else result.stdout


def _digest(path, algo):
    digest = hashlib.new(algo)
    with open(path, "rb") as f:
        while chunk := f.read(1024 * 1024):
            digest.update(chunk)
    return digest.hexdigest()


@pytest.fixture
def sparse_image(tmp_path):
    """64 MiB, 4 MiB of random data in it, the rest holes."""
    path = tmp_path / "sparse.raw"
    with open(path, "wb") as f:
        f.truncate(64 * 1024 * 1024)
        for offset in range(0, 64, 16):
            f.seek(offset * 1024 * 1024)
            f.write(os.urandom(1024 * 1024))
    return str(path)


@pytest.fixture
def image(cloud_env, sparse_image):
    created = _openstack(cloud_env, "image", "create", "--disk-format",
                         "raw", "--container-format", "bare", "--file",
                         sparse_image, "gvfs-test-%s" % uuid.uuid4().hex[:8])
    yield _openstack(cloud_env, "image", "show", created["id"])
    subprocess.run(["openstack", "image", "delete", created["id"]],
                   env=cloud_env, capture_output=True, timeout=300)


def _on_export(deployment, image_id, *, sidecar=False):
    name = (".gvfs-meta." + image_id) if sidecar else image_id
    return os.path.join(deployment["export"], deployment["images_dir"], name)


def test_image_lands_on_the_export_sparse_with_its_sidecar(
        deployment, image, sparse_image):
    assert image["status"] == "active"
    assert deployment["glance_store"] in image["properties"]["stores"]
    stored = _on_export(deployment, image["id"])
    assert _digest(stored, "sha512") == image["properties"][
        "os_hash_value"] == _digest(sparse_image, "sha512")
    assert image["checksum"] == _digest(sparse_image, "md5")
    # Thin provisioning: the holes stayed holes on the DTN.
    assert os.stat(stored).st_blocks * 512 < 16 * 1024 * 1024
    assert os.path.exists(_on_export(deployment, image["id"], sidecar=True))
    through_mount = os.path.join(deployment["mount_point"],
                                 deployment["images_dir"], image["id"])
    assert _digest(through_mount, "sha512") == _digest(sparse_image,
                                                       "sha512")


def test_image_save_returns_the_bytes(cloud_env, image, sparse_image,
                                      tmp_path):
    saved = str(tmp_path / "saved.raw")
    _openstack(cloud_env, "image", "save", "--file", saved, image["id"],
               parse=False)
    assert _digest(saved, "sha256") == _digest(sparse_image, "sha256")


def test_image_delete_removes_file_and_sidecar(cloud_env, deployment,
                                               image):
    _openstack(cloud_env, "image", "delete", image["id"], parse=False)
    assert not os.path.exists(_on_export(deployment, image["id"]))
    assert not os.path.exists(_on_export(deployment, image["id"],
                                         sidecar=True))


def test_client_proxy_answers_stats(deployment):
    result = subprocess.run(
        ["gvfs-proxy", "--config-file", deployment["client_proxy_conf"],
         "stats"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)


def test_a_server_boots_as_an_overlay_of_its_golden_image(cloud_env,
                                                          deployment):
    if "nova_instances_path" not in deployment:
        pytest.fail("devstack ran without n-cpu: enable it for this job")
    golden = [i for i in _openstack(cloud_env, "image", "list")
              if i["Name"].startswith("cirros")][0]
    name = "gvfs-test-%s" % uuid.uuid4().hex[:8]
    server = _openstack(cloud_env, "server", "create", "--flavor",
                        "m1.tiny", "--image", golden["ID"], "--network",
                        "private", "--wait", name)
    try:
        assert server["status"] == "ACTIVE"
        disk = os.path.join(deployment["nova_instances_path"],
                            server["id"], "disk")
        info = json.loads(subprocess.run(
            ["qemu-img", "info", "-U", "--output", "json", disk],
            capture_output=True, text=True, check=True).stdout)
        assert info["format"] == "qcow2"
        assert info["backing-filename"] == os.path.join(
            deployment["mount_point"], deployment["images_dir"],
            golden["ID"])
    finally:
        _openstack(cloud_env, "server", "delete", "--wait", server["id"],
                   parse=False)


def test_gvfs_api_is_in_the_catalog_and_answers(cloud_env):
    jobs = _openstack(cloud_env, "gvfs", "migration", "list")
    assert isinstance(jobs, list)
    sites = _openstack(cloud_env, "gvfs", "site", "list")
    assert any(site["Local"] for site in sites)


def test_an_image_migrates_to_the_other_site(cloud_env, deployment, image):
    if "peer_site" not in deployment:
        pytest.skip("single-site job: the two-site job migrates")
    _openstack(cloud_env, "gvfs", "migrate", image["id"], "--to",
               deployment["peer_site"], "--wait", parse=False)
    jobs = _openstack(cloud_env, "gvfs", "migration", "list")
    newest = max(jobs, key=lambda job: job["Created At"])
    assert newest["State"] == "done", newest
