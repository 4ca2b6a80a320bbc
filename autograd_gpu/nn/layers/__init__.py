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
