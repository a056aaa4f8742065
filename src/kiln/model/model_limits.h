// Bounds on what a model file or config.json may declare, checked when the config is read: the
// config comes before the tensors, so a corrupt count would otherwise size tables unchecked.
#pragma once

namespace kiln::model {

// More layers than any real model has (the largest have ~130).
inline constexpr int kMaxLayers = 4096;

}  // namespace kiln::model
