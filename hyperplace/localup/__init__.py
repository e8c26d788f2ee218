"""``hack/local-up.sh`` and the integration tests' shared pieces: a real control plane started
from Go-built binaries (:mod:`.controlplane`), the hyperplace processes with one set of flags
(:mod:`.components`), fake nodes and their HyperNode tree (:mod:`.cluster`) and a fake kubelet
(:mod:`.fakekubelet`). ``python -m hyperplace.localup up|status|down`` runs the whole thing: the
CLI (:mod:`.__main__`), the ``up`` sequence (:mod:`.bringup`), kubectl and the waits on the
cluster (:mod:`.kubectl`), and the state directory with the processes it records
(:mod:`.state`)."""
