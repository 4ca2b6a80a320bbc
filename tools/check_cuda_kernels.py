"""Compile every CUDA kernel autograd_gpu builds with the real CUDA compiler, without a GPU.

The CuPy stand-in (testing/cupy_standin) runs our ElementwiseKernel / ReductionKernel bodies by
interpreting a subset of C: it cannot say whether NVRTC accepts the CUDA C that CuPy 14 generates
around them (types, CArray indexing, float16 overloads, CUB's reduction template, our RawKernels). This
tool does, in three steps:

1. ``collect()`` runs our CUDA code paths on the stand-in (the benchmarks' training steps, RNN layers,
   every optimizer in its torch-parity configurations, losses, norms, activations, pooling, attention,
   ag.compile'd steps) with hooks around the stand-in's kernel classes and the compile fuser's
   vectorised kernel, recording each kernel's definition and, per call, what CuPy's source depends on:
   the argument dtypes, their ndim after CuPy's dimension reduction, C-contiguity, 32-bit indexing,
   scalars, the type placeholders' types, and for a reduction its axes.
2. ``generate()`` writes the CUDA source CuPy 14 would hand to NVRTC for that call: the templates of
   cupy/_core/_kernel.pyx (``_get_elementwise_kernel_code``), _reduction.pyx
   (``_ReductionKernel_get_cached_function_code``) and _cub_reduction.pyx (the CUB block reduction a
   one-input one-output ReductionKernel takes when its reduced axes are contiguous: its renaming of the
   parameters to in0/out0 included; both passes of a full reduction), prefixed by the headers and with
   the options of ``compile_with_cache`` / ``assemble_cupy_compiler_options`` (``--std=c++17``, CuPy's
   include directories). A RawKernel's source is ours as is (no headers, as CuPy's RawKernel).
3. ``compile_all()`` runs ``nvcc -arch=sm_90 -ptx`` on each distinct source (in parallel) and reports
   OK or the compiler's error.

    python tools/check_cuda_kernels.py                 # everything, a line per kernel, exit 1 on an error
    python tools/check_cuda_kernels.py --only optim    # the scenarios whose name contains "optim"
    python tools/check_cuda_kernels.py --keep /tmp/k   # keep the .cu files (one per distinct source)
    python tools/check_cuda_kernels.py --crosscheck /tmp/cpv/bin/python   # compare with CuPy's own generator

Needs ``nvcc`` (PATH, $CUDA_PATH/bin or /usr/local/cuda*/bin; AG_NVCC names it) and CuPy 14's header
directory (``cupy/_core/include`` of an installed cupy package, found by importing it in a subprocess
where possible, or AG_CUPY_INCLUDE). ``--crosscheck PYTHON`` runs CuPy's own code generators
(``_get_elementwise_kernel_code``, ``_ReductionKernel_get_cached_function_code``: importable without a
GPU) in a Python where CuPy is installed and says which of our generated sources differ from theirs.

What the generator does not mirror of CuPy: NVRTC itself (nvcc compiles the same source as a .cu file,
with cuda_runtime.h implicitly included, where NVRTC has fewer headers); jitify (off by default in
CuPy); the kernel-parameter optimiser (``cupyx.optimizing``: other block sizes); the ``mean`` /
``argmax`` special cases of CUB's two-pass reduction (only CuPy's own reductions are named so); HIP.
"""
import argparse
import contextlib
import json
import os
import re
import shutil
import string
import subprocess
import sys
import tempfile
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

ARCH = "sm_90"
INT32_MAX = 0x7FFFFFFF
# compile_with_cache (cupy/_core/_compile_with_cache.pyx): prepended to every ElementwiseKernel /
# ReductionKernel source (prepend_cupy_headers=True); RawKernel/RawModule sources get nothing
CUPY_HEADERS = ("cupy/complex.cuh", "cupy/carray.cuh", "cupy/atomics.cuh", "cupy/math_constants.h")
_CUPY_HEADER = "".join(f"#include <{h}>\n" for h in CUPY_HEADERS)
# _cub_reduction.pyx, _get_cub_header_include() with the bundled CCCL
_CUB_HEADER = "\n#include <cub/block/block_reduce.cuh>\n#include <cub/block/block_load.cuh>\n"

# numpy dtype -> the C type name CuPy pastes (cupy._core._scalar.get_typename)
_TYPENAMES = {"bool": "bool", "int8": "signed char", "uint8": "unsigned char", "int16": "short",
              "uint16": "unsigned short", "int32": "int", "uint32": "unsigned int", "int64": "long long",
              "uint64": "unsigned long long", "float16": "float16", "float32": "float", "float64": "double",
              "complex64": "thrust::complex<float>", "complex128": "thrust::complex<double>"}
NDARRAY, INDEXER, SCALAR, POINTER = 1, 2, 3, 4       # cupy/_core/_kernel.pxd, _ArgKind


class CupyError(Exception):
    """What CuPy itself would raise before compiling (a bad parameter spec, an undecidable type)."""


def typename(t):
    t = np.dtype(t)
    if t.name not in _TYPENAMES:
        raise CupyError(f"CuPy has no C type for {t}")
    return _TYPENAMES[t.name]


# -- CuPy's parameter and argument descriptions ---------------------------------------------------------
class Param:
    """cupy._core._kernel.ParameterInfo."""

    def __init__(self, spec, is_const):
        self.name = self.dtype = self.ctype = None
        self.raw, self.is_const = False, is_const
        s = spec.split()
        if len(s) < 2:
            raise CupyError(f"Syntax error: {spec}")
        t, self.name = s[-2:]
        if t == "CIndexer":
            pass
        elif len(t) == 1:
            self.ctype = t
        else:
            try:
                dt = np.dtype(t)
            except TypeError:
                raise CupyError(f"Wrong type {t} (a parameter type is a NumPy dtype name or a one-letter "
                                f"type placeholder), in {spec!r}") from None
            if dt.name != t:
                raise CupyError(f"Wrong type {t}, in {spec!r}")
            self.dtype, self.ctype = dt, typename(dt)
        for w in s[:-2]:
            if w == "raw":
                self.raw = True
            elif w == "_non_const":
                self.is_const = False
            else:
                raise CupyError(f'Unknown keyword "{w}"')

    def key(self):
        return (self.name, None if self.dtype is None else self.dtype.name, self.ctype, self.raw, self.is_const)


def param_info(s, is_const):
    """cupy._core._kernel._get_param_info."""
    if len(s) == 0:
        return ()
    return tuple(Param(p, is_const) for p in s.strip().split(","))


class ArgInfo:
    """cupy._core._kernel._ArgInfo: (kind, dtype, ndim, c_contiguous, index_32_bits)."""

    def __init__(self, kind, dtype=None, ndim=0, c_contiguous=True, index_32_bits=True):
        self.kind, self.ndim = kind, ndim
        self.dtype = None if dtype is None else np.dtype(dtype)
        self.c_contiguous, self.index_32_bits = bool(c_contiguous), bool(index_32_bits)

    def c_type(self):
        if self.kind == NDARRAY:
            return f"CArray<{typename(self.dtype)}, {self.ndim}, {int(self.c_contiguous)}, {int(self.index_32_bits)}>"
        if self.kind == SCALAR:
            return typename(self.dtype)
        if self.kind == INDEXER:
            return f"CIndexer<{self.ndim}, {int(self.index_32_bits)}>"
        raise AssertionError(self.kind)

    def param_c_type(self, p):
        return ("const " if p.is_const else "") + self.c_type()

    def var_name(self, p):
        return "_raw_" + p.name if self.kind in (NDARRAY, POINTER) and not p.raw else p.name

    def key(self):
        return (self.kind, None if self.dtype is None else self.dtype.name, self.ndim, self.c_contiguous,
                self.index_32_bits)


def kernel_params(params, infos):
    """cupy._core._kernel._get_kernel_params."""
    return ", ".join(f"{a.param_c_type(p)} {a.var_name(p)}" for p, a in zip(params, infos))


def typedefs(pairs, infos=()):
    """_TypeMap.get_typedef_code, after the include CuPy 14 puts first where an argument or a placeholder
    is float16 (its float16 class is in cupy/float16.cuh, not in the headers every kernel gets)."""
    code = "".join(f"typedef {typename(t)} {name};\n" for name, t in pairs)
    if any(np.dtype(t) == np.float16 for _, t in pairs) or any(
            a.dtype is not None and a.dtype == np.float16 for a in infos):
        code = '#include "cupy/float16.cuh"\n\n' + code
    return code


def decide_types(in_params, out_params, in_dtypes, out_dtypes):
    """cupy._core._kernel._decide_params_type_core: placeholders bound by the output arrays, then by the
    input arrays (a scalar binds nothing: its dtype is None here). -> in_types, out_types, pairs."""
    types = {}
    for p, a in list(zip(out_params, out_dtypes)) + list(zip(in_params, in_dtypes)):
        if a is None:
            continue
        if p.dtype is not None:
            if np.dtype(a) != p.dtype:
                raise CupyError(f"Type is mismatched. {p.name} {a} {p.dtype}")
        elif p.ctype in types:
            if types[p.ctype] != np.dtype(a):
                raise CupyError(f"Type is mismatched. {p.name} {a} {types[p.ctype]} {p.ctype}")
        else:
            types[p.ctype] = np.dtype(a)

    def resolve(p):
        if p.dtype is not None:
            return p.dtype
        if p.ctype not in types:          # CuPy: KeyError in _decide_params_type_core
            raise CupyError(f"the type placeholder {p.ctype} of {p.name!r} is bound by no array argument "
                            "(CuPy binds placeholders from arrays only; a scalar takes its parameter's type)")
        return types[p.ctype]
    return [resolve(p) for p in in_params], [resolve(p) for p in out_params], tuple(sorted(types.items()))


# -- arrays as CuPy sees them: shape, strides, itemsize ---------------------------------------------------
class Arr:
    def __init__(self, shape, strides, dtype, c_contiguous=None):
        self.shape, self.strides, self.dtype = tuple(shape), tuple(strides), np.dtype(dtype)
        self.c = _c_contiguous(self.shape, self.strides, self.dtype.itemsize) if c_contiguous is None \
            else c_contiguous

    @classmethod
    def of(cls, a):
        h = a._a
        return cls(h.shape, h.strides, h.dtype, bool(h.flags.c_contiguous))

    @classmethod
    def new(cls, shape, dtype):
        dtype = np.dtype(dtype)
        strides, s = [], dtype.itemsize
        for n in reversed(shape):
            strides.insert(0, s)
            s *= max(n, 1)
        return cls(shape, strides, dtype, True)

    @property
    def size(self):
        return int(np.prod(self.shape, dtype=np.int64))

    def f_contiguous(self):
        return _c_contiguous(self.shape[::-1], self.strides[::-1], self.dtype.itemsize)

    def index_32_bits(self):
        span = sum(abs(st) * (n - 1) for n, st in zip(self.shape, self.strides) if n)
        return self.size <= INT32_MAX and span + self.dtype.itemsize <= INT32_MAX

    def info(self, ndim=None):
        return ArgInfo(NDARRAY, self.dtype, len(self.shape) if ndim is None else ndim, self.c, self.index_32_bits())

    def broadcast_to(self, shape):
        pad = len(shape) - len(self.shape)
        sh, st = (1,) * pad + self.shape, (0,) * pad + self.strides
        strides = tuple(0 if n == 1 and m != 1 else s for n, m, s in zip(sh, shape, st))
        if tuple(sh) == tuple(shape) and not pad:
            return self
        return Arr(shape, strides, self.dtype)

    def transpose(self, axes):
        return Arr([self.shape[a] for a in axes], [self.strides[a] for a in axes], self.dtype)

    def with_dims(self, shape, strides):
        return Arr(shape, strides, self.dtype, self.c)     # CuPy's _view(..., update_c_contiguity=False)


def _c_contiguous(shape, strides, itemsize):
    if any(n == 0 for n in shape):
        return True
    s = itemsize
    for n, st in zip(reversed(shape), reversed(strides)):
        if n != 1:
            if st != s:
                return False
            s *= n
    return True


def _reduced_view(a):
    """ndarray.reduced_view: a C-contiguous array as 1-d; else adjacent axes merged, size-1 axes dropped."""
    if len(a.shape) <= 1:
        return a
    if a.c:
        return a.with_dims((a.size,), (a.dtype.itemsize,))
    shape, strides = [], []
    for n, st in zip(a.shape, a.strides):
        if n == 1:
            continue
        if shape and strides[-1] == n * st:
            shape[-1] *= n
            strides[-1] = st
        else:
            shape.append(n)
            strides.append(st)
    if len(shape) == len(a.shape):
        return a
    return a.with_dims(shape, strides)


def reduce_dims(args, params, shape):
    """cupy._core._kernel._reduce_dims / _reduced_view_core over ``args`` (Arr, or None for a scalar),
    updating the list in place; returns the new loop shape."""
    shape = tuple(shape)
    if len(shape) <= 1 or len(args) == 0:
        return shape
    if len(args) == 1:
        a = args[0]
        if params[0].raw or a is None:
            return shape
        r = _reduced_view(a)
        if r is a:
            return shape
        args[0] = r
        return r.shape
    ndim = len(shape)
    arrays = [i for i, (p, a) in enumerate(zip(params, args)) if not p.raw and a is not None]
    strided = []
    for i in arrays:
        if not args[i].c:
            if ndim == 2:
                return shape
            strided.append(i)
    if not arrays:
        return shape
    if not strided:
        total = args[arrays[0]].size
        for i in arrays:
            args[i] = args[i].with_dims((total,), (args[i].dtype.itemsize,))
        return (total,)
    vec, axes, last = list(shape), [], -1
    for ax in range(ndim):
        if vec[ax] == 1:
            continue
        if last < 0:
            last = ax
            continue
        if any(args[i].strides[ax] * vec[ax] != args[i].strides[last] for i in strided):
            axes.append(last)
        else:
            vec[ax] *= vec[last]
        last = ax
    if last >= 0:
        axes.append(last)
    if len(axes) == ndim:
        return shape
    new = tuple(vec[ax] for ax in axes)
    for i in arrays:
        args[i] = args[i].with_dims(new, [args[i].strides[ax] for ax in axes])
    return new


def _indexer(shape):
    size = int(np.prod(shape, dtype=np.int64))
    return ArgInfo(INDEXER, None, len(shape), True, size <= INT32_MAX)


# -- the generated sources -------------------------------------------------------------------------------
_EW_TEMPLATE = string.Template('''
    ${typedef_preamble}
    ${preamble}
    extern "C" __global__ void ${name}(${params}) {
      ${loop_prep};
      #pragma unroll 1
      CUPY_FOR(i, _ind.size()) {
        _ind.set(i);
        ${operation};
      }
      ${after_loop};
    }
    ''')

_RED_TEMPLATE = string.Template('''
${type_preamble}
${preamble}
#define REDUCE(a, b) (${reduce_expr})
#define POST_MAP(a) (${post_map_expr})
#define _REDUCE(_offset) if (_tid < _offset) {   _type_reduce _a = _sdata[_tid], _b = _sdata[(_tid + _offset)];   _sdata[_tid] = REDUCE(_a, _b); }

typedef ${reduce_type} _type_reduce;
extern "C" __global__ void ${name}(${params}) {
  __shared__ char _sdata_raw[${block_size} * sizeof(_type_reduce)];
  _type_reduce *_sdata = reinterpret_cast<_type_reduce*>(_sdata_raw);
  unsigned int _tid = threadIdx.x;

  IndexT _J_offset = _tid >> __popc(_block_stride - 1); // _tid / _block_stride
  ptrdiff_t _j_offset = (ptrdiff_t)_J_offset * _out_ind.size();
  IndexT _J_stride = ${block_size} >> __popc(_block_stride - 1);
  ptrdiff_t _j_stride = (ptrdiff_t)_J_stride * _out_ind.size();

  for (ptrdiff_t _i_base = (ptrdiff_t)blockIdx.x * _block_stride;
       _i_base < _out_ind.size();
       _i_base += (ptrdiff_t)gridDim.x * _block_stride) {
    _type_reduce _s = _type_reduce(${identity});
    ptrdiff_t _i =
        _i_base + (_tid & (_block_stride - 1));  // _tid % _block_stride
    IndexT _J = _J_offset;
    for (ptrdiff_t _j = _i + _j_offset; _j < _in_ind.size();
         _j += _j_stride, _J += _J_stride) {
      _in_ind.set(_j);
      ${input_expr}
      _type_reduce _a = static_cast<_type_reduce>(${pre_map_expr});
      _s = REDUCE(_s, _a);
    }
    _sdata[_tid] = _s;
    __syncthreads();
    for (unsigned int _block = ${block_size} / 2;
         _block >= _block_stride; _block >>= 1) {
      if (_tid < _block) {
        _REDUCE(_block);
      }
      __syncthreads();
    }
    if (_tid < _block_stride) {
      _s = _sdata[_tid];
    }
    if (_tid < _block_stride && _i < _out_ind.size()) {
      _out_ind.set(static_cast<ptrdiff_t>(_i));
      ${output_expr}
      POST_MAP(_s);
    }
  }
}''')


def elementwise_source(params, infos, pairs, operation, name, preamble="", loop_prep="", after_loop=""):
    """_get_elementwise_kernel_code + _get_simple_elementwise_kernel_code."""
    op = []
    for p, a in zip(params, infos):
        if a.kind == NDARRAY and not p.raw:
            op.append(("const {t} &{n} = _raw_{n}[_ind.get()];" if p.is_const else
                       "{t} &{n} = _raw_{n}[_ind.get()];").format(t=p.ctype, n=p.name))
    op.append(operation)
    return _EW_TEMPLATE.substitute(typedef_preamble=typedefs(pairs, infos), params=kernel_params(params, infos),
                                   operation="\n".join(op), name=name, preamble=preamble, loop_prep=loop_prep,
                                   after_loop=after_loop)


def reduction_source(nin, nout, params, infos, pairs, name, block_size, reduce_type, identity, map_expr,
                     reduce_expr, post_map_expr, preamble):
    """_ReductionKernel_get_cached_function_code + _create_reduction_function_code."""
    ins = [p for p, a in zip(params[:nin], infos[:nin]) if not p.raw and a.kind == NDARRAY]
    outs = [p for p, a in zip(params[nin:nin + nout], infos[nin:nin + nout]) if not p.raw and a.kind == NDARRAY]
    input_expr = "\n".join((("const {0} {1}" if p.is_const else "{0}& {1}") + " = _raw_{1}[_in_ind.get()];")
                           .format(p.ctype, p.name) for p in ins)
    output_expr = "\n".join("{0} &{1} = _raw_{1}[_out_ind.get()];".format(p.ctype, p.name)
                            for p in outs if not p.is_const)
    return _RED_TEMPLATE.substitute(name=name, block_size=block_size, reduce_type=reduce_type,
                                    params=kernel_params(params, infos), identity=identity,
                                    reduce_expr=reduce_expr, pre_map_expr=map_expr, post_map_expr=post_map_expr,
                                    type_preamble=typedefs(pairs, infos), input_expr=input_expr,
                                    output_expr=output_expr, preamble=preamble)


def cub_source(name, block_size, items_per_thread, reduce_type, params, infos, identity, pre_map_expr,
               reduce_expr, post_map_expr, pairs, preamble):
    """_cub_reduction.pyx, _create_cub_reduction_function's module_code."""
    code = _CUB_HEADER + '''
${type_preamble}
${preamble}

typedef ${reduce_type} _type_reduce;

static_assert(sizeof(_type_reduce) <= 32,
    "The intermediate reduction type is assumed to be at most 32 bytes.");

// Compile-time constants for CUB template specializations
#define ITEMS_PER_THREAD  ${items_per_thread}
#define BLOCK_SIZE        ${block_size}

// for hipCUB: use the hipcub namespace
#ifdef __HIP_DEVICE_COMPILE__
#define cub hipcub
#endif

#if defined FIRST_PASS
    typedef type_in0_raw  type_mid_in;
    typedef _type_reduce  type_mid_out;
    #define POST_MAP(a)   out0 = a;
#elif defined SECOND_PASS
    typedef _type_reduce  type_mid_in;
    typedef type_out0_raw type_mid_out;
    #define POST_MAP(a)   (${post_map_expr})
#else  // one-pass reduction
    typedef type_in0_raw  type_mid_in;
    typedef type_out0_raw type_mid_out;
    #define POST_MAP(a)   (${post_map_expr})
#endif

struct _reduction_op {
    __device__ __forceinline__ _type_reduce operator()(
        const _type_reduce &a, const _type_reduce &b) const {
        return ${reduce_expr};
    }
};

extern "C"
__global__ void ${name}(${params}) {
  unsigned int _tid = threadIdx.x;
'''
    if pre_map_expr == "in0":
        code += '''
  // Specialize BlockLoad type for faster (?) loading
  typedef cub::BlockLoad<_type_reduce, BLOCK_SIZE,
                         ITEMS_PER_THREAD, cub::BLOCK_LOAD_DIRECT> BlockLoadT;

  // Shared memory for loading
  __shared__ typename BlockLoadT::TempStorage temp_storage_load;
'''
    code += '''
  // Specialize BlockReduce type for our thread block
  typedef cub::BlockReduce<_type_reduce, BLOCK_SIZE> BlockReduceT;

  // Shared memory for reduction
  __shared__ typename BlockReduceT::TempStorage temp_storage;

  // Declare reduction operation
  _reduction_op op;

  // input & output raw pointers
  const type_mid_in* _in0 = static_cast<const type_mid_in*>(_raw_in0);
  type_mid_out* _out0 = static_cast<type_mid_out*>(_raw_out0);

  // Per-thread tile data
  _type_reduce _sdata[ITEMS_PER_THREAD];
  #pragma unroll
  for (int j = 0; j < ITEMS_PER_THREAD; j++) {
      _sdata[j] = _type_reduce(${identity});
  }

  // each block handles the reduction of 1 segment
  size_t segment_idx = size_t(blockIdx.x) * _segment_size;
  const type_mid_in* segment_head = _in0 + segment_idx;
  size_t i = 0;  // tile head within the segment
  int tile_size = (BLOCK_SIZE * ITEMS_PER_THREAD < _segment_size ?
                   BLOCK_SIZE * ITEMS_PER_THREAD :
                   _segment_size);
  sizeT _seg_size = _segment_size;

  #if defined FIRST_PASS
  // for two-pass reduction only: "last segment" is special
  if (_array_size > 0) {
      if (_array_size - segment_idx <= _segment_size) {
          _seg_size = _array_size - segment_idx;
      }
      #ifdef __HIP_DEVICE_COMPILE__
      // We don't understand HIP...
      __syncthreads();  // Propagate the new value back to memory
      #endif
  }
  #endif

  // loop over tiles within 1 segment
  _type_reduce aggregate = _type_reduce(${identity});
  for (i = 0; i < _seg_size; i += BLOCK_SIZE * ITEMS_PER_THREAD) {
      // for the last tile
      if (_seg_size - i <= tile_size) { tile_size = _seg_size - i; }
'''
    if pre_map_expr == "in0":
        code += '''
      // load a tile
      BlockLoadT(temp_storage_load).Load(segment_head + i, _sdata, tile_size,
                                         _type_reduce(${identity}));
'''
    else:
        code += '''
      // load a tile
      #pragma unroll
      for (int j = 0; j < ITEMS_PER_THREAD; j++) {
          // index of the element in a tile
          int e_idx = _tid * ITEMS_PER_THREAD + j;

          // some pre_map_expr uses _J internally...
          #if defined FIRST_PASS
          IndexT _J = (segment_idx + i + e_idx);
          #else  // only one pass
          IndexT _J = (segment_idx + i + e_idx) % _seg_size;
          #endif

          if (e_idx < tile_size) {
              const type_mid_in in0 = *(segment_head + i + e_idx);
              _sdata[j] = static_cast<_type_reduce>(${pre_map_expr});
          } else {
              _sdata[j] = _type_reduce(${identity});
          }
      }
'''
    code += '''
      // Compute block reduction
      // Note that the output is only meaningful for thread 0
      aggregate = op(aggregate, BlockReduceT(temp_storage).Reduce(_sdata, op));

      __syncthreads();  // for reusing temp_storage
  }

  if (_tid == 0) {
      type_mid_out& out0 = *(_out0 + blockIdx.x);
      POST_MAP(aggregate);
  }
}
'''

    def cub_params():
        out = []
        for i, (p, a) in enumerate(zip(params, infos)):
            ctype = ("const void*" if p.is_const else "void*") if i < len(params) - 2 else a.param_c_type(p)
            out.append(f"{ctype} {a.var_name(p)}")
        return ", ".join(out)
    return string.Template(code).substitute(
        name=name, block_size=block_size, items_per_thread=items_per_thread, reduce_type=reduce_type,
        params=cub_params(), identity=identity, reduce_expr=reduce_expr, pre_map_expr=pre_map_expr,
        post_map_expr=post_map_expr, type_preamble=typedefs(pairs), preamble=preamble)


def _clp2(x):
    """internal.clp2: the smallest power of 2 >= x."""
    x = int(x)
    return 1 if x <= 1 else 1 << (x - 1).bit_length()


# -- one kernel call -> the sources CuPy compiles for it ------------------------------------------------
class Source:
    """One source CuPy would compile: kind, kernel name, variant, what decides its types, text, options."""

    def __init__(self, kind, name, variant, types, text, options=(), headers=True):
        self.kind, self.name, self.variant, self.types = kind, name, variant, types
        self.text, self.options, self.headers = text, tuple(options), headers
        self.uses = []                          # scenarios that made it

    def file_text(self):
        return (_CUPY_HEADER if self.headers else "") + self.text

    def key(self):
        return (self.file_text(), self.options)


def _is_nd(x):
    return isinstance(x, dict) and x.get("nd")


def _arr(x):
    return Arr(x["shape"], x["strides"], x["dtype"], x["c"])


def _types_text(pairs, infos_or_dtypes):
    tp = ", ".join(f"{k}={np.dtype(v).name}" for k, v in pairs if k != "IndexT")
    return tp or ", ".join(sorted({np.dtype(d).name for d in infos_or_dtypes if d is not None}))


def elementwise_sources(spec, call):
    """The source of one ElementwiseKernel call (_kernel.pyx, ElementwiseKernel.__call__)."""
    name = spec["name"]
    if not re.match(r"^[a-zA-Z_][a-zA-Z_0-9]*$", name):
        raise CupyError(f'Invalid kernel name: "{name}"')
    in_params, out_params = param_info(spec["in_params"], True), param_info(spec["out_params"], False)
    if "i" in [p.name for p in in_params + out_params]:
        raise CupyError("Can not use 'i' as a parameter name")
    params = in_params + out_params + param_info("CIndexer _ind", False)
    nin = len(in_params)
    args = call["args"]
    ins, outs = args[:nin], args[nin:]
    size = call.get("size")
    in_dt = [x["dtype"] if _is_nd(x) else None for x in ins]
    out_dt = [x["dtype"] for x in outs]
    in_types, out_types, pairs = decide_types(in_params, out_params, in_dt, out_dt)
    # the loop shape: size=, or the broadcast of the non-raw arrays
    arrs = [(_arr(x) if _is_nd(x) else None) for x in ins + outs]
    allp = in_params + out_params
    if size is not None:
        shape = (int(size),)
    else:
        shape = np.broadcast_shapes(*[a.shape for p, a in zip(allp, arrs) if a is not None and not p.raw])
    if 0 in shape:
        return []
    for i, (p, a) in enumerate(zip(allp, arrs)):
        if a is not None and not p.raw and i < nin:
            arrs[i] = a.broadcast_to(shape)
    if not outs:
        arrs += [None if p.raw else Arr.new(shape, t) for p, t in zip(out_params, out_types)]
        if any(p.raw for p in out_params):
            raise CupyError("Output array size is Undecided")
    if spec.get("reduce_dims", True):
        shape = reduce_dims(arrs, allp, shape)
    infos = []
    for i, (p, a) in enumerate(zip(allp, arrs)):
        if a is not None:
            infos.append(a.info())
        else:
            infos.append(ArgInfo(SCALAR, in_types[i], 0, True, True))
    infos.append(_indexer(shape))
    text = elementwise_source(params, infos, pairs, spec["operation"], name, spec.get("preamble", ""),
                              spec.get("loop_prep", ""), spec.get("after_loop", ""))
    types = _types_text(pairs, in_types + out_types)
    return [Source("elementwise", name, "", types, text, spec.get("options", ()))]


def reduction_sources(spec, call):
    """The sources of one ReductionKernel call (_reduction.pyx, ReductionKernel.__call__ / _call): CUB's
    block reduction where CuPy 14 takes it (one input, one output, the reduced axes contiguous; when nvcc
    is found at run time), and the plain reduction kernel (taken otherwise) always."""
    name = spec["name"]
    in_params, out_params = param_info(spec["in_params"], True), param_info(spec["out_params"], False)
    params = in_params + out_params + param_info("CIndexer _in_ind, CIndexer _out_ind", False) + \
        param_info("int32 _block_stride", True)
    nin, nout = len(in_params), len(out_params)
    args = call["args"]
    ins, outs = args[:nin], list(args[nin:])
    if call.get("out") is not None:
        outs = [call["out"]]
    in_dt = [x["dtype"] if _is_nd(x) else None for x in ins]
    out_dt = [x["dtype"] for x in outs]
    in_types, out_types, pairs = decide_types(in_params, out_params, in_dt, out_dt)
    reduce_type = spec.get("reduce_type") or out_params[0].ctype
    identity = "" if spec.get("identity") is None else str(spec["identity"])
    arrs = [(_arr(x) if _is_nd(x) else None) for x in ins]
    shape = np.broadcast_shapes(*[a.shape for p, a in zip(in_params, arrs) if a is not None and not p.raw])
    arrs = [a.broadcast_to(shape) if a is not None and not p.raw else a for p, a in zip(in_params, arrs)]
    ndim = len(shape)
    axis = call.get("axis")
    if axis is None:
        reduce_axis, out_axis = tuple(range(ndim)), ()
    else:
        axis = tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
        reduce_axis = tuple(sorted(a % ndim for a in axis))
        out_axis = tuple(d for d in range(ndim) if d not in reduce_axis)
    if len(arrs) == 1 and len(out_axis) <= 1 and arrs[0] is not None and not arrs[0].c:
        st = arrs[0].strides
        reduce_axis = tuple(sorted(reduce_axis, key=lambda i: -abs(st[i])))
        out_axis = tuple(sorted(out_axis, key=lambda i: -abs(st[i])))
    keepdims = call.get("keepdims", False)
    if keepdims:
        out_shape = tuple(1 if d in reduce_axis else n for d, n in enumerate(shape))
    else:
        out_shape = tuple(shape[d] for d in out_axis)
    out_arrs = [_arr(x) for x in outs] if outs else [Arr.new(out_shape, t) for t in out_types]
    if int(np.prod(out_shape, dtype=np.int64)) == 0:
        return []
    in_size = int(np.prod(shape, dtype=np.int64))
    index_t = np.dtype("int64") if in_size / int(np.prod(out_shape, dtype=np.int64)) > INT32_MAX \
        else np.dtype("int32")
    pairs = pairs + (("IndexT", index_t),)
    types = _types_text([p for p in pairs if p[0] != "IndexT"], in_types + out_types)
    sources = []

    # CUB (_cub_reduction.pyx, _try_to_call_cub_reduction)
    cub = None
    if nin == 1 and nout == 1 and arrs[0] is not None:
        a = arrs[0]
        if a.f_contiguous():
            ok = reduce_axis == tuple(range(len(reduce_axis)))
            perm = reduce_axis + out_axis
        elif a.c:
            ok = reduce_axis == tuple(range(ndim - len(reduce_axis), ndim))
            perm = out_axis + reduce_axis
        else:
            ok, perm = False, None
        if ok and perm == tuple(range(ndim)):
            contiguous = int(np.prod([shape[i] for i in reduce_axis], dtype=np.int64))
            if contiguous:
                cub = (contiguous, len(out_axis) == 0)
    if cub is not None:
        contiguous, full = cub
        size_type = "uint64" if contiguous > INT32_MAX else "int32"
        cpairs = pairs + (("sizeT", np.dtype(size_type)),)
        cparams = params[0:2] + param_info(size_type + " _segment_size", True) + \
            param_info(size_type + " _array_size", True)
        map_expr, post_map_expr = spec["map_expr"], spec["post_map_expr"]
        old_in0, old_out0 = cparams[0].name, cparams[1].name
        if old_in0 != "in0" or old_out0 != "out0":      # CuPy's "HACK for ReductionKernel": plain replace
            cparams = param_info("T in0", True) + param_info("T out0", False) + cparams[2:]
            map_expr = map_expr.replace(old_in0, "in0")
            post_map_expr = post_map_expr.replace(old_out0, "out0")
            cpairs = cpairs + (("type_in0_raw", arrs[0].dtype), ("type_out0_raw", out_arrs[0].dtype))
        items, block = 4, _clp2((contiguous + 3) // 4)
        block = min(max(block, 32), 512)
        opts = ("--std=c++17", "-DCUB_DISABLE_BF16_SUPPORT")

        def scalar(v):
            return ArgInfo(SCALAR, "int64" if contiguous > INT32_MAX else "int32")
        if not full:
            infos = [arrs[0].info(), out_arrs[0].info(), scalar(contiguous), scalar(0)]
            sources.append(Source("reduction", name, "cub", types, cub_source(
                name, block, items, reduce_type, cparams, infos, identity, map_expr, spec["reduce_expr"],
                post_map_expr, cpairs, spec.get("preamble", "")), opts + tuple(spec.get("options", ()))))
        else:
            per = min(contiguous, block * items)
            nblocks = (contiguous + per - 1) // per
            infos = [arrs[0].info(), ArgInfo(POINTER), scalar(per), scalar(contiguous)]
            sources.append(Source("reduction", name + "_pass1", "cub pass 1", types, cub_source(
                name + "_pass1", block, items, reduce_type, cparams, infos, identity, map_expr,
                spec["reduce_expr"], post_map_expr, cpairs, spec.get("preamble", "")),
                ("-DFIRST_PASS=1",) + opts))
            infos = [ArgInfo(POINTER), out_arrs[0].info(), scalar(nblocks), scalar(contiguous)]
            sources.append(Source("reduction", name + "_pass2", "cub pass 2", types, cub_source(
                name + "_pass2", block, items, reduce_type, cparams, infos, identity, "in0",
                spec["reduce_expr"], post_map_expr, cpairs, spec.get("preamble", "")),
                ("-DSECOND_PASS=1",) + opts))

    # the plain reduction kernel (_AbstractReductionKernel._call, _launch)
    perm = reduce_axis + out_axis
    in_shape = shape
    if perm != tuple(range(ndim)):
        if any(p.raw for p in in_params):
            raise CupyError("Illegal conditions")
        arrs = [a.transpose(perm) if a is not None else None for a in arrs]
        in_shape = tuple(shape[i] for i in perm)
    if spec.get("reduce_dims", True):
        in_shape = reduce_dims(arrs, in_params, in_shape)
        out_shape = reduce_dims(out_arrs, out_params, out_shape)
    infos = [a.info() if a is not None else ArgInfo(SCALAR, t) for a, t in zip(arrs, in_types)]
    infos += [a.info() for a in out_arrs]
    infos += [_indexer(in_shape), _indexer(out_shape), ArgInfo(SCALAR, "int32")]
    sources.append(Source("reduction", name, "simple" if cub is None else "simple (CuPy without CUB)", types,
                          reduction_source(nin, nout, params, infos, pairs, name, 512, reduce_type, identity,
                                           spec["map_expr"], spec["reduce_expr"], spec["post_map_expr"],
                                           spec.get("preamble", "")), spec.get("options", ())))
    return sources


def raw_sources(spec, call):
    """A RawKernel's source: ours as is (RawKernel compiles with prepend_cupy_headers=False)."""
    return [Source("raw", spec["name"], call.get("variant", ""), call.get("types", ""), spec["code"],
                   tuple(spec.get("options", ())), headers=False)]


def generate(record):
    """The Source objects of one recorded kernel call (kernel spec, call)."""
    spec, call = record
    return {"elementwise": elementwise_sources, "reduction": reduction_sources,
            "raw": raw_sources}[spec["kind"]](spec, call)


# -- recording on the stand-in ---------------------------------------------------------------------------
def _desc(a, nd_type):
    if type(a) is nd_type:
        h = a._a
        return {"nd": True, "shape": list(h.shape), "strides": list(h.strides), "dtype": h.dtype.name,
                "c": bool(h.flags.c_contiguous)}
    if isinstance(a, np.generic):
        return {"nd": False, "dtype": a.dtype.name}
    return {"nd": False, "dtype": type(a).__name__}


class Recorder:
    """Hooks around the stand-in's ElementwiseKernel / ReductionKernel and the compile fuser's VecKernel;
    ``records`` is {(spec key, call key): (spec, call, scenarios)}."""

    def __init__(self):
        self.records = {}
        self.scenario = "?"
        self._undo = []

    def _add(self, spec, call):
        key = (json.dumps(spec, sort_keys=True), json.dumps(call, sort_keys=True))
        if key not in self.records:
            self.records[key] = (spec, call, [])
        if self.scenario not in self.records[key][2]:
            self.records[key][2].append(self.scenario)

    def _patch(self, owner, attr, make):
        old = getattr(owner, attr)
        setattr(owner, attr, make(old))
        self._undo.append((owner, attr, old))

    def __enter__(self):
        from autograd_gpu.testing.cupy_standin import _kernels, _core
        from autograd_gpu.backends import fuse_cuda_vec
        nd = _core.ndarray
        rec = self

        def ew_init(old):
            def __init__(self, in_params, out_params, operation, name="kernel", reduce_dims=True, preamble="",
                         no_return=False, return_tuple=False, **kwargs):
                self._h4_spec = {"kind": "elementwise", "in_params": in_params, "out_params": out_params,
                                 "operation": operation, "name": name, "reduce_dims": reduce_dims,
                                 "preamble": preamble, "loop_prep": kwargs.get("loop_prep", ""),
                                 "after_loop": kwargs.get("after_loop", ""),
                                 "options": list(kwargs.get("options", ()))}
                old(self, in_params, out_params, operation, name, reduce_dims, preamble, no_return, return_tuple,
                    **kwargs)
            return __init__

        def ew_call(old):
            def __call__(self, *args, size=None, **kw):
                out = old(self, *args, size=size, **kw)
                rec._add(self._h4_spec, {"args": [_desc(a, nd) for a in args], "size": size})
                return out
            return __call__

        def red_init(old):
            def __init__(self, in_params, out_params, map_expr, reduce_expr, post_map_expr, identity,
                         name="reduce_kernel", reduce_type=None, reduce_dims=True, preamble="", options=()):
                self._h4_spec = {"kind": "reduction", "in_params": in_params, "out_params": out_params,
                                 "map_expr": map_expr, "reduce_expr": reduce_expr, "post_map_expr": post_map_expr,
                                 "identity": None if identity is None else str(identity), "name": name,
                                 "reduce_type": reduce_type, "reduce_dims": reduce_dims, "preamble": preamble,
                                 "options": list(options)}
                old(self, in_params, out_params, map_expr, reduce_expr, post_map_expr, identity, name, reduce_type,
                    reduce_dims, preamble, options)
            return __init__

        def red_call(old):
            def __call__(self, *args, out=None, axis=None, keepdims=False, **kw):
                res = old(self, *args, out=out, axis=axis, keepdims=keepdims, **kw)
                ax = list(axis) if isinstance(axis, (tuple, list)) else axis
                rec._add(self._h4_spec, {"args": [_desc(a, nd) for a in args],
                                         "out": None if out is None else _desc(out, nd), "axis": ax,
                                         "keepdims": bool(keepdims)})
                return res
            return __call__

        def vec_call(old):
            # the stand-in runs the ElementwiseKernel (no RawKernel there): record the RawKernel CuPy would
            # build for these arguments (kinds as _vectorised decides them), and the all-arrays one
            def __call__(self, *args):
                out = old(self, *args)
                if self.out_t in fuse_cuda_vec._C_TYPES and all(dt == self.out_t for dt, _ in self.params):
                    kinds = []
                    for a in args[:len(self.params)]:
                        if type(a) is not nd:
                            kinds.append("s")
                        elif a.ndim == 0:
                            kinds.append("p")
                        else:
                            kinds.append("v")
                    for ks in {tuple(kinds), ("v",) * len(self.params)}:
                        src = fuse_cuda_vec.source(self.name, self.params, ks, self.out_t, self.code)
                        rec._add({"kind": "raw", "name": self.name, "code": src, "options": []},
                                 {"variant": "kinds " + "".join(ks), "types": self.out_t})
                return out
            return __call__

        self._patch(_kernels.ElementwiseKernel, "__init__", ew_init)
        self._patch(_kernels.ElementwiseKernel, "__call__", ew_call)
        self._patch(_kernels.ReductionKernel, "__init__", red_init)
        self._patch(_kernels.ReductionKernel, "__call__", red_call)
        self._patch(fuse_cuda_vec.VecKernel, "__call__", vec_call)
        return self

    def __exit__(self, *exc):
        for owner, attr, old in reversed(self._undo):
            setattr(owner, attr, old)
        self._undo.clear()


def _clear_kernel_caches():
    """Our modules cache built kernels (per CuPy module); kernels built before the hooks have no recorded
    definition, so start from empty caches."""
    from autograd_gpu.backends.kernels import optim, losses, activations, rnn, conv, grads
    from autograd_gpu.backends import fuse_cuda
    for cache in (optim._KERNELS, losses._kernels, activations._built, rnn._kernels, conv._built, grads._built,
                  fuse_cuda._kernels):
        cache.clear()


# -- the scenarios: our CUDA paths, run on the stand-in --------------------------------------------------
def _t(shape, dtype, seed=0, requires_grad=False, low=None):
    import autograd_gpu as ag
    a = np.random.default_rng(seed).standard_normal(shape)
    if low is not None:
        a = np.abs(a) + low
    return ag.tensor(a.astype(dtype), device="cuda", requires_grad=requires_grad)


def _backward(y):
    """Backward of ``y`` weighted by a ramp (a sum alone would take the ops' shortcuts for a ones seed)."""
    import autograd_gpu as ag
    if y.ndim:
        ramp = np.linspace(0.5, 1.5, y.numel()).reshape(y.shape).astype(np.dtype(str(y.dtype)))
        y = (y * ag.tensor(ramp, device="cuda")).sum()
    y.backward()


def sc_workloads(dtype):
    """The benchmarks' eager training steps (quick sizes, their own dtype)."""
    if dtype != "float32":
        return
    from benchmarks.workloads import WORKLOADS
    for name in ("mlp_step", "mlp_adam_step", "cnn_step", "transformer_step", "lstm_step"):
        steps, _ = WORKLOADS[name]("cuda", "quick")
        for _ in range(2):
            steps["ours"]()


def sc_rnn(dtype):
    """LSTM, GRU and RNN (tanh, relu) layers, forward and backward; a sequence and a single step; cells."""
    from autograd_gpu import nn
    import autograd_gpu as ag
    for cls, kw in ((nn.LSTM, {}), (nn.GRU, {}), (nn.RNN, {}), (nn.RNN, {"nonlinearity": "relu"}),
                    (nn.GRU, {"bidirectional": True, "num_layers": 2}), (nn.LSTM, {"num_layers": 2})):
        for seq in (5, 1):
            m = cls(6, 8, **kw).to("cuda").to(getattr(ag, dtype))
            x = _t((seq, 3, 6), dtype, 1, True)
            out = m(x)
            _backward(out[0])
    for cls in (nn.LSTMCell, nn.GRUCell, nn.RNNCell):
        m = cls(6, 8).to("cuda").to(getattr(ag, dtype))
        out = m(_t((3, 6), dtype, 2, True))
        _backward(out[0] if isinstance(out, tuple) else out)


def _optim_cases():
    cases = []
    for mod in ("tests.test_fused_optim", "tests.test_fused_optim_new"):
        try:
            m = __import__(mod, fromlist=["CASES"])
            cases += list(m.CASES)
        except Exception:                       # noqa: BLE001 - the tests are not shipped: a fallback list
            pass
    if not cases:
        from autograd_gpu import optim
        cases = [(optim.SGD, dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.05, maximize=True)),
                 (optim.Adam, dict(lr=0.01, weight_decay=0.1, amsgrad=True)), (optim.AdamW, dict(lr=0.01)),
                 (optim.RMSprop, dict(lr=0.01, momentum=0.5, centered=True, weight_decay=0.1)),
                 (optim.Adagrad, dict(lr=0.1, weight_decay=0.1))]
    return cases


def sc_optim(dtype):
    """Every optimizer in the torch-parity configurations of tests/test_fused_optim*.py: 3 steps over 3
    parameters (one bucket: the multi-parameter kernel) and over 1."""
    from autograd_gpu import nn
    for cls, kw in _optim_cases():
        for shapes in (((4, 3), (3,), (2, 2, 2)), ((5,),)):
            ps = [nn.Parameter(_t(s, dtype, i)) for i, s in enumerate(shapes)]
            opt = cls(ps, **kw)
            for step in range(3):
                for i, p in enumerate(ps):
                    p.grad = _t(p.shape, dtype, 10 + step + i)
                opt.step()
            opt.zero_grad()


def sc_losses(dtype):
    """cross_entropy / nll_loss (reductions, ignore_index, weights, label smoothing), log_softmax and
    softmax over each dim, forward and backward."""
    import autograd_gpu as ag
    import autograd_gpu.nn.functional as F
    tgt = ag.tensor(np.array([0, 3, 1, 4, 2, 0], np.int64), device="cuda")
    for red in ("mean", "sum", "none"):
        for kw in ({}, {"ignore_index": 1}, {"weight": _t((5,), dtype, 3, low=0.1)}, {"label_smoothing": 0.1}):
            x = _t((6, 5), dtype, 1, True)
            _backward(F.cross_entropy(x, tgt, reduction=red, **kw))
            x = _t((6, 5), dtype, 2, True)
            kw2 = {k: v for k, v in kw.items() if k != "label_smoothing"}
            _backward(F.nll_loss(F.log_softmax(x, dim=1), tgt, reduction=red, **kw2))
    x = _t((2, 5, 3), dtype, 4, True)
    _backward(F.cross_entropy(x, ag.tensor(np.array([[0, 4, 2], [1, 1, 3]], np.int64), device="cuda")))
    for dim in (0, 1, -1):
        x = _t((3, 4, 5), dtype, 5, True)
        _backward(F.log_softmax(x, dim=dim))
        x = _t((3, 4, 5), dtype, 6, True)
        _backward(F.softmax(x, dim=dim))
    x = _t((4, 7), dtype, 7, True)
    _backward(F.softmax(x.T, dim=1))
    for fn in (F.mse_loss, F.l1_loss, F.smooth_l1_loss, F.binary_cross_entropy_with_logits):
        x = _t((4, 3), dtype, 8, True)
        _backward(fn(x, _t((4, 3), dtype, 9).sigmoid()))


def sc_norms(dtype):
    """layer_norm and rms_norm (affine or not, over one and two dims), batch/group norm, forward and backward."""
    import autograd_gpu.nn.functional as F
    for shape, norm in (((4, 6), (6,)), ((2, 3, 8), (8,)), ((2, 3, 4), (3, 4))):
        for affine in (True, False):
            x = _t(shape, dtype, 1, True)
            w = _t(norm, dtype, 2, True) if affine else None
            b = _t(norm, dtype, 3, True) if affine else None
            _backward(F.layer_norm(x, norm, w, b))
            x = _t(shape, dtype, 4, True)
            _backward(F.rms_norm(x, norm, w))
    x = _t((4, 6), dtype, 5, True)
    _backward(F.layer_norm(x.T, (4,)))
    from autograd_gpu import nn
    import autograd_gpu as ag
    for m in (nn.BatchNorm1d(3), nn.BatchNorm2d(3), nn.GroupNorm(1, 3), nn.LayerNorm(5), nn.RMSNorm(5)):
        m = m.to("cuda").to(getattr(ag, dtype))
        x = _t((2, 3, 5) if not isinstance(m, nn.BatchNorm2d) else (2, 3, 4, 5), dtype, 6, True)
        _backward(m(x))


def sc_activations(dtype):
    """relu, tanh, sigmoid, gelu (erf, tanh), silu and the other activations; linear + bias + relu; the
    product gradient kernel (x * w)."""
    import autograd_gpu as ag
    import autograd_gpu.nn.functional as F
    from autograd_gpu import nn
    fns = [F.relu, F.tanh, F.sigmoid, F.silu, F.gelu, lambda x: F.gelu(x, approximate="tanh"), F.elu,
           F.leaky_relu, F.softplus, F.mish, F.hardswish, F.logsigmoid, ag.tanh, ag.sigmoid, ag.exp]
    for f in fns:
        for shape in ((5, 4), (0, 3)):
            x = _t(shape, dtype, 1, True)
            _backward(f(x))
        x = _t((4, 5), dtype, 2, True)
        _backward(f(x.T))
    for act in (nn.ReLU(), nn.GELU(), nn.SiLU(), nn.Tanh()):
        m = nn.Sequential(nn.Linear(6, 5), act, nn.Linear(5, 3)).to("cuda").to(getattr(ag, dtype))
        _backward(m(_t((4, 6), dtype, 3, True)))
    x, w = _t((4, 5), dtype, 4, True), _t((4, 5), dtype, 5, True)
    _backward(x * w)
    x, w = _t((4, 5), dtype, 4, True), _t((5,), dtype, 5, True)
    _backward(x * w)


def sc_conv_pool(dtype):
    """conv2d and max/avg pooling (kernel sizes 2, 3, strides, padding), forward and backward; the small CNN."""
    import autograd_gpu as ag
    import autograd_gpu.nn.functional as F
    from autograd_gpu import nn
    for k, s, p in ((2, 2, 0), (3, 1, 1), (3, 2, 1), (2, 1, 0)):
        x = _t((2, 3, 8, 8), dtype, 1, True)
        _backward(F.max_pool2d(x, k, s, p))
        x = _t((2, 3, 8, 8), dtype, 2, True)
        _backward(F.avg_pool2d(x, k, s, p))
    x = _t((2, 3, 9), dtype, 3, True)
    _backward(F.max_pool1d(x, 3, 2))
    m = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(4, 2, 3)).to(
        "cuda").to(getattr(ag, dtype))
    _backward(m(_t((2, 3, 8, 8), dtype, 4, True)))


def sc_attention(dtype):
    """scaled_dot_product_attention (no mask, causal, a bool and a float mask, dropout) and
    MultiheadAttention / a transformer encoder layer, forward and backward."""
    import autograd_gpu as ag
    import autograd_gpu.nn.functional as F
    from autograd_gpu import nn
    q, k, v = (_t((2, 2, 5, 4), dtype, i, True) for i in range(3))
    _backward(F.scaled_dot_product_attention(q, k, v))
    q, k, v = (_t((2, 2, 5, 4), dtype, i, True) for i in range(3))
    _backward(F.scaled_dot_product_attention(q, k, v, is_causal=True))
    mask = ag.tensor(np.tril(np.ones((5, 5), bool)), device="cuda")
    q, k, v = (_t((2, 2, 5, 4), dtype, i, True) for i in range(3))
    _backward(F.scaled_dot_product_attention(q, k, v, attn_mask=mask))
    q, k, v = (_t((2, 2, 5, 4), dtype, i, True) for i in range(3))
    _backward(F.scaled_dot_product_attention(q, k, v, attn_mask=_t((5, 5), dtype, 7)))
    q, k, v = (_t((2, 2, 5, 4), dtype, i, True) for i in range(3))
    _backward(F.scaled_dot_product_attention(q, k, v, dropout_p=0.1))
    m = nn.MultiheadAttention(8, 2, batch_first=True).to("cuda").to(getattr(ag, dtype))
    x = _t((2, 5, 8), dtype, 8, True)
    _backward(m(x, x, x)[0])
    m = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True).to("cuda").to(getattr(ag, dtype))
    _backward(m(_t((2, 5, 8), dtype, 9, True)))


def sc_compile(dtype):
    """ag.compile'd functions and training steps on CUDA: fused elementwise chains (and their vectorised
    RawKernels), fused sums, an MLP step with SGD and with Adam."""
    import autograd_gpu as ag
    import autograd_gpu.nn.functional as F
    from autograd_gpu import nn, optim

    def chain(x, y):
        with ag.no_grad():
            return ag.tanh(x * y + 1) * ag.exp(-x) - y / 3
    cf = ag.compile(chain)
    for i in range(3):
        cf(_t((64, 33), dtype, i), _t((33,), dtype, i + 10))
    cf = ag.compile(chain)
    for i in range(3):
        cf(_t((300, 256), dtype, i), _t((300, 256), dtype, i + 10))    # >= 65536 elements: vectorised

    def loss_sum(x):
        x.grad = None
        loss = (ag.sigmoid(x) * x + x * x).sum()
        loss.backward()
        return loss
    cf = ag.compile(loss_sum)
    x = _t((1000,), dtype, 0, True)
    for _ in range(3):
        cf(x)
    for opt_cls, kw in ((optim.SGD, dict(lr=0.1, momentum=0.9)), (optim.Adam, dict(lr=1e-3))):
        model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)).to("cuda").to(getattr(ag, dtype))
        opt = opt_cls(model.parameters(), **kw)
        xb = _t((32, 8), dtype, 3)
        yb = ag.tensor(np.arange(32) % 4, device="cuda")

        def step():
            opt.zero_grad()
            loss = F.cross_entropy(model(xb), yb)
            loss.backward()
            opt.step()
            return loss
        cstep = ag.compile(step)
        for _ in range(4):
            cstep()


SCENARIOS = {"workloads": sc_workloads, "rnn": sc_rnn, "optim": sc_optim, "losses": sc_losses, "norms": sc_norms,
             "activations": sc_activations, "conv_pool": sc_conv_pool, "attention": sc_attention,
             "compile": sc_compile}
DTYPES = ("float32", "float64", "float16")


@contextlib.contextmanager
def _standin():
    from autograd_gpu.testing import cupy_standin
    was = cupy_standin.installed()
    if not was:
        cupy_standin.install()
    try:
        yield
    finally:
        if not was:
            cupy_standin.uninstall()


def collect(only=None, dtypes=DTYPES):
    """Run the scenarios (names containing ``only``, if given) for each dtype on the stand-in, recording
    every kernel call. Returns (records, problems): records a list of (spec, call, scenario names);
    problems a list of (scenario, dtype, one-line error) where a scenario raised (float16 paths our
    code does not take raise there, which is expected)."""
    import warnings
    problems = []
    with _standin(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _clear_kernel_caches()
        with Recorder() as rec:
            for name, fn in SCENARIOS.items():
                if only and not any(o in name for o in only):
                    continue
                for dt in dtypes:
                    rec.scenario = f"{name}/{dt}"
                    try:
                        fn(dt)
                    except Exception as e:          # noqa: BLE001 - reported, the other scenarios go on
                        tb = traceback.extract_tb(e.__traceback__)[-1]
                        problems.append((name, dt, f"{type(e).__name__}: {str(e).splitlines()[0][:160]} "
                                                   f"({Path(tb.filename).name}:{tb.lineno})" if str(e) else
                                         type(e).__name__))
        _clear_kernel_caches()                      # the caches hold hooked kernels: built fresh next time
    return [v for v in rec.records.values()], problems


def sources_of(records):
    """Generate every record's sources; identical sources (same text and options) are merged.
    Returns (sources, refusals): refusals a list of (kernel name, what CuPy would raise)."""
    by_key, refusals = {}, []
    for spec, call, scen in records:
        try:
            srcs = generate((spec, call))
        except CupyError as e:
            refusals.append((spec["name"], str(e)))
            continue
        for s in srcs:
            k = s.key()
            if k not in by_key:
                by_key[k] = s
            for sc in scen:
                if sc not in by_key[k].uses:
                    by_key[k].uses.append(sc)
    return list(by_key.values()), refusals


# -- the compiler ----------------------------------------------------------------------------------------
def find_nvcc():
    """nvcc: $AG_NVCC, PATH, $CUDA_PATH/bin, /usr/local/cuda*/bin; None when there is none."""
    cands = [os.environ.get("AG_NVCC"), shutil.which("nvcc")]
    for root in [os.environ.get("CUDA_PATH"), os.environ.get("CUDA_HOME")] + sorted(
            str(p) for p in Path("/usr/local").glob("cuda*")):
        if root:
            cands.append(os.path.join(root, "bin", "nvcc"))
    for c in cands:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    return None


def find_cupy_include():
    """CuPy's header directory (it holds cupy/carray.cuh): $AG_CUPY_INCLUDE, else an installed cupy's
    cupy/_core/include (found without importing CuPy here: the stand-in may be in its place)."""
    env = os.environ.get("AG_CUPY_INCLUDE")
    cands = [env] if env else []
    try:
        import importlib.util
        spec = importlib.util.find_spec("cupy")
        if spec is not None and spec.origin:
            cands.append(str(Path(spec.origin).parent / "_core" / "include"))
    except (ImportError, ValueError):
        pass
    for c in cands:
        if c and (Path(c) / "cupy" / "carray.cuh").is_file():
            return c
    return None


def cupy_options(include):
    """assemble_cupy_compiler_options: CCCL first, the default standard, CuPy's include directory."""
    cccl = [f"-I{include}/cupy/_cccl/{d}" for d in ("cub", "thrust", "libcudacxx")]
    return cccl, [f"-I{include}"]


def _nvcc(nvcc, include, options, text, workdir, base):
    """nvcc -arch=sm_90 -ptx on ``text`` with CuPy's options; returns (ok, message)."""
    cccl, inc = cupy_options(include)
    opts = list(options)
    if not any("-std=" in o for o in opts):
        opts.append("--std=c++17")
    cu = Path(workdir) / f"{base}.cu"
    cu.write_text(text)
    cmd = [nvcc, f"-arch={ARCH}", "-ptx", *cccl, *opts, *inc, str(cu), "-o", str(Path(workdir) / f"{base}.ptx")]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode == 0:
        return True, ""
    msg = (p.stderr or p.stdout).strip()
    errs = [ln for ln in msg.splitlines() if "error" in ln]
    return False, "\n".join(errs[:6]) or msg[-2000:]


def compile_one(src, nvcc, include, workdir, index):
    """One source in its own file, exactly as CuPy hands it to the compiler."""
    base = f"{index:04d}_{re.sub(r'[^A-Za-z0-9_]', '_', src.name)[:60]}"
    return _nvcc(nvcc, include, src.options, src.file_text(), workdir, base)


_MACROS = ("REDUCE", "POST_MAP", "_REDUCE", "ITEMS_PER_THREAD", "BLOCK_SIZE")


def _batch_text(batch):
    """Several sources (same options) in one file, to pay nvcc's start and the headers' parse once: each
    in its own namespace (its typedefs), its kernel renamed (extern "C" names are global), the
    reduction templates' macros undefined after it; the headers first."""
    head = _CUPY_HEADER if batch[0][1].headers else ""
    if any(_CUB_HEADER in s.text for _, s in batch):
        head += _CUB_HEADER
    head += '#include "cupy/float16.cuh"\n' if batch[0][1].headers else ""
    parts = [head]
    for i, s in batch:
        text = s.text.replace(_CUB_HEADER, "", 1) if s.text.startswith(_CUB_HEADER) else s.text
        text, n = re.subn(r"(__global__\s+void\s+)" + re.escape(s.name) + r"\(", rf"\g<1>{s.name}__b{i}(", text,
                          count=1)
        if not n:
            return None
        parts.append(f"namespace ag_batch_{i} {{\n{text}\n}}  // namespace ag_batch_{i}\n" +
                     "".join(f"#undef {m}\n" for m in _MACROS))
    return "".join(parts)


def compile_all(sources, nvcc, include, jobs=None, keep=None, batch=1):
    """Compile each source; returns a list of (source, ok, message) in the order given. ``batch`` > 1:
    up to that many sources of the same options per nvcc run (much faster); a batch that fails is
    compiled again one source a file, so every error reported is that of the source as CuPy builds it."""
    jobs = jobs or os.cpu_count() or 1
    workdir = keep or tempfile.mkdtemp(prefix="ag_cuda_kernels_")
    Path(workdir).mkdir(parents=True, exist_ok=True)
    results = [None] * len(sources)
    try:
        groups = {}
        for i, s in enumerate(sources):
            groups.setdefault((s.options, s.headers), []).append((i, s))
        batches = []
        for members in groups.values():
            for k in range(0, len(members), max(batch, 1)):
                batches.append(members[k:k + max(batch, 1)])

        def run(b):
            if len(b) > 1:
                text = _batch_text(b)
                if text is not None:
                    ok, _ = _nvcc(nvcc, include, b[0][1].options, text, workdir, f"batch_{b[0][0]:04d}")
                    if ok:
                        return [(i, True, "") for i, _ in b]
            return [(i, *compile_one(s, nvcc, include, workdir, i)) for i, s in b]
        with ThreadPoolExecutor(jobs) as ex:
            for out in ex.map(run, batches):
                for i, ok, msg in out:
                    results[i] = (ok, msg)
    finally:
        if keep is None:
            shutil.rmtree(workdir, ignore_errors=True)
    return [(s, ok, msg) for s, (ok, msg) in zip(sources, results)]


# -- cross-check with CuPy's own generators ----------------------------------------------------------------
_CROSS = r'''
import json, sys, numpy
from cupy._core import _kernel as K, _reduction as R, _scalar, _carray
import cupy
KIND = {1: (cupy.ndarray,), 2: (_carray.Indexer,), 3: (_scalar.CScalar,)}
def infos(lst):
    out = []
    for kind, dt, nd, c, i32 in lst:
        out.append(K._ArgInfo(kind, KIND[kind][0], None if dt is None else numpy.dtype(dt).type, nd, c, i32))
    return tuple(out)
def tmap(pairs):
    return K._TypeMap(tuple((k, numpy.dtype(v).type) for k, v in pairs))
res = []
for job in json.load(sys.stdin):
    if job["kind"] == "elementwise":
        params = K._get_param_info(job["in_params"], True) + K._get_param_info(job["out_params"], False) + \
            K._get_param_info("CIndexer _ind", False)
        res.append(K._get_elementwise_kernel_code(infos(job["infos"]), tmap(job["pairs"]), params, job["operation"],
                                                  job["name"], job["preamble"], job["loop_prep"], job["after_loop"]))
    else:
        params = (K._get_param_info(job["in_params"], True) + K._get_param_info(job["out_params"], False) +
                  K._get_param_info("CIndexer _in_ind, CIndexer _out_ind", False) +
                  K._get_param_info("int32 _block_stride", True))
        res.append(R._ReductionKernel_get_cached_function_code(
            job["nin"], job["nout"], params, infos(job["infos"]), tmap(job["pairs"]), job["name"], 512,
            job["reduce_type"], job["identity"], job["map_expr"], job["reduce_expr"], job["post_map_expr"],
            job["preamble"], ()))
json.dump(res, sys.stdout)
'''


def crosscheck(records, python):
    """Regenerate the elementwise and plain-reduction sources with CuPy's own functions (in ``python``,
    where CuPy is installed) and compare; returns (compared, [(name, first differing line ours/theirs)])."""
    jobs, ours = [], []
    g = globals()
    saved = (g["elementwise_source"], g["reduction_source"])

    def ew(params, infos, pairs, operation, name, preamble="", loop_prep="", after_loop=""):
        jobs.append({"kind": "elementwise", "in_params": cur["spec"]["in_params"],
                     "out_params": cur["spec"]["out_params"], "infos": [i.key() for i in infos],
                     "pairs": [(k, np.dtype(v).name) for k, v in pairs], "operation": operation, "name": name,
                     "preamble": preamble, "loop_prep": loop_prep, "after_loop": after_loop})
        text = saved[0](params, infos, pairs, operation, name, preamble, loop_prep, after_loop)
        ours.append((name, text))
        return text

    def red(nin, nout, params, infos, pairs, name, block_size, reduce_type, identity, map_expr, reduce_expr,
            post_map_expr, preamble):
        jobs.append({"kind": "reduction", "in_params": cur["spec"]["in_params"],
                     "out_params": cur["spec"]["out_params"], "nin": nin, "nout": nout,
                     "infos": [i.key() for i in infos], "pairs": [(k, np.dtype(v).name) for k, v in pairs],
                     "name": name, "reduce_type": reduce_type, "identity": identity, "map_expr": map_expr,
                     "reduce_expr": reduce_expr, "post_map_expr": post_map_expr, "preamble": preamble})
        text = saved[1](nin, nout, params, infos, pairs, name, block_size, reduce_type, identity, map_expr,
                        reduce_expr, post_map_expr, preamble)
        ours.append((name, text))
        return text
    cur = {}
    g["elementwise_source"], g["reduction_source"] = ew, red
    try:
        for spec, call, _ in records:
            if spec["kind"] == "raw":
                continue
            cur["spec"] = spec
            try:
                generate((spec, call))
            except CupyError:
                pass
    finally:
        g["elementwise_source"], g["reduction_source"] = saved
    p = subprocess.run([python, "-c", _CROSS], input=json.dumps(jobs), capture_output=True, text=True,
                       cwd=tempfile.gettempdir())
    if p.returncode:
        raise RuntimeError(f"the cross-check in {python} failed:\n{p.stderr[-3000:]}")
    theirs = json.loads(p.stdout)
    diffs = []
    for (name, a), b in zip(ours, theirs):
        if a != b:
            la, lb = a.splitlines(), b.splitlines()
            i = next((i for i, (x, y) in enumerate(zip(la, lb)) if x != y), min(len(la), len(lb)))
            diffs.append((name, (la[i] if i < len(la) else "<end>"), (lb[i] if i < len(lb) else "<end>")))
    return len(ours), diffs


# -- command line ----------------------------------------------------------------------------------------
def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", nargs="*", help="scenarios whose name contains one of these words")
    ap.add_argument("--dtypes", nargs="*", default=list(DTYPES))
    ap.add_argument("--jobs", type=int, default=None, help="parallel nvcc runs (default: the CPU count)")
    ap.add_argument("--keep", help="write the .cu/.ptx files here and keep them")
    ap.add_argument("--batch", type=int, default=1, help="sources per nvcc run (default 1: each source in its "
                                                         "own file, as CuPy compiles it; a failing batch is "
                                                         "compiled again one source a file)")
    ap.add_argument("--crosscheck", metavar="PYTHON", help="a Python with CuPy 14: compare our generated "
                                                           "sources with CuPy's own generators")
    ap.add_argument("--no-compile", action="store_true", help="collect and generate only")
    ap.add_argument("--json", help="write the report as JSON here")
    a = ap.parse_args(argv)

    records, problems = collect(a.only, tuple(a.dtypes))
    sources, refusals = sources_of(records)
    print(f"{len(records)} kernel calls recorded, {len(sources)} distinct CUDA sources "
          f"({sum(s.kind == 'elementwise' for s in sources)} elementwise, "
          f"{sum(s.kind == 'reduction' for s in sources)} reduction, {sum(s.kind == 'raw' for s in sources)} raw)")
    for sc, dt, msg in problems:
        print(f"  scenario {sc}/{dt} stopped: {msg}")
    for name, msg in refusals:
        print(f"  CuPy would refuse {name}: {msg}")
    rc = 1 if refusals else 0
    if a.crosscheck:
        n, diffs = crosscheck(records, a.crosscheck)
        print(f"cross-check with CuPy's generators: {n} sources compared, {len(diffs)} differ")
        for name, x, y in diffs[:20]:
            print(f"  {name}: ours   {x!r}\n  {' ' * len(name)}  theirs {y!r}")
        rc |= 1 if diffs else 0
    if a.no_compile:
        return rc
    nvcc, include = find_nvcc(), find_cupy_include()
    if nvcc is None or include is None:
        print(f"cannot compile: nvcc {nvcc or 'not found (AG_NVCC)'}, CuPy headers "
              f"{include or 'not found (AG_CUPY_INCLUDE)'}")
        return 2
    results = compile_all(sources, nvcc, include, a.jobs, a.keep, a.batch)
    bad = 0
    for s, ok, msg in sorted(results, key=lambda r: (r[0].name, r[0].types, r[0].variant)):
        print(f"{'OK  ' if ok else 'FAIL'} {s.kind:11s} {s.name:34s} {s.types:28s} {s.variant}")
        if not ok:
            bad += 1
            print("     " + msg.replace("\n", "\n     "))
            print(f"     (made by: {', '.join(s.uses[:4])})")
    print(f"{len(results)} sources compiled with {nvcc} -arch={ARCH}: {len(results) - bad} OK, {bad} failed")
    if a.json:
        Path(a.json).write_text(json.dumps({
            "problems": problems, "refusals": refusals,
            "results": [{"kind": s.kind, "name": s.name, "types": s.types, "variant": s.variant, "ok": ok,
                         "error": msg, "uses": s.uses} for s, ok, msg in results]}, indent=1))
    return rc | (1 if bad else 0)


if __name__ == "__main__":
    sys.exit(main())
