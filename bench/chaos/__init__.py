"""The chaos campaign: ``tests/chaos`` runs it on 100 seeds in CI, ``python -m bench.chaos --seeds
1000`` at scale with mutation scores (``__main__.py``).

``campaign.py`` runs seeds; one run is a ``world.py`` (the cluster, its processes, the kubelet)
under ``faults.py`` (what a storm does), checked by ``invariants.py`` (what a user would see),
given ``settings.py`` and giving an ``outcome.py``. Its deliberately broken schedulers are in
``mutations.py``, its virtual clock in ``vloop.py``."""
