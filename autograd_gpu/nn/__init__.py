"""Neural-network building blocks: Module, Parameter, layers, losses, init and utils."""
from . import functional
from .parameter import Parameter
from .module import Module
from . import init, utils, parallel
from .layers import (Sequential, ModuleList, ModuleDict, Linear, Identity, Flatten, Embedding, Conv1d, Conv2d,
                     MaxPool1d, MaxPool2d, AvgPool1d, AvgPool2d, AdaptiveAvgPool2d, BatchNorm1d, BatchNorm2d,
                     LayerNorm, ReLU, LeakyReLU, GELU, SiLU, Tanh, Sigmoid, ELU, Softplus, Softmax, LogSoftmax,
                     Dropout, MSELoss, L1Loss, CrossEntropyLoss, NLLLoss, BCELoss, BCEWithLogitsLoss,
                     MultiheadAttention, TransformerEncoderLayer, TransformerEncoder, TransformerDecoderLayer,
                     TransformerDecoder, Transformer, RNN, LSTM, GRU, RNNCell, LSTMCell, GRUCell)

__all__ = ["functional", "Parameter", "Module", "init", "utils", "parallel", "Sequential", "ModuleList", "ModuleDict", "Linear",
           "Identity", "Flatten", "Embedding", "Conv1d", "Conv2d", "MaxPool1d", "MaxPool2d", "AvgPool1d",
           "AvgPool2d", "AdaptiveAvgPool2d", "BatchNorm1d", "BatchNorm2d", "LayerNorm", "ReLU", "LeakyReLU", "GELU",
           "SiLU", "Tanh", "Sigmoid", "ELU", "Softplus", "Softmax", "LogSoftmax", "Dropout", "MSELoss", "L1Loss",
           "CrossEntropyLoss", "NLLLoss", "BCELoss", "BCEWithLogitsLoss", "MultiheadAttention",
           "TransformerEncoderLayer", "TransformerEncoder", "TransformerDecoderLayer", "TransformerDecoder",
           "Transformer", "RNN", "LSTM", "GRU", "RNNCell", "LSTMCell", "GRUCell"]

# the structural layers of the breadth issue
from .layers import (ConvTranspose1d, ConvTranspose2d, Conv3d, GroupNorm, InstanceNorm1d, InstanceNorm2d, RMSNorm,
                     LocalResponseNorm, Upsample, PixelShuffle, PixelUnshuffle, Unfold, Fold, ZeroPad2d, ConstantPad1d,
                     ConstantPad2d, ReflectionPad1d, ReflectionPad2d, ReplicationPad2d, CircularPad2d,
                     AdaptiveAvgPool1d, AdaptiveMaxPool2d, Unflatten, EmbeddingBag, Dropout1d, Dropout2d, AlphaDropout,
                     Bilinear, UpsamplingNearest2d, UpsamplingBilinear2d)
from .layers import ConvTranspose3d
from .layers import conv_transpose as _ct, normalization as _nz, resample as _rs, structural as _st

__all__ += _ct.__all__ + _nz.__all__ + _rs.__all__ + _st.__all__

# the activations, losses and parameter containers of the breadth issue
from .layers import (Mish, Hardswish, Hardsigmoid, Hardtanh, ReLU6, SELU, CELU, GLU, PReLU, Softsign, Tanhshrink,
                     Softshrink, Hardshrink, LogSigmoid, Softmax2d, CosineSimilarity,
                     PairwiseDistance, SmoothL1Loss, HuberLoss, KLDivLoss, MarginRankingLoss,
                     TripletMarginLoss, CosineEmbeddingLoss, PoissonNLLLoss, GaussianNLLLoss,
                     CTCLoss, MultiMarginLoss, MultiLabelSoftMarginLoss, HingeEmbeddingLoss,
                     SoftMarginLoss, ParameterList, ParameterDict)
from .layers import activation_extra as _act_x, loss_extra as _loss_x, param_containers as _param_c

__all__ += _act_x.__all__ + _loss_x.__all__ + _param_c.__all__
