"""The training step in PyTorch: its vocabulary (``joint``), fake stand-ins of a model's tensors (``fake``)
and its trace into aot_autograd's joint graph (``trace``). Below the graph layer and the doors: nothing here
knows memplan's graphs or plans."""
