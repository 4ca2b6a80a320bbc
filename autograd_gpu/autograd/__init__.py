"""Autograd: Function, the backward engine, grad modes, gradcheck."""
from .grad_mode import (no_grad, enable_grad, set_grad_enabled, is_grad_enabled, inference_mode,
                        is_inference_mode_enabled)
from .function import Function
from .engine import backward, grad
from .gradcheck import gradcheck, gradgradcheck
from .anomaly import detect_anomaly, is_anomaly_enabled
