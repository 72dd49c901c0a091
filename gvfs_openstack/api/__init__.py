# SPDX-License-Identifier: Apache-2.0
"""gvfs-api: the disaster-recovery service's REST API, behind Keystone.

Users reach it through the catalog (service type ``gvfs``) with their own
token; policy decides what they may do; it asks ``gvfs-conductor`` over
oslo.messaging RPC to act.
"""
