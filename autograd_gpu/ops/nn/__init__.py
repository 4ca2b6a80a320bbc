"""The kernels of nn.functional (``F``), one module per family; importing this package registers every
F.* op (namespace "nn.functional"), which autograd_gpu/nn/functional.py re-exports.

- activation.py: softmax, log_softmax (fused Functions) and F's forms of the elementwise activations
- linear.py: linear (fused Linear) and the private relu(linear) node LinearReLU
- conv.py: conv1d, conv2d and pooling, over the primitives of autograd_gpu/ops/conv.py
- conv_transpose.py: conv_transpose1d/2d (the convolution's adjoint), conv3d, adaptive_avg_pool1d, adaptive_max_pool2d
- resample.py: pad, interpolate, pixel_shuffle/unshuffle, unfold/fold, grid_sample, affine_grid
- norm.py: batch_norm, layer_norm (fused LayerNorm)
- attention.py: scaled_dot_product_attention (fused, with the CPU's blocked causal path)
- loss.py: cross_entropy, nll_loss, mse_loss, l1_loss, binary_cross_entropy(_with_logits)
- dropout.py: dropout; embedding.py: embedding, one_hot
- activation_extra.py: mish, hardswish, ..., logsigmoid; normalize, cosine_similarity, pairwise_distance
- loss_extra.py: smooth_l1, huber, kl_div, the margin and embedding losses, poisson/gaussian nll; ctc.py: ctc_loss
- _args.py: the argument helpers they share
"""
from . import activation, linear, conv, norm, attention, loss, dropout, embedding  # noqa: F401  (they register)
from . import conv_transpose, resample  # noqa: F401  (they register)
from . import activation_extra, loss_extra, ctc  # noqa: F401
