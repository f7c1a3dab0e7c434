"""The graph IR: graphs, nodes, primitives, analyses, edits and printing."""

from myir.ir.graph import Apply, Constant, Debug, Graph, Node, Parameter, as_node
from myir.ir.primitives import PRIMITIVES, Primitive
from myir.ir import analysis, edit
from myir.ir.edit import clone, inline, replace

__all__ = ["Apply", "Constant", "Debug", "Graph", "Node", "Parameter", "as_node",
           "PRIMITIVES", "Primitive", "analysis", "edit", "clone", "inline", "replace"]
