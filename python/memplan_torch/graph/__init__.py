"""memplan graphs from traced steps and back: what a node is (``nodes``), lowering a joint graph to a
memplan.graph (``lower``), a model's step exported whole (``step_graph``), the graph as Inductor compiles it
(``passes``), and a plan read back as what to run when (``schedule``). Above ``step/``; below the doors."""
