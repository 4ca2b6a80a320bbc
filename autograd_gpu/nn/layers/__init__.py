"""The layers of autograd_gpu.nn, one family per file."""
from .container import Sequential, ModuleList, ModuleDict
from .linear import Linear, Identity, Flatten, Embedding
from .conv import Conv1d, Conv2d
from .pooling import MaxPool1d, MaxPool2d, AvgPool1d, AvgPool2d, AdaptiveAvgPool2d
from .norm import BatchNorm1d, BatchNorm2d, LayerNorm
from .activation import (ReLU, LeakyReLU, GELU, SiLU, Tanh, Sigmoid, ELU, Softplus, Softmax, LogSoftmax,
                         Dropout)
from .loss import MSELoss, L1Loss, CrossEntropyLoss, NLLLoss, BCELoss, BCEWithLogitsLoss
from .attention import MultiheadAttention
from .rnn import RNN, LSTM, GRU, RNNCell, LSTMCell, GRUCell
from .transformer import (TransformerEncoderLayer, TransformerEncoder, TransformerDecoderLayer,
                          TransformerDecoder, Transformer)

__all__ = ["Sequential", "ModuleList", "ModuleDict", "Linear", "Identity", "Flatten", "Embedding", "Conv1d", "Conv2d",
           "MaxPool1d", "MaxPool2d", "AvgPool1d", "AvgPool2d", "AdaptiveAvgPool2d", "BatchNorm1d", "BatchNorm2d",
           "LayerNorm", "ReLU", "LeakyReLU", "GELU", "SiLU", "Tanh", "Sigmoid", "ELU", "Softplus", "Softmax",
           "LogSoftmax", "Dropout", "MSELoss", "L1Loss", "CrossEntropyLoss", "NLLLoss", "BCELoss", "BCEWithLogitsLoss",
           "MultiheadAttention", "TransformerEncoderLayer", "TransformerEncoder", "TransformerDecoderLayer",
           "TransformerDecoder", "Transformer", "RNN", "LSTM", "GRU", "RNNCell", "LSTMCell", "GRUCell"]

# the structural layers of the breadth issue (transposed and 3-D convolution, normalisations, resampling, padding)
from .conv_transpose import ConvTranspose1d, ConvTranspose2d, ConvTranspose3d, Conv3d
from .normalization import GroupNorm, InstanceNorm1d, InstanceNorm2d, RMSNorm, LocalResponseNorm
from .resample import (Upsample, UpsamplingNearest2d, UpsamplingBilinear2d,
                       PixelShuffle, PixelUnshuffle, Unfold, Fold, ZeroPad2d, ConstantPad1d, ConstantPad2d,
                       ReflectionPad1d, ReflectionPad2d, ReplicationPad2d, CircularPad2d)
from .structural import (AdaptiveAvgPool1d, AdaptiveMaxPool2d, Unflatten, EmbeddingBag, Dropout1d, Dropout2d,
                         AlphaDropout, Bilinear)
from . import conv_transpose as _ct, normalization as _nz, resample as _rs, structural as _st

__all__ += _ct.__all__ + _nz.__all__ + _rs.__all__ + _st.__all__

# the activations, losses and parameter containers of the breadth issue
from .activation_extra import (Mish, Hardswish, Hardsigmoid, Hardtanh, ReLU6, SELU, CELU, GLU, PReLU, Softsign,
                               Tanhshrink, Softshrink, Hardshrink, LogSigmoid,
                               Softmax2d, CosineSimilarity, PairwiseDistance)
from .loss_extra import (SmoothL1Loss, HuberLoss, KLDivLoss, MarginRankingLoss, TripletMarginLoss,
                         CosineEmbeddingLoss, PoissonNLLLoss, GaussianNLLLoss, CTCLoss,
                         MultiMarginLoss, MultiLabelSoftMarginLoss, HingeEmbeddingLoss,
                         SoftMarginLoss)
from .param_containers import ParameterList, ParameterDict
from . import activation_extra as _act_x, loss_extra as _loss_x, param_containers as _param_c

__all__ += _act_x.__all__ + _loss_x.__all__ + _param_c.__all__
