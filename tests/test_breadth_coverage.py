"""Every name of the breadth issue (the PyTorch names users reach for) exists where PyTorch has it -- ``ag.f``, a
Tensor method where ``torch.Tensor`` has one, ``F.f``, ``nn.M``, a ``Module`` method, ``optim.O``,
``optim.lr_scheduler.S`` -- takes PyTorch's parameters with PyTorch's defaults where PyTorch's signature can be
read, and is documented in its section of docs/api.md. The names are kept here as data; where torch is
installed, the recorded placements (which names are no Tensor method, which are only methods) are checked
against torch too, so the list cannot drift from PyTorch's."""
import inspect
import re
from pathlib import Path

import pytest

import autograd_gpu as ag
import autograd_gpu.nn.functional as F
from autograd_gpu import nn, optim
from autograd_gpu.optim import lr_scheduler

try:
    import torch
except ImportError:
    torch = None
needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed")

API = Path(__file__).resolve().parents[1] / "docs" / "api.md"

OPS = """
sort argsort topk kthvalue median msort
tril triu tril_indices triu_indices diagonal diag diag_embed trace block_diag
nonzero argwhere masked_fill masked_select take index_add index_copy index_fill scatter scatter_reduce searchsorted
bucketize bincount unique unique_consecutive masked_fill_ index_add_ index_copy_ index_fill_ scatter_ scatter_reduce_
cumsum cumprod cummax cummin logcumsumexp
mm bmm mv addmm addmv baddbmm kron cross cdist inner outer vdot
asin acos atan atan2 sinh cosh asinh acosh atanh log2 log10 exp2 hypot lerp heaviside fmod remainder trunc frac
logaddexp logaddexp2 logit xlogy erf erfc erfinv digamma lgamma polygamma sinc copysign nan_to_num deg2rad rad2deg
fliplr flipud rot90 narrow movedim moveaxis meshgrid cartesian_prod broadcast_tensors atleast_1d atleast_2d atleast_3d
vander unbind hstack vstack dstack column_stack tensor_split unflatten
std_mean var_mean aminmax amax amin nansum nanmean count_nonzero renorm cov corrcoef
isclose allclose isfinite isinf isnan equal
""".split()
# torch has these only as functions (no torch.Tensor method) ...
NOT_METHODS = set("""tril_indices triu_indices block_diag searchsorted bucketize cdist meshgrid cartesian_prod
broadcast_tensors atleast_1d atleast_2d atleast_3d vander hstack vstack dstack column_stack std_mean var_mean""".split())
# ... and these in-place forms only as Tensor methods
ONLY_METHODS = {"masked_fill_", "index_add_", "index_copy_", "index_fill_", "scatter_", "scatter_reduce_"}
# ``equal`` stays NumPy's elementwise comparison (the section's rule), so torch.Tensor.equal (one bool for the
# whole tensor) has no counterpart method here on purpose
METHOD_EXCEPTIONS = {"equal"}

FUNCTIONAL = """
conv_transpose1d conv_transpose2d conv_transpose3d conv3d group_norm instance_norm rms_norm local_response_norm interpolate pad
pixel_shuffle pixel_unshuffle unfold fold adaptive_avg_pool1d adaptive_max_pool2d max_pool1d avg_pool1d mish hardswish
hardsigmoid hardtanh relu6 selu celu glu prelu softsign tanhshrink softshrink hardshrink logsigmoid normalize
cosine_similarity pairwise_distance smooth_l1_loss huber_loss kl_div margin_ranking_loss triplet_margin_loss
cosine_embedding_loss poisson_nll_loss gaussian_nll_loss ctc_loss multi_margin_loss multilabel_soft_margin_loss
hinge_embedding_loss soft_margin_loss embedding_bag dropout1d dropout2d alpha_dropout grid_sample affine_grid
""".split()

MODULES = """
ConvTranspose1d ConvTranspose2d ConvTranspose3d Conv3d GroupNorm InstanceNorm1d InstanceNorm2d RMSNorm LocalResponseNorm Upsample
PixelShuffle PixelUnshuffle Unfold Fold AdaptiveAvgPool1d AdaptiveMaxPool2d MaxPool1d AvgPool1d Unflatten Mish
Hardswish Hardsigmoid Hardtanh ReLU6 SELU CELU GLU PReLU Softsign Tanhshrink Softshrink Hardshrink LogSigmoid
Softmax2d CosineSimilarity PairwiseDistance SmoothL1Loss HuberLoss KLDivLoss MarginRankingLoss TripletMarginLoss
CosineEmbeddingLoss PoissonNLLLoss GaussianNLLLoss CTCLoss MultiMarginLoss MultiLabelSoftMarginLoss
HingeEmbeddingLoss SoftMarginLoss EmbeddingBag ZeroPad2d ConstantPad1d ConstantPad2d ReflectionPad1d
ReflectionPad2d ReplicationPad2d CircularPad2d Dropout1d Dropout2d AlphaDropout Bilinear ParameterList
ParameterDict Transformer
""".split()

MODULE_METHODS = """
register_forward_pre_hook register_forward_hook register_full_backward_hook register_full_backward_pre_hook
get_submodule get_parameter named_buffers apply requires_grad_
""".split()

GRAD_MODES = ["no_grad", "inference_mode"]

OPTIMIZERS = "Adadelta Adamax NAdam RAdam ASGD Rprop LBFGS".split()

SCHEDULERS = """
StepLR MultiStepLR ExponentialLR CosineAnnealingLR LambdaLR MultiplicativeLR ConstantLR LinearLR PolynomialLR
CosineAnnealingWarmRestarts CyclicLR OneCycleLR ReduceLROnPlateau SequentialLR ChainedScheduler
""".split()

# the docs/api.md section each kind of name is documented in: (heading it starts at, heading it ends before)
DOC_SECTIONS = {
    "ops": ("## Operations", "## Autograd"),
    "F": ("### `ag.nn.functional`", "### `ag.nn.init`"),
    "nn": ("## Neural networks", "### `ag.nn.functional`"),
    "Module": ("### Modules", "### Layers"),
    "grad modes": ("## Autograd", "## Functional transforms"),
    "optim": ("## Optimizers", "### `ag.optim.lr_scheduler`"),
    "lr_scheduler": ("### `ag.optim.lr_scheduler`", "## Data"),
}
KINDS = {"ops": OPS, "F": FUNCTIONAL, "nn": MODULES, "Module": MODULE_METHODS, "grad modes": GRAD_MODES,
         "optim": OPTIMIZERS, "lr_scheduler": SCHEDULERS}


def test_the_lists_hold_the_whole_section():
    assert (len(OPS), len(FUNCTIONAL), len(MODULES), len(MODULE_METHODS), len(OPTIMIZERS), len(SCHEDULERS)) == \
        (124, 54, 64, 9, 7, 15)
    for names in KINDS.values():
        assert len(set(names)) == len(names)
    assert NOT_METHODS <= set(OPS) and ONLY_METHODS <= set(OPS) and not NOT_METHODS & ONLY_METHODS


@pytest.mark.parametrize("name", OPS)
def test_op_exists_as_function_and_tensor_method(name):
    if name not in ONLY_METHODS:
        assert callable(getattr(ag, name, None)), f"ag.{name} is missing"
    if name not in NOT_METHODS | METHOD_EXCEPTIONS:
        assert callable(getattr(ag.Tensor, name, None)), f"Tensor.{name} is missing"


@pytest.mark.parametrize("kind,name", [(k, n) for k in ("F", "nn", "Module", "grad modes", "optim", "lr_scheduler")
                                       for n in KINDS[k]])
def test_name_exists(kind, name):
    home = {"F": F, "nn": nn, "Module": nn.Module, "grad modes": ag, "optim": optim, "lr_scheduler": lr_scheduler}
    assert callable(getattr(home[kind], name, None)), f"{kind}.{name} is missing"


@needs_torch
def test_the_recorded_placements_are_pytorchs():
    assert {n for n in OPS if not hasattr(torch.Tensor, n)} == NOT_METHODS
    assert {n for n in OPS if not hasattr(torch, n)} == ONLY_METHODS
    for kind, home in (("F", torch.nn.functional), ("nn", torch.nn), ("Module", torch.nn.Module),
                       ("grad modes", torch), ("optim", torch.optim), ("lr_scheduler", torch.optim.lr_scheduler)):
        assert [n for n in KINDS[kind] if not hasattr(home, n)] == [], kind


def _doc_section(kind):
    text = API.read_text(encoding="utf-8")
    start, end = DOC_SECTIONS[kind]
    i = text.index(start)
    return text[i:text.index(end, i + len(start))]


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_name_is_in_its_docs_section(kind):
    """Each name appears inside a `code span` of its section of docs/api.md (as a whole word)."""
    spans = " ".join(re.findall(r"`([^`]+)`", _doc_section(kind)))
    words = set(re.findall(r"[A-Za-z_]\w*", spans))
    assert [n for n in KINDS[kind] if n not in words] == []


# -- signatures: PyTorch's parameters, PyTorch's defaults (where torch's signature can be read) -------------
# parameters of torch that are deliberately not taken here, with the reason
SKIPPED_PARAMETERS: set[str] = set()     # every parameter of torch's is checked
SKIPPED = {
    ("nn", "Hardtanh", "min_value"), ("nn", "Hardtanh", "max_value"),      # torch's deprecated aliases
}
# defaults that differ in form but not in meaning
EQUIVALENT_DEFAULTS = {("nn", "Transformer", "activation"): "relu"}       # torch: F.relu itself; here its name


def _signature_pairs():
    out = []
    for name in FUNCTIONAL:
        out.append(("F", name, lambda n: getattr(F, n), lambda n: getattr(torch.nn.functional, n)))
    for name in MODULES:
        out.append(("nn", name, lambda n: getattr(nn, n).__init__, lambda n: getattr(torch.nn, n).__init__))
    for name in MODULE_METHODS:
        out.append(("Module", name, lambda n: getattr(nn.Module, n), lambda n: getattr(torch.nn.Module, n)))
    for name in OPTIMIZERS:
        out.append(("optim", name, lambda n: getattr(optim, n).__init__, lambda n: getattr(torch.optim, n).__init__))
    for name in SCHEDULERS:
        out.append(("lr_scheduler", name, lambda n: getattr(lr_scheduler, n).__init__,
                    lambda n: getattr(torch.optim.lr_scheduler, n).__init__))
    return out


SIGNATURES = _signature_pairs()


def _torch_signature(fn):
    """inspect's signature; for a builtin of torch without one, the signature its docstring opens with
    (``conv3d(input, weight, bias=None, stride=1, ...) -> Tensor``)."""
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):
        head = (fn.__doc__ or "").strip().splitlines()[0]
        m = re.fullmatch(r"(\w+)\((.*)\)\s*->\s*Tensor", head.strip())
        assert m, f"cannot read torch's signature of {fn!r} from {head!r}"
        scope = {}
        exec(f"def {m.group(1)}({m.group(2)}): pass", scope)       # noqa: S102 (torch's own docstring)
        return inspect.signature(scope[m.group(1)])


@needs_torch
@pytest.mark.parametrize("kind,name,mine,theirs", SIGNATURES, ids=[f"{k}.{n}" for k, n, _, _ in SIGNATURES])
def test_signature_takes_pytorchs_parameters_and_defaults(kind, name, mine, theirs):
    tsig = _torch_signature(theirs(name))
    sig = inspect.signature(mine(name))
    problems = []
    for pname, tp in tsig.parameters.items():
        if tp.kind in (tp.VAR_POSITIONAL, tp.VAR_KEYWORD) or pname in SKIPPED_PARAMETERS \
                or (kind, name, pname) in SKIPPED:
            continue
        p = sig.parameters.get(pname)
        if p is None:
            problems.append(f"no parameter {pname!r}")
            continue
        want = EQUIVALENT_DEFAULTS.get((kind, name, pname), tp.default)
        if isinstance(want, torch.Tensor) or p.default is want:
            continue
        if p.default != want and not (p.default is inspect.Parameter.empty and want is inspect.Parameter.empty):
            problems.append(f"{pname}={p.default!r}, PyTorch's default is {want!r}")
        if tp.kind == tp.KEYWORD_ONLY and p.kind not in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD):
            problems.append(f"{pname} must be a keyword")
    assert problems == [], f"{kind}.{name}: " + "; ".join(problems)


# -- where each module, loss, optimizer and scheduler is compared with PyTorch ---------------------------------
# name -> "file::test" that runs it against torch (value and gradients with a torch state dict loaded by name for
# modules, every reduction for losses, each of 20 steps for optimizers, 30 epochs for schedulers). A drift
# guard: the test must exist and its file must name the module (the comparisons themselves run there).
_LAYERS = "test_breadth_layers.py::test_layer_with_pytorch_state_dict_matches_pytorch"
_ACTIVATIONS = "test_breadth_losses.py::test_activation_module_matches_torch"
_MODULES_VS = "test_breadth_vs_torch.py::test_module_with_torchs_state_dict_matches_torch"
_LOSSES = "test_breadth_vs_torch.py::test_loss_module_matches_torch_for_every_reduction"
_OPTIMIZERS = "test_breadth_vs_torch.py::test_optimizer_each_of_20_steps_matches_torch_and_resumes_from_a_state_dict"
_SCHEDULERS = "test_breadth_vs_torch.py::test_scheduler_30_epochs_match_torch_and_resume_from_state_dicts"
COMPARED_IN = {
    **{n: _LAYERS for n in """ConvTranspose1d ConvTranspose2d Conv3d GroupNorm InstanceNorm1d InstanceNorm2d RMSNorm
        LocalResponseNorm Upsample PixelShuffle PixelUnshuffle Unfold Fold AdaptiveAvgPool1d AdaptiveMaxPool2d
        MaxPool1d AvgPool1d Unflatten ZeroPad2d ConstantPad1d ConstantPad2d ReflectionPad1d ReflectionPad2d
        ReplicationPad2d CircularPad2d Dropout1d Dropout2d AlphaDropout Bilinear""".split()},
    **{n: _ACTIVATIONS for n in """Mish Hardswish Hardsigmoid Hardtanh ReLU6 SELU CELU GLU PReLU Softsign Tanhshrink
        Softshrink Hardshrink LogSigmoid""".split()},
    **{n: _MODULES_VS for n in ("Softmax2d", "CosineSimilarity", "PairwiseDistance")},
    **{n: _LOSSES for n in """SmoothL1Loss HuberLoss KLDivLoss MarginRankingLoss TripletMarginLoss CosineEmbeddingLoss
        PoissonNLLLoss GaussianNLLLoss MultiMarginLoss MultiLabelSoftMarginLoss HingeEmbeddingLoss
        SoftMarginLoss""".split()},
    "CTCLoss": "test_breadth_vs_torch.py::test_ctc_loss_module_matches_torch_for_every_reduction",
    "ConvTranspose3d": "test_conv_transpose3d.py::test_layer_with_a_torch_state_dict_matches_torch",
    "EmbeddingBag": "test_breadth_layers.py::test_embedding_bag_layer_matches_pytorch",
    "ParameterList": "test_breadth_losses.py::test_parameter_list_registers_appends_and_round_trips_a_torch_state_dict",
    "ParameterDict": "test_breadth_losses.py::test_parameter_dict_behaves_as_a_dict_of_parameters",
    "Transformer": "test_transformer.py::test_full_transformer_matches_torch_and_generates_the_causal_mask",
    **{n: _OPTIMIZERS for n in ("Adadelta", "Adamax", "NAdam", "RAdam", "ASGD", "Rprop")},
    "LBFGS": "test_breadth_vs_torch.py::test_lbfgs_each_step_matches_torch_and_resumes_from_a_state_dict",
    **{n: _SCHEDULERS for n in SCHEDULERS if n != "ReduceLROnPlateau"},
    "ReduceLROnPlateau": "test_breadth_vs_torch.py::test_reduce_lr_on_plateau_30_epochs_matches_torch_and_resumes",
}


def test_every_module_loss_optimizer_and_scheduler_has_a_comparison_with_torch():
    assert sorted(COMPARED_IN) == sorted(MODULES + OPTIMIZERS + SCHEDULERS)
    tests = Path(__file__).resolve().parent
    missing = []
    for name, where in COMPARED_IN.items():
        file, test = where.split("::")
        text = (tests / file).read_text(encoding="utf-8")
        if f"def {test}(" not in text or not re.search(rf"(?<![\w]){name}(?![\w])", text) or "torch" not in text:
            missing.append(f"{name} -> {where}")
    assert missing == []
