"""Differentiable operations, each a Function (forward and backward side by side) or a composition."""
