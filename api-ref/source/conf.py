# SPDX-License-Identifier: Apache-2.0
"""Sphinx configuration of gvfs-api's REST API reference (os-api-ref)."""

project = "gvfs-api"
copyright = "gvfs-openstack developers"

extensions = [
    "os_api_ref",
    "openstackdocstheme",
]

master_doc = "index"
html_theme = "openstackdocs"
html_theme_options = {"sidebar_mode": "toc"}

openstackdocs_repo_name = "gvfs-openstack/gvfs-openstack"
openstackdocs_bug_project = "gvfs-openstack"
openstackdocs_bug_tag = "api-ref"
openstackdocs_auto_name = False
openstackdocs_pdf_link = False
