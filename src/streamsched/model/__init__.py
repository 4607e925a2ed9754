"""The core model: immutable value objects with numpy arrays inside."""

from streamsched.model.cluster import Cluster, Node
from streamsched.model.placement import Placement
from streamsched.model.taskgraph import TaskGraph
from streamsched.model.topology import GROUPINGS, Operator, Stream, Topology

__all__ = ["Cluster", "Node", "Placement", "TaskGraph", "Operator", "Stream", "Topology", "GROUPINGS"]
