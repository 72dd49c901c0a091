# SPDX-License-Identifier: Apache-2.0
"""The loopback lab: real NFS-Ganesha, sshd, toxiproxy and proxies."""
