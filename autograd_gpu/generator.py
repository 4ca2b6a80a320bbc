"""ag.Generator: a random number generator of its own, as torch.Generator, passed as ``generator=`` to the
random functions (ag.rand, randn, randint, randperm, rand_like, randn_like, multinomial, nn.init's
initialisers, DataLoader). Drawing from one leaves the global generators (ag.manual_seed's) alone, and two
generators seeded alike draw alike.

A CPU generator wraps a NumPy ``Generator`` (PCG64, seeded as the CPU backend's global one: a Generator
seeded with n draws what ``ag.manual_seed(n)`` then the global functions draw); a CUDA generator wraps a
``cupy.random.RandomState`` on its GPU (cuRAND), made by the backend's ``make_rng``.
"""
import numbers
import secrets
from typing import Any

from .backends import array_bytes, bytes_array
from .device import Device, device as _parse_device
from .dtypes import uint8
from .tensor import Tensor

__all__ = ["Generator", "rng_for"]

_DEFAULT_SEED = 67280421310721           # PyTorch's default seed of a new generator
_U64 = 2 ** 64 - 1
# the state's bytes: the initial seed (8), then the backend's generator_state: on the CPU PCG64's state and increment,
# has_uint32 and uinteger (37); on a GPU the seed the RandomState was (re)started from (8)
_STATE_BYTES = {"cpu": 8 + 37, "cuda": 8 + 8}


def _check_seed(seed, what):
    """A seed as PyTorch takes it: an int in [-2**63, 2**64), negative ones taken modulo 2**64."""
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise TypeError(f"Generator.{what}: expected an int seed, got {type(seed).__name__}")
    seed = int(seed)
    if not -2 ** 63 <= seed <= _U64:
        raise ValueError(f"Generator.{what}: expected a seed in [-2**63, 2**64), got {seed}")
    return seed & _U64


class Generator:
    """A random number generator on ``device`` ("cpu" or "cuda[:i]"), as torch.Generator.

    ``manual_seed(seed)`` (returns the generator), ``seed()`` (a fresh nondeterministic seed, returned),
    ``initial_seed()``, ``get_state()`` / ``set_state(state)`` (a uint8 CPU tensor) and ``.device``.

    >>> g = ag.Generator().manual_seed(0)
    >>> a = ag.rand(3, generator=g)
    >>> b = ag.rand(3, generator=ag.Generator().manual_seed(0))
    >>> bool((a == b).all())
    True
    """

    __slots__ = ("_device", "_backend", "_rng", "_seed")

    def __init__(self, device: Device | str = "cpu") -> None:
        if not isinstance(device, (Device, str)):
            raise TypeError(f"Generator: expected a device (a str such as 'cpu' or 'cuda:0', or an ag.device), "
                            f"got {type(device).__name__}")
        self._device = _parse_device(device)
        self._backend = self._device.backend          # raises with the install hint when CUDA is missing
        self._rng: Any = None
        self._seed = 0
        self._reseed(_DEFAULT_SEED)

    def _reseed(self, seed):
        self._seed = seed
        if self._rng is None:
            self._rng = self._backend.make_rng(seed)
        else:
            # in place: a DataLoader or a compiled program holding the backend generator follows
            self._backend.reseed_rng(self._rng, seed)

    @property
    def device(self) -> Device:
        """The device the generator draws on."""
        return self._device

    def manual_seed(self, seed: int) -> "Generator":
        """Seed the generator (an int in [-2**63, 2**64); negative seeds are taken modulo 2**64); returns it."""
        self._reseed(_check_seed(seed, "manual_seed"))
        return self

    def seed(self) -> int:
        """Seed the generator from the operating system's entropy and return that seed."""
        s = secrets.randbits(64)
        self._reseed(s)
        return s

    def initial_seed(self) -> int:
        """The seed the generator was last seeded with (PyTorch's default, 67280421310721, until then)."""
        return self._seed

    def get_state(self) -> Tensor:
        """The generator's state as a uint8 CPU tensor, for ``set_state``: the initial seed, then on the CPU the
        whole PCG64 state (45 bytes in all). On a GPU, CuPy's RandomState cannot be read, so the generator is
        forked: a seed is drawn from it (one read from the device) and the generator restarts from that seed,
        which the state records (16 bytes); so a get_state() on a GPU changes the numbers drawn after it."""
        raw = self._seed.to_bytes(8, "little") + self._backend.generator_state(self._rng)
        return Tensor._make(bytes_array(raw), _parse_device("cpu"))

    def set_state(self, new_state: Tensor) -> "Generator":
        """Restore a state from ``get_state()`` of a generator on the same kind of device; returns the generator."""
        n = _STATE_BYTES[self._device.type]
        if not isinstance(new_state, Tensor) or new_state.dtype != uint8 or new_state.device.type != "cpu":
            got = (f"a {new_state.dtype} tensor on {new_state.device}" if isinstance(new_state, Tensor)
                   else type(new_state).__name__)
            raise TypeError(f"Generator.set_state: expected a uint8 CPU tensor (from get_state()), got {got}")
        if new_state.ndim != 1 or new_state.shape[0] != n:
            raise ValueError(f"Generator.set_state: expected the {n}-byte state of a {self._device.type} generator, "
                             f"got shape {tuple(new_state.shape)}")
        raw = array_bytes(new_state.data)
        self._backend.set_generator_state(self._rng, raw[8:])
        self._seed = int.from_bytes(raw[:8], "little")
        return self

    def __repr__(self) -> str:
        return f"<ag.Generator on {self._device}>"


def rng_for(generator: Any, dev: Device, op: str) -> Any:
    """The backend generator to draw with on ``dev`` for ``generator=``: None (the device's global one) for
    None, an ag.Generator's own when it is on ``dev``, else a clear error naming both devices."""
    if generator is None:
        return None
    if not isinstance(generator, Generator):
        raise TypeError(f"{op}: expected generator to be an ag.Generator or None, got {type(generator).__name__}")
    if generator._device is not dev:
        raise RuntimeError(f"{op}: expected a generator on {dev} (the device of the result), got one on "
                           f"{generator._device}")
    # inside ag.func.vmap(randomness='error') the device's global generator is a stand-in whose every
    # missing attribute raises vmap's error: a draw from an ag.Generator raises it too, as a global draw does
    getattr(dev.backend.rng, "_ag_generator_probe", None)
    return generator._rng
