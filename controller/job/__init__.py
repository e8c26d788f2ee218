"""Volcano Job controller: Job -> PodGroup + pods, and the Job's status."""
