"""Queue controller: queue state and PodGroup counts, and queue Commands (Volcano's
``pkg/controllers/queue``)."""
