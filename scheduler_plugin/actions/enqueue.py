"""``enqueue`` action: admit Pending PodGroups to Inqueue (Volcano's ``enqueue``).

Queues are visited in queue order, one job at a time, round robin (a queue goes back into
the order after each of its jobs, so one queue cannot admit all its jobs before the others),
and each queue's Pending jobs in job order. Jobs of a queue that is not Open stay Pending. A job without minResources is always admitted;
otherwise the plugins vote (:meth:`Session.job_enqueueable`). An admitted job's phase becomes
Inqueue in the session (the runtime then writes it to the PodGroup) and the plugins reserve its
minResources; a refused job stays Pending with the first refusing plugin's reason.

Reservations live for the session: allocate gives back those of admitted jobs it could not
place and asks the held jobs again (``allocate._second_chance``), and an Inqueue job does not
reserve at the next session's open (Volcano keeps both, so one admitted gang no domain can take
blocks its queue's admission while smaller jobs that fit wait).

A job that already holds pods (a gang sent back to Pending by a failed bind or a crash between
its binds) is asked only for the part of its minResources its pods do not hold
(:attr:`~..plugins.queue_accounting.JobSums.admission`); Volcano asks for all of it on top of
them, and a half-bound gang in a full queue then holds its pods for nothing.
"""

from __future__ import annotations

import heapq

from ..algorithms.queue_sums import OPEN, job_sums, queue_state
from ..framework.session import Session
from ..model.jobs import JobInfo


def enqueue(ssn: Session) -> None:
    """Move admissible Pending jobs to Inqueue, queue by queue in queue order."""
    snap = ssn.snap
    by_queue: dict[str, list[JobInfo]] = {}
    for job in snap.jobs.values():
        if job.queue not in snap.queues:
            continue  # the job waits with "queue not found" (allocate says so)
        if ssn.job_phase(job) != "Pending":
            continue
        if job.tasks and ssn.job_ready(job):
            # Its gang minimum runs: admitted in all but the written phase (its PodGroup becomes
            # Running at this session's close). No vote to ask and nothing to reserve, which
            # keeps a cycle over thousands of running jobs whose PodGroups carry no phase cheap.
            # A PodGroup with no pod yet has nothing running, whatever the (possibly absent)
            # JobReady votes say: it is asked like any other, so its minResources count.
            ssn.enqueued.add(job.key)
            continue
        state = queue_state(snap.queues.get(job.queue))
        if state != OPEN:
            # Volcano admits a job without minResources even here; its plugins then refuse
            # every task. Holding it Pending says the same thing earlier.
            ssn.enqueue_reasons[job.key] = f"queue {job.queue} is {state}, not Open"
            continue
        by_queue.setdefault(job.queue, []).append(job)
    if not by_queue:
        return
    jkey = ssn.job_sort_key()
    for jobs in by_queue.values():
        jobs.sort(key=jkey, reverse=True)  # pop() from the end gives the first
    qkey = ssn.queue_sort_key()
    # The queue order is re-read each time a queue comes back (its share may have moved).
    heap = [(qkey(q), q) for q in by_queue]
    heapq.heapify(heap)
    while heap:
        _, q = heapq.heappop(heap)
        jobs = by_queue[q]
        if not jobs:
            continue
        job = jobs.pop()
        # Nothing to ask (no minResources, no DRA device claimed): admitted, as Volcano does.
        if job_sums(snap, job).admission is None or ssn.job_enqueueable(job):
            ssn.job_enqueued(job)
        else:
            why = ssn.enqueue_reasons.get(job.key) or "a plugin refused to admit the job"
            ssn.enqueue_reasons[job.key] = why
        if jobs:
            heapq.heappush(heap, (qkey(q), q))


# END
