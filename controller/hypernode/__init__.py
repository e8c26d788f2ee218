"""HyperNode controller: status (nodeCount, Ready) and label-based auto-discovery."""
