"""Describe a decoder from its modeling source alone, without running it.

Hub remote code may not be executed before the user says ``--trust-remote-code``, so the
analysis then reads the source with ``ast``: it follows the construction graph (causal LM ->
model -> decoder layer -> attention / MLP / norms), reads constructor arguments (biases, norm
widths, activation keys), follows the decoder layer's forward to place the norms, and looks for
the operations that change numerics (``1 + weight``, ``tanh`` soft-capping, embedding scaling).
The roles are found by structure, not by Llama's names (``static_graph``): ``transformer.h``,
``attention`` / ``feed_forward``, ``wqkv`` / ``wo``, ``w1`` / ``w3`` / ``w2`` and classes picked
from ``ATTENTION_CLASSES[config._attn_implementation]`` are read, and the checkpoint keeps its
names (weight renames onto the Llama layout). A fused q/k/v projection is read with the layout
its forward shows, ALiBi from its slopes; neither is ever read as something else silently.
Every value cites its line. What it cannot read becomes an unresolved delta with that line,
saying what was expected and what was found.
Values come with confidence 0.8: read, not measured (a trusted run measures them).
"""

from onboard.analysis.static.attention import OUTPUT_NAMES
from onboard.analysis.static.config_values import ConfigValues
from onboard.analysis.static.mlp import PLAIN_ACTIVATIONS
from onboard.analysis.static.norms import NORM_BASES
from onboard.analysis.static.reader import StaticReader, StaticResult
from onboard.analysis.static.source_model import SourceModel

__all__ = [
    "NORM_BASES",
    "OUTPUT_NAMES",
    "PLAIN_ACTIVATIONS",
    "ConfigValues",
    "SourceModel",
    "StaticReader",
    "StaticResult",
]
