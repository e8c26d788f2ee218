"""Pure computations over a snapshot (numpy, no session, no I/O): scores, what a unit asks,
queue shares and sums, hierarchical DRF, victim units, fragmentation."""
