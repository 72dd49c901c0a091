# SPDX-License-Identifier: Apache-2.0
"""Sphinx configuration of the gvfs-openstack guide.

Laid out as OpenStack projects' guides are (install, admin,
configuration, cli, contributor) in openstackdocstheme; the REST API's
reference is built apart from it with os-api-ref (``api-ref/source``).
"""

project = "gvfs-openstack"
copyright = "gvfs-openstack developers"

extensions = [
    "openstackdocstheme",
    # The architecture picture.
    "sphinx.ext.graphviz",
    # Every option, rendered from the code's own oslo.config definitions.
    "oslo_config.sphinxext",
    # gvfs-api's policy defaults, from the code's oslo.policy rules.
    "oslo_policy.sphinxext",
    # The openstack gvfs commands, from their cliff classes.
    "cliff.sphinxext",
    # The release notes of releasenotes/notes.
    "reno.sphinxext",
]

master_doc = "index"
exclude_patterns = []
html_theme = "openstackdocs"
graphviz_output_format = "svg"

# openstackdocstheme: where the source and its bugs live.
openstackdocs_repo_name = "gvfs-openstack/gvfs-openstack"
openstackdocs_bug_project = "gvfs-openstack"
openstackdocs_bug_tag = "doc"
openstackdocs_auto_name = False
openstackdocs_pdf_link = False

# The options' help is reStructuredText; one option may appear under the
# same group name in two namespaces (the store's group is a placeholder).
suppress_warnings = []
