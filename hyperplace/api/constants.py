"""Label, annotation and name conventions shared with Volcano (wire compatible)."""

from typing import Final

# API groups and versions.
TOPOLOGY_GROUP: Final = "topology.volcano.sh"
TOPOLOGY_VERSION: Final = "v1alpha1"
BATCH_GROUP: Final = "batch.volcano.sh"
BATCH_VERSION: Final = "v1alpha1"
SCHEDULING_GROUP: Final = "scheduling.volcano.sh"
SCHEDULING_VERSION: Final = "v1beta1"
BUS_GROUP: Final = "bus.volcano.sh"
BUS_VERSION: Final = "v1alpha1"

# A pod joins its PodGroup through this annotation (Volcano's convention).
GROUP_NAME_ANNOTATION: Final = "scheduling.k8s.io/group-name"

# Labels (and annotations) the Job controller stamps on pods.
TASK_SPEC_KEY: Final = "volcano.sh/task-spec"
TASK_INDEX_KEY: Final = "volcano.sh/task-index"
PARTITION_ID_KEY: Final = "volcano.sh/partition-id"
JOB_NAME_KEY: Final = "volcano.sh/job-name"
JOB_NAMESPACE_KEY: Final = "volcano.sh/job-namespace"
QUEUE_NAME_KEY: Final = "volcano.sh/queue-name"
JOB_VERSION_KEY: Final = "volcano.sh/job-version"
JOB_RETRY_COUNT_KEY: Final = "volcano.sh/job-retry-count"

# Declared by Volcano for the job's allocated HyperNode; we write it for humans and
# recover the truth from running pods (see scheduler recovery).
JOB_ALLOCATED_HYPERNODE_ANNOTATION: Final = "volcano.sh/job-allocated-hypernode"

# On a pod the Job controller made again after its predecessor was lost with its node: that
# node's name. The scheduler puts the replacement in the same leaf when it can (a preference).
REPLACES_NODE_ANNOTATION: Final = "hyperplace.io/replaces-node"

# HyperNode discovery.
NETWORK_TOPOLOGY_SOURCE_LABEL: Final = "volcano.sh/network-topology-source"

DEFAULT_SCHEDULER_NAME: Final = "volcano"
DEFAULT_QUEUE: Final = "default"
DEFAULT_MAX_RETRY: Final = 3

# The virtual root HyperNode every scheduler session adds.
CLUSTER_TOP_HYPERNODE: Final = "<cluster-top-hypernode>"
