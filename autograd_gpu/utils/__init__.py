"""Utilities: checkpoint (activation checkpointing: recompute in backward instead of storing)."""
from .checkpoint import checkpoint

__all__ = ["checkpoint"]
