"""Pure computations over a snapshot and a session's allocation state (numpy, no session, no
I/O): fit counts, scores, domain ranking, what a unit lacks, queue shares and sums, hierarchical
DRF, victim planning, fragmentation."""
