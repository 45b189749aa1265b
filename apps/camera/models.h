/* Models built in-process with the C builder API, for tests, the demo and
 * the benchmark while no model file is at hand (`--model builtin:NAME`).
 *   tiny      (1,3,64,64) -> (1,3) probabilities: 1x1 conv (identity) +
 *             ReLU, global average pool, fc (10 x identity), softmax. It
 *             classifies a frame by its dominant normalised colour: 0 red,
 *             1 green, 2 blue, which makes end-to-end results checkable.
 *   resnet18  (1,3,224,224) -> (1,1000) logits: torchvision ResNet-18 shape
 *             (BatchNorm folded), random weights from a fixed seed. */
#ifndef CAM_MODELS_H
#define CAM_MODELS_H
#include "edgert.h"

/* NAME without the "builtin:" prefix. ERT_E_NOT_FOUND for unknown names. */
ert_status cam_builtin_model(ert_context *ctx, const char *name, ert_model **out);

#endif
