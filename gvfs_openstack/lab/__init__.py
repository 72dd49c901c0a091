"""The loopback lab: real NFS-Ganesha, sshd, toxiproxy and proxies."""
