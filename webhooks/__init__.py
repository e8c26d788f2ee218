"""Admission webhooks for HyperNodes, Volcano Jobs and their pods.

* ``webhooks.admission``: ``admit()``, the whole admission pipeline without I/O (used by
  the simulator and ``hyperplace validate``), with ``AdmissionContext`` and
  ``AdmissionOutcome``.
* ``webhooks.hypernode``, ``webhooks.job``, ``webhooks.pod``: the single webhooks.
* ``webhooks.review``: AdmissionReview v1 parsing and answers (``handle_review``).
* ``webhooks.server``: the aiohttp apps; ``webhooks.tls``: certificate hot reload;
  ``webhooks.cache``: an AdmissionContext fed by informers.

Importing this package (or ``admission``) does not import aiohttp.
"""
