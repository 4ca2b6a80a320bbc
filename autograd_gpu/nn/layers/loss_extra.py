"""More loss modules (SmoothL1Loss, HuberLoss, KLDivLoss, MarginRankingLoss, TripletMarginLoss,
CosineEmbeddingLoss, PoissonNLLLoss, GaussianNLLLoss, CTCLoss, MultiMarginLoss, MultiLabelSoftMarginLoss,
HingeEmbeddingLoss, SoftMarginLoss): thin wrappers over nn.functional with PyTorch's arguments (the deprecated
size_average / reduce included where PyTorch keeps them); class weights are buffers, so they follow .to()."""
from ..module import Module
from .. import functional as F
from ...ops.nn._args import _reduction

__all__ = ["SmoothL1Loss", "HuberLoss", "KLDivLoss", "MarginRankingLoss", "TripletMarginLoss",
           "CosineEmbeddingLoss", "PoissonNLLLoss", "GaussianNLLLoss", "CTCLoss", "MultiMarginLoss",
           "MultiLabelSoftMarginLoss", "HingeEmbeddingLoss", "SoftMarginLoss"]


class _Loss(Module):
    def __init__(self, size_average=None, reduce=None, reduction="mean"):
        super().__init__()
        self.reduction = _reduction(reduction, size_average, reduce, type(self).__name__)

    def extra_repr(self):
        return "" if self.reduction == "mean" else f"reduction={self.reduction!r}"


class SmoothL1Loss(_Loss):
    """F.smooth_l1_loss with ``beta``."""

    def __init__(self, size_average=None, reduce=None, reduction="mean", beta=1.0):
        super().__init__(size_average, reduce, reduction)
        self.beta = beta

    def forward(self, input, target):
        return F.smooth_l1_loss(input, target, reduction=self.reduction, beta=self.beta)


class HuberLoss(_Loss):
    """F.huber_loss with ``delta``."""

    def __init__(self, reduction="mean", delta=1.0):
        super().__init__(reduction=reduction)
        self.delta = delta

    def forward(self, input, target):
        return F.huber_loss(input, target, reduction=self.reduction, delta=self.delta)


class KLDivLoss(Module):
    """F.kl_div; reduction also 'batchmean'."""

    def __init__(self, size_average=None, reduce=None, reduction="mean", log_target=False):
        super().__init__()
        if size_average is not None or reduce is not None:
            reduction = _reduction(reduction, size_average, reduce, "KLDivLoss")
        elif reduction not in ("mean", "batchmean", "sum", "none"):
            raise ValueError(f"KLDivLoss: reduction must be 'mean', 'batchmean', 'sum' or 'none', got {reduction!r}")
        self.reduction, self.log_target = reduction, log_target

    def forward(self, input, target):
        return F.kl_div(input, target, reduction=self.reduction, log_target=self.log_target)


class MarginRankingLoss(_Loss):
    """F.margin_ranking_loss with ``margin``."""

    def __init__(self, margin=0.0, size_average=None, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        self.margin = margin

    def forward(self, input1, input2, target):
        return F.margin_ranking_loss(input1, input2, target, margin=self.margin, reduction=self.reduction)


class TripletMarginLoss(_Loss):
    """F.triplet_margin_loss with ``margin``, ``p``, ``eps``, ``swap``."""

    def __init__(self, margin=1.0, p=2.0, eps=1e-6, swap=False, size_average=None, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        if margin <= 0:
            raise ValueError(f"TripletMarginLoss: expected margin to be greater than 0, got {margin}")
        self.margin, self.p, self.eps, self.swap = margin, p, eps, swap

    def forward(self, anchor, positive, negative):
        return F.triplet_margin_loss(anchor, positive, negative, margin=self.margin, p=self.p, eps=self.eps,
                                     swap=self.swap, reduction=self.reduction)


class CosineEmbeddingLoss(_Loss):
    """F.cosine_embedding_loss with ``margin``."""

    def __init__(self, margin=0.0, size_average=None, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        self.margin = margin

    def forward(self, input1, input2, target):
        return F.cosine_embedding_loss(input1, input2, target, margin=self.margin, reduction=self.reduction)


class PoissonNLLLoss(_Loss):
    """F.poisson_nll_loss with ``log_input``, ``full``, ``eps``."""

    def __init__(self, log_input=True, full=False, size_average=None, eps=1e-8, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        self.log_input, self.full, self.eps = log_input, full, eps

    def forward(self, log_input, target):
        return F.poisson_nll_loss(log_input, target, log_input=self.log_input, full=self.full, eps=self.eps,
                                  reduction=self.reduction)


class GaussianNLLLoss(_Loss):
    """F.gaussian_nll_loss with ``full``, ``eps``; forward(input, target, var)."""

    def __init__(self, *, full=False, eps=1e-6, reduction="mean"):
        super().__init__(reduction=reduction)
        self.full, self.eps = full, eps

    def forward(self, input, target, var):
        return F.gaussian_nll_loss(input, target, var, full=self.full, eps=self.eps, reduction=self.reduction)


class CTCLoss(_Loss):
    """F.ctc_loss with ``blank``, ``zero_infinity``; forward(log_probs, targets, input_lengths, target_lengths)."""

    def __init__(self, blank=0, reduction="mean", zero_infinity=False):
        super().__init__(reduction=reduction)
        self.blank, self.zero_infinity = blank, zero_infinity

    def forward(self, log_probs, targets, input_lengths, target_lengths):
        return F.ctc_loss(log_probs, targets, input_lengths, target_lengths, self.blank, self.reduction,
                          self.zero_infinity)


class MultiMarginLoss(_Loss):
    """F.multi_margin_loss with ``p``, ``margin`` and class ``weight`` (a buffer)."""

    def __init__(self, p=1, margin=1.0, weight=None, size_average=None, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        if p not in (1, 2):
            raise ValueError(f"MultiMarginLoss: only p == 1 and p == 2 are supported, got {p!r}")
        if weight is not None and weight.ndim != 1:
            raise ValueError(f"MultiMarginLoss: weight must be a 1-D tensor, got shape {weight.shape}")
        self.p, self.margin = p, margin
        self.register_buffer("weight", weight)

    def forward(self, input, target):
        return F.multi_margin_loss(input, target, p=self.p, margin=self.margin, weight=self.weight,
                                   reduction=self.reduction)


class MultiLabelSoftMarginLoss(_Loss):
    """F.multilabel_soft_margin_loss with class ``weight`` (a buffer)."""

    def __init__(self, weight=None, size_average=None, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)

    def forward(self, input, target):
        return F.multilabel_soft_margin_loss(input, target, weight=self.weight, reduction=self.reduction)


class HingeEmbeddingLoss(_Loss):
    """F.hinge_embedding_loss with ``margin``."""

    def __init__(self, margin=1.0, size_average=None, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        self.margin = margin

    def forward(self, input, target):
        return F.hinge_embedding_loss(input, target, margin=self.margin, reduction=self.reduction)


class SoftMarginLoss(_Loss):
    """F.soft_margin_loss."""

    def forward(self, input, target):
        return F.soft_margin_loss(input, target, reduction=self.reduction)
