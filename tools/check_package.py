# SPDX-License-Identifier: Apache-2.0
"""Check the package as a deployment installs it (``tox -e package``).

Builds the sdist and the wheel, installs the wheel -- not editable, no
checkout on ``sys.path`` -- into the running virtualenv, then, from a
directory outside the checkout, loads every entry point the distribution
declares (console scripts, the Glance store, the OSC plugin and commands,
the option lists), lists the options of each ``oslo.config.opts``
namespace and runs each console script with ``--help``.  What only the
checkout holds (the lab under ``tests/``) must not be needed, and must
not be shipped.
"""

import argparse
import glob
import os
import subprocess
import sys
import tempfile

DIST = "gvfs-openstack"
PACKAGE = "gvfs_openstack"

#: Run in a fresh interpreter whose working directory is not the checkout.
_LOAD_ALL = r"""
import importlib.metadata
import json
import sys

dist = importlib.metadata.distribution(%(dist)r)
package = __import__(%(package)r)
if not package.__file__.startswith(%(site)r):
    sys.exit("imported %%s, not the installed wheel" %% package.__file__)
loaded = []
for ep in dist.entry_points:
    obj = ep.load()
    if ep.group == "oslo.config.opts":
        groups = obj()
        if not groups or not all(opts for _, opts in groups):
            sys.exit("%%s lists no options" %% ep.name)
    loaded.append("%%s %%s" %% (ep.group, ep.name))
print(json.dumps(loaded))
"""


def _run(argv, **kwargs):
    print("+ " + " ".join(argv), flush=True)
    return subprocess.run(argv, check=True, **kwargs)


def build(checkout, outdir):
    _run([sys.executable, "-m", "build", "--sdist", "--wheel",
          "--outdir", outdir, checkout])
    wheels = glob.glob(os.path.join(outdir, "*.whl"))
    sdists = glob.glob(os.path.join(outdir, "*.tar.gz"))
    if len(wheels) != 1 or len(sdists) != 1:
        raise SystemExit("expected one wheel and one sdist in %s, found %s"
                         % (outdir, os.listdir(outdir)))
    return wheels[0]


def check_contents(wheel):
    """Every package has its ``__init__.py``; no test code is shipped."""
    import zipfile

    names = zipfile.ZipFile(wheel).namelist()
    shipped = [n for n in names if n.startswith(PACKAGE + "/")]
    stray = [n for n in names if n.startswith(("tests/", "tools/"))
             or "/lab/" in n]
    if stray:
        raise SystemExit("the wheel ships test code: %s" % stray[:5])
    dirs = {os.path.dirname(n) for n in shipped if n.endswith(".py")}
    missing = sorted(d for d in dirs
                     if d + "/__init__.py" not in names)
    if missing:
        raise SystemExit("packages without __init__.py: %s" % missing)
    return len(shipped)


def install(wheel):
    _run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
          "--force-reinstall", wheel])


def load_everything(checkout):
    import sysconfig

    site = sysconfig.get_paths()["purelib"]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    with tempfile.TemporaryDirectory() as elsewhere:
        out = _run([sys.executable, "-I", "-c", _LOAD_ALL % {
            "dist": DIST, "package": PACKAGE, "site": site}],
            cwd=elsewhere, env=env, capture_output=True, text=True)
        loaded = out.stdout.strip()
        bindir = os.path.dirname(sys.executable)
        import importlib.metadata
        scripts = [ep.name for ep in importlib.metadata.distribution(
            DIST).entry_points if ep.group == "console_scripts"]
        for script in scripts:
            _run([os.path.join(bindir, script), "--help"], cwd=elsewhere,
                 env=env, stdout=subprocess.DEVNULL)
    return loaded, scripts


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkout", nargs="?", default=os.getcwd())
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as outdir:
        wheel = build(args.checkout, outdir)
        files = check_contents(wheel)
        install(wheel)
        loaded, scripts = load_everything(args.checkout)
    print("package: %s ships %d files; loaded %s; ran --help of %s"
          % (os.path.basename(wheel), files, loaded, ", ".join(scripts)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
