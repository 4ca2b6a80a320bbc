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
