# SPDX-License-Identifier: Apache-2.0
"""End to end: the real ``openstack`` CLI and openstacksdk against a real
glance-api whose default store is ``gvfs``, mounted by the store itself
through ``gvfs-proxy mount`` -> client proxy -> server proxy ->
NFS-Ganesha (the DTN's export).

Every call carries a token of the lab's Keystone, checked by Glance's
``auth_token`` middleware: the CLI runs as a project's ``member`` (the
lab's ``alpha-member``) unless a test says otherwise.
"""

import hashlib
import json
import os
import subprocess
import threading
import time
import urllib.error

import openstack
import pytest
import requests

from gvfs_lab import slowness
from gvfs_lab import topology
from tests.functional.conftest import glance_on

MIB = 1024 * 1024


@pytest.fixture(scope="module")
def lab(lab_factory):
    return lab_factory("tcp", cache={"capacity_mb": 256})


def images_dir(lab):
    """Where the ``dtn`` store keeps its images on the export."""
    return os.path.join(lab.export, "images")


@pytest.fixture(scope="module")
def wan(lab_factory, keystone, tmp_path_factory):
    """A lab whose tunnel runs through toxiproxy, and its glance-api."""
    lab = lab_factory("tcp", link=True)
    lab.toxiproxy.wan("wan", rtt_ms=2, rate_mbit=80)
    with glance_on(lab, str(tmp_path_factory.mktemp("wan-glance")),
                   keystone, io_timeout=5, workers=1) as api:
        yield lab, api


def cli(glance, *args, user=None):
    """The CLI's output (parsed with ``-f``); it must succeed."""
    result = glance.openstack(*args, user=user)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout) if "-f" in args else result.stdout


def sparse_image(path, data_mib=3, size_mib=96):
    """A fresh disk image: data at the start and the end, zeros between.

    Returns its md5 and sha512.
    """
    head, tail = os.urandom(data_mib * MIB), os.urandom(MIB)
    with open(path, "wb") as f:
        f.write(head)
        f.seek((size_mib - 1) * MIB)
        f.write(tail)
    md5, sha512 = hashlib.md5(), hashlib.sha512()
    with open(path, "rb") as f:
        while chunk := f.read(8 * MIB):
            md5.update(chunk)
            sha512.update(chunk)
    return md5.hexdigest(), sha512.hexdigest()


def sdk(glance, user=None):
    """openstacksdk logged in as ``user``, in the glance-api's region."""
    env = glance.credentials(user)
    return openstack.connect(
        auth_type="password", region_name=env["OS_REGION_NAME"],
        auth={"auth_url": env["OS_AUTH_URL"],
              "username": env["OS_USERNAME"],
              "password": env["OS_PASSWORD"],
              "project_name": env["OS_PROJECT_NAME"],
              "user_domain_name": env["OS_USER_DOMAIN_NAME"],
              "project_domain_name": env["OS_PROJECT_DOMAIN_NAME"]})


def details(glance, image_id):
    """The image as the Images API v2 returns it.

    The CLI hides the hash and store fields.
    """
    return glance.image(image_id)


def wait_for(glance, image_id, predicate, timeout=180):
    deadline = time.monotonic() + slowness.scaled(timeout)
    while True:
        image = details(glance, image_id)
        if predicate(image):
            return image
        assert image["status"] not in ("killed", "deleted"), image
        assert time.monotonic() < deadline, image
        time.sleep(0.5)


def test_create_save_delete_with_the_cli(glance, lab, tmp_path):
    images = images_dir(lab)
    source = str(tmp_path / "disk.raw")
    md5, sha512 = sparse_image(source)
    image = cli(glance, "image", "create", "--file", source,
                "--disk-format", "raw", "--container-format", "bare",
                "-f", "json", "cli-image")
    assert image["status"] == "active"
    image = details(glance, image["id"])
    assert image["checksum"] == md5
    assert image["os_hash_algo"] == "sha512"
    assert image["os_hash_value"] == sha512
    assert image["stores"] == "dtn"
    # On the DTN's export: the same bytes, sparse, with its sidecar.
    on_export = os.path.join(images, image["id"])
    assert os.path.getsize(on_export) == 96 * MIB
    assert os.stat(on_export).st_blocks * 512 < 16 * MIB
    assert os.path.exists(os.path.join(images,
                                       ".gvfs-meta." + image["id"]))

    saved = str(tmp_path / "saved.raw")
    cli(glance, "image", "save", "--file", saved, image["id"])
    with open(saved, "rb") as a, open(source, "rb") as b:
        assert a.read() == b.read()

    cli(glance, "image", "delete", image["id"])
    assert not os.path.exists(on_export)
    assert not os.path.exists(os.path.join(images,
                                           ".gvfs-meta." + image["id"]))


def test_project_roles_decide_who_sees_and_who_deletes(glance, lab,
                                                       tmp_path):
    """A member's private image, and who may do what with it.

    Its project's reader sees it and may not delete it; another project
    does not see it at all.
    """
    source = str(tmp_path / "private.raw")
    md5, sha512 = sparse_image(source, data_mib=1, size_mib=8)
    image = cli(glance, "image", "create", "--file", source, "--private",
                "--disk-format", "raw", "--container-format", "bare",
                "-f", "json", "alpha-private", user="alpha-member")
    on_export = os.path.join(images_dir(lab), image["id"])
    assert os.path.exists(on_export)

    shown = cli(glance, "image", "show", "-f", "json", image["id"],
                user="alpha-reader")
    assert shown["id"] == image["id"] and shown["checksum"] == md5
    assert shown["visibility"] == "private"
    as_reader = glance.image(image["id"], user="alpha-reader")
    assert as_reader["os_hash_value"] == sha512
    assert as_reader["owner"] == glance.keystone.project_id("alpha")

    # Another project's member: not found, by id or in a list.
    hidden = glance.openstack("image", "show", image["id"],
                              user="beta-member")
    assert hidden.returncode != 0
    assert "No Image found" in hidden.stderr, hidden.stderr
    listed = cli(glance, "image", "list", "-f", "json", user="beta-member")
    assert image["id"] not in [i["ID"] for i in listed]
    with pytest.raises(urllib.error.HTTPError) as unseen:
        glance.image(image["id"], user="beta-member")
    assert unseen.value.code == 404

    # The reader may look, not delete: 403, and the file stays.
    refused = glance.openstack("image", "delete", image["id"],
                               user="alpha-reader")
    assert refused.returncode != 0
    assert "403" in refused.stderr, refused.stderr
    with pytest.raises(urllib.error.HTTPError) as forbidden:
        glance._request("/v2/images/%s" % image["id"], "DELETE",
                        user="alpha-reader")
    assert forbidden.value.code == 403
    assert glance.image(image["id"])["status"] == "active"
    assert os.path.exists(on_export)

    cli(glance, "image", "delete", image["id"], user="alpha-member")
    assert not os.path.exists(on_export)


def test_a_member_cannot_point_an_image_at_another_images_file(
        glance, tmp_path):
    """No user-made gvfs location names another project's image file.

    Glance as deployed (its default policy, ``show_multiple_locations``
    off) refuses users any location but http ones; Nova's backend also
    clones only a location naming its own image's file
    (``tests/unit/test_nova_backend.py``).
    """
    source = str(tmp_path / "beta.raw")
    sparse_image(source, data_mib=1, size_mib=4)
    private = glance.add_image("beta-private", source, user="beta-member",
                               visibility="private")
    mine = glance.create_image("alpha-pointer", user="alpha-member")
    url = "gvfs://dtn/%s" % private["id"]
    for method, path, body, content_type in (
            ("POST", "/v2/images/%s/locations" % mine,
             {"url": url, "validation_data": {}}, "application/json"),
            ("PATCH", "/v2/images/%s" % mine,
             [{"op": "add", "path": "/locations/-",
               "value": {"url": url, "metadata": {}}}],
             "application/openstack-images-v2.1-json-patch")):
        with pytest.raises(urllib.error.HTTPError) as refused:
            glance._request(path, method, json.dumps(body).encode(),
                            {"Content-Type": content_type},
                            user="alpha-member")
        assert refused.value.code == 403, path
    assert glance.image(mine, user="alpha-member")["status"] == "queued"
    glance.delete(mine, user="alpha-member")
    glance.delete(private["id"], user="beta-member")


def test_no_token_or_a_bad_one_is_401(glance):
    """auth_token turns away what Keystone did not vouch for."""
    images = glance.url + "/v2/images"
    token = glance.token()
    assert requests.get(images, headers={"X-Auth-Token": token},
                        timeout=30).status_code == 200
    no_token = requests.get(images, timeout=30)
    assert no_token.status_code == 401
    # Where to get one: the lab's Keystone.
    assert glance.keystone.auth_url.rsplit("/v3", 1)[0] in \
        no_token.headers["WWW-Authenticate"]
    assert requests.get(images, headers={"X-Auth-Token": token[:-4] + "AAAA"},
                        timeout=30).status_code == 401
    assert requests.get(images, headers={"X-Auth-Token": "not-a-token"},
                        timeout=30).status_code == 401
    # A real token, revoked before Glance ever saw it (so not in its
    # cache of validated tokens).
    revoked = glance.keystone.new_token("alpha-member")
    glance.keystone.client().tokens.revoke_token(revoked)
    assert requests.get(images, headers={"X-Auth-Token": revoked},
                        timeout=30).status_code == 401
    upload = requests.put(images + "/%s/file" % ("0" * 32), data=b"x" * 10,
                          headers={"Content-Type":
                                   "application/octet-stream"}, timeout=30)
    assert upload.status_code == 401


def test_import_glance_direct(glance, lab, tmp_path):
    images = images_dir(lab)
    source = str(tmp_path / "direct.raw")
    md5, sha512 = sparse_image(source, size_mib=24)
    image = cli(glance, "image", "create", "--import", "--file", source,
                "--disk-format", "raw", "--container-format", "bare",
                "-f", "json", "imported")
    image = wait_for(glance, image["id"], lambda i: i["status"] == "active")
    assert image["checksum"] == md5 and image["os_hash_value"] == sha512
    assert image["stores"] == "dtn"
    with open(os.path.join(images, image["id"]), "rb") as a, \
            open(source, "rb") as b:
        assert a.read() == b.read()


def test_copy_image_from_the_file_store_into_gvfs(glance, lab, tmp_path):
    images = images_dir(lab)
    source = str(tmp_path / "copy.raw")
    md5, sha512 = sparse_image(source, size_mib=16)
    conn = sdk(glance)
    created = conn.image.create_image(name="to-copy", disk_format="raw",
                                      container_format="bare")
    # Into the local file store, as another backend would hold it.
    assert glance.upload(created.id, source, store="local") == 204
    assert details(glance, created.id)["stores"] == "local"

    # Copying into another store is the cloud admin's (Glance's
    # copy_image policy), not the owner's.  Asked over HTTP: openstacksdk
    # 4.22's import_image does not check the answer, so the CLI says
    # nothing when Glance refuses.
    with pytest.raises(urllib.error.HTTPError) as refused:
        glance._request("/v2/images/%s/import" % created.id, "POST",
                        json.dumps({"method": {"name": "copy-image"},
                                    "stores": ["dtn"]}).encode(),
                        {"Content-Type": "application/json"},
                        user="alpha-member")
    assert refused.value.code == 403
    # --store takes a list: the image goes first.
    cli(glance, "image", "import", created.id, "--method", "copy-image",
        "--store", "dtn", user="admin")
    image = wait_for(glance, created.id,
                     lambda i: "dtn" in i["stores"].split(","))
    assert sorted(image["stores"].split(",")) == ["dtn", "local"]
    assert image["checksum"] == md5 and image["os_hash_value"] == sha512
    with open(os.path.join(images, created.id), "rb") as a, \
            open(source, "rb") as b:
        assert a.read() == b.read()


def test_a_tunnel_cut_mid_upload_fails_cleanly(wan, tmp_path):
    lab, glance = wan
    images = images_dir(lab)
    source = str(tmp_path / "dense.raw")
    with open(source, "wb") as f:
        f.write(os.urandom(64 * MIB))
    # Not the CLI: without --file it uploads its standard input.
    image = sdk(glance).image.create_image(
        name="cut", disk_format="raw", container_format="bare")
    outcome = []
    upload = threading.Thread(target=lambda: outcome.append(
        glance.upload(image.id, source)))
    upload.start()
    deadline = time.monotonic() + slowness.scaled(60)
    while not any(os.path.getsize(os.path.join(images, name)) > 4 * MIB
                  for name in os.listdir(images)
                  if name.startswith(".gvfs-upload.")):
        assert time.monotonic() < deadline, "the upload never started"
        time.sleep(0.1)
    lab.toxiproxy.set_enabled("wan", False)
    try:
        upload.join(180)
        assert not upload.is_alive()
        [error] = outcome
        # glance-api answers 500 and closes while the body still streams
        # in, so the client may see the reset before the answer.
        assert isinstance(error, (urllib.error.HTTPError,
                                  urllib.error.URLError)), error
        with open(os.path.join(glance.workdir, "glance.log")) as log:
            assert "Connection timed out" in log.read()
        assert details(glance, image.id)["status"] == "queued"
    finally:
        lab.toxiproxy.set_enabled("wan", True)
    # Once the DTN is back, the next call of the store removes the
    # partial upload it could not remove during the outage.
    small = str(tmp_path / "small.raw")
    with open(small, "wb") as f:
        f.write(os.urandom(MIB))
    after = cli(glance, "image", "create", "--file", small, "--disk-format",
                "raw", "--container-format", "bare", "-f", "json", "after")
    assert sorted(os.listdir(images)) == sorted(
        [after["id"], ".gvfs-meta." + after["id"],
         ".gvfs-meta.%s.blocks" % after["id"]])


@pytest.fixture
def full_lab(lab_factory, keystone, tmp_path_factory, tiny_disk):
    """A lab whose DTN export is a 48 MiB file system."""
    workdir = str(tmp_path_factory.mktemp("full-lab"))
    export = os.path.join(workdir, "export")
    os.makedirs(export)
    subprocess.run(["mount", "--bind", tiny_disk(48), export], check=True)
    try:
        with topology.Lab(workdir, tunnel="tcp") as lab:
            with glance_on(lab, os.path.join(workdir, "glance"),
                           keystone) as api:
                yield lab, api
    finally:
        subprocess.run(["umount", "-l", export], check=False)


def test_a_full_export_is_storage_full_and_keeps_nothing(full_lab,
                                                         tmp_path):
    lab, glance = full_lab
    images = images_dir(lab)
    source = str(tmp_path / "big.raw")
    with open(source, "wb") as f:
        f.write(os.urandom(64 * MIB))
    result = glance.openstack("image", "create", "--file", source,
                              "--disk-format", "raw", "--container-format",
                              "bare", "too-big")
    assert result.returncode != 0
    # glance-api's answer to the store's StorageFull.
    assert "413" in result.stderr, result.stderr
    with open(os.path.join(glance.workdir, "glance.log")) as log:
        assert "Image storage media is full" in log.read()
    # Nothing on the export, and no image with data.
    assert os.listdir(images) == []
    listed = json.loads(glance.openstack("image", "list", "--name",
                                         "too-big", "-f", "json").stdout)
    assert all(i["Status"] != "active" for i in listed)
