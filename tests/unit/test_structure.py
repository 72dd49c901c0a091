# SPDX-License-Identifier: Apache-2.0
"""The package's rooms and doors, read from its source.

What the architecture promises -- a protocol core without I/O, a proxy
that knows nothing of OpenStack's services, one logging library, no
option registered by an import -- is checked on every module, so a
change that breaks it fails here instead of in a review.
"""

import ast
import os

import pytest

PACKAGE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "gvfs_openstack")


def _modules(subdir=""):
    top = os.path.join(PACKAGE, subdir)
    for root, _, files in os.walk(top):
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(root, name)
                with open(path) as f:
                    yield os.path.relpath(path, PACKAGE), ast.parse(f.read())


def _imported(tree):
    """Every module name an import statement names, at any depth."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield node.module
            for alias in node.names:
                yield node.module + "." + alias.name


def test_every_package_has_an_init():
    for root, dirs, files in os.walk(PACKAGE):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        if any(f.endswith(".py") for f in files):
            assert "__init__.py" in files, root


@pytest.mark.parametrize("path,tree", list(_modules("nfs")))
def test_the_protocol_core_does_no_io(path, tree):
    io = ("socket", "asyncio", "select", "ssl", "zstandard", "threading",
          "subprocess")
    for name in _imported(tree):
        assert name.split(".")[0] not in io, (path, name)
        if name.startswith("gvfs_openstack."):
            assert name.startswith("gvfs_openstack.nfs"), (path, name)


@pytest.mark.parametrize("path,tree", list(_modules("proxy")))
def test_the_proxy_knows_nothing_of_openstack_services(path, tree):
    for name in _imported(tree):
        assert not name.startswith(("nova", "glance", "glance_store",
                                    "gvfs_openstack.nova",
                                    "gvfs_openstack.glance",
                                    "gvfs_openstack.migration",
                                    "gvfs_openstack.osc")), (path, name)


@pytest.mark.parametrize("path,tree", list(_modules()))
def test_modules_log_through_oslo_log(path, tree):
    for name in _imported(tree):
        assert name != "logging" and not name.startswith("logging."), \
            (path, name)


@pytest.mark.parametrize("path,tree", list(_modules()))
def test_the_package_never_imports_the_lab_or_the_tests(path, tree):
    """``gvfs_lab`` and ``tests`` are not in the wheel."""
    for name in _imported(tree):
        assert name.split(".")[0] not in ("gvfs_lab", "tests"), (path, name)


@pytest.mark.parametrize("path,tree", list(_modules("conf")))
def test_options_import_nothing_they_configure(path, tree):
    """``conf`` is below every layer whose options it holds.

    So a program registers its options (and ``list_opts`` lists them)
    without importing the code that acts on them; the mount that the
    share options describe is made in ``mount/configured.py``.
    """
    for name in _imported(tree):
        if name.startswith("gvfs_openstack."):
            assert name.startswith("gvfs_openstack.conf"), (path, name)


@pytest.mark.parametrize("path,tree", [
    (path, tree) for path, tree in _modules()
    if not path.startswith("cmd" + os.sep)])
def test_no_library_imports_a_program(path, tree):
    """Programs (``cmd``) sit on top: what they share lives below them.

    ``gvfs-meta``'s exit statuses, say, are in ``delta/statuses.py``,
    which the program and the conductor that reads them both import.
    """
    for name in _imported(tree):
        assert not name.startswith("gvfs_openstack.cmd"), (path, name)


#: oslo.config's registering calls (register_opt, register_opts,
#: register_cli_opt, register_group), and ours named after them
#: (``conf.privileged.register``).
REGISTERING = ("register",)


@pytest.mark.parametrize("path,tree", list(_modules()))
def test_no_option_is_registered_by_an_import(path, tree):
    """Only a function registers options: a program calls it at start."""
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef,
                             ast.ClassDef)):
            continue
        for call in ast.walk(node):
            if not isinstance(call, ast.Call):
                continue
            name = getattr(call.func, "attr", getattr(call.func, "id", ""))
            assert not name.startswith(REGISTERING), \
                "%s registers options at import (line %d)" % (path,
                                                              call.lineno)


def test_state_names_import_nothing():
    """The OSC plugin and gvfs-api read them without the job store."""
    with open(os.path.join(PACKAGE, "migration", "states.py")) as f:
        tree = ast.parse(f.read())
    assert list(_imported(tree)) == []


#: What only the conductor's job store needs.
JOB_STORE = ("sqlalchemy", "oslo_db", "alembic",
             "gvfs_openstack.migration.jobs", "gvfs_openstack.migration.db")


def _module_of(path):
    name = "gvfs_openstack." + path[:-3].replace(os.sep, ".")
    return name[:-len(".__init__")] if name.endswith(".__init__") else name


def _reached(start, trees):
    """Every module name ``start`` imports, through the package's own."""
    seen, todo, names = set(), [start], set()
    while todo:
        module = todo.pop()
        if module in seen or module not in trees:
            continue
        seen.add(module)
        for name in _imported(trees[module]):
            names.add(name)
            todo.append(name)
    return names


@pytest.mark.parametrize("subdir", ["osc", "api"])
def test_the_cli_and_the_api_do_not_load_the_job_store(subdir):
    """``[osc]`` and ``[api]`` install neither SQLAlchemy nor oslo.db.

    So nothing they import, through any module of the package, may need
    them.
    """
    trees = {_module_of(path): tree for path, tree in _modules()}
    for path, _ in _modules(subdir):
        for name in _reached(_module_of(path), trees):
            assert not name.startswith(JOB_STORE), (path, name)
