"""Data sets: MNIST (IDX reader and downloader), the shipped 8x8 digits, and 2-D toy sets."""
from .toy import make_spiral, make_moons
from .mnist import MNIST, read_idx
from .digits import Digits, load_digits

__all__ = ["make_spiral", "make_moons", "MNIST", "read_idx", "Digits", "load_digits"]
