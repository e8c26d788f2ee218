"""Queue controller: queue state and PodGroup counts (Volcano's ``pkg/controllers/queue``)."""
