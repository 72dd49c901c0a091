"""OpenStackClient plugin: ``openstack gvfs migrate`` and ``openstack gvfs
migration list|show|cancel``."""
