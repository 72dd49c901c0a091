# SPDX-License-Identifier: Apache-2.0
"""The migration conductor: disaster-recovery transfer of images.

A job moves images from one site's Glance to another's: a local copy to
the source DTN, DTN-to-DTN GridFTP (or Globus), a remote copy into the
destination store and registration in the destination Glance, each stage
in a forked worker (:mod:`gvfs_openstack.migration.pipeline`).
"""
