"""Adaptive placement of CEP dataflows that arrive and depart on edge and cloud resources
(edge-cloud-topset.txt): model, TopSet/TopSet-P, GA-Incremental/GA-Global, rebalancing,
workloads and the control-interval simulation."""
