"""The chaos campaign (``campaign.py``, its deliberately broken schedulers in ``mutations.py``, its
virtual clock in ``vloop.py``): ``tests/chaos`` runs it on 100 seeds in CI, ``python -m bench.chaos
--seeds 1000`` at scale with mutation scores."""
