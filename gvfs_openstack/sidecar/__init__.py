# SPDX-License-Identifier: Apache-2.0
"""Metadata sidecars: the zero-block map, digest and fetch policy of a file.

Written next to an image (``.gvfs-meta.<name>``) by the Glance store and
``gvfs-meta``, read by client proxies (GVFS paper, section 3.2).
"""
