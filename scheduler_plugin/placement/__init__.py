"""The placement engine: where a gang's pods, and a preemptor's victims, go.

Between the framework (the session and its allocation state) and the actions that orchestrate:
which pods of a job form its unit (:mod:`.gang_units`), the domain search and exact placement
(:mod:`.domain_search`, ranking candidate domains in :mod:`.domain_ranking` and saying what a
domain lacks in :mod:`.shortfall`), head-of-queue holds and EASY backfill of held room
(:mod:`.head_of_queue`), exclusive topology fences (:mod:`.exclusive_fences`) and, for the
eviction actions, the fewest and least disruptive victims per domain (:mod:`.victim_search`)."""
