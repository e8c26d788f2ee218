"""The cluster state a cycle reads: kept from watch events (``cluster_state``), or built from
whole listings (``rebuild``), and the check that the two agree (``verify``)."""
