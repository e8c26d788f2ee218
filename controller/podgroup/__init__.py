"""PodGroups for pods of any owner (Volcano's podgroup controller)."""
