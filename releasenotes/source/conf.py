# SPDX-License-Identifier: Apache-2.0
"""Sphinx configuration of the release notes (``tox -e releasenotes``).

The layout of the OpenStack release-notes job: reno renders the notes of
``releasenotes/notes`` from the git history, one page per series.
"""

project = "gvfs-openstack release notes"
copyright = "gvfs-openstack developers"

extensions = ["reno.sphinxext"]

source_suffix = ".rst"
master_doc = "index"
exclude_patterns = []
html_theme = "alabaster"
templates_path = ["_templates"]
html_static_path = ["_static"]
