"""OpInfo entries for indexing: getitem with every index kind, setitem, gather, take_along_axis,
index_select, scatter_add. Index tensors are built inside the lambdas on the input's device."""
import numpy as np

import autograd_gpu as ag
from .op_db import OpInfo


def _ix(values, x):
    """An integer index tensor on x's device."""
    return ag.tensor(values, dtype=ag.int64, device=x.device)


def _copy(a):
    return a.clone() if isinstance(a, ag.Tensor) else a.copy()


# setitem works on a copy (a leaf that requires grad cannot be written in place); the same
# function runs on Tensors (op) and on NumPy arrays (ref)
def _set_slice(x, v):
    y = _copy(x)
    y[1:, 0] = v
    return y


def _set_scalar(x):
    y = _copy(x)
    y[..., 1] = 0.5
    return y


def _set_int_array(x, v):
    y = _copy(x)
    y[[0, 2], 1:3] = v
    return y


def _set_mask(x, m, v):
    y = _copy(x)
    y[m] = v
    return y


def _scatter_add_ref(a, dim, index, src):
    out = a.copy()
    pos = tuple(index if d == dim else np.arange(s).reshape([-1 if k == d else 1 for k in range(index.ndim)])
                for d, s in enumerate(index.shape))
    np.add.at(out, pos, src[tuple(slice(0, s) for s in index.shape)])
    return out


_GATHER_1 = [[0, 0], [3, 1], [1, 1]]          # for dim 1 of a (4, 4) input, using its first 3 rows
_GATHER_0 = [[2, 0, 2], [2, 1, 0]]            # for dim 0 of a (3, 4) input, using its first 3 columns
_SCATTER = [[0, 0, 2, 1], [0, 2, 2, 2]]       # for dim 0 of a (3, 4) input: repeated targets

OPS = [
    # basic indices: the result is a view, the backward assigns
    OpInfo("getitem_int", lambda x: x[1], lambda a: a[1], (((3, 4),), ((2, 3, 4),))),
    OpInfo("getitem_neg_int", lambda x: x[-1, 2], lambda a: a[-1, 2], (((3, 4),),)),   # 0-d result
    OpInfo("getitem_slice", lambda x: x[1:, ::2], lambda a: a[1:, ::2], (((3, 4),), ((2, 5, 1),))),
    OpInfo("getitem_neg_step", lambda x: x[::-1, -2::-2], lambda a: a[::-1, -2::-2], (((3, 4),),)),
    OpInfo("getitem_none_ellipsis", lambda x: x[None, ..., 1], lambda a: a[None, ..., 1], (((3, 4),), ((2, 3, 4),))),
    OpInfo("getitem_ellipsis_slice", lambda x: x[..., 1:3, None], lambda a: a[..., 1:3, None], (((2, 3, 4),),)),
    OpInfo("getitem_0d", lambda x: x[()], lambda a: a[()], (((),), ((3,),))),
    OpInfo("getitem_0d_none", lambda x: x[None], lambda a: a[None], (((),),)),
    OpInfo("getitem_size0", lambda x: x[2:2], lambda a: a[2:2], (((3, 4),), ((0, 2),))),
    # integer arrays: repeated indices must accumulate in backward
    OpInfo("getitem_int_tensor", lambda x: x[_ix([0, 2, 0], x)], lambda a: a[np.array([0, 2, 0])],
           (((3, 4),), ((3,),))),
    OpInfo("getitem_int_list", lambda x: x[[1, 1, -1]], lambda a: a[[1, 1, -1]], (((3, 4),),)),
    OpInfo("getitem_int_2d", lambda x: x[_ix([[0, 1], [1, 1]], x)], lambda a: a[np.array([[0, 1], [1, 1]])],
           (((3, 4),),)),
    OpInfo("getitem_int_pairs", lambda x: x[[0, 1, 0], [2, 2, 2]], lambda a: a[[0, 1, 0], [2, 2, 2]], (((3, 4),),)),
    OpInfo("getitem_int_after_slice", lambda x: x[:, [3, 0, 3]], lambda a: a[:, [3, 0, 3]], (((3, 4),),)),
    OpInfo("getitem_int_separated", lambda x: x[[0, 1, 1], :, [1, 1, 3]], lambda a: a[[0, 1, 1], :, [1, 1, 3]],
           (((2, 3, 4),),)),
    OpInfo("getitem_int_with_none", lambda x: x[None, [2, 2], ..., 1], lambda a: a[None, [2, 2], ..., 1],
           (((3, 4),),)),
    OpInfo("getitem_int_empty", lambda x: x[[]], lambda a: a[np.array([], dtype=np.int64)], (((3, 4),),)),
    OpInfo("getitem_int_0d", lambda x: x[_ix(2, x), 1:], lambda a: a[np.array(2), 1:], (((3, 4),),)),
    OpInfo("getitem_index_kind", lambda x, i: x[i], lambda a, i: a[i], (((3, 4), (6,)), ((3,), (2, 2))),
           kinds=(None, "index:3")),
    # bool masks
    OpInfo("getitem_mask", lambda x, m: x[m], lambda a, m: a[m], (((3, 4), (3, 4)), ((3, 4), (3,)), ((0,), (0,))),
           kinds=(None, "bool")),
    OpInfo("getitem_mask_mixed", lambda x, m: x[1:, m], lambda a, m: a[1:, m], (((3, 4), (4,)),),
           kinds=(None, "bool")),
    OpInfo("getitem_mask_list", lambda x: x[[True, False, True]], lambda a: a[[True, False, True]], (((3, 4),),)),
    # setitem on a clone (a leaf that requires grad cannot be written in place)
    OpInfo("setitem_slice", _set_slice, _set_slice, (((3, 4), (2,)), ((3, 4), ()), ((3, 4), (1, 2)))),
    OpInfo("setitem_scalar", _set_scalar, _set_scalar, (((3, 4),), ((2, 3, 4),))),
    OpInfo("setitem_int_array", _set_int_array, _set_int_array, (((3, 4), (2, 2)), ((3, 4), (1, 2)))),
    OpInfo("setitem_mask", _set_mask, _set_mask, (((3, 4), (3, 4), ()), ((3, 4), (3,), (4,))),
           kinds=(None, "bool", None)),
    # PyTorch/NumPy gather family
    OpInfo("gather_dim1", lambda x: ag.gather(x, 1, _ix(_GATHER_1, x)),
           lambda a: np.take_along_axis(a[:3], np.array(_GATHER_1), 1), (((4, 4),),)),
    OpInfo("gather_dim0_smaller", lambda x: x.gather(0, _ix(_GATHER_0, x)),
           lambda a: np.take_along_axis(a[:, :3], np.array(_GATHER_0), 0), (((3, 4),),)),
    OpInfo("gather_index_kind", lambda x, i: x.gather(-1, i), lambda a, i: np.take_along_axis(a, i, -1),
           (((3, 4), (3, 6)), ((2, 3, 2), (2, 3, 5))), kinds=(None, "index:2")),
    OpInfo("take_along_axis", lambda x, i: ag.take_along_axis(x, i, 1), lambda a, i: np.take_along_axis(a, i, 1),
           (((3, 4), (3, 5)), ((3, 4), (1, 2)), ((1, 4), (3, 2))), kinds=(None, "index:4")),
    OpInfo("take_along_axis_none", lambda x, i: x.take_along_axis(i, None),
           lambda a, i: np.take_along_axis(a, i, None), (((3, 4), (7,)),), kinds=(None, "index:12")),
    OpInfo("index_select", lambda x: x.index_select(0, _ix([2, 0, 2], x)), lambda a: a[[2, 0, 2]],
           (((3, 4),), ((3,),))),
    OpInfo("index_select_last", lambda x, i: ag.index_select(x, -1, i), lambda a, i: np.take(a, i, -1),
           (((2, 3, 4), (5,)), ((2, 4), (0,))), kinds=(None, "index:4")),
    OpInfo("scatter_add", lambda x, s: ag.scatter_add(x, 0, _ix(_SCATTER, x), s),
           lambda a, s: _scatter_add_ref(a, 0, np.array(_SCATTER), s), (((3, 4), (2, 4)), ((3, 4), (3, 5)))),
    OpInfo("scatter_add_dim1", lambda x, i, s: x.scatter_add(1, i, s), lambda a, i, s: _scatter_add_ref(a, 1, i, s),
           (((3, 4), (3, 6), (3, 6)), ((3, 4), (2, 2), (3, 3))), kinds=(None, "index:4", None)),
]
