// snorm8 weights on an OpenCL device without CL_SNORM_INT8 images (NVIDIA's OpenCL): held in
// CL_SIGNED_INT8 images, one byte a channel as the artifact stores them, and read as integers.
//
// A texture constant in snorm8 texels holds bytes k whose values are k / 127 (relax_vk's
// passes/scope/quantized_weight_texels.py); its kernels read it with READ_IMAGEF, which a snorm8
// image answers with k / 127 from the texture unit. A CL_SIGNED_INT8 image holds the same bytes but
// answers read_imagei with k: each such read of such a parameter becomes
// convert_float4(read_imagei(...)) * (1 / 127), the same value up to float32 rounding. The source is
// rewritten only where every launch of a kernel binds snorm8 tensors at the same parameters and no
// copy step touches one; anything else leaves the float32-texel fallback (with_float_texels).
#pragma once

#include <string>

#include "program.hpp"

namespace rvk {

// `source` with the snorm8 parameters' reads rewritten as above, or "" with `why` saying what
// prevents it.
std::string with_integer_snorm8_reads(const Program& program, const std::string& source, std::string& why);

}  // namespace rvk
