# SPDX-License-Identifier: Apache-2.0
"""Sphinx configuration of the gvfs-openstack operator guide."""

project = "gvfs-openstack"
copyright = "gvfs-openstack developers"

extensions = [
    # The architecture picture.
    "sphinx.ext.graphviz",
    # Every option, rendered from the code's own oslo.config definitions.
    "oslo_config.sphinxext",
    # The release notes of releasenotes/notes.
    "reno.sphinxext",
]

master_doc = "index"
exclude_patterns = []
html_theme = "alabaster"
graphviz_output_format = "svg"
# The options' help is reStructuredText; one option may appear under the
# same group name in two namespaces (the store's group is a placeholder).
suppress_warnings = []
