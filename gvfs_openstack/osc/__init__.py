# SPDX-License-Identifier: Apache-2.0
"""OpenStackClient plugin: ``openstack gvfs migrate`` and ``openstack gvfs
migration list|show|cancel``."""
