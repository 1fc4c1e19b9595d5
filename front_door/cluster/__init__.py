"""The front door as a cluster: its nodes, which node leads a partition, the doors that share one cluster, and
the compacted topic their shared metadata lasts in (users, ACLs, quotas, dynamic broker configs)."""
