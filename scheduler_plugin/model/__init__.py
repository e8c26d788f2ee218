"""Data of the scheduler, no behaviour beyond reading it: jobs and tasks, node filters, the
HyperNode tree, the snapshot a cycle reads, explanations, reservation records, resources and
typed memo keys."""
